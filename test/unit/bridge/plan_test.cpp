#include "bridge/plan.hpp"

#include <gtest/gtest.h>

#include "bridge/well_known.hpp"
#include "bridge/workload.hpp"

namespace tightrope::bridge {
namespace {

Pod pod(const std::string& name, const std::string& job = "") {
  Pod p;
  p.meta.namespace_name = "ml";
  p.meta.name = name;
  p.phase = "Pending";
  if (!job.empty()) {
    p.meta.labels = {{std::string(kLabelJobId), job}};
    p.finalizer = true;
  }
  return p;
}

JobView job(int64_t id, const std::string& state, const std::string& nodes = "") {
  JobView v;
  v.job.id = id;
  v.job.state = {state};
  v.job.nodes = nodes;
  v.job.state_reason = state == "PENDING" ? "Resources" : "None";
  return v;
}

TEST(PlanGroup, AGangWaitsUntilEveryPodExistsThenIsSubmittedWhole) {
  Pod a = pod("a");
  Pod b = pod("b");
  GroupState state{{&a, &b}, 4, {}, {}};
  GroupPlan plan = plan_group(state);
  EXPECT_TRUE(plan.submit.empty());
  ASSERT_EQ(plan.waiting.size(), 2U);
  EXPECT_EQ(plan.waiting[0].second, "waits for the rest of its group: 2 of 4 pods exist");
  Pod c = pod("c");
  Pod d = pod("d");
  state.pods = {&a, &b, &c, &d};
  plan = plan_group(state);
  EXPECT_EQ(plan.submit.size(), 4U);
}

TEST(PlanGroup, APendingJobTellsItsPodsWhyAndARunningOnePlacesThem) {
  Pod a = pod("a", "12");
  GroupState state{{&a}, 1, {{12, job(12, "PENDING")}}, {}};
  GroupPlan plan = plan_group(state);
  ASSERT_EQ(plan.waiting.size(), 1U);
  EXPECT_NE(plan.waiting[0].second.find("Slurm job 12 is pending (Resources)"), std::string::npos);
  a.scheduled_message = plan.waiting[0].second;
  EXPECT_TRUE(plan_group(state).waiting.empty());  // told once
  state.jobs = {{12, job(12, "RUNNING", "k1")}};
  plan = plan_group(state);
  EXPECT_EQ(plan.place, std::vector<int64_t>{12});
  EXPECT_TRUE(plan.submit.empty());
}

TEST(PlanGroup, AJobNotYetLookedUpIsLeftAlone) {
  Pod a = pod("a", "12");
  const GroupPlan plan = plan_group({{&a}, 1, {}, {}});
  EXPECT_TRUE(plan.remove.empty());
  EXPECT_TRUE(plan.submit.empty());
  EXPECT_TRUE(plan.cancel.empty());
}

TEST(PlanGroup, AnEndedJobDeletesItsRunningPodsAndLetsThemGo) {
  Pod a = pod("a", "12");
  a.node_name = "k1";
  a.phase = "Running";
  Pod done = pod("b", "12");
  done.phase = "Succeeded";
  GroupState state{{&a, &done}, 1, {{12, job(12, "TIMEOUT")}}, {}};
  GroupPlan plan = plan_group(state);
  ASSERT_EQ(plan.remove.size(), 1U);
  EXPECT_EQ(plan.remove[0].first, &a);
  EXPECT_EQ(plan.remove[0].second, "Slurm job 12 ended TIMEOUT");
  EXPECT_EQ(plan.release.size(), 2U);
  state.jobs[12].known = false;
  plan = plan_group(state);
  EXPECT_EQ(plan.remove[0].second, "Slurm no longer has job 12");
}

TEST(PlanGroup, PodsThatEndedOrWereDeletedCancelTheJob) {
  Pod a = pod("a", "12");
  a.phase = "Succeeded";
  Pod b = pod("b", "12");
  b.phase = "Failed";
  GroupState state{{&a, &b}, 2, {{12, job(12, "RUNNING", "k[1-2]")}}, {}};
  GroupPlan plan = plan_group(state);
  ASSERT_EQ(plan.cancel.size(), 1U);
  EXPECT_EQ(plan.cancel[0], (std::pair<int64_t, std::string>{12, "its pods ended"}));
  EXPECT_EQ(plan.release.size(), 2U);
  Pod c = pod("c", "12");
  c.meta.deleting = true;  // never bound
  state.pods = {&c};
  plan = plan_group(state);
  EXPECT_EQ(plan.cancel[0].second, "its pods were deleted");
}

TEST(PlanGroup, APodBeingDeletedKeepsItsJobUntilItsKubeletReportsItsEnd) {
  Node k1;
  k1.meta.name = "k1";
  k1.ready = true;
  Pod a = pod("a", "12");
  a.node_name = "k1";
  a.phase = "Running";
  a.meta.deleting = true;
  GroupState state{{&a}, 1, {{12, job(12, "RUNNING", "k1")}}, {{"k1", &k1}}};
  EXPECT_TRUE(plan_group(state).cancel.empty());
  k1.ready = false;  // its kubelet is gone: it will never report
  EXPECT_EQ(plan_group(state).cancel.size(), 1U);
}

TEST(PlanGroup, AfterARestartAJobThatClaimsUnlabelledPodsAdoptsThem) {
  Pod a = pod("a");
  JobView claimed = job(30, "PENDING");
  claimed.job.admin_comment = JobClaim{"ml/Pod/a", {"ml/a"}}.encode();
  GroupState state{{&a}, 1, {{30, claimed}}, {}};
  GroupPlan plan = plan_group(state);
  ASSERT_EQ(plan.adopt.size(), 1U);
  EXPECT_EQ(plan.adopt[0].second, 30);
  EXPECT_TRUE(plan.submit.empty());
  state.pods.clear();
  plan = plan_group(state);
  ASSERT_EQ(plan.cancel.size(), 1U);
  EXPECT_EQ(plan.cancel[0].first, 30);
}

TEST(PlanGroup, APodOfARunningGangWhoseLabelIsNotSeenYetIsAdoptedNotSubmittedAgain) {
  Pod a = pod("a", "40");
  Pod b = pod("b");  // labelled a moment ago; the cache does not show it yet
  JobView gang = job(40, "PENDING");
  gang.job.admin_comment = JobClaim{"ml/Job/g", {"ml/a", "ml/b"}}.encode();
  const GroupPlan plan = plan_group({{&a, &b}, 2, {{40, gang}}, {}});
  EXPECT_TRUE(plan.submit.empty()) << "the gang's second pod was submitted as a job of its own";
  ASSERT_EQ(plan.adopt.size(), 1U);
  EXPECT_EQ(plan.adopt[0], (std::pair<const Pod*, int64_t>{&b, 40}));
  EXPECT_TRUE(plan.cancel.empty());
}

Node bridge_node(const std::string& name) {
  Node n;
  n.meta.name = name;
  n.meta.labels = {{std::string(kLabelExternalNode), "true"}};
  n.ready = true;
  n.allocatable = {4000, int64_t{8} << 30, 2};
  return n;
}

slurm::Node slurm_node(const std::string& name, std::vector<std::string> state,
                       const std::string& reason = "") {
  slurm::Node n;
  n.name = name;
  n.state = std::move(state);
  n.reason = reason;
  return n;
}

TEST(PlanNode, ALabelledNodeIsRegisteredTaintedAndItsCordonDrainsIt) {
  Node k1 = bridge_node("k1");
  k1.annotations[std::string(kAnnotationTopology)] = "topo-switch:s1";
  k1.address = "10.0.0.7";
  NodePlan plan = plan_node({&k1, nullptr, "slurm-bridge-scheduler", "slurm-bridge"});
  EXPECT_EQ(plan.create,
            "NodeName=k1 NodeAddr=10.0.0.7 State=EXTERNAL CPUs=4 RealMemory=8192 "
            "Features=slurm-bridge Gres=gpu:2 GresConf=name=gpu,count=2 Topology=topo-switch:s1");
  EXPECT_TRUE(plan.taint);
  k1.taints = {{std::string(kTaintManagedNode), "slurm-bridge-scheduler", "NoExecute"}};
  k1.unschedulable = true;
  const slurm::Node idle = slurm_node("k1", {"IDLE", "EXTERNAL"});
  plan = plan_node({&k1, &idle, "s", "p"});
  EXPECT_EQ(plan.drain, "slurm-bridge: Kubernetes Node k1 is cordoned");
  EXPECT_FALSE(plan.taint);
  k1.unschedulable = false;
  const slurm::Node ours = slurm_node("k1", {"IDLE", "DRAIN", "EXTERNAL"}, *plan.drain);
  plan = plan_node({&k1, &ours, "s", "p"});
  EXPECT_TRUE(plan.undrain);
}

TEST(PlanNode, ASlurmDrainCordonsTheNodeAndItsEndUncordonsIt) {
  Node k1 = bridge_node("k1");
  k1.taints = {{std::string(kTaintManagedNode), "s", "NoExecute"}};
  const slurm::Node admin = slurm_node("k1", {"IDLE", "DRAIN", "EXTERNAL"}, "bad dimm");
  NodePlan plan = plan_node({&k1, &admin, "s", "p"});
  EXPECT_EQ(plan.cordon, "bad dimm");
  EXPECT_FALSE(plan.undrain);
  k1.unschedulable = true;
  k1.annotations[std::string(kAnnotationCordonedBy)] = "bad dimm";
  EXPECT_FALSE(plan_node({&k1, &admin, "s", "p"}).uncordon);
  const slurm::Node resumed = slurm_node("k1", {"IDLE", "EXTERNAL"});
  EXPECT_TRUE(plan_node({&k1, &resumed, "s", "p"}).uncordon);
}

TEST(PlanNode, ANodeThatLeavesIsDeletedFromSlurmOnceItsJobsEnd) {
  const slurm::Node busy = slurm_node("k1", {"ALLOCATED", "EXTERNAL"});
  NodePlan plan = plan_node({nullptr, &busy, "s", "p"});
  EXPECT_FALSE(plan.remove);
  EXPECT_EQ(plan.drain, "slurm-bridge: Kubernetes Node k1 left the bridge");
  const slurm::Node idle = slurm_node("k1", {"IDLE", "DRAIN", "EXTERNAL"});
  EXPECT_TRUE(plan_node({nullptr, &idle, "s", "p"}).remove);
  const slurm::Node slurmd = slurm_node("n1", {"IDLE", "DYNAMIC_NORM"});
  EXPECT_FALSE(plan_node({nullptr, &slurmd, "s", "p"}).remove);  // not an external node
}

}  // namespace
}  // namespace tightrope::bridge
