// The slurm-operator binary against the bed: a whole cluster (Controller, RestApi, Accounting,
// LoginSet, Token) becomes its Kubernetes objects; edits reach them; deletion garbage-collects
// them; a restart converges without duplicates; the bed's real Slurm answers the operator's
// minted JWT and the Token's; the Accounting's slurmdbd.conf runs a real slurmdbd on the bed's
// MariaDB; bad input is refused or reported, never crashes anything.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <fstream>
#include <set>

#include "../kube/kube_support.hpp"
#include "kube/base64.hpp"
#include "kube/time.hpp"
#include "operator/resources.hpp"
#include "operator_support.hpp"
#include "slurm/token.hpp"
#include "testbed.hpp"

namespace tightrope::op {
namespace {

using kube::testing::eventually;
using kube::testing::field;
using nlohmann::json;
using testing::OperatorProcess;
using ::tightrope::testing::TestBed;

constexpr auto kConverge = std::chrono::seconds(30);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class OperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = kube::testing::make_client();
    testing::install_crds(*client_);
    ns_ = kube::testing::fresh_namespace(*client_);
  }

  void TearDown() override {
    if (HasFailure() && op_) {
      std::cerr << "---- slurm-operator log\n" << op_->log() << "----\n";
    }
    op_.reset();
  }

  void start_operator() {
    op_ = std::make_unique<OperatorProcess>(ns_);
    op_->start();
  }

  void create(const kube::ResourceType& type, json object) {
    object["metadata"]["namespace"] = ns_;
    auto created = client_->create(type, ns_, object);
    ASSERT_TRUE(created) << created.error().message;
  }

  void secret(const std::string& name, const std::string& key, const std::string& value) {
    create(kube::resources::secrets(), {{"apiVersion", "v1"},
                                        {"kind", "Secret"},
                                        {"metadata", {{"name", name}}},
                                        {"data", {{key, kube::encode_base64(value)}}}});
  }

  void config_map(const std::string& name, const json& data) {
    create(kube::resources::config_maps(), {{"apiVersion", "v1"},
                                            {"kind", "ConfigMap"},
                                            {"metadata", {{"name", name}}},
                                            {"data", data}});
  }

  // The bed's keys, so that the bed's Slurm accepts what the operator signs.
  void key_secrets() {
    secret("slurm-auth-slurm", "slurm.key", read_file(TestBed::var("SLURM_KEY")));
    secret("slurm-auth-jwths256", "jwt_hs256.key", read_file(TestBed::var("SLURM_JWT_KEY")));
    secret("mariadb-password", "password", "slurmpw");
    secret("slurm-sssd-conf", "sssd.conf", "[sssd]\nservices = nss, pam\n");
  }

  json sample(const std::string& file) {
    json doc = testing::read_yaml_file(testing::source_dir() / "deploy/samples" / file).front();
    doc["metadata"]["namespace"] = ns_;
    return doc;
  }

  // Controller "slurm" from the sample, with ConfigMaps the sample names.
  void apply_cluster() {
    key_secrets();
    config_map("slurm-config-cgroup", {{"cgroup.conf", "CgroupPlugin=cgroup/v2\n"}});
    config_map("slurm-config-gres", {{"gres.conf", "AutoDetect=nvidia\n"}});
    config_map("slurm-prolog-gpu-health", {{"gpu-health.sh", "#!/bin/sh\nexit 0\n"}});
    config_map("slurm-epilog-cleanup", {{"cleanup.sh", "#!/bin/sh\nexit 0\n"}});
    create(resources::controllers(), sample("controller.yaml"));
    create(resources::restapis(), sample("restapi.yaml"));
    json accounting = sample("accounting.yaml");
    accounting["spec"]["storageConfig"]["host"] = "127.0.0.1";
    accounting["spec"]["storageConfig"]["port"] = std::stoi(TestBed::var("MARIADB_PORT"));
    create(resources::accountings(), accounting);
    create(resources::loginsets(), sample("loginset.yaml"));
    create(resources::tokens(), sample("token.yaml"));
  }

  std::optional<json> get(const kube::ResourceType& type, const std::string& name) {
    auto got = client_->get(type, ns_, name);
    return got ? std::optional<json>(*got) : std::nullopt;
  }

  // Ready's reason of a resource ("" while it has none).
  std::string ready_reason(const kube::ResourceType& type, const std::string& name,
                           const std::string& condition = "Ready") {
    return testing::condition(*client_, type, ns_, name, condition);
  }

  std::string slurm_conf() {
    auto cm = get(kube::resources::config_maps(), "slurm-config");
    return cm ? field<std::string>(*cm, "/data/slurm.conf", "") : "";
  }

  std::string config_hash() {
    auto sts = get(kube::resources::stateful_sets(), "slurm-controller");
    return sts ? field<std::string>(*sts,
                                    "/spec/template/metadata/annotations/"
                                    "slinky.slurm.net~1slurm-config-hash",
                                    "")
               : "";
  }

  std::unique_ptr<kube::Client> client_;
  std::string ns_;
  std::unique_ptr<OperatorProcess> op_;
};

TEST_F(OperatorTest, AFullClusterBecomesItsObjects) {
  apply_cluster();
  start_operator();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));

  const std::string conf = slurm_conf();
  EXPECT_NE(conf.find("ClusterName=slurm\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("AccountingStorageHost=slurm-accounting." + ns_), std::string::npos);
  EXPECT_NE(conf.find("Prolog=gpu-health.sh\n"), std::string::npos);  // shipped to slurmd
  EXPECT_NE(conf.find("MetricsType=metrics/openmetrics"), std::string::npos);
  // cgroup.conf comes from the user's ConfigMap, so the operator writes none.
  auto cm = get(kube::resources::config_maps(), "slurm-config");
  ASSERT_TRUE(cm);
  EXPECT_FALSE(cm->contains("/data/cgroup.conf"_json_pointer));

  auto sts = get(kube::resources::stateful_sets(), "slurm-controller");
  ASSERT_TRUE(sts);
  EXPECT_EQ(field<int64_t>(*sts, "/spec/replicas", 0), 1);
  EXPECT_EQ(field<std::string>(*sts, "/spec/serviceName", ""), "slurm-controller-internal");
  const json& pod = (*sts)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["name"], "slurmctld");
  EXPECT_EQ(pod["containers"][0]["resources"]["requests"]["cpu"], "2");  // the user's
  EXPECT_EQ(pod["priorityClassName"], "slurm-control-plane");
  EXPECT_EQ((*sts)["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"], "standard-rwo");
  const json owner = (*sts)["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "Controller");
  EXPECT_TRUE(owner["controller"].get<bool>());

  for (const char* name : {"slurm-controller", "slurm-controller-internal", "slurm-restapi",
                           "slurm-accounting", "slurm-login"}) {
    EXPECT_TRUE(
        eventually([&] { return get(kube::resources::services(), name).has_value(); }, kConverge))
        << name;
  }
  EXPECT_TRUE(eventually(
      [&] { return get(kube::resources::deployments(), "slurm-restapi").has_value(); }, kConverge));
  auto restapi = get(kube::resources::deployments(), "slurm-restapi");
  ASSERT_TRUE(restapi);
  EXPECT_EQ((*restapi)["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "openapi/slurmctld,openapi/slurmdbd");
  EXPECT_TRUE(eventually(
      [&] { return get(kube::resources::stateful_sets(), "slurm-accounting").has_value(); },
      kConverge));
  EXPECT_TRUE(eventually(
      [&] { return get(kube::resources::deployments(), "slurm-login").has_value(); }, kConverge));
  auto keys = get(kube::resources::secrets(), "slurm-login-ssh-host-keys");
  ASSERT_TRUE(keys);
  EXPECT_EQ((*keys)["data"].size(), 3U);
  EXPECT_TRUE(keys->value("immutable", false));
  EXPECT_TRUE(eventually(
      [&] { return get(kube::resources::secrets(), "slurm-token-slurm").has_value(); }, kConverge));
  EXPECT_TRUE(
      eventually([&] { return ready_reason(resources::tokens(), "slurm-token") == "True/Issued"; },
                 kConverge));
  // No kubelet in the bed: workloads never become available, and the reasons say so.
  EXPECT_TRUE(eventually(
      [&] {
        return ready_reason(resources::restapis(), "slurm") == "False/SlurmrestdNotAvailable";
      },
      kConverge));
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::accountings(), "slurm") == "False/SlurmdbdNotReady"; },
      kConverge));
}

TEST_F(OperatorTest, TheOperatorsJwtAndTheTokensJwtAreAcceptedBySlurm) {
  apply_cluster();
  start_operator();
  // diag needs a token slurmctld accepts: Responding means the minted JWT works.
  EXPECT_TRUE(eventually(
      [&] {
        return ready_reason(resources::controllers(), "slurm", "SlurmReachable") ==
               "True/Responding";
      },
      kConverge));
  EXPECT_EQ(ready_reason(resources::controllers(), "slurm"), "True/SlurmctldResponding");

  ASSERT_TRUE(eventually(
      [&] { return get(kube::resources::secrets(), "slurm-token-slurm").has_value(); }, kConverge));
  auto token_secret = get(kube::resources::secrets(), "slurm-token-slurm");
  auto jwt = kube::decode_base64(field<std::string>(*token_secret, "/data/SLURM_JWT", ""));
  ASSERT_TRUE(jwt);
  const auto claims = slurm::verify_jwt(read_file(TestBed::var("SLURM_JWT_KEY")), *jwt);
  ASSERT_TRUE(claims);
  EXPECT_EQ(claims->user, "slurm");
  EXPECT_EQ(claims->expires_at - claims->issued_at, std::chrono::hours(1));  // lifetime: 1h
  const auto [status, body] = testing::http_get(
      TestBed::var("SLURMRESTD_URL") + "/slurm/v0.0.44/diag", {"X-SLURM-USER-TOKEN: " + *jwt});
  EXPECT_EQ(status, 200) << body;
  const auto [bad, bad_body] =
      testing::http_get(TestBed::var("SLURMRESTD_URL") + "/slurm/v0.0.44/diag",
                        {"X-SLURM-USER-TOKEN: " + *jwt + "x"});
  EXPECT_NE(bad, 200);
}

TEST_F(OperatorTest, EditsReachTheObjectsAndAConfigChangeRollsSlurmctld) {
  apply_cluster();
  start_operator();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));
  const std::string first = config_hash();

  ASSERT_TRUE(client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"extraConf", "SchedulerType=sched/backfill\n"}}}}));
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("SchedulerType=sched/backfill") != std::string::npos; },
      kConverge));
  EXPECT_TRUE(eventually([&] { return config_hash() != first; }, kConverge));

  // A NodeSet adds its NodeSet and partition lines.
  json nodeset = sample("nodeset.yaml");
  create(resources::nodesets(), nodeset);
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("NodeSet=gpu Feature=gpu") != std::string::npos; }, kConverge))
      << slurm_conf();
  EXPECT_NE(slurm_conf().find("PartitionName=gpu Nodes=gpu"), std::string::npos);

  // A referenced ConfigMap's data is part of the hash too.
  const std::string second = config_hash();
  ASSERT_TRUE(client_->patch(kube::resources::config_maps(), ns_, "slurm-config-gres",
                             kube::PatchType::kMerge, {{"data", {{"gres.conf", "Name=gpu\n"}}}}));
  EXPECT_TRUE(eventually([&] { return config_hash() != second; }, kConverge));

  ASSERT_TRUE(client_->patch(resources::restapis(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"replicas", 3}}}}));
  EXPECT_TRUE(eventually(
      [&] {
        auto d = get(kube::resources::deployments(), "slurm-restapi");
        return d && field<int64_t>(*d, "/spec/replicas", 0) == 3;
      },
      kConverge));

  // An owned object deleted by hand comes back.
  ASSERT_TRUE(client_->remove(kube::resources::services(), ns_, "slurm-controller"));
  EXPECT_TRUE(eventually(
      [&] { return get(kube::resources::services(), "slurm-controller").has_value(); }, kConverge));
}

// A cluster another operator of these kinds made (Slinky's, before a move): each workload with
// that operator's own pod template, owned by its resource, under the selector both use.
json foreign_workload(const std::string& kind, const std::string& name, const std::string& app,
                      const json& owner) {
  const json selector = {{"app.kubernetes.io/name", app},
                         {"app.kubernetes.io/instance", owner["metadata"]["name"]}};
  json w = {{"apiVersion", "apps/v1"},
            {"kind", kind},
            {"metadata",
             {{"name", name},
              {"ownerReferences", json::array({{{"apiVersion", "slinky.slurm.net/v1beta1"},
                                                {"kind", owner["kind"]},
                                                {"name", owner["metadata"]["name"]},
                                                {"uid", owner["metadata"]["uid"]},
                                                {"controller", true},
                                                {"blockOwnerDeletion", true}}})}}},
            {"spec",
             {{"replicas", 1},
              {"selector", {{"matchLabels", selector}}},
              {"template",
               {{"metadata", {{"labels", selector}}},
                {"spec",
                 {{"containers",
                   json::array({{{"name", app},
                                 {"image", "ghcr.io/slinkyproject/" + app + ":25.05"}}})}}}}}}}};
  if (kind == "StatefulSet") {
    w["spec"]["serviceName"] = name;
  }
  return w;
}

TEST_F(OperatorTest, AClusterAnotherOperatorMadeIsAdoptedAsItIsUntilItsSpecChanges) {
  apply_cluster();
  const std::string slinky_conf = "ClusterName=slurm\nSlurmctldHost=slurm-controller-0\n";
  config_map("slurm-config", {{"slurm.conf", slinky_conf}});
  const struct {
    const kube::ResourceType* owner_type;
    std::string owner;
    const kube::ResourceType* type;
    std::string kind, name, app;
  } made[] = {
      {&resources::controllers(), "slurm", &kube::resources::stateful_sets(), "StatefulSet",
       "slurm-controller", "slurmctld"},
      {&resources::restapis(), "slurm", &kube::resources::deployments(), "Deployment",
       "slurm-restapi", "slurmrestd"},
      {&resources::accountings(), "slurm", &kube::resources::stateful_sets(), "StatefulSet",
       "slurm-accounting", "slurmdbd"},
      {&resources::loginsets(), "slurm-login", &kube::resources::deployments(), "Deployment",
       "slurm-login", "login"},
  };
  // The same object with its spec as made (the controllers write status, so the
  // resourceVersion moves anyway).
  std::map<std::string, std::string> uids;
  const auto spec_as_made = [&](const kube::ResourceType& type, const std::string& name) {
    auto w = get(type, name);
    return w && field<std::string>(*w, "/metadata/uid", "") == uids[name] &&
           field<int64_t>(*w, "/metadata/generation", 0) == 1;
  };
  for (const auto& m : made) {
    auto owner = get(*m.owner_type, m.owner);
    ASSERT_TRUE(owner);
    create(*m.type, foreign_workload(m.kind, m.name, m.app, *owner));
    uids[m.name] = field<std::string>(*get(*m.type, m.name), "/metadata/uid", "");
  }
  start_operator();

  // Each resource says it adopted what it found and reports on it, writing nothing over it.
  for (const auto& m : made) {
    EXPECT_TRUE(eventually(
        [&] {
          auto r = get(*m.owner_type, m.owner);
          return r &&
                 field<std::string>(*r,
                                    "/metadata/annotations/"
                                    "tightrope.slurm.net~1adopted-generation",
                                    "") == "1" &&
                 !ready_reason(*m.owner_type, m.owner).empty();
        },
        kConverge))
        << m.owner_type->kind << " " << m.owner;
  }
  EXPECT_TRUE(eventually(
      [&] {
        auto events = client_->list(kube::resources::events(), ns_);
        int adopted = 0;
        for (const auto& e : events ? events->items : json::array()) {
          adopted += e.value("reason", "") == "Adopted" ? 1 : 0;
        }
        return adopted == 4;
      },
      kConverge));
  // Later reconciles (the Token's, the NodeSets' none) change nothing either.
  const int64_t seen = op_->reconciles("controller");
  EXPECT_TRUE(eventually([&] { return op_->reconciles("controller") > seen; }, kConverge));
  for (const auto& m : made) {
    EXPECT_TRUE(spec_as_made(*m.type, m.name)) << m.name << " was written over";
  }
  EXPECT_EQ(slurm_conf(), slinky_conf);

  // The Controller's spec changes: its own objects are Tightrope's from then on; the others
  // stay adopted.
  ASSERT_TRUE(client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"extraConf", "SchedulerType=sched/backfill\n"}}}}));
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("SchedulerType=sched/backfill") != std::string::npos; },
      kConverge));
  // Its StatefulSet had fields that cannot change (serviceName, volumeClaimTemplates) set
  // otherwise: it is made anew, the pods left to it.
  EXPECT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));
  EXPECT_FALSE(spec_as_made(kube::resources::stateful_sets(), "slurm-controller"));
  EXPECT_TRUE(spec_as_made(kube::resources::deployments(), "slurm-restapi"));

  // Taking the annotation off ends an adoption with no change of the spec.
  ASSERT_TRUE(client_->patch(
      resources::restapis(), ns_, "slurm", kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{"tightrope.slurm.net/adopted-generation", nullptr}}}}}}));
  EXPECT_TRUE(eventually(
      [&] { return !spec_as_made(kube::resources::deployments(), "slurm-restapi"); }, kConverge));
}

TEST_F(OperatorTest, DeletingTheResourcesGarbageCollectsWhatTheyOwn) {
  apply_cluster();
  start_operator();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));
  ASSERT_TRUE(eventually(
      [&] { return get(kube::resources::deployments(), "slurm-login").has_value(); }, kConverge));
  for (const auto* type : {&resources::controllers(), &resources::loginsets()}) {
    ASSERT_TRUE(
        client_->remove(*type, ns_, type == &resources::controllers() ? "slurm" : "slurm-login"));
  }
  // kube-controller-manager's garbage collector follows the owner references.
  EXPECT_TRUE(eventually(
      [&] {
        return !get(kube::resources::stateful_sets(), "slurm-controller") &&
               !get(kube::resources::config_maps(), "slurm-config") &&
               !get(kube::resources::services(), "slurm-controller") &&
               !get(kube::resources::deployments(), "slurm-login") &&
               !get(kube::resources::secrets(), "slurm-login-ssh-host-keys");
      },
      std::chrono::seconds(90)));
  // What other resources own stays.
  EXPECT_TRUE(get(kube::resources::stateful_sets(), "slurm-accounting").has_value());
  EXPECT_TRUE(get(kube::resources::secrets(), "slurm-auth-slurm").has_value());
  // And the RestApi whose Controller is gone says so.
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::restapis(), "slurm") == "False/ControllerNotFound"; },
      kConverge));
}

TEST_F(OperatorTest, AnOperatorKilledMidwayConvergesWithoutDuplicatesAfterARestart) {
  apply_cluster();
  start_operator();
  // Killed as soon as it started writing.
  ASSERT_TRUE(eventually(
      [&] { return get(kube::resources::config_maps(), "slurm-config").has_value(); }, kConverge));
  op_->kill_hard();
  start_operator();
  ASSERT_TRUE(eventually(
      [&] {
        return get(kube::resources::secrets(), "slurm-login-ssh-host-keys").has_value() &&
               get(kube::resources::secrets(), "slurm-token-slurm").has_value() &&
               ready_reason(resources::tokens(), "slurm-token") == "True/Issued";
      },
      kConverge));
  const auto keys = get(kube::resources::secrets(), "slurm-login-ssh-host-keys");
  const auto token = get(kube::resources::secrets(), "slurm-token-slurm");
  // Once more, cleanly this time: nothing is made again, once the new process has reconciled
  // what makes the keys and the token.
  EXPECT_EQ(op_->stop(), 0);
  start_operator();
  ASSERT_TRUE(eventually(
      [&] {
        return op_->reconciles("controller") > 0 && op_->reconciles("loginset") > 0 &&
               op_->reconciles("token") > 0;
      },
      kConverge));
  EXPECT_EQ(get(kube::resources::secrets(), "slurm-login-ssh-host-keys")->at("data"),
            keys->at("data"));
  EXPECT_EQ(get(kube::resources::secrets(), "slurm-token-slurm")->at("data"), token->at("data"));
  // One of each: names are fixed, and nothing the operator labels is left over.
  for (const auto* type : {&kube::resources::stateful_sets(), &kube::resources::deployments(),
                           &kube::resources::services(), &kube::resources::config_maps()}) {
    kube::ListOptions managed;
    managed.label_selector = "app.kubernetes.io/managed-by=slurm-operator";
    auto list = client_->list(*type, ns_, managed);
    ASSERT_TRUE(list);
    std::set<std::string> names;
    for (const auto& item : list->items) {
      EXPECT_TRUE(names.insert(item["metadata"]["name"].get<std::string>()).second);
    }
  }
  auto deployments = client_->list(kube::resources::deployments(), ns_);
  EXPECT_EQ(deployments->items.size(), 2U);  // slurm-restapi and slurm-login
}

TEST_F(OperatorTest, AMissingSecretIsAConditionAndAnEventAndTheClusterFollowsWhenItAppears) {
  start_operator();
  create(resources::controllers(), sample("controller.yaml"));
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::controllers(), "slurm") == "False/ConfigMapNotFound"; },
      kConverge));
  config_map("slurm-config-cgroup", {{"cgroup.conf", "CgroupPlugin=cgroup/v2\n"}});
  config_map("slurm-config-gres", {{"gres.conf", "AutoDetect=nvidia\n"}});
  config_map("slurm-prolog-gpu-health", {{"gpu-health.sh", "#!/bin/sh\n"}});
  config_map("slurm-epilog-cleanup", {{"cleanup.sh", "#!/bin/sh\n"}});
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::controllers(), "slurm") == "False/SecretNotFound"; },
      kConverge));
  auto controller = get(resources::controllers(), "slurm");
  std::string message;
  for (const auto& c : (*controller)["status"]["conditions"]) {
    if (c["type"] == "Ready") {
      message = c["message"];
    }
  }
  EXPECT_NE(message.find("slurm-auth-slurm"), std::string::npos) << message;
  EXPECT_NE(message.find("spec.slurmKeyRef"), std::string::npos) << message;
  EXPECT_TRUE(eventually(
      [&] {
        auto events = client_->list(kube::resources::events(), ns_);
        for (const auto& e : events ? events->items : json::array()) {
          if (e.value("reason", "") == "SecretNotFound" && e.value("type", "") == "Warning") {
            return true;
          }
        }
        return false;
      },
      kConverge));
  // Still running after more retries, not crash-looping; the retry is bounded and the Secret's
  // arrival is watched.
  const int64_t failed_at = op_->reconciles("controller");
  EXPECT_TRUE(
      eventually([&] { return op_->reconciles("controller") >= failed_at + 2; }, kConverge));
  EXPECT_TRUE(op_->running());
  EXPECT_EQ(testing::http_get("http://127.0.0.1:" + std::to_string(op_->health_port()) + "/healthz")
                .first,
            200);
  key_secrets();
  EXPECT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));
  const auto [status, metrics] =
      testing::http_get("http://127.0.0.1:" + std::to_string(op_->metrics_port()) + "/metrics");
  EXPECT_EQ(status, 200);
  EXPECT_NE(metrics.find("controller_runtime_reconcile_total{controller=\"controller\""),
            std::string::npos);
}

TEST_F(OperatorTest, InvalidResourcesAreRefusedWithTheFieldAndTheReason) {
  json controller = sample("controller.yaml");
  controller["spec"].erase("slurmKeyRef");
  auto refused = client_->create(resources::controllers(), ns_, controller);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, kube::ErrorKind::kInvalid);
  EXPECT_NE(refused.error().message.find("slurmKeyRef"), std::string::npos)
      << refused.error().message;

  json nodeset = sample("nodeset.yaml");
  nodeset["spec"]["replicas"] = "many";
  refused = client_->create(resources::nodesets(), ns_, nodeset);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("spec.replicas"), std::string::npos)
      << refused.error().message;

  json token = sample("token.yaml");
  token["spec"].erase("username");
  refused = client_->create(resources::tokens(), ns_, token);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("spec.username"), std::string::npos)
      << refused.error().message;

  // Immutable once set.
  create(resources::controllers(), sample("controller.yaml"));
  auto changed = client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                                {{"spec", {{"clusterName", "other"}}}});
  ASSERT_FALSE(changed);
  EXPECT_NE(changed.error().message.find("clusterName"), std::string::npos)
      << changed.error().message;
}

TEST_F(OperatorTest, AnExtraConfThatSetsWhatTheOperatorOwnsIsReportedWithItsLine) {
  key_secrets();
  json controller = sample("controller.yaml");
  controller["spec"].erase("configFileRefs");
  controller["spec"].erase("prologScriptRefs");
  controller["spec"].erase("epilogScriptRefs");
  controller["spec"]["extraConf"] = "SelectType=select/cons_tres\nClusterName=other\n";
  create(resources::controllers(), controller);
  start_operator();
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::controllers(), "slurm") == "False/InvalidConfig"; },
      kConverge));
  auto doc = get(resources::controllers(), "slurm");
  const std::string text = doc->dump();
  EXPECT_NE(text.find("extraConf line 2"), std::string::npos) << text;
  EXPECT_NE(text.find("ClusterName"), std::string::npos);
  EXPECT_FALSE(get(kube::resources::stateful_sets(), "slurm-controller").has_value());
}

// Runs a command in the bed's Slurm root and returns its output (stdout and stderr).
std::string in_bed(const std::string& command, int* status = nullptr) {
  const std::string line = (testing::source_dir() / "scripts/testbed").string() + " --name " +
                           TestBed::var("TESTBED_NAME") + " slurm " + command + " 2>&1";
  std::string out;
  FILE* pipe = ::popen(line.c_str(), "r");
  std::array<char, 4096> buf{};
  while (pipe != nullptr && std::fgets(buf.data(), buf.size(), pipe) != nullptr) {
    out += buf.data();
  }
  const int rc = pipe == nullptr ? -1 : ::pclose(pipe);
  if (status != nullptr) {
    *status = rc;
  }
  return out;
}

bool port_open(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool open = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return open;
}

TEST_F(OperatorTest, TheAccountingsSlurmdbdConfRunsARealSlurmdbdOnTheBedsMariaDb) {
  // A database of its own on the bed's MariaDB, for the user the Accounting names.
  int status = 0;
  const std::string db = "tightrope_acct";
  in_bed("mariadb --socket=/bed/run/mysqld/mysqld.sock -e \"CREATE DATABASE IF NOT EXISTS " + db +
             "; GRANT ALL ON " + db + ".* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;\"",
         &status);
  ASSERT_EQ(status, 0);
  ASSERT_FALSE(port_open(6819)) << "something already listens on slurmdbd's port 6819";
  key_secrets();
  json accounting = sample("accounting.yaml");
  accounting["spec"]["storageConfig"]["host"] = "127.0.0.1";
  accounting["spec"]["storageConfig"]["port"] = std::stoi(TestBed::var("MARIADB_PORT"));
  accounting["spec"]["storageConfig"]["database"] = db;
  // Only loopback, as everything in the bed.
  accounting["spec"]["extraConf"] = "CommunicationParameters=NoInAddrAny\n";
  create(resources::accountings(), accounting);
  start_operator();
  ASSERT_TRUE(eventually(
      [&] { return get(kube::resources::secrets(), "slurm-accounting").has_value(); }, kConverge));
  auto secret = get(kube::resources::secrets(), "slurm-accounting");
  auto conf = kube::decode_base64(field<std::string>(*secret, "/data/slurmdbd.conf", ""));
  ASSERT_TRUE(conf);
  EXPECT_NE(conf->find("StoragePass=slurmpw"), std::string::npos);

  // The files as the pod would mount them, next to a slurm.conf for sacctmgr.
  const std::string dir_in_root = "/bed/jobs/acct-" + ns_;
  const auto dir =
      std::filesystem::path(TestBed::var("TESTBED_DIR")) / "var/jobs" / ("acct-" + ns_);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "slurmdbd.conf") << *conf;
  std::ofstream(dir / "slurm.conf") << "ClusterName=slurm\nSlurmctldHost=localhost\n"
                                       "AuthType=auth/slurm\nCredType=cred/slurm\n"
                                       "AccountingStorageType=accounting_storage/slurmdbd\n"
                                       "AccountingStorageHost=localhost\n"
                                       "AccountingStoragePort=6819\n";
  // The keys too: the pod's /etc/slurm projects them from the Secrets the Accounting names.
  std::ofstream(dir / "slurm.key", std::ios::binary) << read_file(TestBed::var("SLURM_KEY"));
  std::ofstream(dir / "jwt.key", std::ios::binary) << read_file(TestBed::var("SLURM_JWT_KEY"));
  for (const char* file : {"slurmdbd.conf", "slurm.key", "jwt.key"}) {
    in_bed("chown slurm:slurm " + dir_in_root + "/" + file);
    in_bed("chmod 600 " + dir_in_root + "/" + file);
  }

  // slurmdbd insists on running on DbdHost: a UTS namespace gives it the pod's host name, and
  // the name resolves to loopback as a pod's own name resolves to its IP (the kubelet's
  // /etc/hosts), so NoInAddrAny binds 127.0.0.1 only.
  const auto hosts = std::filesystem::path(TestBed::var("SLURM_ROOT")) / "etc/hosts";
  const std::string hosts_before = read_file(hosts.string());
  std::ofstream(hosts, std::ios::app) << "127.0.0.1 slurm-accounting-0\n";
  struct RestoreHosts {
    std::filesystem::path path;
    std::string text;
    ~RestoreHosts() { std::ofstream(path) << text; }
  } restore_hosts{hosts, hosts_before};
  const std::string log = (dir / "slurmdbd.log").string();
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string script =
        "hostname slurm-accounting-0 && exec chroot " + TestBed::var("SLURM_ROOT") +
        " /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=" + dir_in_root +
        "/slurm.conf slurmdbd -D >" + log + " 2>&1";
    ::execlp("unshare", "unshare", "--uts", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGTERM);
      int s = 0;
      ::waitpid(pid, &s, 0);
    }
  } reap{pid};
  bool exited = false;
  ASSERT_TRUE(eventually(
      [&] {
        int s = 0;
        exited = exited || ::waitpid(pid, &s, WNOHANG) == pid;
        return exited || port_open(6819);
      },
      std::chrono::seconds(60)));
  ASSERT_FALSE(exited) << "slurmdbd exited:\n" << read_file(log);
  in_bed("env SLURM_CONF=" + dir_in_root + "/slurm.conf sacctmgr -i add cluster slurm", &status);
  const std::string clusters = in_bed(
      "env SLURM_CONF=" + dir_in_root + "/slurm.conf sacctmgr -n -P list cluster format=Cluster",
      &status);
  EXPECT_EQ(status, 0) << clusters;
  std::istringstream lines(clusters);
  bool listed = false;
  for (std::string line; std::getline(lines, line);) {
    listed = listed || line == "slurm";
  }
  EXPECT_TRUE(listed) << clusters << read_file(log);
}

TEST_F(OperatorTest, AServiceMonitorAppearsOnceItsCrdIsInstalledAndGoesWhenMetricsAreOff) {
  const std::string crd_name = "servicemonitors.monitoring.coreos.com";
  (void)client_->remove(kube::resources::custom_resource_definitions(), "", crd_name);
  ASSERT_TRUE(eventually(
      [&] {
        return !client_->get(kube::resources::custom_resource_definitions(), "", crd_name).ok();
      },
      kConverge));
  apply_cluster();
  start_operator();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge));
  // Without the monitoring.coreos.com CRD: no ServiceMonitor, and no error either.
  EXPECT_TRUE(eventually(
      [&] { return ready_reason(resources::controllers(), "slurm") == "True/SlurmctldResponding"; },
      kConverge));

  // The Prometheus operator's CRD, reduced to what the API server needs to serve it.
  const json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "servicemonitors.monitoring.coreos.com"}}},
      {"spec",
       {{"group", "monitoring.coreos.com"},
        {"scope", "Namespaced"},
        {"names",
         {{"plural", "servicemonitors"},
          {"singular", "servicemonitor"},
          {"kind", "ServiceMonitor"},
          {"listKind", "ServiceMonitorList"}}},
        {"versions", json::array({{{"name", "v1"},
                                   {"served", true},
                                   {"storage", true},
                                   {"schema",
                                    {{"openAPIV3Schema",
                                      {{"type", "object"},
                                       {"x-kubernetes-preserve-unknown-fields", true}}}}}}})}}}};
  ASSERT_TRUE(client_->apply(kube::resources::custom_resource_definitions(), "", crd,
                             {"tightrope-test", true}));
  // The operator asks again after 10 s; a Controller change makes it reconcile.
  int touches = 0;
  const auto& monitors = resources::service_monitors();
  EXPECT_TRUE(eventually(
      [&] {
        // Each touch is an event; the operator notices the CRD within 10 s of the first.
        (void)client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"metadata", {{"labels", {{"touch", std::to_string(++touches)}}}}}});
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        return get(monitors, "slurm-controller").has_value();
      },
      std::chrono::seconds(40)));
  auto monitor = get(monitors, "slurm-controller");
  ASSERT_TRUE(monitor);
  EXPECT_EQ((*monitor)["metadata"]["labels"]["release"], "prometheus");
  EXPECT_EQ((*monitor)["spec"]["endpoints"].size(), 4U);
  EXPECT_EQ((*monitor)["spec"]["endpoints"][1]["path"], "/metrics/nodes");

  ASSERT_TRUE(client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"metrics", {{"enabled", false}}}}}}));
  EXPECT_TRUE(
      eventually([&] { return !get(monitors, "slurm-controller").has_value(); }, kConverge));
  EXPECT_TRUE(
      eventually([&] { return slurm_conf().find("MetricsType") == std::string::npos; }, kConverge));
}

TEST_F(OperatorTest, AHealthCheckGivesTheNodeSetsItSelectsTheirChecksAndTakesThemBack) {
  apply_cluster();
  json nodeset = sample("nodeset.yaml");
  nodeset["metadata"]["labels"]["tier"] = "gpu";
  nodeset["spec"]["replicas"] = 0;
  create(resources::nodesets(), nodeset);
  config_map("site-health", {{"fans", "#!/bin/sh\nexit 0\n"}});
  json check = sample("healthcheck.yaml");
  check["spec"]["nodeSetSelector"] = {{"matchLabels", {{"tier", "gpu"}}}};
  check["spec"]["passive"]["scripts"]["configMapRef"]["name"] = "site-health";
  create(resources::health_checks(), check);
  start_operator();

  // The NodeSet's pods mount gpu-health: the checks and the site's script.
  ASSERT_TRUE(eventually(
      [&] { return get(kube::resources::config_maps(), "gpu-health").has_value(); }, kConverge));
  const json cm = *get(kube::resources::config_maps(), "gpu-health");
  EXPECT_EQ(json::parse(field<std::string>(cm, "/data/checks.json", "{}"))["intervalSeconds"], 60);
  EXPECT_EQ(field<std::string>(cm, "/data/script.fans", ""), "#!/bin/sh\nexit 0\n");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "HealthCheck");
  EXPECT_TRUE(eventually(
      [&] {
        return ready_reason(resources::health_checks(), "gpu-workers") == "True/ChecksDistributed";
      },
      kConverge));
  EXPECT_TRUE(eventually(
      [&] {
        const std::string conf = slurm_conf();
        return conf.find("HealthCheckProgram=/usr/local/sbin/tightrope-health") !=
                   std::string::npos &&
               conf.find("HealthCheckInterval=60") != std::string::npos &&
               conf.find("HealthCheckTimeout=45") != std::string::npos;
      },
      kConverge))
      << slurm_conf();

  // A changed script reaches the ConfigMap.
  ASSERT_TRUE(client_->patch(kube::resources::config_maps(), ns_, "site-health",
                             kube::PatchType::kMerge, {{"data", {{"fans", "exit 1\n"}}}}));
  EXPECT_TRUE(eventually(
      [&] {
        auto now = get(kube::resources::config_maps(), "gpu-health");
        return now && field<std::string>(*now, "/data/script.fans", "") == "exit 1\n";
      },
      kConverge));

  // Deselected: its checks go, and so do slurm.conf's lines.
  ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, "gpu", kube::PatchType::kMerge,
                             {{"metadata", {{"labels", {{"tier", "cpu"}}}}}}));
  EXPECT_TRUE(eventually(
      [&] { return !get(kube::resources::config_maps(), "gpu-health").has_value(); }, kConverge));
  EXPECT_TRUE(eventually(
      [&] {
        return ready_reason(resources::health_checks(), "gpu-workers") == "False/NoNodeSetSelected";
      },
      kConverge));
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("HealthCheckProgram") == std::string::npos; }, kConverge))
      << slurm_conf();
}

TEST_F(OperatorTest, WithLeaderElectionOneReplicaActsAndTheStandbyTakesOverAfterAKill) {
  apply_cluster();
  const std::vector<std::string> elect = {"--leader-elect", "--leader-elect-namespace", ns_};
  auto first = std::make_unique<OperatorProcess>(ns_, elect);
  auto second = std::make_unique<OperatorProcess>(ns_, elect);
  first->start();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge)) << first->log();
  second->start();  // ready (caches filled) while standing by
  const auto holder = [&]() -> std::string {
    auto lease = client_->get(kube::resources::leases(), ns_, "slurm-operator");
    return lease ? field<std::string>(*lease, "/spec/holderIdentity", "") : "";
  };
  ASSERT_FALSE(holder().empty());
  EXPECT_EQ(second->log().find("operator.leading"), std::string::npos) << second->log();

  first->kill_hard();  // no release: the standby waits out the lease (15 s)
  const std::string dead = holder();
  ASSERT_TRUE(client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"extraConf", "SchedulerType=sched/builtin\n"}}}}));
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("SchedulerType=sched/builtin") != std::string::npos; },
      std::chrono::seconds(40)))
      << second->log();
  EXPECT_NE(holder(), dead);
  EXPECT_NE(second->log().find("operator.leading"), std::string::npos);
  // A clean stop hands the lease back at once.
  EXPECT_EQ(second->stop(), 0);
  auto lease = client_->get(kube::resources::leases(), ns_, "slurm-operator");
  ASSERT_TRUE(lease);
  EXPECT_EQ(field<std::string>(*lease, "/spec/holderIdentity", "none"), "");
}

TEST_F(OperatorTest, ALeaderWhoseLeaseIsTakenStandsByAndLeadsAgainWithoutRestarting) {
  apply_cluster();
  const std::vector<std::string> elect = {"--leader-elect", "--leader-elect-namespace", ns_};
  auto op = std::make_unique<OperatorProcess>(ns_, elect);
  op->start();
  ASSERT_TRUE(eventually([&] { return !config_hash().empty(); }, kConverge)) << op->log();
  const auto reports_slurm = [&] {
    const auto [status, text] =
        testing::http_get("http://127.0.0.1:" + std::to_string(op->metrics_port()) + "/metrics");
    return status == 200 && text.find("\ntightrope_slurm_up{") != std::string::npos;
  };
  ASSERT_TRUE(eventually(reports_slurm, kConverge));
  // Another holder takes the Lease and never renews it: the operator's renewals fail for the
  // renew deadline (10 s), then it stands by until the thief's 30 s run out.
  auto lease = client_->get(kube::resources::leases(), ns_, "slurm-operator");
  ASSERT_TRUE(lease);
  (*lease)["spec"]["holderIdentity"] = "thief";
  (*lease)["spec"]["leaseDurationSeconds"] = 30;
  (*lease)["spec"]["renewTime"] = kube::format_micro_time(std::chrono::system_clock::now());
  ASSERT_TRUE(client_->update(kube::resources::leases(), ns_, *lease));
  ASSERT_TRUE(
      eventually([&] { return op->log().find("operator.standing_by") != std::string::npos; },
                 std::chrono::seconds(30)))
      << op->log();
  // Standing by, it acts on nothing.
  const int64_t reconciled = op->reconciles("controller");
  ASSERT_TRUE(client_->patch(resources::controllers(), ns_, "slurm", kube::PatchType::kMerge,
                             {{"spec", {{"extraConf", "SchedulerType=sched/builtin\n"}}}}));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(op->reconciles("controller"), reconciled);
  EXPECT_EQ(slurm_conf().find("SchedulerType=sched/builtin"), std::string::npos);
  // Nor reports Slurm: the new leader does, and a sum over both would count twice.
  EXPECT_FALSE(reports_slurm());
  // Leading again in the same process, it finds what changed meanwhile.
  EXPECT_TRUE(eventually(
      [&] { return slurm_conf().find("SchedulerType=sched/builtin") != std::string::npos; },
      std::chrono::seconds(40)))
      << op->log();
  EXPECT_TRUE(op->running());
  EXPECT_TRUE(eventually(reports_slurm, kConverge));
  const std::string log = op->log();
  EXPECT_NE(log.find("operator.leading", log.find("operator.standing_by")), std::string::npos);
  EXPECT_EQ(op->stop(), 0);
}

TEST_F(OperatorTest, EverySampleManifestIsAcceptedUnchanged) {
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::source_dir() / "deploy/samples")) {
    for (json doc : testing::read_yaml_file(entry.path())) {
      doc["metadata"]["namespace"] = ns_;
      const auto* type = resources::for_object(doc["apiVersion"], doc["kind"]);
      ASSERT_NE(type, nullptr) << entry.path();
      auto created = client_->create(*type, ns_, doc);
      EXPECT_TRUE(created) << entry.path() << ": " << created.error().message;
    }
  }
}

}  // namespace
}  // namespace tightrope::op
