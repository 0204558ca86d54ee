// The webhook served in this process and registered with the bed's API server: resources
// created and updated through kube::Client are admitted or refused by it. The registration is
// scoped to one namespace labelled for this run, so tests in other namespaces never reach it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../unit/api/support.hpp"
#include "../kube/kube_support.hpp"
#include "http.hpp"
#include "kube/base64.hpp"
#include "webhook/server.hpp"

namespace tightrope::webhook {
namespace {

using kube::testing::eventually;
using kube::testing::make_client;
using kube::testing::unique_name;
using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const kube::ResourceType& webhook_configurations() {
  static const kube::ResourceType type{"admissionregistration.k8s.io", "v1",
                                       "validatingwebhookconfigurations",
                                       "ValidatingWebhookConfiguration", false};
  return type;
}
const kube::ResourceType& controllers() {
  static const kube::ResourceType type{"slinky.slurm.net", "v1beta1", "controllers", "Controller",
                                       true};
  return type;
}
const kube::ResourceType& nodesets() {
  static const kube::ResourceType type{"slinky.slurm.net", "v1beta1", "nodesets", "NodeSet", true};
  return type;
}

// The exit status of a shell command.
int run(const std::string& command) {
  const int status = std::system(command.c_str());  // NOLINT(cert-env33-c): fixed commands
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A shell command's standard output.
std::string output_of(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), &pclose);
  if (!pipe) {
    return out;
  }
  std::array<char, 4096> buffer{};
  while (const size_t n = fread(buffer.data(), 1, buffer.size(), pipe.get())) {
    out.append(buffer.data(), n);
  }
  return out;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A CA and the certificates it signs for 127.0.0.1, made with the openssl command in a
// directory removed at the end. ECDSA P-256 keys: quick to make, and Go's TLS takes them.
class Pki {
 public:
  Pki() {
    std::string pattern = (fs::temp_directory_path() / "tightrope-webhook-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    dir_ = pattern;
    write_file(dir_ / "openssl.cnf",
               "[req]\n"
               "distinguished_name = dn\n"
               "prompt = no\n"
               "[dn]\n"
               "CN = tightrope webhook test CA\n"
               "[ca]\n"
               "basicConstraints = critical, CA:TRUE\n"
               "keyUsage = critical, keyCertSign, cRLSign\n"
               "subjectKeyIdentifier = hash\n"
               "[serving]\n"
               "basicConstraints = critical, CA:FALSE\n"
               "keyUsage = critical, digitalSignature\n"
               "extendedKeyUsage = serverAuth\n"
               "subjectAltName = IP:127.0.0.1\n");
    openssl(
        "req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
        " -config openssl.cnf -extensions ca -keyout ca.key -out ca.crt");
  }
  ~Pki() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Pki(const Pki&) = delete;
  Pki& operator=(const Pki&) = delete;

  const fs::path& dir() const { return dir_; }
  fs::path ca_file() const { return dir_ / "ca.crt"; }
  std::string ca_pem() const {
    std::ifstream in(ca_file());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // A serving certificate for 127.0.0.1 with common name `cn`, written to <name>.crt/.key.
  void issue(const std::string& cn, const std::string& name) {
    openssl(
        "req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -config openssl.cnf"
        " -subj /CN=" +
        cn + " -keyout " + name + ".key -out " + name + ".csr");
    openssl("x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2" +
            " -extfile openssl.cnf -extensions serving -out " + name + ".crt");
  }

 private:
  void openssl(const std::string& args) const {
    const std::string command =
        "cd '" + dir_.string() + "' && openssl " + args + " >/dev/null 2>&1";
    if (run(command) != 0) {
      throw std::runtime_error("failed: " + command);
    }
  }

  fs::path dir_;
};

// The CRDs of deploy/crds, applied (idempotent: other tests apply the same) and Established.
void install_crds(kube::Client& client) {
  for (const auto& entry : fs::directory_iterator(api::testing::source_dir() / "deploy/crds")) {
    for (const json& crd : api::testing::load_yaml_file(entry.path())) {
      auto applied = client.apply(kube::resources::custom_resource_definitions(), "", crd,
                                  {"tightrope-webhook-test", true});
      ASSERT_TRUE(applied) << entry.path() << ": " << applied.error().message;
      const std::string name = crd["metadata"]["name"];
      EXPECT_TRUE(eventually([&] {
        auto got = client.get(kube::resources::custom_resource_definitions(), "", name);
        for (const auto& c : got ? kube::testing::field(*got, "/status/conditions", json::array())
                                 : json::array()) {
          if (c.value("type", "") == "Established" && c.value("status", "") == "True") {
            return true;
          }
        }
        return false;
      })) << name
          << " not Established";
    }
  }
}

json valid_controller(const std::string& name) {
  return {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "Controller"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"slurmKeyRef", {{"name", "slurm-auth-slurm"}, {"key", "slurm.key"}}},
            {"jwtKeyRef", {{"name", "slurm-auth-jwths256"}, {"key", "jwt_hs256.key"}}}}}};
}

// Passes the CRD's schema and CEL rules (slurmKeyRef is there) but not the webhook (no name).
json invalid_controller(const std::string& name) {
  json c = valid_controller(name);
  c["spec"]["slurmKeyRef"].erase("name");
  return c;
}

bool refused_by_webhook(const kube::Error& e) {
  return e.message.find("admission webhook") != std::string::npos &&
         e.message.find("denied the request") != std::string::npos;
}

std::vector<std::string> cause_fields(const kube::Error& e) {
  std::vector<std::string> out;
  for (const auto& c : e.status.causes) {
    out.push_back(c.field);
  }
  return out;
}

class Webhook : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = make_client();
    install_crds(*client_);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
    pki_ = std::make_unique<Pki>();
    pki_->issue("tightrope-webhook-test", "tls");
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.cert_file = pki_->dir() / "tls.crt";
    options.key_file = pki_->dir() / "tls.key";
    registry_ = std::make_unique<metrics::Registry>();
    options.metrics = registry_.get();
    server_ = std::make_unique<Server>(options, config_maps_from(*client_));
    server_->serve_bindings(copy_topology_with(*client_));
    auto started = server_->start();
    ASSERT_TRUE(started) << started.error();

    // A namespace of this run, and a registration that only it selects.
    ns_ = unique_name("webhook");
    const std::string label = "tightrope.test/webhook";
    auto created = client_->create(kube::resources::namespaces(), "",
                                   {{"apiVersion", "v1"},
                                    {"kind", "Namespace"},
                                    {"metadata", {{"name", ns_}, {"labels", {{label, ns_}}}}}});
    ASSERT_TRUE(created) << created.error().message;
    kube::testing::wait_until_it_holds_pods(*client_, ns_);
    configuration_ = ns_ + "-validate";
    json rules = json::array();
    rules.push_back(
        {{"apiGroups", {"slinky.slurm.net"}},
         {"apiVersions", {"v1beta1"}},
         {"operations", {"CREATE", "UPDATE"}},
         {"resources",
          {"controllers", "nodesets", "loginsets", "restapis", "accountings", "tokens"}},
         {"scope", "Namespaced"}});
    const std::string url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/validate";
    const json webhook = {
        {"name", "validate." + ns_ + ".tightrope.test"},
        {"admissionReviewVersions", {"v1"}},
        {"sideEffects", "None"},
        {"failurePolicy", "Fail"},
        {"timeoutSeconds", 5},
        {"clientConfig", {{"url", url}, {"caBundle", kube::encode_base64(pki_->ca_pem())}}},
        {"namespaceSelector", {{"matchLabels", {{label, ns_}}}}},
        {"rules", rules}};
    auto registered = client_->create(webhook_configurations(), "",
                                      {{"apiVersion", "admissionregistration.k8s.io/v1"},
                                       {"kind", "ValidatingWebhookConfiguration"},
                                       {"metadata", {{"name", configuration_}}},
                                       {"webhooks", json::array({webhook})}});
    ASSERT_TRUE(registered) << registered.error().message;
    registered_ = true;

    // The API server takes up a new configuration through an informer: probe until a refusal
    // comes from the webhook. A probe that got in before that is deleted.
    std::string last;
    bool active = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int i = 0; !active && std::chrono::steady_clock::now() < deadline; ++i) {
      const std::string name = "probe-" + std::to_string(i);
      auto probe = client_->create(controllers(), ns_, invalid_controller(name));
      if (probe) {
        (void)client_->remove(controllers(), ns_, name);
        last = "admitted without the webhook";
      } else {
        active = refused_by_webhook(probe.error());
        last = probe.error().message;
      }
      if (!active) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    ASSERT_TRUE(active) << "the API server did not call the webhook within 30 s; last: " << last;
    ready_ = true;
  }

  // Also after a failure: a registration left behind with failurePolicy Fail would refuse
  // everything in its namespace (and only there, by its selector).
  static void TearDownTestSuite() {
    if (registered_) {
      auto removed = client_->remove(webhook_configurations(), "", configuration_);
      EXPECT_TRUE(removed || removed.error().kind == kube::ErrorKind::kNotFound)
          << removed.error().message;
    }
    if (!ns_.empty()) {
      (void)client_->remove(kube::resources::namespaces(), "", ns_);
    }
    server_.reset();
    registry_.reset();
    pki_.reset();
    client_.reset();
  }

  void SetUp() override {
    if (!ready_) {
      GTEST_FAIL() << "the webhook was not set up";
    }
  }

  std::string url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(server_->port()) + path;
  }

  static inline std::unique_ptr<kube::Client> client_;
  static inline std::unique_ptr<Pki> pki_;
  static inline std::unique_ptr<metrics::Registry> registry_;
  static inline std::unique_ptr<Server> server_;
  static inline std::string ns_;
  static inline std::string configuration_;
  static inline bool registered_ = false;
  static inline bool ready_ = false;
};

TEST_F(Webhook, ASlurmdPodBoundToANodeTakesItsTopology) {
  const kube::ResourceType mutating{"admissionregistration.k8s.io", "v1",
                                    "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                                    false};
  const std::string node = ns_ + "-node";
  const std::string registration = ns_ + "-binding";
  const std::string topology = "topo-switch:s2,topo-block:b2";
  ASSERT_TRUE(client_->create(
      kube::resources::nodes(), "",
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata",
        {{"name", node}, {"annotations", {{"topology.slinky.slurm.net/spec", topology}}}}}}));
  const json hook = {
      {"name", "binding." + ns_ + ".tightrope.test"},
      {"admissionReviewVersions", {"v1"}},
      {"sideEffects", "NoneOnDryRun"},
      {"failurePolicy", "Fail"},  // here a missed call must fail the test, not pass unseen
      {"timeoutSeconds", 5},
      {"clientConfig",
       {{"url", url(std::string(kBindingPath))},
        {"caBundle", kube::encode_base64(pki_->ca_pem())}}},
      {"namespaceSelector", {{"matchLabels", {{"tightrope.test/webhook", ns_}}}}},
      {"rules", json::array({{{"apiGroups", {""}},
                              {"apiVersions", {"v1"}},
                              {"operations", {"CREATE"}},
                              {"resources", {"pods/binding"}},
                              {"scope", "Namespaced"}}})}};
  ASSERT_TRUE(client_->create(mutating, "",
                              {{"apiVersion", "admissionregistration.k8s.io/v1"},
                               {"kind", "MutatingWebhookConfiguration"},
                               {"metadata", {{"name", registration}}},
                               {"webhooks", json::array({hook})}}));
  // Pods no scheduler takes: this test binds them itself.
  const auto pod = [&](const std::string& name, const std::string& app) {
    return json{{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/name", app}}}}},
                {"spec",
                 {{"schedulerName", "tightrope-nobody"},
                  {"containers", json::array({{{"name", "c"}, {"image", "none"}}})}}}};
  };
  const auto bind = [&](const std::string& name) {
    return client_->create(kube::resources::pods(), ns_,
                           {{"apiVersion", "v1"},
                            {"kind", "Binding"},
                            {"metadata", {{"name", name}}},
                            {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}},
                           name, "binding");
  };
  const auto topology_of = [&](const std::string& name) {
    auto got = client_->get(kube::resources::pods(), ns_, name);
    return got ? got->value("/metadata/annotations"_json_pointer, json::object())
                     .value("topology.slinky.slurm.net/spec", "")
               : std::string("(gone)");
  };
  ASSERT_TRUE(client_->create(kube::resources::pods(), ns_, pod("slinky-0", "slurmd")));
  ASSERT_TRUE(client_->create(kube::resources::pods(), ns_, pod("login-0", "login")));
  // The API server takes up the registration through an informer: the first binding may
  // precede it, so each pod is bound once, after a slurmd probe pod shows the copy works.
  bool active = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; !active && std::chrono::steady_clock::now() < deadline; ++i) {
    const std::string probe = "probe-" + std::to_string(i);
    ASSERT_TRUE(client_->create(kube::resources::pods(), ns_, pod(probe, "slurmd")));
    ASSERT_TRUE(bind(probe));
    active = topology_of(probe) == topology;
    (void)client_->remove(kube::resources::pods(), ns_, probe);
    if (!active) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  ASSERT_TRUE(active) << "no binding reached the webhook within 30 s";
  auto bound = bind("slinky-0");
  ASSERT_TRUE(bound) << bound.error().message;
  EXPECT_EQ(topology_of("slinky-0"), topology);
  ASSERT_TRUE(bind("login-0"));
  EXPECT_EQ(topology_of("login-0"), "") << "only slurmd pods";

  (void)client_->remove(mutating, "", registration);
  (void)client_->remove(kube::resources::nodes(), "", node);
}

TEST_F(Webhook, AnInvalidControllerIsRefusedWithItsFieldPath) {
  auto created = client_->create(controllers(), ns_, invalid_controller("invalid"));
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, kube::ErrorKind::kInvalid) << created.error().message;
  EXPECT_EQ(created.error().http_status, 422);
  EXPECT_TRUE(refused_by_webhook(created.error())) << created.error().message;
  EXPECT_THAT(created.error().message,
              HasSubstr("Controller " + ns_ + "/invalid: spec.slurmKeyRef.name: required"));
  EXPECT_THAT(cause_fields(created.error()), ::testing::ElementsAre("spec.slurmKeyRef.name"));
}

TEST_F(Webhook, ReviewsByVerdictAndTheCertificatesExpiryAreMetrics) {
  ASSERT_FALSE(client_->create(controllers(), ns_, invalid_controller("counted-invalid")));
  ASSERT_TRUE(client_->create(controllers(), ns_, valid_controller("counted-valid")));
  const std::string text = registry_->render();
  EXPECT_THAT(text, HasSubstr("tightrope_webhook_reviews_total{kind=\"Controller\","
                              "operation=\"CREATE\",allowed=\"false\"}"));
  EXPECT_THAT(text, HasSubstr("tightrope_webhook_reviews_total{kind=\"Controller\","
                              "operation=\"CREATE\",allowed=\"true\"}"));
  EXPECT_THAT(text,
              HasSubstr("tightrope_webhook_review_duration_seconds_count{kind=\"Controller\"}"));
  // The test certificate is valid for two days from its making.
  // The sample's line, not the HELP line that also names the metric.
  const std::string name = "\ntightrope_webhook_certificate_expiry_timestamp_seconds ";
  const size_t at = text.find(name);
  ASSERT_NE(at, std::string::npos) << text;
  const double expiry = std::stod(text.substr(at + name.size()));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(expiry, now + 86400);
  EXPECT_LT(expiry, now + 3 * 86400);
}

TEST_F(Webhook, AValidControllerIsAccepted) {
  auto created = client_->create(controllers(), ns_, valid_controller("valid"));
  ASSERT_TRUE(created) << created.error().message;
}

TEST_F(Webhook, AnUpdateThatRenamesTheClusterIsRefused) {
  // Unset, the ClusterName is "<namespace>_<name>"; the CRD's rule (self == oldSelf) sees no
  // old value to compare, the webhook sees the name change.
  ASSERT_TRUE(client_->create(controllers(), ns_, valid_controller("renamed")));
  auto current = client_->get(controllers(), ns_, "renamed");
  ASSERT_TRUE(current) << current.error().message;
  json changed = *current;
  changed["spec"]["clusterName"] = "other";
  auto updated = client_->update(controllers(), ns_, changed);
  ASSERT_FALSE(updated);
  EXPECT_TRUE(refused_by_webhook(updated.error())) << updated.error().message;
  EXPECT_THAT(updated.error().message, HasSubstr("spec.clusterName: is immutable once set"));

  // An update that keeps it goes through.
  json labelled = *current;
  labelled["metadata"]["labels"] = {{"team", "hpc"}};
  auto relabelled = client_->update(controllers(), ns_, labelled);
  EXPECT_TRUE(relabelled) << relabelled.error().message;
}

TEST_F(Webhook, AControllerWhoseExtraConfSetsAnOperatorKeyIsRefusedNamingTheLine) {
  json c = valid_controller("extra");
  c["spec"]["extraConf"] = "MaxJobCount=20000\nSlurmctldPort=7000\n";
  auto created = client_->create(controllers(), ns_, c);
  ASSERT_FALSE(created);
  EXPECT_TRUE(refused_by_webhook(created.error())) << created.error().message;
  EXPECT_THAT(created.error().message, HasSubstr("spec.extraConf: extraConf line 2"));
}

TEST_F(Webhook, AControllerWhoseConfigMapHoldsSlurmConfIsRefused) {
  auto config_map = client_->create(
      kube::resources::config_maps(), ns_,
      {{"apiVersion", "v1"},
       {"kind", "ConfigMap"},
       {"metadata", {{"name", "whole-conf"}}},
       {"data", {{"slurm.conf", "ClusterName=mine\n"}, {"gres.conf", "AutoDetect=nvml\n"}}}});
  ASSERT_TRUE(config_map) << config_map.error().message;
  json c = valid_controller("files");
  c["spec"]["configFileRefs"] = json::array({{{"name", "whole-conf"}}});
  auto created = client_->create(controllers(), ns_, c);
  ASSERT_FALSE(created);
  EXPECT_TRUE(refused_by_webhook(created.error())) << created.error().message;
  EXPECT_THAT(created.error().message,
              HasSubstr("spec.configFileRefs[0]: ConfigMap \"whole-conf\" holds slurm.conf"));

  // A ConfigMap that does not exist yet is the reconciler's to report, not a refusal.
  c["metadata"]["name"] = "files-later";
  c["spec"]["configFileRefs"] = json::array({{{"name", "not-yet"}}});
  auto later = client_->create(controllers(), ns_, c);
  EXPECT_TRUE(later) << later.error().message;
}

TEST_F(Webhook, ANodeSetWhoseControllerIsInAnotherNamespaceIsRefused) {
  const json nodeset = {
      {"apiVersion", "slinky.slurm.net/v1beta1"},
      {"kind", "NodeSet"},
      {"metadata", {{"name", "gpu"}}},
      {"spec", {{"controllerRef", {{"name", "slurm"}, {"namespace", "somewhere-else"}}}}}};
  auto created = client_->create(nodesets(), ns_, nodeset);
  ASSERT_FALSE(created);
  EXPECT_TRUE(refused_by_webhook(created.error())) << created.error().message;
  EXPECT_THAT(created.error().message, HasSubstr("spec.controllerRef.namespace"));
  EXPECT_THAT(cause_fields(created.error()), ::testing::Contains("spec.controllerRef.namespace"));
}

TEST_F(Webhook, HealthAndThePerKindPathsAreServed) {
  for (const char* path : {"/healthz", "/readyz"}) {
    tightrope::testing::HttpRequest get;
    get.url = url(path);
    get.ca_file = pki_->ca_file().string();
    const auto response = tightrope::testing::http(get);
    EXPECT_EQ(response.status, 200) << path;
  }
  // A review on Slinky's NodeSet path, answered as on /validate.
  tightrope::testing::HttpRequest post;
  post.method = "POST";
  post.url = url("/validate-slinky-slurm-net-v1beta1-nodeset");
  post.ca_file = pki_->ca_file().string();
  post.headers = {"Content-Type: application/json"};
  post.body = json({{"apiVersion", "admission.k8s.io/v1"},
                    {"kind", "AdmissionReview"},
                    {"request", {{"uid", "u-1"}, {"operation", "DELETE"}}}})
                  .dump();
  auto response = tightrope::testing::http(post);
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = json::parse(response.body, nullptr, false);
  EXPECT_EQ(answer["response"]["uid"], "u-1");
  EXPECT_THAT(answer["response"]["status"]["message"].dump(), HasSubstr("request.kind"));
}

TEST_F(Webhook, ABodyOverTheLimitIsRefusedWith413) {
  tightrope::testing::HttpRequest post;
  post.method = "POST";
  post.url = url("/validate");
  post.ca_file = pki_->ca_file().string();
  post.headers = {"Content-Type: application/json"};
  post.body = std::string(size_t{5} << 20, ' ');
  EXPECT_EQ(tightrope::testing::http(post).status, 413);
}

TEST_F(Webhook, ARotatedCertificateIsServedWithoutARestart) {
  // As kubelet updates a Secret volume: new files replace the old ones by rename.
  pki_->issue("tightrope-webhook-rotated", "next");
  fs::rename(pki_->dir() / "next.key", pki_->dir() / "tls.key");
  fs::rename(pki_->dir() / "next.crt", pki_->dir() / "tls.crt");
  const std::string subject_command =
      "openssl s_client -connect 127.0.0.1:" + std::to_string(server_->port()) +
      " </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null";
  std::string subject;
  EXPECT_TRUE(eventually(
      [&] {
        subject = output_of(subject_command);
        return subject.find("tightrope-webhook-rotated") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << "still served: " << subject;
  // The API server trusts the new certificate (same CA) and still gets answers.
  auto created = client_->create(controllers(), ns_, invalid_controller("after-rotation"));
  ASSERT_FALSE(created);
  EXPECT_TRUE(refused_by_webhook(created.error())) << created.error().message;
}

}  // namespace
}  // namespace tightrope::webhook
