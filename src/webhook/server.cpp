#include "webhook/server.hpp"

#include <httplib.h>

#include "api/well_known.hpp"
#include "base/log.hpp"
#include "kube/resource.hpp"
#include "webhook/certificate.hpp"

namespace tightrope::webhook {
namespace {

std::string object_of(const Verdict& v) {
  return v.namespace_name.empty() ? v.name : v.namespace_name + "/" + v.name;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    out += (out.empty() ? "" : "; ") + item;
  }
  return out;
}

void log_verdict(const Verdict& v, const std::string& path,
                 std::chrono::steady_clock::duration took) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  if (!v.allowed) {
    log::info("webhook.denied", {{"operation", v.operation},
                                 {"kind", v.kind},
                                 {"object", object_of(v)},
                                 {"uid", v.uid},
                                 {"path", path},
                                 {"code", std::to_string(v.code)},
                                 {"message", v.message},
                                 {"ms", std::to_string(ms)}});
  } else if (log::enabled(log::Level::kDebug)) {
    log::debug("webhook.allowed", {{"operation", v.operation},
                                   {"kind", v.kind},
                                   {"object", object_of(v)},
                                   {"uid", v.uid},
                                   {"warnings", joined(v.warnings)},
                                   {"ms", std::to_string(ms)}});
  }
}

}  // namespace

std::vector<std::string> review_paths() {
  std::vector<std::string> out = {"/validate"};
  for (const auto& path : validated_kind_paths()) {
    out.push_back(path);
  }
  return out;
}

Server::Server(ServerOptions options, ConfigMapLookup config_maps, NodeSetLookup nodesets)
    : options_(std::move(options)),
      config_maps_(std::move(config_maps)),
      nodesets_(std::move(nodesets)) {
  if (options_.metrics != nullptr) {
    reviews_ = &options_.metrics->counter(
        "tightrope_webhook_reviews_total",
        "AdmissionReviews answered, by kind, operation and whether they were allowed.",
        {"kind", "operation", "allowed"});
    durations_ = &options_.metrics->histogram(
        "tightrope_webhook_review_duration_seconds",
        "Seconds from reading an AdmissionReview to its answer, by kind.", {"kind"},
        metrics::exponential_buckets(0.0005, 2, 14));
    expiry_ = &options_.metrics
                   ->gauge("tightrope_webhook_certificate_expiry_timestamp_seconds",
                           "When the serving certificate in use expires (its notAfter), in "
                           "seconds since the epoch.",
                           {})
                   .with({});
  }
}

void Server::refresh_certificate() {
  if (!certificate_) {
    return;
  }
  certificate_->refresh();
  if (expiry_ != nullptr) {
    expiry_->set(static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                         certificate_->not_after().time_since_epoch())
                                         .count()));
  }
}

void Server::count(const Verdict& verdict, std::chrono::steady_clock::duration took) {
  if (reviews_ == nullptr) {
    return;
  }
  reviews_
      ->with({{"kind", verdict.kind},
              {"operation", verdict.operation},
              {"allowed", verdict.allowed ? "true" : "false"}})
      .inc();
  durations_->with({{"kind", verdict.kind}}).observe(std::chrono::duration<double>(took).count());
}

Server::~Server() {
  stop();
}

tightrope::Result<Done, std::string> Server::start() {
  if (server_) {
    return fail("already started");
  }
  auto certificate = ServingCertificate::load(options_.cert_file, options_.key_file);
  if (!certificate) {
    return fail("serving certificate: " + certificate.error());
  }
  certificate_ = std::move(*certificate);
  refresh_certificate();
  ServingCertificate* cert = certificate_.get();
  auto server =
      std::make_unique<httplib::SSLServer>([cert](SSL_CTX& ctx) { return cert->configure(&ctx); });
  if (!server->is_valid()) {
    return fail("TLS context setup failed");
  }
  server->set_payload_max_length(options_.max_body_bytes);
  server->set_read_timeout(options_.io_timeout.count(), 0);
  server->set_write_timeout(options_.io_timeout.count(), 0);

  const auto on_review = [this](const httplib::Request& req, httplib::Response& res) {
    const auto started = std::chrono::steady_clock::now();
    const Verdict verdict = admit(std::string_view(req.body), config_maps_, nodesets_);
    const auto took = std::chrono::steady_clock::now() - started;
    log_verdict(verdict, req.path, took);
    count(verdict, took);
    // 200 whatever the verdict, as controller-runtime answers: the API server reads the
    // decision from the review, and takes any other status for a broken webhook.
    res.set_content(review_response(verdict).dump(), "application/json");
  };
  for (const auto& path : review_paths()) {
    server->Post(path, on_review);
  }
  if (binding_effect_) {
    server->Post(std::string(kBindingPath),
                 [this](const httplib::Request& req, httplib::Response& res) {
                   const auto started = std::chrono::steady_clock::now();
                   auto [verdict, binding] = read_binding(req.body);
                   if (binding) {
                     binding_effect_(*binding);
                   }
                   const auto took = std::chrono::steady_clock::now() - started;
                   log_verdict(verdict, req.path, took);
                   count(verdict, took);
                   res.set_content(review_response(verdict).dump(), "application/json");
                 });
  }
  for (const auto& [path, handler] : extra_) {
    server->Post(path,
                 [this, &handler = handler](const httplib::Request& req, httplib::Response& res) {
                   const auto started = std::chrono::steady_clock::now();
                   const Verdict verdict = handler(std::string_view(req.body));
                   const auto took = std::chrono::steady_clock::now() - started;
                   log_verdict(verdict, req.path, took);
                   count(verdict, took);
                   res.set_content(review_response(verdict).dump(), "application/json");
                 });
  }
  // Nothing to wait for once the certificate is loaded: ready as soon as it serves.
  for (const char* path : {"/healthz", "/readyz"}) {
    server->Get(path, [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
  }

  const std::string address = options_.host + ":" + std::to_string(options_.port);
  if (options_.port == 0) {
    port_ = server->bind_to_any_port(options_.host);
  } else {
    port_ = server->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    port_ = 0;
    return fail("cannot listen on " + address);
  }
  server_ = std::move(server);
  httplib::Server* raw = server_.get();
  thread_ = std::thread([raw] { raw->listen_after_bind(); });
  // stop() does nothing to a server whose accept loop has not begun; wait for it so a stop
  // right after start cannot leave the thread running. Connections queue on the bound socket.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!raw->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log::info("webhook.serving", {{"address", options_.host + ":" + std::to_string(port_)},
                                {"cert_file", options_.cert_file.string()},
                                {"subject", cert->subject()}});
  return Done{};
}

void Server::stop() {
  if (server_) {
    server_->stop();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  server_.reset();
}

namespace {

// The object through the API server; nothing when it is not there or cannot be read, the latter
// logged as `event` with the object under `what`.
std::optional<nlohmann::json> read_object(kube::Client& client, const kube::ResourceType& type,
                                          const std::string& ns, const std::string& name,
                                          const char* event, const char* what) {
  auto got = client.get(type, ns, name);
  if (!got) {
    if (got.error().kind != kube::ErrorKind::kNotFound) {
      log::warn(event, {{what, ns + "/" + name}, {"error", got.error().message}});
    }
    return std::nullopt;
  }
  return std::move(*got);
}

}  // namespace

ConfigMapLookup config_maps_from(kube::Client& client) {
  return [&client](const std::string& ns,
                   const std::string& name) -> std::optional<std::map<std::string, std::string>> {
    const auto got = read_object(client, kube::resources::config_maps(), ns, name,
                                 "webhook.configmap_unreadable", "configmap");
    if (!got) {
      return std::nullopt;
    }
    std::map<std::string, std::string> data;
    if (const auto it = got->find("data"); it != got->end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        data[key] = value.is_string() ? value.get<std::string>() : std::string();
      }
    }
    // Binary files land in /etc/slurm too; their names matter, not their bytes.
    if (const auto it = got->find("binaryData"); it != got->end() && it->is_object()) {
      for (auto entry = it->begin(); entry != it->end(); ++entry) {
        data.emplace(entry.key(), std::string());
      }
    }
    return data;
  };
}

NodeSetLookup nodesets_from(kube::Client& client) {
  return [&client](const std::string& ns, const std::string& name) {
    static const kube::ResourceType nodesets{std::string(api::kGroup), std::string(api::kVersion),
                                             "nodesets", "NodeSet", true};
    return read_object(client, nodesets, ns, name, "webhook.nodeset_unreadable", "nodeset");
  };
}

BindingEffect copy_topology_with(kube::Client& client) {
  return [&client](const Binding& b) {
    const std::string pod_key = b.namespace_name + "/" + b.pod;
    auto pod = client.get(kube::resources::pods(), b.namespace_name, b.pod);
    if (!pod) {
      log::warn("webhook.binding_pod_unreadable",
                {{"pod", pod_key}, {"error", pod.error().message}});
      return;
    }
    auto node = client.get(kube::resources::nodes(), "", b.node);
    if (!node) {
      if (node.error().kind != kube::ErrorKind::kNotFound) {
        log::warn("webhook.binding_node_unreadable",
                  {{"node", b.node}, {"error", node.error().message}});
      }
      return;
    }
    const auto topology = topology_for(*pod, *node);
    if (!topology) {
      return;
    }
    const nlohmann::json patch = {
        {"metadata",
         {{"annotations", {{std::string(api::kAnnotationNodeTopologySpec), *topology}}}}}};
    if (auto patched = client.patch(kube::resources::pods(), b.namespace_name, b.pod,
                                    kube::PatchType::kMerge, patch);
        !patched) {
      log::warn("webhook.binding_patch_failed",
                {{"pod", pod_key}, {"node", b.node}, {"error", patched.error().message}});
      return;
    }
    log::info("webhook.topology_copied",
              {{"pod", pod_key}, {"node", b.node}, {"topology", *topology}});
  };
}

}  // namespace tightrope::webhook
