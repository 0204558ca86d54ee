// slurm-bridge against the bed's real API server and real Slurm 26.05: Nodes become Slurm
// external nodes, pods become external jobs that Slurm schedules, and each side's changes reach
// the other. The bed has no kubelet: a hollow one (hollow_kubelet.hpp) registers the Nodes and
// plays the pods' containers.
#include "bridge/bridge.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "hollow_kubelet.hpp"
#include "kube/kube_support.hpp"
#include "slurm/token.hpp"
#include "testbed.hpp"

namespace tightrope::bridge {
namespace {

using kube::testing::eventually;
using nlohmann::json;
using tightrope::testing::TestBed;
using namespace std::chrono_literals;

class BridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube_ = kube::testing::make_client();
    ns_ = kube::testing::fresh_namespace(*kube_);
    prefix_ = "b" + std::to_string(getpid()) + "-" + std::to_string(++counter_);
    scheduler_ = "bridge-" + prefix_;
    slurm::ClientOptions o;
    o.url = TestBed::var("SLURMRESTD_URL");
    slurm_ = std::make_unique<slurm::Client>(
        o, std::make_shared<slurm::MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm"));
    std::vector<testing::HollowNode> nodes;
    for (int i = 1; i <= kNodes; ++i) {
      nodes.push_back({node(i), "4", "8Gi", 0, {{std::string(kLabelExternalNode), "true"}}});
    }
    kubelet_ = std::make_unique<testing::HollowKubelet>(*kube_, ns_, nodes);
    kubelet_->start();
    events_ = std::make_unique<kube::EventRecorder>(
        *kube_, kube::EventRecorderOptions{"slurm-bridge", prefix_});
    start_bridge();
    ASSERT_TRUE(eventually(
        [&] {
          return slurm_node(node(1)).has_value() && slurm_node(node(2)).has_value() &&
                 slurm_node(node(3)).has_value();
        },
        30s));
  }

  void TearDown() override {
    bridge_.reset();
    kubelet_->stop();
    // The Nodes are gone: their Slurm nodes follow (a new bridge would see to it; here, now).
    for (int i = 1; i <= kNodes; ++i) {
      (void)slurm_->delete_node(node(i));
    }
    for (const auto& job : jobs()) {
      (void)slurm_->cancel_job(job.id);
    }
  }

  void start_bridge() {
    BridgeOptions options;
    options.scheduler_name = scheduler_;
    options.partition = "slurm-bridge";
    options.slurm_period = 200ms;
    options.group_workers = 2;
    bridge_ = std::make_unique<Bridge>(*kube_, *events_, *slurm_, options, nullptr);
    bridge_->start_informers();
    ASSERT_TRUE(bridge_->wait_for_sync(20s));
    bridge_->start_controllers();
  }

  std::string node(int i) const { return prefix_ + "-n" + std::to_string(i); }

  std::optional<slurm::Node> slurm_node(const std::string& name) {
    auto n = slurm_->get_node(name);
    return n ? std::optional<slurm::Node>(*n) : std::nullopt;
  }

  // The jobs this test's pods made (their admin comment names the namespace).
  std::vector<slurm::Job> jobs() {
    std::vector<slurm::Job> out;
    auto list = slurm_->list_jobs();
    if (!list) {
      return out;
    }
    for (const auto& job : list->list.jobs) {
      const auto claim = JobClaim::decode(job.admin_comment);
      if (claim && claim->group.starts_with(ns_ + "/")) {
        out.push_back(job);
      }
    }
    return out;
  }

  json pod_doc(const std::string& name, const std::string& cpu = "1") const {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"schedulerName", scheduler_},
              {"terminationGracePeriodSeconds", 5},
              {"containers",
               {{{"name", "main"},
                 {"image", "busybox"},
                 {"resources", {{"requests", {{"cpu", cpu}, {"memory", "256Mi"}}}}}}}}}}};
  }

  json pod(const std::string& name) {
    auto p = kube_->get(kube::resources::pods(), ns_, name);
    return p ? *p : json();
  }

  std::string node_of(const std::string& name) {
    return kube::testing::field<std::string>(pod(name), "/spec/nodeName", "");
  }

  std::string job_label(const std::string& name) {
    return kube::testing::field<std::string>(
        pod(name), "/metadata/labels/scheduler.slinky.slurm.net~1slurm-jobid", "");
  }

  std::optional<slurm::Job> job(const std::string& id) {
    if (id.empty()) {
      return std::nullopt;
    }
    auto j = slurm_->get_job(std::stoll(id));
    return j ? std::optional<slurm::Job>(*j) : std::nullopt;
  }

  bool gone(const std::string& name) {
    auto p = kube_->get(kube::resources::pods(), ns_, name);
    return !p && p.error().kind == kube::ErrorKind::kNotFound;
  }

  static constexpr int kNodes = 4;
  static inline int counter_ = 0;
  std::unique_ptr<kube::Client> kube_;
  std::string ns_;
  std::string prefix_;
  std::string scheduler_;
  std::unique_ptr<slurm::Client> slurm_;
  std::unique_ptr<testing::HollowKubelet> kubelet_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<Bridge> bridge_;
};

TEST_F(BridgeTest, LabelledNodesAreExternalNodesAndCordonAndDrainFollowEachOther) {
  const auto n1 = slurm_node(node(1));
  ASSERT_TRUE(n1.has_value());
  EXPECT_TRUE(n1->has("EXTERNAL"));
  EXPECT_EQ(n1->cpus, 4);
  EXPECT_EQ(n1->features, std::vector<std::string>{"slurm-bridge"});
  ASSERT_TRUE(eventually([&] {
    auto n = kube_->get(kube::resources::nodes(), "", node(1));
    return n && n->contains("spec") && (*n)["spec"].contains("taints") &&
           (*n)["spec"]["taints"][0]["key"] == kTaintManagedNode;
  }));
  // Cordoned in Kubernetes: drained in Slurm; uncordoned: undrained.
  ASSERT_TRUE(kube_
                  ->patch(kube::resources::nodes(), "", node(1), kube::PatchType::kMerge,
                          {{"spec", {{"unschedulable", true}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] {
    const auto n = slurm_node(node(1));
    return n && n->drain() && n->reason.starts_with("slurm-bridge: ");
  }));
  ASSERT_TRUE(kube_
                  ->patch(kube::resources::nodes(), "", node(1), kube::PatchType::kMerge,
                          {{"spec", {{"unschedulable", false}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] { return !slurm_node(node(1))->drain(); }));
  // Drained in Slurm by an administrator: cordoned in Kubernetes, with why; resumed: uncordoned.
  ASSERT_TRUE(slurm_->drain(node(2), "bad dimm").ok());
  ASSERT_TRUE(eventually([&] {
    auto n = kube_->get(kube::resources::nodes(), "", node(2));
    return n && kube::testing::field<bool>(*n, "/spec/unschedulable", false) &&
           kube::testing::field<std::string>(
               *n, "/metadata/annotations/tightrope.slurm.net~1bridge-cordon", "") == "bad dimm";
  }));
  ASSERT_TRUE(slurm_->undrain(node(2)).ok());
  ASSERT_TRUE(eventually([&] {
    auto n = kube_->get(kube::resources::nodes(), "", node(2));
    return n && !kube::testing::field<bool>(*n, "/spec/unschedulable", false);
  }));
  // The Node leaves the bridge: its Slurm node goes.
  ASSERT_TRUE(
      kube_
          ->patch(kube::resources::nodes(), "", node(3), kube::PatchType::kMerge,
                  {{"metadata", {{"labels", {{std::string(kLabelExternalNode), nullptr}}}}}})
          .ok());
  ASSERT_TRUE(eventually([&] { return !slurm_node(node(3)).has_value(); }));
}

TEST_F(BridgeTest, APodRunsWhereSlurmPutsItAndItsEndEndsTheJob) {
  ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, pod_doc("solo")).ok());
  ASSERT_TRUE(eventually([&] { return !node_of("solo").empty(); }, 30s));
  const auto j = job(job_label("solo"));
  ASSERT_TRUE(j.has_value());
  EXPECT_TRUE(j->has("RUNNING"));
  EXPECT_TRUE(j->external());
  EXPECT_EQ(j->nodes, node_of("solo"));
  EXPECT_EQ(kube::testing::field<std::string>(
                pod("solo"), "/metadata/annotations/slinky.slurm.net~1slurm-node", ""),
            node_of("solo"));
  ASSERT_TRUE(eventually([&] {
    return kube::testing::field<std::string>(pod("solo"), "/status/phase", "") == "Running";
  }));
  ASSERT_TRUE(kubelet_->finish("solo", "Succeeded"));
  ASSERT_TRUE(eventually([&] {
    const auto after = job(std::to_string(j->id));
    return after && !after->active();
  }));
  // Its finalizer is gone: nothing holds the pod any more.
  ASSERT_TRUE(eventually([&] { return !pod("solo")["metadata"].contains("finalizers"); }));
}

TEST_F(BridgeTest, AGangOfFourOnThreeFreeNodesWaitsAndStartsWholeWhenAFourthFrees) {
  ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, pod_doc("first")).ok());
  ASSERT_TRUE(eventually([&] { return !node_of("first").empty(); }, 30s));
  // An Indexed Job of 4 pods run at once: one Slurm job of 4 nodes, while only 3 are free.
  const json batch = {{"apiVersion", "batch/v1"},
                      {"kind", "Job"},
                      {"metadata", {{"name", "gang"}, {"namespace", ns_}}},
                      {"spec",
                       {{"completions", 4},
                        {"parallelism", 4},
                        {"completionMode", "Indexed"},
                        {"template",
                         {{"spec",
                           {{"schedulerName", scheduler_},
                            {"restartPolicy", "Never"},
                            {"containers",
                             {{{"name", "main"},
                               {"image", "busybox"},
                               {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}}}}}};
  ASSERT_TRUE(kube_->create({"batch", "v1", "jobs", "Job", true}, ns_, batch).ok());
  const auto gang_pods = [&] {
    kube::ListOptions o;
    o.label_selector = "batch.kubernetes.io/job-name=gang";
    auto list = kube_->list(kube::resources::pods(), ns_, o);
    return list ? list->items : json::array();
  };
  ASSERT_TRUE(eventually(
      [&] {
        const json pods = gang_pods();
        return pods.size() == 4 && std::all_of(pods.begin(), pods.end(), [](const json& p) {
                 return p["metadata"].contains("labels") &&
                        p["metadata"]["labels"].contains(std::string(kLabelJobId));
               });
      },
      30s));
  std::this_thread::sleep_for(2s);
  json pods = gang_pods();
  const std::string id = pods[0]["metadata"]["labels"][std::string(kLabelJobId)];
  for (const json& p : pods) {
    EXPECT_EQ(p["metadata"]["labels"][std::string(kLabelJobId)], id);  // one job for all
    EXPECT_FALSE(p["spec"].contains("nodeName")) << "a gang pod started before its job had nodes";
  }
  EXPECT_TRUE(job(id)->has("PENDING"));
  // The message the pods carry says why they wait.
  ASSERT_TRUE(eventually([&] {
    const json p = gang_pods()[0];
    for (const json& c : p["status"].value("conditions", json::array())) {
      if (c["type"] == "PodScheduled" &&
          c.value("message", "").find("Slurm job " + id + " is pending") != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
  // A node frees up: the gang starts whole, one pod a node.
  ASSERT_TRUE(kubelet_->finish("first", "Succeeded"));
  ASSERT_TRUE(eventually(
      [&] {
        const json now = gang_pods();
        return std::all_of(now.begin(), now.end(),
                           [](const json& p) { return p["spec"].contains("nodeName"); });
      },
      30s));
  std::set<std::string> used;
  for (const json& p : gang_pods()) {
    used.insert(p["spec"]["nodeName"].get<std::string>());
  }
  EXPECT_EQ(used.size(), 4U);
  EXPECT_TRUE(job(id)->has("RUNNING"));
}

TEST_F(BridgeTest, ScancelDeletesThePodsAndDeletingThePodsEndsTheJob) {
  ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, pod_doc("cancelled")).ok());
  ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, pod_doc("deleted")).ok());
  ASSERT_TRUE(eventually(
      [&] { return !node_of("cancelled").empty() && !node_of("deleted").empty(); }, 30s));
  const std::string cancelled = job_label("cancelled");
  const std::string deleted = job_label("deleted");
  ASSERT_EQ(TestBed::slurm_cli("scancel " + cancelled), 0);
  ASSERT_TRUE(eventually([&] { return gone("cancelled"); }, 30s));
  ASSERT_TRUE(kube_->remove(kube::resources::pods(), ns_, "deleted").ok());
  ASSERT_TRUE(eventually(
      [&] {
        const auto j = job(deleted);
        return j && !j->active();
      },
      30s));
  ASSERT_TRUE(eventually([&] { return gone("deleted"); }, 30s));
}

TEST_F(BridgeTest, ARestartedBridgeFindsItsJobsInSlurmAndLosesNothing) {
  // Five pods that want a whole node each (4 CPUs) on four nodes: one waits.
  const std::vector<std::string> names = {"r1", "r2", "r3", "r4", "r5"};
  for (const auto& name : names) {
    ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, pod_doc(name, "4")).ok());
  }
  const auto bound = [&] {
    return std::count_if(names.begin(), names.end(),
                         [&](const std::string& n) { return !node_of(n).empty(); });
  };
  ASSERT_TRUE(eventually(
      [&] {
        return bound() == kNodes &&
               std::all_of(names.begin(), names.end(),
                           [&](const std::string& n) { return !job_label(n).empty(); });
      },
      30s));
  bridge_.reset();  // mid-flight: one job pending, four running
  const size_t before = jobs().size();
  EXPECT_EQ(before, names.size());
  std::string waiting;
  std::string ended;
  for (const auto& name : names) {
    (node_of(name).empty() ? waiting : ended) = name;
  }
  EXPECT_TRUE(job(job_label(waiting))->has("PENDING"));
  // While no bridge runs, a running pod ends.
  ASSERT_TRUE(kubelet_->finish(ended, "Succeeded"));
  start_bridge();
  // The new bridge cancels the ended pod's job, Slurm starts the waiting one, and it is bound.
  ASSERT_TRUE(eventually([&] { return !node_of(waiting).empty(); }, 30s));
  EXPECT_EQ(jobs().size(), before) << "a job was submitted twice";
  EXPECT_FALSE(job(job_label(ended))->active());
}

TEST_F(BridgeTest, BadJobOptionsAreToldOnThePodAndNothingIsSubmitted) {
  json doc = pod_doc("bad");
  doc["metadata"]["annotations"] = {{"slurmjob.slinky.slurm.net/timelimit", "soon"}};
  ASSERT_TRUE(kube_->create(kube::resources::pods(), ns_, doc).ok());
  ASSERT_TRUE(eventually([&] {
    for (const json& c : pod("bad")["status"].value("conditions", json::array())) {
      if (c["type"] == "PodScheduled" && c.value("reason", "") == "InvalidJobOptions") {
        return c.value("message", "").find("slurmjob.slinky.slurm.net/timelimit") !=
               std::string::npos;
      }
    }
    return false;
  }));
  EXPECT_TRUE(job_label("bad").empty());
  EXPECT_TRUE(jobs().empty());
}

}  // namespace
}  // namespace tightrope::bridge
