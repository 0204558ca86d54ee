#include "cli/view.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <ctime>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "kube/base64.hpp"
#include "kube/config.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/components.hpp"
#include "operator/build/controller.hpp"
#include "operator/reconcile_support.hpp"
#include "operator/resources.hpp"

namespace tightrope::cli {
namespace {

namespace build = op::build;

using json_pointer = json::json_pointer;

const kube::ResourceType& validating_webhooks() {
  static const kube::ResourceType type{"admissionregistration.k8s.io", "v1",
                                       "validatingwebhookconfigurations",
                                       "ValidatingWebhookConfiguration", false};
  return type;
}

// A token the user gave: sent as it is; a refusal is final.
class GivenToken : public slurm::TokenSource {
 public:
  explicit GivenToken(std::string token) : token_(std::move(token)) {}
  slurm::Result<std::string> token() override { return token_; }
  void invalidate() override {}

 private:
  std::string token_;
};

std::string describe(const kube::Error& e) {
  return e.message;
}

kube::ListOptions labelled(std::string selector) {
  kube::ListOptions options;
  options.label_selector = std::move(selector);
  return options;
}

std::vector<json> items_of(kube::Result<kube::ObjectList> list, const std::string& what,
                           std::vector<std::string>* unreadable) {
  if (!list) {
    unreadable->push_back(what + ": " + describe(list.error()));
    return {};
  }
  return {list->items.begin(), list->items.end()};
}

std::vector<json> owned_by(std::vector<json> objects, const std::string& controller) {
  std::erase_if(objects, [&](const json& o) {
    return str_at(o, "/spec/controllerRef/name"_json_pointer) != controller;
  });
  return objects;
}

// A key of a Secret document, decoded; "" when it has none.
std::string key_in(const json& secret, const std::string& key) {
  const auto data = secret.find("data");
  if (data == secret.end() || !data->is_object() || !data->contains(key) ||
      !(*data)[key].is_string()) {
    return "";
  }
  auto decoded = kube::decode_base64((*data)[key].get<std::string>());
  return decoded ? *decoded : "";
}

// A Secret, or nothing (the reason goes to `unreadable` when given).
std::optional<json> read_secret(kube::Client& kube, const std::string& ns, const std::string& name,
                                std::vector<std::string>* unreadable) {
  auto secret = kube.get(kube::resources::secrets(), ns, name);
  if (!secret) {
    if (unreadable != nullptr) {
      unreadable->push_back("Secret " + ns + "/" + name + ": " + describe(secret.error()));
    }
    return std::nullopt;
  }
  return std::move(*secret);
}

// A Secret's key, decoded; "" when missing or unreadable (the reason goes to `unreadable`).
std::string secret_value(kube::Client& kube, const std::string& ns, const std::string& name,
                         const std::string& key, std::vector<std::string>* unreadable) {
  const auto secret = read_secret(kube, ns, name, unreadable);
  return secret ? key_in(*secret, key) : "";
}

// When an object was last written: its creation, or the latest managedFields entry.
std::optional<Time> last_written(const json& object) {
  auto latest = kube::parse_time(str_at(object, "/metadata/creationTimestamp"_json_pointer));
  for (const auto& m : object.value("/metadata/managedFields"_json_pointer, json::array())) {
    if (auto t = kube::parse_time(m.value("time", ""))) {
      latest = latest ? std::max(*latest, *t) : *t;
    }
  }
  return latest;
}

std::optional<Time> certificate_not_after(const std::string& pem, std::string* error) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), int(pem.size())),
                                                &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
  if (!cert) {
    *error = "tls.crt is not a PEM certificate";
    return std::nullopt;
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1) {
    *error = "tls.crt has an unreadable notAfter";
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

void gather_operator(kube::Client& kube, OperatorView& op) {
  std::vector<std::string> unreadable;
  const std::string selector = std::string(api::kLabelName) + "=slurm-operator";
  op.deployments = items_of(kube.list(kube::resources::deployments(), "", labelled(selector)),
                            "operator Deployments", &unreadable);
  op.pods = items_of(kube.list(kube::resources::pods(), "", labelled(selector)), "operator pods",
                     &unreadable);
  for (const auto& d : op.deployments) {
    // The Lease: --leader-elect-id (default slurm-operator) in --leader-elect-namespace
    // (default the Deployment's).
    bool elects = false;
    std::string id = "slurm-operator";
    std::string ns = str_at(d, "/metadata/namespace"_json_pointer);
    for (const auto& c : d.value("/spec/template/spec/containers"_json_pointer, json::array())) {
      for (const auto& arg : c.value("args", json::array())) {
        const std::string a = arg.is_string() ? arg.get<std::string>() : "";
        elects = elects || a == "--leader-elect" || a == "--leader-elect=true";
        if (a.starts_with("--leader-elect-id=")) {
          id = a.substr(a.find('=') + 1);
        } else if (a.starts_with("--leader-elect-namespace=")) {
          ns = a.substr(a.find('=') + 1);
        }
      }
    }
    if (elects) {
      auto lease = kube.get(kube::resources::leases(), ns, id);
      if (lease) {
        op.leases.push_back(std::move(*lease));
      } else if (lease.error().kind != kube::ErrorKind::kNotFound) {
        unreadable.push_back(
            std::string("Lease ").append(ns).append("/").append(id).append(": ").append(
                describe(lease.error())));
      } else {
        op.leases.push_back({{"metadata", {{"name", id}, {"namespace", ns}}}, {"missing", true}});
      }
    }
  }
  for (auto& crd : items_of(kube.list(kube::resources::custom_resource_definitions(), ""), "CRDs",
                            &unreadable)) {
    if (str_at(crd, "/spec/group"_json_pointer) == "slinky.slurm.net") {
      op.crds.push_back(std::move(crd));
    }
  }
  for (auto& config : items_of(kube.list(validating_webhooks(), ""),
                               "ValidatingWebhookConfigurations", &unreadable)) {
    bool ours = false;
    for (const auto& w : config.value("webhooks", json::array())) {
      ours = ours || w.value("name", "").ends_with(".validate.slinky.slurm.net");
    }
    if (!ours) {
      continue;
    }
    // The serving certificate: the Secret that the Service's pods mount.
    const json& first = config["webhooks"][0];
    const std::string ns = str_at(first, "/clientConfig/service/namespace"_json_pointer);
    const std::string service = str_at(first, "/clientConfig/service/name"_json_pointer);
    op.webhooks.push_back(std::move(config));
    if (service.empty()) {
      continue;
    }
    auto svc = kube.get(kube::resources::services(), ns, service);
    if (!svc) {
      const std::string where = std::string(ns).append("/").append(service);
      op.certificates.push_back(
          {where, std::nullopt,
           std::string("Service ").append(where).append(": ").append(describe(svc.error()))});
      continue;
    }
    std::string selector_text;
    const json service_selector = svc->value("/spec/selector"_json_pointer, json::object());
    for (const auto& [k, v] : service_selector.items()) {
      selector_text += (selector_text.empty() ? "" : ",") + k + "=" + v.get<std::string>();
    }
    auto pods = kube.list(kube::resources::pods(), ns, labelled(selector_text));
    std::string secret;
    if (pods) {
      for (const auto& p : pods->items) {
        for (const auto& v : p.value("/spec/volumes"_json_pointer, json::array())) {
          if (secret.empty() && v.contains("secret")) {
            secret = str_at(v, "/secret/secretName"_json_pointer);
          }
        }
      }
    }
    if (secret.empty()) {
      continue;
    }
    WebhookCertificate cert{std::string(ns).append("/").append(secret), std::nullopt, ""};
    const std::string pem = secret_value(kube, ns, secret, "tls.crt", &unreadable);
    if (pem.empty()) {
      cert.error = "no tls.crt in Secret " + cert.secret;
    } else {
      cert.not_after = certificate_not_after(pem, &cert.error);
    }
    op.certificates.push_back(std::move(cert));
  }
  op.error = build::join(unreadable, "; ");
}

}  // namespace

tightrope::Result<std::vector<std::string>, std::string> list_controllers(kube::Client& kube,
                                                                          const std::string& ns) {
  auto list = kube.list(op::resources::controllers(), ns);
  if (!list) {
    return fail("cannot list Controllers in namespace " + ns + ": " + describe(list.error()));
  }
  std::vector<std::string> names;
  for (const auto& c : list->items) {
    names.push_back(name_of(c));
  }
  std::sort(names.begin(), names.end());
  return names;
}

tightrope::Result<std::shared_ptr<slurm::Client>, std::string> connect_slurm(
    kube::Client& kube, const ClusterView& view, const SlurmAccess& access, std::string* via,
    std::string* token_from) {
  const std::string ns = view.namespace_name;
  slurm::ClientOptions options;
  options.timeout = access.timeout;
  options.max_attempts = 2;
  options.backoff_initial = std::chrono::milliseconds(100);
  std::string route;
  if (!access.url.empty()) {
    options.url = access.url;
    route = access.url;
  } else {
    // The oldest RestApi of the Controller, as the operator picks it.
    const json* oldest = nullptr;
    const auto age = [](const json& r) {
      return std::pair(str_at(r, "/metadata/creationTimestamp"_json_pointer), name_of(r));
    };
    for (const auto& r : view.restapis) {
      if (oldest == nullptr || age(r) < age(*oldest)) {
        oldest = &r;
      }
    }
    if (oldest == nullptr) {
      return fail("no RestApi names Controller " + ns + "/" + view.controller_name() +
                  ": there is no slurmrestd to ask (or give --slurmrestd URL)");
    }
    api::RestApi restapi;  // the names the operator gives its objects need only its name
    restapi.metadata.name = name_of(*oldest);
    const std::string service = build::restapi_name(restapi);
    const std::string port = std::to_string(build::kSlurmrestdPort);
    const kube::Config& config = kube.config();
    options.url =
        config.server + "/api/v1/namespaces/" + ns + "/services/" + service + ":" + port + "/proxy";
    options.tls.ca_pem = config.ca_pem;
    options.tls.cert_pem = config.client_cert_pem;
    options.tls.key_pem = config.client_key_pem;
    options.tls.insecure_skip_verify = config.insecure_skip_tls_verify;
    std::string bearer = config.token;
    if (!config.token_file.empty()) {
      if (auto read = kube::read_token_file(config.token_file)) {
        bearer = *read;
      }
    }
    if (!bearer.empty()) {
      options.headers.emplace_back("Authorization", "Bearer " + bearer);
    }
    route = "the API server's service proxy to " + ns + "/" + service + ":" + port;
  }
  std::shared_ptr<slurm::TokenSource> tokens;
  std::string from;
  if (!access.token.empty()) {
    tokens = std::make_shared<GivenToken>(access.token);
    from = "the token given";
  } else {
    auto decoded = api::decode_controller(view.controller);
    const api::KeyRef* ref = decoded ? decoded->spec.jwt_key() : nullptr;
    if (ref == nullptr) {
      return fail("Controller " + ns + "/" + view.controller_name() +
                  " has no jwtKeyRef to mint a token with: give --token (scontrol token)");
    }
    std::vector<std::string> why;
    std::string key = secret_value(kube, ns, ref->name, ref->key, &why);
    if (key.empty()) {
      return fail("cannot mint a Slurm token: " +
                  (why.empty() ? "Secret " + ns + "/" + ref->name + " has no key " + ref->key
                               : why.front()) +
                  " (give --token, from `scontrol token`)");
    }
    tokens = std::make_shared<slurm::MintingTokenSource>(
        [key]() -> slurm::Result<std::string> { return key; },
        "Secret " + ns + "/" + ref->name + " key " + ref->key, access.user,
        std::chrono::minutes(5));
    from = "minted for user " + access.user + " from Secret " + ns + "/" + ref->name;
  }
  if (via != nullptr) {
    *via = route;
  }
  if (token_from != nullptr) {
    *token_from = from;
  }
  return std::make_shared<slurm::Client>(std::move(options), std::move(tokens));
}

tightrope::Result<ClusterView, std::string> gather(kube::Client& kube,
                                                   const GatherOptions& options) {
  ClusterView view;
  view.now = std::chrono::system_clock::now();
  const std::string ns = options.namespace_name;
  view.namespace_name = ns;
  std::string name = options.controller;
  if (name.empty()) {
    auto names = list_controllers(kube, ns);
    if (!names) {
      return fail(names.error());
    }
    if (names->size() != 1) {
      return fail(names->empty()
                      ? "no Controller in namespace " + ns + " (use -n)"
                      : "namespace " + ns + " has " + std::to_string(names->size()) +
                            " Controllers (" + build::join(*names, ", ") + "): name one");
    }
    name = names->front();
  }
  auto controller = kube.get(op::resources::controllers(), ns, name);
  if (!controller) {
    return fail("Controller " + ns + "/" + name + ": " + describe(controller.error()));
  }
  view.controller = std::move(*controller);
  auto& u = view.unreadable;
  view.nodesets =
      owned_by(items_of(kube.list(op::resources::nodesets(), ns), "NodeSets", &u), name);
  view.restapis =
      owned_by(items_of(kube.list(op::resources::restapis(), ns), "RestApis", &u), name);
  view.loginsets =
      owned_by(items_of(kube.list(op::resources::loginsets(), ns), "LoginSets", &u), name);
  // An Accounting is named by the Controller, not the other way round.
  const std::string accounting = str_at(view.controller, "/spec/accountingRef/name"_json_pointer);
  for (auto& a : items_of(kube.list(op::resources::accountings(), ns), "Accountings", &u)) {
    if (name_of(a) == accounting) {
      view.accountings.push_back(std::move(a));
    }
  }
  view.tokens = items_of(kube.list(op::resources::tokens(), ns), "Tokens", &u);
  const std::string cluster = std::string(api::kLabelCluster) + "=" + name;
  view.pods = items_of(kube.list(kube::resources::pods(), ns, labelled(cluster)), "pods", &u);
  // slurmdbd pods belong to their Accounting, which Controllers name: no cluster label.
  for (const auto& a : view.accountings) {
    for (auto& p :
         items_of(kube.list(kube::resources::pods(), ns,
                            labelled(std::string(api::kLabelName) + "=slurmdbd," +
                                     std::string(api::kLabelInstance) + "=" + name_of(a))),
                  "slurmdbd pods", &u)) {
      view.pods.push_back(std::move(p));
    }
  }
  view.kube_nodes = items_of(kube.list(kube::resources::nodes(), ""), "Nodes", &u);
  view.pdbs = items_of(kube.list(kube::resources::pod_disruption_budgets(), ns),
                       "PodDisruptionBudgets", &u);
  view.stateful_sets = items_of(kube.list(kube::resources::stateful_sets(), ns, labelled(cluster)),
                                "StatefulSets", &u);
  api::Controller named;
  named.metadata.name = name;
  if (auto config =
          kube.get(kube::resources::config_maps(), ns, build::controller_config_map_name(named))) {
    view.slurm_conf = str_at(*config, "/data/slurm.conf"_json_pointer);
  }

  auto decoded = api::decode_controller(view.controller);
  std::string jwt_key;
  if (decoded) {
    const auto& ref = decoded->spec.slurm_key_ref;
    if (!ref.name.empty()) {
      if (const auto secret = read_secret(kube, ns, ref.name, &u)) {
        view.slurm_key_hash = op::key_hash(key_in(*secret, ref.key));
        view.slurm_key_changed_at = last_written(*secret);
      }
    }
    if (const api::KeyRef* jwt = decoded->spec.jwt_key()) {
      jwt_key = secret_value(kube, ns, jwt->name, jwt->key, &u);
    }
  }
  for (const auto& doc : view.tokens) {
    auto token = api::decode_token(doc);
    if (!token) {
      continue;
    }
    api::apply_defaults(*token);
    TokenState state;
    state.token = token->metadata.name;
    state.secret = ns + "/" + token->spec.secret_ref->name + " key " + token->spec.secret_ref->key;
    const std::string jwt =
        secret_value(kube, ns, token->spec.secret_ref->name, token->spec.secret_ref->key, nullptr);
    state.present = !jwt.empty();
    // slurmctld verifies with the Controller's key, whatever key the Token was minted with.
    if (auto verified = slurm::verify_jwt(jwt_key, jwt)) {
      state.signed_by_current_key = true;
      state.expires_at = verified->expires_at;
    }
    view.token_states.push_back(std::move(state));
  }

  // Slurm, through slurmrestd.
  auto& s = view.slurm;
  auto client = connect_slurm(kube, view, options.slurm, &s.via, &s.token_from);
  if (!client) {
    s.error = slurm::Error{slurm::ErrorKind::kUnavailable, 0, client.error(), {}};
  } else {
    auto& c = **client;
    if (auto ping = c.ping()) {
      s.ping = *ping;
    } else {
      s.ping_error = ping.error();
    }
    auto nodes = c.list_nodes({std::nullopt, true});
    if (nodes) {
      s.nodes = std::move(nodes->list.nodes);
      if (auto jobs = c.list_jobs()) {
        s.jobs = std::move(jobs->list.jobs);
        s.have_nodes = true;
      } else {
        s.error = jobs.error();
      }
    } else {
      s.error = nodes.error();
    }
    if (s.have_nodes) {
      if (auto diag = c.diag()) {
        s.diag = *diag;
      }
      if (auto partitions = c.list_partitions()) {
        s.partitions = std::move(*partitions);
      }
      if (auto reservations = c.list_reservations()) {
        s.reservations = std::move(*reservations);
      }
      if (!view.accountings.empty()) {
        s.accounting_asked = true;
        if (auto dbd = c.accounting_diag(); !dbd) {
          s.accounting_error = dbd.error();
        }
      }
    }
  }
  if (options.operator_side) {
    gather_operator(kube, view.op);
  }
  return view;
}

}  // namespace tightrope::cli
