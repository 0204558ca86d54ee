// NodeSets on the bed: slurm-operator (the real binary) manages slurmd pods, the test-only pod
// runner plays kubelet and runs a real slurmd for each, and the bed's real slurmctld (an
// external Controller) is the cluster they join. Scale-in and updates drain first and never
// take a pod with a running job; ScheduledUpdate waits for its maintenance reservation; when
// Slurm cannot be asked nothing is deleted; cordons reach Slurm and an administrator's drain is
// never undone.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../kube/kube_support.hpp"
#include "../operator/operator_support.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "nodeset/nodeset_support.hpp"
#include "nodeset/pod_runner.hpp"
#include "operator/nodeset_plan.hpp"
#include "operator/resources.hpp"
#include "slurm/client.hpp"
#include "slurm/hostlist.hpp"
#include "slurm/token.hpp"
#include "testbed.hpp"

namespace tightrope::op {
namespace {

using kube::testing::eventually;
using kube::testing::field;
using nlohmann::json;
using testing::OperatorProcess;
using testing::PodRunner;
using ::tightrope::testing::TestBed;

constexpr auto kConverge = std::chrono::seconds(60);

class NodeSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = kube::testing::make_client();
    testing::install_crds(*client_);
    ns_ = kube::testing::fresh_namespace(*client_);
    slurm::ClientOptions options;
    options.url = TestBed::var("SLURMRESTD_URL");
    slurm_ = std::make_unique<slurm::Client>(options, std::make_shared<slurm::MintingTokenSource>(
                                                          TestBed::var("SLURM_JWT_KEY"), "slurm"));
    runner_ = std::make_unique<PodRunner>(
        *client_, testing::PodRunnerOptions{ns_,
                                            {"bed-node-1", "bed-node-2", "bed-node-3", "bed-node-4",
                                             "bed-node-5", "bed-node-6"},
                                            TestBed::var("SLURM_ROOT"),
                                            std::string(TestBed::var("TESTBED_DIR")) + "/logs"});
    runner_->start();
    testing::create_external_cluster(*client_, ns_);
    op_ = std::make_unique<OperatorProcess>(ns_);
    op_->start();
  }

  void TearDown() override {
    if (HasFailure() && op_) {
      std::cerr << "---- slurm-operator log\n" << op_->log() << "----\n";
    }
    op_.reset();
    runner_.reset();
    if (!slurm_) {
      return;  // SetUp did not get this far
    }
    // What this test left in Slurm: the bed's slurmctld outlives the test.
    (void)slurm_->delete_reservation("SlurmOperatorMaint-" + nodeset_);
    if (auto nodes = slurm_->list_nodes()) {
      for (const auto& n : nodes->list.nodes) {
        // StatefulSet mode names nodes after the NodeSet, DaemonSet mode after the Node.
        if (n.name.starts_with(nodeset_ + "-") || n.name.starts_with("bed-node-")) {
          (void)slurm_->delete_node(n.name);
        }
      }
    }
  }

  void create(const kube::ResourceType& type, json object) {
    object["metadata"]["namespace"] = ns_;
    auto created = client_->create(type, ns_, object);
    ASSERT_TRUE(created) << created.error().message;
  }

  void scale(int64_t replicas) {
    auto scaled = client_->set_replicas(resources::nodesets(), ns_, nodeset_, replicas);
    ASSERT_TRUE(scaled) << scaled.error().message;
  }

  std::vector<json> pods() {
    kube::ListOptions options;
    options.label_selector = "app.kubernetes.io/instance=" + nodeset_;
    auto list = client_->list(kube::resources::pods(), ns_, options);
    return list ? std::vector<json>(list->items.begin(), list->items.end()) : std::vector<json>{};
  }

  std::set<std::string> pod_names() {
    std::set<std::string> out;
    for (const auto& p : pods()) {
      out.insert(p["metadata"].value("name", ""));
    }
    return out;
  }

  static bool has_condition(const json& pod, const std::string& type) {
    for (const auto& c : pod.value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == type && c.value("status", "") == "True") {
        return true;
      }
    }
    return false;
  }

  // Every pod of the set Ready, its Slurm node idle, and the pod's conditions saying so.
  bool all_ready_and_idle(size_t count) {
    const auto list = pods();
    if (list.size() != count) {
      return false;
    }
    for (const auto& p : list) {
      if (p["metadata"].contains("deletionTimestamp") || !has_condition(p, "Ready") ||
          !has_condition(p, "SlurmNodeStateIdle")) {
        return false;
      }
      auto node = slurm_node(p["spec"].value("hostname", ""));
      if (!node || node->base_state() != "IDLE" || node->drain() || node->has("NOT_RESPONDING")) {
        return false;
      }
    }
    return true;
  }

  std::optional<slurm::Node> slurm_node(const std::string& name) {
    auto node = slurm_->get_node(name);
    return node ? std::optional<slurm::Node>(*node) : std::nullopt;
  }

  // The operator started again with `flags`, and a NodeSet of one worker: the Kubernetes Node
  // of that worker once it is Ready and idle, "" if it never is.
  std::string one_worker_under(std::vector<std::string> flags) {
    op_ = std::make_unique<OperatorProcess>(ns_, std::move(flags));
    op_->start();
    testing::create_nodeset(*client_, ns_, nodeset_, 1);
    if (!eventually([&] { return all_ready_and_idle(1); }, kConverge)) {
      return "";
    }
    return pods().front()["spec"].value("nodeName", "");
  }

  void cordon(const std::string& kube_node, bool on) {
    ASSERT_TRUE(client_->patch(kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
                               {{"spec", {{"unschedulable", on ? json(true) : json(nullptr)}}}}));
  }

  // Two more reconciles of the NodeSet controller, so that one began after a change.
  bool reconciled_twice() {
    const int64_t before = op_->reconciles("nodeset");
    return eventually([&] { return op_->reconciles("nodeset") >= before + 2; }, kConverge);
  }

  // The pod's annotation `key`, "" when absent.
  std::string pod_annotation(const std::string& pod, std::string_view key) {
    auto got = client_->get(kube::resources::pods(), ns_, pod);
    if (!got) {
      return "";
    }
    return (*got)["metadata"].value("annotations", json::object()).value(std::string(key), "");
  }

  std::string nodeset_condition(const std::string& type) {
    return testing::condition(*client_, resources::nodesets(), ns_, nodeset_, type);
  }

  // A batch job on one node that sleeps `seconds`.
  int64_t submit_on(const std::string& node, int seconds) {
    slurm::JobSubmission job;
    job.name = "hold-" + node;
    job.partition = TestBed::var("SLURM_PARTITION");
    job.script = "#!/bin/sh\nsleep " + std::to_string(seconds) + "\n";
    job.working_directory = TestBed::var("SLURM_JOB_DIR");
    job.required_nodes = {node};
    job.time_limit = std::chrono::minutes(5);
    auto id = slurm_->submit_job(job);
    EXPECT_TRUE(id) << (id ? "" : id.error().message);
    return id ? *id : 0;
  }

  std::string job_state(int64_t id) {
    auto job = slurm_->get_job(id);
    return job && !job->state.empty() ? job->state.front() : "";
  }

  std::string uid_of(const std::string& pod) {
    auto got = client_->get(kube::resources::pods(), ns_, pod);
    return got ? (*got)["metadata"].value("uid", "") : "";
  }

  std::string revision_of(const std::string& pod) {
    auto got = client_->get(kube::resources::pods(), ns_, pod);
    return got ? field<std::string>(*got, "/metadata/labels/controller-revision-hash", "") : "";
  }

  // Every pod at the NodeSet's current revision, Ready and idle in Slurm.
  bool rolled(size_t count) {
    auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
    if (!doc || !all_ready_and_idle(count)) {
      return false;
    }
    const auto current = field<std::string>(*doc, "/status/nodeSetHash", "");
    for (const auto& p : pods()) {
      if (field<std::string>(p, "/metadata/labels/controller-revision-hash", "") != current) {
        return false;
      }
    }
    return field<int64_t>(*doc, "/status/updatedReplicas", -1) == static_cast<int64_t>(count);
  }

  // What a failure message needs: each pod and its Slurm node, and the NodeSet's status.
  // Two pods of a NodeSet with pruneSlurmNodeRecords: NodeNotFound, ready, idle, and the second
  // one's Slurm record linked to it (the comment, written once the pod is ready).
  void two_pruned_pods_linked() {
    testing::create_nodeset(*client_, ns_, nodeset_, 2);
    ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                               {{"spec", {{"pruneSlurmNodeRecords", "NodeNotFound"}}}}));
    ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
    ASSERT_TRUE(eventually(
        [&] {
          auto node = slurm_node(nodeset_ + "-1");
          return node && node->comment.find(nodeset_ + "-1") != std::string::npos;
        },
        kConverge));
  }

  std::string describe() {
    std::string out;
    for (const auto& p : pods()) {
      const std::string host = p["spec"].value("hostname", "");
      auto node = slurm_node(host);
      out += p["metadata"].value("name", "") +
             " rev=" + field<std::string>(p, "/metadata/labels/controller-revision-hash", "") +
             (p["metadata"].contains("deletionTimestamp") ? " terminating" : "") +
             (has_condition(p, "Ready") ? " ready" : " not-ready") + " slurm=";
      if (node) {
        for (const auto& w : node->state) {
          out += w + "+";
        }
        out += " reason=" + node->reason;
      }
      out += "\n";
    }
    if (auto doc = client_->get(resources::nodesets(), ns_, nodeset_)) {
      out += doc->value("status", json::object()).dump();
    }
    return out;
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<slurm::Client> slurm_;
  std::unique_ptr<PodRunner> runner_;
  std::unique_ptr<OperatorProcess> op_;
  std::string ns_;
  std::string nodeset_ = kube::testing::unique_name("ns");
};

TEST_F(NodeSetTest, RollingUpdateWaitsForTheRunningJob) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  const std::string busy = nodeset_ + "-0";
  const std::string busy_uid = uid_of(busy);
  const int64_t job = submit_on(busy, 15);
  ASSERT_TRUE(eventually([&] { return job_state(job) == "RUNNING"; }, kConverge));
  const std::string old_revision = revision_of(busy);

  // A new slurmd image: every pod must be replaced, one at a time (maxUnavailable 1).
  ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                             {{"spec", {{"slurmd", {{"image", "registry.local/slurmd:next"}}}}}}));
  while (job_state(job) == "RUNNING") {
    EXPECT_EQ(uid_of(busy), busy_uid) << "the pod running a job was replaced";
    EXPECT_LE(pods().size(), 2U);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(job_state(job), "COMPLETED");
  ASSERT_TRUE(eventually([&] { return rolled(2); }, kConverge)) << describe();
  EXPECT_NE(revision_of(busy), old_revision);
}

TEST_F(NodeSetTest, PodsAnotherOperatorMadeAreAdoptedAndRunOnUntilTheSpecChanges) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  // The NodeSet as Slinky's operator leaves it: the pods carry its revision hash, its status
  // names that hash at the current generation, it has no Ready condition, and no ControllerRevision
  // is Tightrope's.
  op_->kill_hard();
  const std::string slinky_hash = "7b9c5d6f84";
  std::map<std::string, std::string> uids;
  for (const auto& p : pods()) {
    const std::string name = p["metadata"].value("name", "");
    uids[name] = p["metadata"].value("uid", "");
    ASSERT_TRUE(
        client_->patch(kube::resources::pods(), ns_, name, kube::PatchType::kMerge,
                       {{"metadata", {{"labels", {{"controller-revision-hash", slinky_hash}}}}}}));
  }
  auto revisions = client_->list(kube::resources::controller_revisions(), ns_);
  ASSERT_TRUE(revisions);
  for (const auto& r : revisions->items) {
    ASSERT_TRUE(client_->remove(kube::resources::controller_revisions(), ns_,
                                r["metadata"].value("name", "")));
  }
  auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
  ASSERT_TRUE(doc);
  json& status = (*doc)["status"];
  status["nodeSetHash"] = slinky_hash;
  status["observedGeneration"] = (*doc)["metadata"]["generation"];
  status.erase("conditions");
  ASSERT_TRUE(client_->update_status(resources::nodesets(), ns_, *doc));
  const int64_t job = submit_on(nodeset_ + "-0", 20);
  ASSERT_TRUE(eventually([&] { return job_state(job) == "RUNNING"; }, kConverge));

  op_->start();
  EXPECT_TRUE(eventually(
      [&] {
        auto n = client_->get(resources::nodesets(), ns_, nodeset_);
        return n &&
               field<std::string>(*n, "/metadata/annotations/tightrope.slurm.net~1adopted-revision",
                                  "") == slinky_hash &&
               field<int64_t>(*n, "/status/updatedReplicas", 0) == 2 &&
               !nodeset_condition("Ready").empty();
      },
      kConverge))
      << describe();
  ASSERT_TRUE(reconciled_twice());
  for (const auto& [name, uid] : uids) {
    EXPECT_EQ(uid_of(name), uid) << name << " was replaced";
    EXPECT_EQ(revision_of(name), slinky_hash);
  }
  EXPECT_EQ(job_state(job), "RUNNING");

  // The spec changes: the adopted pods are outdated and roll as any others, the busy one last.
  ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                             {{"spec", {{"slurmd", {{"image", "registry.local/slurmd:next"}}}}}}));
  EXPECT_TRUE(eventually([&] { return rolled(2); }, kConverge)) << describe();
  EXPECT_EQ(job_state(job), "COMPLETED");
  for (const auto& [name, uid] : uids) {
    EXPECT_NE(uid_of(name), uid) << name << " was not rolled";
  }
}

TEST_F(NodeSetTest, ScheduledUpdateReplacesPodsOnlyInsideTheMaintenanceWindow) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  const std::string maint = "SlurmOperatorMaint-" + nodeset_;
  const auto set_strategy_and_image = [&](std::chrono::system_clock::time_point start,
                                          const std::string& image) {
    json patch = json::object();
    patch["spec"]["updateStrategy"] = {
        {"type", "ScheduledUpdate"},
        {"scheduledUpdate", {{"startTime", kube::format_time(start)}, {"duration", "3m"}}}};
    patch["spec"]["slurmd"]["image"] = image;
    auto patched =
        client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge, patch);
    ASSERT_TRUE(patched) << patched.error().message;
  };
  const auto finalized = [&] {
    auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
    const json finalizers = doc ? field<json>(*doc, "/metadata/finalizers", json::array()) : json();
    return doc && std::find(finalizers.begin(), finalizers.end(),
                            "nodeset.slinky.slurm.net/reservation") != finalizers.end();
  };
  const std::set<std::string> both = {nodeset_ + "-0", nodeset_ + "-1"};
  const std::map<std::string, std::string> uids = {{nodeset_ + "-0", uid_of(nodeset_ + "-0")},
                                                   {nodeset_ + "-1", uid_of(nodeset_ + "-1")}};

  const auto start = std::chrono::system_clock::now() + std::chrono::seconds(25);
  set_strategy_and_image(start, "registry.local/slurmd:next");
  // The reservation covers both outdated nodes, MAINT (nothing new starts there), and the
  // NodeSet holds the finalizer that removes it.
  ASSERT_TRUE(eventually(
      [&] {
        auto r = slurm_->get_reservation(maint);
        if (!r) {
          return false;
        }
        const auto nodes = slurm::expand_hostlist(r->nodes).value_or(std::vector<std::string>{});
        return std::set<std::string>(nodes.begin(), nodes.end()) == both &&
               std::find(r->flags.begin(), r->flags.end(), "MAINT") != r->flags.end();
      },
      kConverge))
      << nodeset_condition("ReservationCreated");
  EXPECT_TRUE(eventually(
      [&] {
        return finalized() && nodeset_condition("ReservationCreated") == "True/Scheduled" &&
               nodeset_condition("Ready") == "False/UpdateScheduled";
      },
      kConverge))
      << nodeset_condition("ReservationCreated") << " " << nodeset_condition("Ready");
  // Nothing is replaced before the window opens ...
  while (std::chrono::system_clock::now() < start - std::chrono::seconds(2)) {
    for (const auto& [pod, uid] : uids) {
      EXPECT_EQ(uid_of(pod), uid) << pod << " was replaced before the window";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // ... and everything is inside it; then the reservation and the finalizer go.
  ASSERT_TRUE(eventually([&] { return rolled(2); }, std::chrono::seconds(120))) << describe();
  EXPECT_LT(std::chrono::system_clock::now(), start + std::chrono::minutes(3));
  for (const auto& [pod, uid] : uids) {
    EXPECT_NE(uid_of(pod), uid);
  }
  ASSERT_TRUE(eventually(
      [&] {
        auto r = slurm_->get_reservation(maint);
        return !r && r.error().kind == slurm::ErrorKind::kNotFound && !finalized();
      },
      kConverge));
  EXPECT_TRUE(
      eventually([&] { return nodeset_condition("ReservationCreated") == "False/NoUpdatePending"; },
                 kConverge));

  // A NodeSet deleted while its window is ahead takes the reservation with it.
  set_strategy_and_image(std::chrono::system_clock::now() + std::chrono::hours(1),
                         "registry.local/slurmd:later");
  ASSERT_TRUE(
      eventually([&] { return slurm_->get_reservation(maint).ok() && finalized(); }, kConverge));
  ASSERT_TRUE(client_->remove(resources::nodesets(), ns_, nodeset_));
  ASSERT_TRUE(eventually(
      [&] {
        auto r = slurm_->get_reservation(maint);
        auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
        return !r && r.error().kind == slurm::ErrorKind::kNotFound && !doc;
      },
      kConverge));
}

TEST_F(NodeSetTest, OperatorKilledMidRolloutConvergesWithoutDuplicates) {
  testing::create_nodeset(*client_, ns_, nodeset_, 3);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(3); }, kConverge));
  ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                             {{"spec", {{"slurmd", {{"image", "registry.local/slurmd:next"}}}}}}));
  // Kill it once the rollout has begun (a drain or a deletion under way).
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& p : pods()) {
          if (p["metadata"].contains("deletionTimestamp") ||
              p.value("/metadata/annotations/nodeset.slinky.slurm.net~1pod-cordon"_json_pointer,
                      std::string()) == "true") {
            return true;
          }
        }
        return false;
      },
      kConverge));
  op_->kill_hard();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  op_->start();
  const auto deadline = std::chrono::steady_clock::now() + kConverge;
  while (!rolled(3) && std::chrono::steady_clock::now() < deadline) {
    EXPECT_LE(pods().size(), 3U) << "more pods than replicas";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(rolled(3)) << describe();
  EXPECT_EQ(pod_names(),
            std::set<std::string>({nodeset_ + "-0", nodeset_ + "-1", nodeset_ + "-2"}));
}

TEST_F(NodeSetTest, ScalesZeroToThreeToFiveToTwoWithIdleNodes) {
  testing::create_nodeset(*client_, ns_, nodeset_, 0);
  ASSERT_TRUE(eventually([&] { return nodeset_condition("Ready") == "True/AllReady"; }, kConverge))
      << nodeset_condition("Ready");
  EXPECT_TRUE(pods().empty());

  scale(3);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(3); }, kConverge));
  EXPECT_EQ(pod_names(),
            std::set<std::string>({nodeset_ + "-0", nodeset_ + "-1", nodeset_ + "-2"}));

  scale(5);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(5); }, kConverge));

  scale(2);
  // Idle nodes go: highest ordinals first, each drained before its pod is deleted.
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  EXPECT_EQ(pod_names(), std::set<std::string>({nodeset_ + "-0", nodeset_ + "-1"}));
  auto gone = slurm_node(nodeset_ + "-4");
  ASSERT_TRUE(gone);
  EXPECT_TRUE(gone->drain());
  EXPECT_NE(gone->reason.find("slurm-operator: "), std::string::npos) << gone->reason;

  ASSERT_TRUE(eventually(
      [&] {
        auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
        return doc && field<int64_t>(*doc, "/status/replicas", -1) == 2 &&
               field<int64_t>(*doc, "/status/readyReplicas", -1) == 2 &&
               field<int64_t>(*doc, "/status/slurmIdle", -1) == 2 &&
               nodeset_condition("Ready") == "True/AllReady";
      },
      kConverge));
  // The pod <-> node link is in the node's comment.
  auto linked = slurm_node(nodeset_ + "-0");
  ASSERT_TRUE(linked);
  const json info = json::parse(linked->comment, nullptr, false);
  EXPECT_EQ(info.value("podName", ""), nodeset_ + "-0");
  EXPECT_EQ(info.value("namespace", ""), ns_);
}

TEST_F(NodeSetTest, ScaleInWaitsForTheJobOnTheVictim) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  const std::string victim = nodeset_ + "-0";
  // The lowest deletion cost makes -0 the victim, although -1 has the higher ordinal.
  ASSERT_TRUE(client_->patch(
      kube::resources::pods(), ns_, victim, kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{"nodeset.slinky.slurm.net/pod-deletion-cost", "-100"}}}}}}));
  const int64_t job = submit_on(victim, 15);
  ASSERT_TRUE(eventually([&] { return job_state(job) == "RUNNING"; }, kConverge));
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& p : pods()) {
          if (p["metadata"]["name"] == victim) {
            return p.value("/metadata/labels/nodeset.slinky.slurm.net~1pod-protect"_json_pointer,
                           std::string()) == "true";
          }
        }
        return false;
      },
      kConverge))
      << "a pod running a job carries the pod-protect label";

  scale(1);
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(victim);
        return node && node->drain() &&
               node->reason.find("pending termination for scale-in") != std::string::npos;
      },
      kConverge));
  EXPECT_EQ(job_state(job), "RUNNING") << "drained while its job runs, not after";
  EXPECT_TRUE(
      eventually([&] { return nodeset_condition("Ready") == "False/Draining"; }, kConverge));
  // While the job runs the pod stays.
  while (job_state(job) == "RUNNING") {
    EXPECT_EQ(pod_names().count(victim), 1U) << "deleted while its job ran";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(job_state(job), "COMPLETED");
  // Not before slurmctld has saved the job's end (kJobEndSaved after it, to Slurm's second).
  const auto ended = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < ended + kJobEndSaved - std::chrono::seconds(2)) {
    EXPECT_EQ(pod_names().count(victim), 1U) << "deleted before its job's end was saved";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(eventually([&] { return pod_names() == std::set<std::string>({nodeset_ + "-1"}); },
                         kConverge));
  EXPECT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
}

TEST_F(NodeSetTest, NothingIsDeletedWhileSlurmCannotBeAsked) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  const pid_t restd = TestBed::pid_of("slurmrestd");
  ASSERT_EQ(::kill(restd, SIGTERM), 0);
  ASSERT_TRUE(eventually([&] { return ::tightrope::testing::process_gone(restd); }, kConverge));
  scale(1);
  ASSERT_TRUE(eventually(
      [&] { return nodeset_condition("DeletionBlocked") == "True/SlurmUnreachable"; }, kConverge))
      << nodeset_condition("DeletionBlocked");
  EXPECT_EQ(nodeset_condition("Ready"), "False/DeletionBlocked");
  // Several reconciles later, each refused by Slurm's absence: both pods stay.
  const int64_t blocked_at = op_->reconciles("nodeset");
  ASSERT_TRUE(eventually([&] { return op_->reconciles("nodeset") >= blocked_at + 3; }, kConverge));
  EXPECT_EQ(pod_names().size(), 2U);
  EXPECT_TRUE(op_->running()) << "the operator must not crash";

  ASSERT_EQ(TestBed::up(), 0);
  EXPECT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  EXPECT_TRUE(eventually([&] { return nodeset_condition("DeletionBlocked") == "False/NotBlocked"; },
                         kConverge));
}

TEST_F(NodeSetTest, CordonDrainsUncordonUndrainsAndAdminDrainsStay) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  std::map<std::string, std::string> node_of;
  for (const auto& p : pods()) {
    node_of[p["metadata"].value("name", "")] = p["spec"].value("nodeName", "");
  }
  const std::string first = nodeset_ + "-0";
  const std::string second = nodeset_ + "-1";
  // An administrator drains -1 in Slurm.
  ASSERT_TRUE(slurm_->drain(second, "admin: bad DIMM"));

  cordon(node_of[first], true);
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(first);
        return node && node->drain() &&
               node->reason == "slurm-operator: Node (" + node_of[first] + ") was cordoned, Pod (" +
                                   ns_ + "/" + first + ") must be cordoned";
      },
      kConverge));
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& p : pods()) {
          if (p["metadata"]["name"] == first) {
            return has_condition(p, "SlurmNodeStateDrain");
          }
        }
        return false;
      },
      kConverge))
      << "the drain shows on the pod";
  ASSERT_TRUE(
      eventually([&] { return pod_annotation(first, api::kAnnotationPodOperatorCordon) == "true"; },
                 kConverge))
      << "the pod is cordoned, as the operator's";
  EXPECT_EQ(pod_annotation(first, api::kAnnotationPodCordon), "true");
  cordon(node_of[first], false);
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(first);
        return node && !node->drain() && pod_annotation(first, api::kAnnotationPodCordon).empty() &&
               pod_annotation(first, api::kAnnotationPodOperatorCordon).empty();
      },
      kConverge));
  // Cordon and uncordon the admin-drained pod's node: each is reconciled, and the drain stays.
  cordon(node_of[second], true);
  ASSERT_TRUE(reconciled_twice());
  cordon(node_of[second], false);
  ASSERT_TRUE(reconciled_twice());
  auto admin = slurm_node(second);
  ASSERT_TRUE(admin);
  EXPECT_TRUE(admin->drain());
  EXPECT_EQ(admin->reason, "admin: bad DIMM");
  ASSERT_TRUE(slurm_->undrain(second));
}

// An administrator drains, and the Node is cordoned a moment later: the reconcile the cordon
// starts plans from a feed snapshot that does not show the drain yet. The drain's reason is
// neither written over nor, at the uncordon, undone.
TEST_F(NodeSetTest, AnAdminDrainJustBeforeACordonIsNeverOverwritten) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string pod = nodeset_ + "-0";
  const std::string kube_node = pods().at(0)["spec"].value("nodeName", "");
  for (int round = 0; round < 3; ++round) {
    const std::string reason = "admin: maintenance " + std::to_string(round);
    ASSERT_TRUE(slurm_->drain(pod, reason));
    cordon(kube_node, true);
    ASSERT_TRUE(reconciled_twice());
    auto node = slurm_node(pod);
    ASSERT_TRUE(node);
    EXPECT_EQ(node->reason, reason) << "round " << round;
    cordon(kube_node, false);
    ASSERT_TRUE(reconciled_twice());
    node = slurm_node(pod);
    ASSERT_TRUE(node);
    EXPECT_TRUE(node->drain()) << "round " << round;
    EXPECT_EQ(node->reason, reason) << "round " << round;
    ASSERT_TRUE(slurm_->undrain(pod));
    ASSERT_TRUE(eventually(
        [&] {
          auto n = slurm_node(pod);
          return n && !n->drain();
        },
        kConverge));
  }
}

TEST_F(NodeSetTest, NodeAnnotationsReachSlurmAsTopologyAndFeatures) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string pod = nodeset_ + "-0";
  const std::string kube_node = pods().front()["spec"].value("nodeName", "");
  ASSERT_TRUE(client_->patch(kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
                             {{"metadata",
                               {{"annotations",
                                 {{"topology.slinky.slurm.net/spec", "topo-switch:s1"},
                                  {"features.slinky.slurm.net/spec", "fast,nvme"}}}}}}));
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(pod);
        if (!node) {
          return false;
        }
        const auto& f = node->features;
        return node->topology.find("topo-switch:s1") != std::string::npos &&
               std::find(f.begin(), f.end(), "k8s/fast") != f.end() &&
               std::find(f.begin(), f.end(), "k8s/nvme") != f.end() &&
               std::find(f.begin(), f.end(), nodeset_) != f.end();
      },
      kConverge))
      << describe();
  // The features go with the annotation; the NodeSet's own stay.
  ASSERT_TRUE(client_->patch(
      kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{"features.slinky.slurm.net/spec", nullptr}}}}}}));
  EXPECT_TRUE(eventually(
      [&] {
        auto node = slurm_node(pod);
        return node && node->features == std::vector<std::string>({nodeset_, "tb"});
      },
      kConverge));
  ASSERT_TRUE(client_->patch(
      kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{"topology.slinky.slurm.net/spec", nullptr}}}}}}));
}

// NVIDIA Topograph's slinky engine, its calls replayed: it lists the ready pods of its pod
// selector (app.kubernetes.io/component=worker in its tests, app.kubernetes.io/name=slurmd in
// NVIDIA's recipes), takes each pod's Slurm node from its label slurm.node.name, else
// spec.hostname, and in its dynamic-nodes mode writes each Node's topology with a strategic
// merge patch of topology.slinky.slurm.net/spec.
TEST_F(NodeSetTest, TopographsSlinkyEngineFindsEachWorkerAndItsTopologyReachesSlurm) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  std::map<std::string, std::string> slurm_node_of_kube_node;
  for (const char* selector :
       {"app.kubernetes.io/component=worker", "app.kubernetes.io/name=slurmd"}) {
    kube::ListOptions options;
    options.label_selector = selector;
    auto listed = client_->list(kube::resources::pods(), ns_, options);
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->items.size(), 2U) << selector;
    for (const auto& pod : listed->items) {
      ASSERT_TRUE(has_condition(pod, "Ready"));
      std::string name = field<std::string>(pod, "/metadata/labels/slurm.node.name", "");
      if (name.empty()) {
        name = pod["spec"].value("hostname", "");
      }
      ASSERT_TRUE(slurm_node(name)) << "no Slurm node " << name;
      slurm_node_of_kube_node[pod["spec"].value("nodeName", "")] = name;
    }
  }
  int block = 0;
  for (const auto& [kube_node, slurm_name] : slurm_node_of_kube_node) {
    const std::string& name = slurm_name;  // a lambda may not capture a structured binding
    const std::string spec = "topo-block:b" + std::to_string(++block);
    ASSERT_TRUE(client_->patch(
        kube::resources::nodes(), "", kube_node, kube::PatchType::kStrategicMerge,
        {{"metadata", {{"annotations", {{"topology.slinky.slurm.net/spec", spec}}}}}}));
    EXPECT_TRUE(eventually(
        [&] {
          auto node = slurm_node(name);
          return node && node->topology.find(spec) != std::string::npos;
        },
        kConverge))
        << name << ": " << (slurm_node(name) ? slurm_node(name)->topology : "no node");
  }
  for (const auto& [kube_node, name] : slurm_node_of_kube_node) {
    ASSERT_TRUE(client_->patch(
        kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{"topology.slinky.slurm.net/spec", nullptr}}}}}}));
  }
}

TEST_F(NodeSetTest, NvlinkCliquesBecomeBlocksAndASegmentStaysInOne) {
  // Two NVLink domains of three Nodes, labelled as GPU Feature Discovery does. The bed's
  // slurmctld declares the topology the operator generates for them (scripts/testbed
  // TOPOLOGY_YAML; unit_operator checks the two agree), and a partition scheduling on it.
  const std::string uuid = "5e1f0c2a-7d3b-4c8e-9a61-0b2d4f6e8a10";
  std::map<std::string, std::string> block_of_node;
  for (int i = 1; i <= 6; ++i) {
    const std::string node = "bed-node-" + std::to_string(i);
    block_of_node[node] = uuid + (i <= 3 ? ".1" : ".2");
    ASSERT_TRUE(client_->patch(
        kube::resources::nodes(), "", node, kube::PatchType::kMerge,
        {{"metadata", {{"labels", {{"nvidia.com/gpu.clique", block_of_node[node]}}}}}}));
  }
  // The generated file names both blocks.
  ASSERT_TRUE(eventually(
      [&] {
        auto config = client_->get(kube::resources::config_maps(), ns_, "slurm-config");
        return config &&
               config->value("/data/topology.yaml"_json_pointer, std::string()).find(uuid + ".2") !=
                   std::string::npos;
      },
      kConverge));
  testing::create_nodeset(*client_, ns_, nodeset_, 4);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(4); }, kConverge)) << describe();

  // Each Slurm node joins the block of its Node's clique.
  std::map<std::string, std::string> block_of_host;
  for (const auto& p : pods()) {
    block_of_host[p["spec"].value("hostname", "")] =
        block_of_node.at(p["spec"].value("nodeName", ""));
  }
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [host, block] : block_of_host) {
          auto node = slurm_node(host);
          if (!node || node->topology.find("nvlink:" + block) == std::string::npos) {
            return false;
          }
        }
        return true;
      },
      kConverge))
      << describe();

  // Four nodes in two blocks of three: one block holds at least two. A job of that many in
  // segments of that many lands inside one block.
  std::map<std::string, int> per_block;
  for (const auto& [host, block] : block_of_host) {
    ++per_block[block];
  }
  int most = 0;
  for (const auto& [block, count] : per_block) {
    most = std::max(most, count);
  }
  const std::filesystem::path out =
      std::filesystem::path(TestBed::var("TESTBED_DIR")) / "logs" / (nodeset_ + "-segment.out");
  std::filesystem::remove(out);
  const std::string n = std::to_string(most);
  ASSERT_EQ(testing::run_in_root(TestBed::var("SLURM_ROOT"),
                                 {"/bin/sh", "-c",
                                  "srun -p nvlink -N" + n + " --segment=" + n +
                                      " -t 1 printenv SLURMD_NODENAME 2>&1"},
                                 out, std::chrono::seconds(60)),
            0)
      << describe();
  std::ifstream lines(out);
  std::set<std::string> blocks;
  size_t hosts = 0;
  for (std::string host; lines >> host;) {
    ASSERT_EQ(block_of_host.count(host), 1U) << "srun printed " << host;
    blocks.insert(block_of_host.at(host));
    ++hosts;
  }
  EXPECT_EQ(hosts, static_cast<size_t>(most));
  EXPECT_EQ(blocks.size(), 1U) << "the job's nodes span blocks";

  for (int i = 1; i <= 6; ++i) {
    (void)client_->patch(kube::resources::nodes(), "", "bed-node-" + std::to_string(i),
                         kube::PatchType::kMerge,
                         {{"metadata", {{"labels", {{"nvidia.com/gpu.clique", nullptr}}}}}});
  }
}

TEST_F(NodeSetTest, AComputeDomainIsMadeAndItsChannelsAreClaimedByEveryPod) {
  // NVIDIA's DRA driver is stood in for: the test installs a ComputeDomain CRD written from the
  // API's documented fields, and plays the driver's controller (the claim template, a
  // DeviceClass) and kubelet plugin (a ResourceSlice per Node with one channel). The API server,
  // the resourceclaim controller and the scheduler that allocates the claims are real.
  const kube::ResourceType device_classes{"resource.k8s.io", "v1", "deviceclasses", "DeviceClass",
                                          false};
  const kube::ResourceType slices{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice",
                                  false};
  const kube::ResourceType claims{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true};
  const std::string channel_class = "compute-domain-default-channel.nvidia.com";
  const json imex = {{"tightrope.slurm.net/compute-domain", "true"}};
  const auto ready_reason = [&] {
    auto got = client_->get(resources::nodesets(), ns_, nodeset_);
    for (const auto& c :
         got ? got->value("/status/conditions"_json_pointer, json::array()) : json::array()) {
      if (c.value("type", "") == "Ready") {
        return c.value("reason", "") + ": " + c.value("message", "");
      }
    }
    return std::string();
  };
  const bool crd_installed = client_
                                 ->get(kube::resources::custom_resource_definitions(), "",
                                       "computedomains.resource.nvidia.com")
                                 .ok();
  testing::create_nodeset(*client_, ns_, nodeset_, 2, imex);
  if (!crd_installed) {
    ASSERT_TRUE(eventually([&] { return ready_reason().starts_with("ComputeDomainCRDMissing: "); },
                           kConverge))
        << ready_reason();
    EXPECT_TRUE(pods().empty());
    testing::install_crd_file(
        *client_, testing::source_dir() / "test/integration/testdata/computedomain-crd.yaml");
  }
  // The domain is made as NVIDIA runs it for Slurm, owned by the NodeSet; pods wait for its
  // claim template.
  const kube::ResourceType& domains = resources::compute_domains();
  ASSERT_TRUE(
      eventually([&] { return client_->get(domains, ns_, nodeset_ + "-imex").ok(); }, kConverge))
      << ready_reason();
  const json domain = *client_->get(domains, ns_, nodeset_ + "-imex");
  EXPECT_EQ(domain["spec"],
            json({{"numNodes", 0},
                  {"channel",
                   {{"allocationMode", "All"},
                    {"resourceClaimTemplate", {{"name", nodeset_ + "-imex-channel"}}}}}}));
  EXPECT_EQ(domain.value("/metadata/ownerReferences/0/kind"_json_pointer, std::string()),
            "NodeSet");
  ASSERT_TRUE(eventually([&] { return ready_reason().starts_with("WaitingForComputeDomain: "); },
                         kConverge))
      << ready_reason();
  EXPECT_NE(ready_reason().find(nodeset_ + "-imex-channel does not exist yet"), std::string::npos)
      << ready_reason();
  EXPECT_TRUE(pods().empty());

  // The driver's side: a channel on every Node, the class that selects them, the template.
  (void)client_->create(
      device_classes, "",
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "DeviceClass"},
       {"metadata", {{"name", channel_class}}},
       {"spec",
        {{"selectors",
          {{{"cel", {{"expression", "device.driver == 'compute-domain.nvidia.com'"}}}}}}}}});
  std::vector<std::string> slice_names;
  for (int i = 1; i <= 6; ++i) {
    const std::string node = "bed-node-" + std::to_string(i);
    slice_names.push_back(ns_ + "-" + node);
    ASSERT_TRUE(client_->create(
        slices, "",
        {{"apiVersion", "resource.k8s.io/v1"},
         {"kind", "ResourceSlice"},
         {"metadata", {{"name", slice_names.back()}}},
         {"spec",
          {{"driver", "compute-domain.nvidia.com"},
           {"nodeName", node},
           {"pool", {{"name", ns_ + "-" + node}, {"generation", 1}, {"resourceSliceCount", 1}}},
           {"devices",
            {{{"name", "channel-0"},
              {"attributes", {{"type", {{"string", "channel"}}}, {"id", {{"int", 0}}}}}}}}}}}));
  }
  ASSERT_TRUE(client_->create(
      resources::resource_claim_templates(), ns_,
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "ResourceClaimTemplate"},
       {"metadata", {{"name", nodeset_ + "-imex-channel"}, {"namespace", ns_}}},
       {"spec",
        {{"spec",
          {{"devices",
            {{"requests",
              {{{"name", "channel"}, {"exactly", {{"deviceClassName", channel_class}}}}}}}}}}}}}));

  // Every pod claims the channels, the scheduler allocates each claim on the pod's Node, and
  // the slurmd pods join Slurm.
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge))
      << ready_reason() << "\n"
      << describe();
  for (const auto& p : pods()) {
    EXPECT_EQ(p["spec"]["resourceClaims"],
              json({{{"name", "compute-domain-channel"},
                     {"resourceClaimTemplateName", nodeset_ + "-imex-channel"}}}));
    bool slurmd_claims = false;
    for (const auto& c : p["spec"]["containers"]) {
      slurmd_claims = slurmd_claims || (c.value("name", "") == "slurmd" &&
                                        c.value("/resources/claims"_json_pointer, json::array()) ==
                                            json({{{"name", "compute-domain-channel"}}}));
    }
    EXPECT_TRUE(slurmd_claims) << p["spec"]["containers"].dump();
  }
  auto made = client_->list(claims, ns_);
  ASSERT_TRUE(made);
  EXPECT_EQ(made->items.size(), 2U);
  for (const auto& claim : made->items) {
    EXPECT_TRUE(claim.contains("status") && claim["status"].contains("allocation")) << claim.dump();
  }

  // The domain goes with its NodeSet.
  ASSERT_TRUE(client_->remove(resources::nodesets(), ns_, nodeset_));
  EXPECT_TRUE(
      eventually([&] { return !client_->get(domains, ns_, nodeset_ + "-imex").ok(); }, kConverge));
  for (const auto& name : slice_names) {
    (void)client_->remove(slices, "", name);
  }
}

TEST_F(NodeSetTest, AnAdminDrainShowsOnTheKubernetesNodeWhenAskedFor) {
  const std::string kube_node = one_worker_under({"--mirror-slurm-drains", "taint"});
  ASSERT_FALSE(kube_node.empty()) << "no worker Ready and idle";
  const std::string pod = nodeset_ + "-0";
  const auto mirrored = [&](bool drained) {
    auto node = client_->get(kube::resources::nodes(), "", kube_node);
    if (!node) {
      return false;
    }
    bool condition = false;
    for (const auto& c : node->value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "SlurmNodeDrained") {
        condition = c.value("status", "") == "True" &&
                    c.value("message", "").find("admin: fan failure") != std::string::npos;
      }
    }
    bool taint = false;
    for (const auto& t : node->value("/spec/taints"_json_pointer, json::array())) {
      taint = taint || (t.value("key", "") == "tightrope.slurm.net/slurm-drained" &&
                        t.value("effect", "") == "NoSchedule");
    }
    return condition == drained && taint == drained;
  };
  ASSERT_TRUE(slurm_->drain(pod, "admin: fan failure"));
  EXPECT_TRUE(eventually([&] { return mirrored(true); }, kConverge));
  ASSERT_TRUE(slurm_->undrain(pod));
  EXPECT_TRUE(eventually([&] { return mirrored(false); }, kConverge));
}

// Slinky's guide, "Cordoning Pods": `kubectl annotate pod <pod> pod-cordon=true` drains its
// Slurm node, removing the annotation undrains it. A Node cordon and uncordon meanwhile leave
// the person's request as it is.
TEST_F(NodeSetTest, APodCordonSetByHandHoldsTheDrainUntilItIsRemoved) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string pod = nodeset_ + "-0";
  const std::string kube_node = pods().at(0)["spec"].value("nodeName", "");
  const auto annotate = [&](const json& value) {
    ASSERT_TRUE(
        client_->patch(kube::resources::pods(), ns_, pod, kube::PatchType::kMerge,
                       {{"metadata", {{"annotations", {{api::kAnnotationPodCordon, value}}}}}}));
  };
  const std::string reason = "slurm-operator: Pod (" + ns_ + "/" + pod + ") was cordoned";
  const auto drained_by_hand = [&] {
    auto node = slurm_node(pod);
    return node && node->drain() && node->reason == reason;
  };
  annotate("true");
  ASSERT_TRUE(eventually(drained_by_hand, kConverge)) << describe();
  ASSERT_TRUE(reconciled_twice());
  EXPECT_TRUE(drained_by_hand()) << describe();
  EXPECT_EQ(pod_annotation(pod, api::kAnnotationPodCordon), "true");
  EXPECT_EQ(pod_annotation(pod, api::kAnnotationPodOperatorCordon), "") << "a person's, unmarked";

  cordon(kube_node, true);
  ASSERT_TRUE(reconciled_twice());
  cordon(kube_node, false);
  ASSERT_TRUE(reconciled_twice());
  EXPECT_TRUE(drained_by_hand()) << describe();
  EXPECT_EQ(pod_annotation(pod, api::kAnnotationPodCordon), "true");

  annotate(nullptr);
  EXPECT_TRUE(eventually(
      [&] {
        auto node = slurm_node(pod);
        return node && !node->drain();
      },
      kConverge))
      << describe();
}

// Slinky 1.3: a health check asks for a drain with pod-cordon-requested and takes it back by
// removing it; the operator never removes the request.
TEST_F(NodeSetTest, APodCordonRequestDrainsUntilTheRequesterRemovesIt) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string pod = nodeset_ + "-0";
  const auto request = [&](const json& value) {
    ASSERT_TRUE(client_->patch(
        kube::resources::pods(), ns_, pod, kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{api::kAnnotationPodCordonRequested, value}}}}}}));
  };
  request("[HC] GPU 3: Xid 79");
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(pod);
        return node && node->drain() && node->reason == "slurm-operator: [HC] GPU 3: Xid 79" &&
               pod_annotation(pod, api::kAnnotationPodOperatorCordon) == "true";
      },
      kConverge))
      << describe();
  ASSERT_TRUE(reconciled_twice());
  EXPECT_EQ(pod_annotation(pod, api::kAnnotationPodCordonRequested), "[HC] GPU 3: Xid 79");
  request(nullptr);
  EXPECT_TRUE(eventually(
      [&] {
        auto node = slurm_node(pod);
        return node && !node->drain() && pod_annotation(pod, api::kAnnotationPodCordon).empty();
      },
      kConverge))
      << describe();
}

// NVIDIA NVSentinel's slinky-drainer, its calls replayed: its fault-quarantine cordons the Node;
// the drainer then sets node-cordon-reason with a full update of the Node, lists the pods on the
// Node by field selector, waits until every ready one shows SlurmNodeStateDrain and none of
// Undrain, Allocated, Mixed, Completing, and deletes them with a 30 s grace period. The job on
// the node ends first, the reason reaches Slurm although it came after the cordon, and the pod
// comes back on another Node, undrained.
TEST_F(NodeSetTest, NvSentinelsSlinkyDrainerWaitsForTheJobAndItsReasonReachesSlurm) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string pod = nodeset_ + "-0";
  const std::string kube_node = pods().at(0)["spec"].value("nodeName", "");
  const int64_t job = submit_on(pod, 20);
  ASSERT_TRUE(eventually([&] { return job_state(job) == "RUNNING"; }, kConverge));

  cordon(kube_node, true);
  const std::string text = "[T] [NVSentinel] 79 GPU:0 - XID error occurred";
  // Its reconcile is retried when the update conflicts (the kubelet's heartbeats change the Node).
  EXPECT_TRUE(eventually(
      [&] {
        auto node = client_->get(kube::resources::nodes(), "", kube_node);
        if (!node) {
          return false;
        }
        (*node)["metadata"]["annotations"][std::string(api::kAnnotationNodeCordonReason)] = text;
        return static_cast<bool>(client_->update(kube::resources::nodes(), "", *node));
      },
      std::chrono::seconds(30)));

  const auto drained_on_node = [&] {
    kube::ListOptions on_node;
    on_node.field_selector = "spec.nodeName=" + kube_node;
    auto listed = client_->list(kube::resources::pods(), ns_, on_node);
    if (!listed) {
      return false;
    }
    for (const auto& p : listed->items) {
      if (!has_condition(p, "Ready")) {
        continue;
      }
      if (!has_condition(p, "SlurmNodeStateDrain")) {
        return false;
      }
      for (const char* busy : {"SlurmNodeStateUndrain", "SlurmNodeStateAllocated",
                               "SlurmNodeStateMixed", "SlurmNodeStateCompleting"}) {
        if (has_condition(p, busy)) {
          return false;
        }
      }
    }
    return true;
  };
  ASSERT_TRUE(eventually(drained_on_node, std::chrono::seconds(90))) << describe();
  EXPECT_EQ(job_state(job), "COMPLETED") << "the drainer waited for the job";
  auto drained = slurm_node(pod);
  ASSERT_TRUE(drained);
  EXPECT_EQ(drained->reason, "slurm-operator: " + text);

  const std::string uid = uid_of(pod);
  kube::DeleteOptions grace;
  grace.grace_period_seconds = 30;
  ASSERT_TRUE(client_->remove(kube::resources::pods(), ns_, pod, grace));
  EXPECT_TRUE(eventually(
      [&] {
        const std::string now_uid = uid_of(pod);
        return !now_uid.empty() && now_uid != uid && all_ready_and_idle(1) &&
               pods().at(0)["spec"].value("nodeName", "") != kube_node;
      },
      kConverge))
      << describe();

  // Repaired: the Node is uncordoned, the drainer removes its reason.
  cordon(kube_node, false);
  ASSERT_TRUE(client_->patch(
      kube::resources::nodes(), "", kube_node, kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{api::kAnnotationNodeCordonReason, nullptr}}}}}}));
}

// Slinky's meaning: a propagated condition names the drain of a cordon. Tightrope's opt-in
// (--drain-on-node-conditions): the condition drains by itself until it clears.
TEST_F(NodeSetTest, APropagatedNodeConditionNamesACordonAndDrainsAloneWhenAsked) {
  const std::string kube_node =
      one_worker_under({"--propagated-node-conditions", "CPUProblem,GPUProblem"});
  ASSERT_FALSE(kube_node.empty()) << "no worker Ready and idle";
  const std::string pod = nodeset_ + "-0";
  // As a node problem detector reports a GPU fault: a condition on the Node's status.
  const auto report = [&](const json& condition) {
    const auto patched =
        client_->patch(kube::resources::nodes(), "", kube_node, kube::PatchType::kStrategicMerge,
                       {{"status", {{"conditions", json::array({condition})}}}}, "status");
    ASSERT_TRUE(patched) << patched.error().message;
  };
  const auto drained_for_xid = [&] {
    auto node = slurm_node(pod);
    return node && node->drain() && node->reason == "slurm-operator: (GpuXid: Xid 79 on GPU 3)";
  };
  const auto undrained = [&] {
    auto node = slurm_node(pod);
    return node && !node->drain();
  };
  report({{"type", "GPUProblem"},
          {"status", "True"},
          {"reason", "GpuXid"},
          {"message", "Xid 79 on GPU 3"},
          {"lastTransitionTime", "2026-12-03T12:00:00Z"}});
  ASSERT_TRUE(reconciled_twice());
  EXPECT_TRUE(undrained()) << "a condition alone drains only when asked";
  cordon(kube_node, true);
  EXPECT_TRUE(eventually(drained_for_xid, kConverge))
      << (slurm_node(pod) ? slurm_node(pod)->reason : "no node");
  cordon(kube_node, false);
  EXPECT_TRUE(eventually(undrained, kConverge));

  op_ = std::make_unique<OperatorProcess>(
      ns_, std::vector<std::string>{"--propagated-node-conditions", "CPUProblem,GPUProblem",
                                    "--drain-on-node-conditions"});
  op_->start();
  EXPECT_TRUE(eventually(drained_for_xid, kConverge))
      << (slurm_node(pod) ? slurm_node(pod)->reason : "no node");
  report({{"type", "GPUProblem"},
          {"status", "False"},
          {"reason", "GpuOk"},
          {"message", ""},
          {"lastTransitionTime", "2026-12-03T12:05:00Z"}});
  EXPECT_TRUE(eventually(undrained, kConverge));
  report({{"type", "GPUProblem"}, {"$patch", "delete"}});
}

TEST_F(NodeSetTest, APinnedPodComesBackToItsNode) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                             {{"spec", {{"pinToNode", true}}}}));
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string name = nodeset_ + "-0";
  const std::string first_node = pods().front()["spec"].value("nodeName", "");
  ASSERT_TRUE(eventually(
      [&] {
        auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
        return doc && field<std::string>(*doc, "/status/ordinalToNode/0", "") == first_node;
      },
      kConverge));
  ASSERT_TRUE(client_->remove(kube::resources::pods(), ns_, name));
  ASSERT_TRUE(eventually(
      [&] {
        auto pod = client_->get(kube::resources::pods(), ns_, name);
        return pod && !(*pod)["metadata"].contains("deletionTimestamp") &&
               pod->value("/spec/affinity/nodeAffinity"_json_pointer, json())
                       .dump()
                       .find(first_node) != std::string::npos;
      },
      kConverge));
  EXPECT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  EXPECT_EQ(pods().front()["spec"].value("nodeName", ""), first_node);
}

TEST_F(NodeSetTest, DaemonSetModeFollowsTheEligibleNodes) {
  const auto label = [&](const std::string& node, bool on) {
    ASSERT_TRUE(client_->patch(
        kube::resources::nodes(), "", node, kube::PatchType::kMerge,
        {{"metadata",
          {{"labels", {{"tightrope.test/slurm", on ? json("yes") : json(nullptr)}}}}}}));
  };
  for (const char* node : {"bed-node-1", "bed-node-2", "bed-node-3"}) {
    label(node, true);
  }
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(client_->patch(
      resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
      {{"spec",
        {{"scalingMode", "DaemonSet"},
         {"template", {{"spec", {{"nodeSelector", {{"tightrope.test/slurm", "yes"}}}}}}}}}}));
  // One pod a labelled Node, named and hostnamed after it; replicas does not count.
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(3); }, kConverge)) << describe();
  EXPECT_EQ(pod_names(), std::set<std::string>({nodeset_ + "-bed-node-1", nodeset_ + "-bed-node-2",
                                                nodeset_ + "-bed-node-3"}));
  for (const auto& p : pods()) {
    EXPECT_EQ(p["spec"].value("hostname", ""), p["spec"].value("nodeName", ""));
  }
  label("bed-node-4", true);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(4); }, kConverge)) << describe();
  // A Node that stops matching loses its pod, drained first like any scale-in.
  label("bed-node-2", false);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(3); }, kConverge)) << describe();
  EXPECT_EQ(pod_names().count(nodeset_ + "-bed-node-2"), 0U);
  EXPECT_NE(op_->log().find("bed-node-2 is drained and idle (scale-in: Node bed-node-2 is no "
                            "longer eligible)"),
            std::string::npos);
  auto doc = client_->get(resources::nodesets(), ns_, nodeset_);
  ASSERT_TRUE(doc);
  EXPECT_EQ(field<int64_t>(*doc, "/status/desired", -1), 3);
}

TEST_F(NodeSetTest, ClaimsAreMadeForEachPodAndGoWithAScaleInWhenAsked) {
  // Volumes bound in advance: the bed has no provisioner.
  std::vector<std::string> volumes;
  for (int i = 0; i < 2; ++i) {
    const std::string pv = ns_ + "-pv-" + std::to_string(i);
    volumes.push_back(pv);
    auto made = client_->create(
        kube::resources::persistent_volumes(), "",
        {{"apiVersion", "v1"},
         {"kind", "PersistentVolume"},
         {"metadata", {{"name", pv}}},
         {"spec",
          {{"capacity", {{"storage", "1Mi"}}},
           {"accessModes", {"ReadWriteOnce"}},
           {"persistentVolumeReclaimPolicy", "Retain"},
           {"storageClassName", ""},
           {"hostPath", {{"path", "/tmp/" + pv}}},
           {"claimRef",
            {{"namespace", ns_}, {"name", "scratch-" + nodeset_ + "-" + std::to_string(i)}}}}}});
    ASSERT_TRUE(made) << made.error().message;
  }
  create(resources::nodesets(),
         {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "NodeSet"},
          {"metadata", {{"name", nodeset_}}},
          {"spec",
           {{"controllerRef", {{"name", "slurm"}}},
            {"replicas", 2},
            {"extraConf", "Features=tb"},
            {"persistentVolumeClaimRetentionPolicy", {{"whenScaled", "Delete"}}},
            {"volumeClaimTemplates",
             json::array({{{"metadata", {{"name", "scratch"}}},
                           {"spec",
                            {{"accessModes", {"ReadWriteOnce"}},
                             {"storageClassName", ""},
                             {"resources", {{"requests", {{"storage", "1Mi"}}}}}}}}})}}}});
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge)) << describe();
  for (const auto& p : pods()) {
    EXPECT_NE(p["spec"]["volumes"].dump().find("scratch-" + nodeset_ + "-"), std::string::npos);
  }
  const auto claim = [&](int i) {
    return client_->get(kube::resources::persistent_volume_claims(), ns_,
                        "scratch-" + nodeset_ + "-" + std::to_string(i));
  };
  ASSERT_TRUE(claim(0));
  ASSERT_TRUE(claim(1));
  scale(1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  // The scaled-away pod's claim goes with it; the other stays.
  EXPECT_TRUE(eventually([&] { return !claim(1).ok(); }, kConverge));
  EXPECT_TRUE(claim(0).ok());
  for (const auto& pv : volumes) {
    (void)client_->remove(kube::resources::persistent_volumes(), "", pv);
  }
}

TEST_F(NodeSetTest, RecordsOfPodsThatAreGoneArePrunedWhenAsked) {
  ASSERT_NO_FATAL_FAILURE(two_pruned_pods_linked());
  scale(1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  EXPECT_TRUE(eventually([&] { return !slurm_node(nodeset_ + "-1").has_value(); }, kConverge))
      << describe();
  EXPECT_TRUE(slurm_node(nodeset_ + "-0").has_value());
}

TEST_F(NodeSetTest, ADeletedNodeSetTakesItsSlurmRecordsWhenAsked) {
  ASSERT_NO_FATAL_FAILURE(two_pruned_pods_linked());
  ASSERT_TRUE(client_->remove(resources::nodesets(), ns_, nodeset_));
  // Its pods go first, then its records, then the NodeSet itself.
  EXPECT_TRUE(eventually(
      [&] {
        return !slurm_node(nodeset_ + "-0").has_value() && !slurm_node(nodeset_ + "-1").has_value();
      },
      kConverge))
      << describe();
  EXPECT_TRUE(eventually([&] { return !client_->get(resources::nodesets(), ns_, nodeset_).ok(); },
                         kConverge));
  EXPECT_TRUE(pods().empty());
}

// Deleting a NodeSet is a scale-in to nothing: its nodes are drained, a pod whose node runs a
// job stays until the job ends (pruneSlurmNodeRecords left at Never: the finalizer is held
// either way), and the NodeSet goes after its last pod.
TEST_F(NodeSetTest, ADeletedNodeSetWaitsForTheJobsOnItsPods) {
  testing::create_nodeset(*client_, ns_, nodeset_, 2);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(2); }, kConverge));
  const std::string busy = nodeset_ + "-0";
  const int64_t job = submit_on(busy, 15);
  ASSERT_TRUE(eventually([&] { return job_state(job) == "RUNNING"; }, kConverge));
  ASSERT_TRUE(client_->remove(resources::nodesets(), ns_, nodeset_));
  ASSERT_TRUE(eventually(
      [&] {
        auto node = slurm_node(busy);
        return node && node->drain() &&
               node->reason.find("pending termination for NodeSet deletion") != std::string::npos;
      },
      kConverge))
      << describe();
  EXPECT_TRUE(eventually([&] { return pod_names() == std::set<std::string>({busy}); }, kConverge))
      << "the idle pod goes at once: " << describe();
  while (job_state(job) == "RUNNING") {
    EXPECT_EQ(pod_names().count(busy), 1U) << "deleted while its job ran";
    EXPECT_TRUE(client_->get(resources::nodesets(), ns_, nodeset_).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(job_state(job), "COMPLETED");
  EXPECT_TRUE(eventually([&] { return !client_->get(resources::nodesets(), ns_, nodeset_).ok(); },
                         kConverge))
      << describe();
  EXPECT_TRUE(pods().empty());
}

// A NodeSet whose spec the operator cannot read when it is deleted (written around the
// webhook) keeps its pod and its finalizer, and says why and the ways out; once the spec is
// corrected, the deletion goes on, drain-first.
TEST_F(NodeSetTest, AnUnreadableNodeSetBeingDeletedKeepsItsPodsUntilItsSpecIsCorrected) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string good = "Features=" + TestBed::var("SLURM_PARTITION");
  const auto set_extra_conf = [&](const std::string& conf) {
    auto patched = client_->patch(resources::nodesets(), ns_, nodeset_, kube::PatchType::kMerge,
                                  {{"spec", {{"extraConf", conf}}}});
    ASSERT_TRUE(patched) << patched.error().message;
  };
  set_extra_conf(good + " Weight");  // a key without a value: the webhook would refuse it
  ASSERT_TRUE(
      eventually([&] { return nodeset_condition("Ready") == "False/InvalidSpec"; }, kConverge));
  ASSERT_TRUE(client_->remove(resources::nodesets(), ns_, nodeset_));
  ASSERT_TRUE(eventually([&] { return nodeset_condition("DeletionBlocked") == "True/InvalidSpec"; },
                         kConverge))
      << describe();
  const auto warned = [&] {
    auto events = client_->list(kube::resources::events(), ns_, {});
    return events && std::any_of(events->items.begin(), events->items.end(), [&](const json& e) {
             return e.value("type", "") == "Warning" &&
                    e.value("reason", "") == "DeletionBlocked" &&
                    e.value("message", "").find("spec.extraConf") != std::string::npos &&
                    e.value("/involvedObject/name"_json_pointer, std::string()) == nodeset_;
           });
  };
  EXPECT_TRUE(eventually(warned, kConverge));
  // Held, pod and NodeSet, for as long as the spec cannot be read.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(pod_names().size(), 1U) << describe();
  EXPECT_TRUE(client_->get(resources::nodesets(), ns_, nodeset_).ok());

  set_extra_conf(good);
  EXPECT_TRUE(eventually([&] { return !client_->get(resources::nodesets(), ns_, nodeset_).ok(); },
                         kConverge))
      << describe();
  EXPECT_TRUE(pods().empty());
}

// The API server refuses the pods (their PriorityClass does not exist): the NodeSet says so in
// Ready and a Warning Event, retries with backoff, and creates them once the class exists.
TEST_F(NodeSetTest, ARefusedCreationIsAConditionAndAnEventAndIsRetried) {
  const std::string priority = "tightrope-" + ns_;
  const kube::ResourceType priority_classes{"scheduling.k8s.io", "v1", "priorityclasses",
                                            "PriorityClass", false};
  create(resources::nodesets(), {{"apiVersion", "slinky.slurm.net/v1beta1"},
                                 {"kind", "NodeSet"},
                                 {"metadata", {{"name", nodeset_}}},
                                 {"spec",
                                  {{"controllerRef", {{"name", "slurm"}}},
                                   {"replicas", 1},
                                   {"extraConf", "Features=" + TestBed::var("SLURM_PARTITION")},
                                   {"template", {{"spec", {{"priorityClassName", priority}}}}}}}});
  ASSERT_TRUE(
      eventually([&] { return nodeset_condition("Ready") == "False/CreateFailed"; }, kConverge));
  const auto warned = [&] {
    auto events = client_->list(kube::resources::events(), ns_, {});
    if (!events) {
      return false;
    }
    return std::any_of(events->items.begin(), events->items.end(), [&](const json& e) {
      return e.value("type", "") == "Warning" && e.value("reason", "") == "CreateFailed" &&
             e.value("/involvedObject/name"_json_pointer, std::string()) == nodeset_;
    });
  };
  EXPECT_TRUE(eventually(warned, kConverge));
  EXPECT_TRUE(pods().empty());

  auto made = client_->create(priority_classes, "",
                              {{"apiVersion", "scheduling.k8s.io/v1"},
                               {"kind", "PriorityClass"},
                               {"metadata", {{"name", priority}}},
                               {"value", 1000}});
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  EXPECT_TRUE(eventually([&] { return nodeset_condition("Ready") == "True/AllReady"; }, kConverge));
  (void)client_->remove(priority_classes, "", priority);
}

TEST_F(NodeSetTest, ANotReadyNodeSetKeepsItsHashAndSelector) {
  // Slinky's CRD requires both in every status written, and an HPA reads the selector.
  testing::create_nodeset(*client_, ns_, nodeset_, 0);
  const auto status = [&] {
    auto n = client_->get(resources::nodesets(), ns_, nodeset_);
    return n ? n->value("status", json::object()) : json::object();
  };
  ASSERT_TRUE(eventually([&] { return nodeset_condition("Ready") == "True/AllReady"; }, kConverge));
  const json before = status();
  ASSERT_FALSE(before.value("nodeSetHash", "").empty()) << before.dump();
  ASSERT_FALSE(before.value("selector", "").empty()) << before.dump();
  const auto removed = client_->remove(resources::controllers(), ns_, "slurm");
  ASSERT_TRUE(removed) << removed.error().message;
  ASSERT_TRUE(eventually([&] { return nodeset_condition("Ready") == "False/ControllerNotFound"; },
                         kConverge));
  const json after = status();
  EXPECT_EQ(after.value("nodeSetHash", ""), before.value("nodeSetHash", "")) << after.dump();
  EXPECT_EQ(after.value("selector", ""), before.value("selector", "")) << after.dump();
}

TEST_F(NodeSetTest, PodDeletedByHandIsRecreated) {
  testing::create_nodeset(*client_, ns_, nodeset_, 1);
  ASSERT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
  const std::string name = nodeset_ + "-0";
  const std::string uid = pods().front()["metadata"].value("uid", "");
  ASSERT_TRUE(client_->remove(kube::resources::pods(), ns_, name));
  ASSERT_TRUE(eventually(
      [&] {
        const auto list = pods();
        return list.size() == 1 && list.front()["metadata"].value("uid", "") != uid;
      },
      kConverge));
  // The new pod's slurmd registers the same node, which comes back from the preStop's DOWN.
  EXPECT_TRUE(eventually([&] { return all_ready_and_idle(1); }, kConverge));
}

}  // namespace
}  // namespace tightrope::op
