// Health-check remediation (docs/health.md): the rules, then the NodeSet's plan step by step —
// drain within the budget, replace once idle, quarantine a Node that keeps failing, verify the
// replacement and undrain it — and what it never does (an administrator's drain, an outage).
#include "operator/remediation.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "nodeset_bed.hpp"
#include "operator/conditions.hpp"
#include "operator/nodeset_plan.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;
using testing::action_for;
using testing::all_of;
using testing::Bed;
using testing::kNow;

int64_t unix_of(const char* rfc3339) {
  return std::chrono::duration_cast<std::chrono::seconds>(
             kube::parse_time(rfc3339)->time_since_epoch())
      .count();
}

std::string extra_with(bool ok, int64_t at, const std::string& check = "gpus",
                       const std::string& message = "3 GPUs present, Slurm registered 4") {
  health::Report report{ok, at, {}, "hc-uid", {}, {}};
  if (!ok) {
    report.failed.push_back({check, message});
  }
  return health::with_report(R"({"tightrope.slurm.net/host":{"cgroup":"v1"}})", report);
}

HealthPolicy policy(bool replace, json max_unhealthy = 1, int64_t quarantine_after = 2) {
  HealthPolicy p{"gpu", "hc-uid", {}, std::nullopt, {}};
  p.remediation.max_unhealthy = std::move(max_unhealthy);
  p.remediation.replace = replace;
  p.remediation.quarantine_after = quarantine_after;
  p.remediation.window_seconds = 86400;
  return p;
}

const int64_t kAfterPods = unix_of("2026-12-03T11:30:00Z");
const int64_t kJustNow = unix_of("2026-12-03T11:59:55Z");  // kNow less 5 s

// cpu-1 made again at 11:50: its Slurm node keeps `state`, `reason` and the failing report of
// the pod before.
void replace_cpu_1(Bed& bed, std::vector<std::string> state, const std::string& reason) {
  bed.world.pods[1].uid = "uid-new";
  bed.world.pods[1].created = "2026-12-03T11:50:00Z";
  bed.nodes["cpu-1"].state = std::move(state);
  bed.nodes["cpu-1"].reason = reason;
  bed.nodes["cpu-1"].extra = extra_with(false, kAfterPods);
}

// The NodeSet's WorkersHealthy after `plan`.
api::Condition workers_healthy(const Bed& bed, const NodeSetPlan& plan) {
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  const api::Condition* c = find_condition(verdict.conditions, "WorkersHealthy");
  return c != nullptr ? *c : api::Condition{};
}

TEST(Remediation, OnlyAReportThePodsOwnSlurmdFoundWithTheseChecksSpeaksForIt) {
  const HealthPolicy p = policy(true);
  slurm::Node node;
  node.extra = extra_with(false, unix_of("2026-12-03T09:00:00Z"));
  EXPECT_FALSE(pod_report(node, "2026-12-03T10:00:00Z", p)) << "the pod before it found that";
  node.extra = extra_with(false, unix_of("2026-12-03T10:00:00Z"));
  ASSERT_TRUE(pod_report(node, "2026-12-03T10:00:00Z", p));
  HealthPolicy remade = p;
  remade.uid = "hc-uid-2";
  EXPECT_FALSE(pod_report(node, "2026-12-03T10:00:00Z", remade))
      << "the checks of a HealthCheck deleted since found that";
  node.extra = R"({"tightrope.slurm.net/host":{}})";
  EXPECT_FALSE(pod_report(node, "2026-12-03T10:00:00Z", p)) << "no report yet";
}

TEST(Remediation, TheTaintNamesTheCheckAsALabelValue) {
  EXPECT_EQ(taint_value("gpus"), "gpus");
  EXPECT_EQ(taint_value("script:ib-ports"), "script-ib-ports");
  EXPECT_EQ(taint_value("script:fan!"), "script-fan");
  EXPECT_EQ(taint_value(std::string(100, 'a')).size(), 63U);
}

TEST(Remediation, ReasonsNameTheFirstCheckAndCountTheRest) {
  health::Report r{false, 1,  {{"gpus", "3 GPUs present"}, {"mounts", "/home is not mounted"}},
                   "",    {}, {}};
  EXPECT_EQ(health_reason(r), "healthcheck: gpus: 3 GPUs present (and 1 more)");
  r.failed = {{"script:fan", "fan 3\nstopped"}};
  EXPECT_EQ(health_reason(r), "healthcheck: script:fan: fan 3 stopped");
  EXPECT_EQ(health_step("slurm-operator: Pod (hpc/cpu-0) is pending termination for healthcheck: "
                        "gpus: x"),
            "replacing");
  EXPECT_EQ(health_step("slurm-operator: " + verifying_reason("hpc/cpu-0")), "verifying");
  EXPECT_EQ(health_step("slurm-operator: healthcheck: gpus: x"), "drained");
}

TEST(Remediation, ANodeKeepsEachPodsFailureOnceAndIsQuarantinedAtTheThreshold) {
  kube::Document node;
  node.meta.name = "k8s-1";
  node.meta.resource_version = "41";
  node.doc = {{"metadata", {{"name", "k8s-1"}}},
              {"spec", {{"taints", json::array({{{"key", "other"}, {"effect", "NoExecute"}}})}}}};
  api::Remediation r{1, true, 2, 3600};
  const int64_t now = unix_of("2026-12-03T12:00:00Z");
  auto first = record_failure(node, {"hpc/cpu-1", "u1", "gpus", now - 60}, r, now);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->records);
  EXPECT_FALSE(first->quarantines);
  EXPECT_EQ(first->patch["metadata"]["resourceVersion"], "41");
  EXPECT_FALSE(first->patch.contains("spec"));
  node.doc["metadata"]["annotations"] =
      first->patch["metadata"]["annotations"];  // as the Node has it after the patch
  EXPECT_FALSE(record_failure(node, {"hpc/cpu-1", "u1", "gpus", now - 30}, r, now))
      << "the same pod counts once";

  const auto second = record_failure(node, {"hpc/cpu-1", "u2", "gpus", now}, r, now);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->quarantines);
  EXPECT_EQ(second->counted, 2);
  const json& taints = second->patch["spec"]["taints"];
  ASSERT_EQ(taints.size(), 2U) << "the Node's other taints stay";
  EXPECT_EQ(taints[1]["key"], api::kTaintUnhealthy);
  EXPECT_EQ(taints[1]["effect"], "NoSchedule");

  // A failure outside the window does not count.
  EXPECT_EQ(failures_within(api::decode_node_failures(node.doc), now + 3600, 3600), 0);
  node.doc["metadata"]["annotations"][api::kAnnotationHealthFailures] = "not json";
  EXPECT_TRUE(api::decode_node_failures(node.doc).empty());
}

TEST(Remediation, ANodeKeepsItsNewestFailuresOnly) {
  kube::Document node;
  node.doc = {{"metadata", {{"name", "k8s-1"}}}, {"spec", json::object()}};
  api::Remediation r{1, true, 100, 86400};
  for (int i = 0; i < 20; ++i) {
    const auto rec =
        record_failure(node, {"hpc/cpu-1", "u" + std::to_string(i), "gpus", 1000 + i}, r, 1100);
    ASSERT_TRUE(rec);
    node.doc["metadata"]["annotations"] = rec->patch["metadata"]["annotations"];
  }
  const auto kept = api::decode_node_failures(node.doc);
  ASSERT_EQ(kept.size(), kNodeFailuresKept);
  EXPECT_EQ(kept.back().uid, "u19");
  EXPECT_EQ(kept.front().uid, "u4");
}

// ---- The NodeSet's plan

TEST(RemediationPlan, AFailingCheckDrainsItsNodeWithAReasonThatNamesIt) {
  Bed bed(2, 2);
  bed.world.health = policy(false);
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty()) << to_string(plan.actions.front().change);
  ASSERT_TRUE(plan.health);
  EXPECT_EQ(workers_healthy(bed, plan).reason, "AwaitingReports");
  bed.nodes["cpu-0"].extra = extra_with(true, kAfterPods);
  EXPECT_EQ(workers_healthy(bed, bed.plan()).message,
            "no worker's report fails (HealthCheck gpu); 1 of 2 workers have not reported yet");

  bed.nodes["cpu-1"].extra = extra_with(false, kAfterPods);
  plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-1");
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: healthcheck: gpus: 3 GPUs present, Slurm registered 4");
  const Action* drain = action_for(plan, "cpu-1");
  ASSERT_NE(drain, nullptr);
  EXPECT_EQ(drain->events.at(0).reason, "HealthCheckFailed");
  // The failure is kept on the pod's Node, with its event.
  const Action* recorded = action_for(plan, "node/k8s-1");
  ASSERT_NE(recorded, nullptr);
  const auto& patch = std::get<PatchKubeNode>(recorded->change);
  const auto failures = api::decode_node_failures(
      json{{"metadata", {{"annotations", patch.patch["metadata"]["annotations"]}}}});
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_EQ(failures[0].pod, "hpc/cpu-1");
  EXPECT_EQ(failures[0].check, "gpus");

  const api::Condition c = workers_healthy(bed, plan);
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "Remediating");
  EXPECT_EQ(c.message,
            "cpu-1 (drained: healthcheck: gpus: 3 GPUs present, Slurm registered 4) "
            "(HealthCheck gpu, at most 1 at once)");

  // The fault clears (replace: false): the same pod's next report passes, the drain goes.
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = drains[0].reason;
  bed.nodes["cpu-1"].extra = extra_with(true, kAfterPods + 60);
  plan = bed.plan();
  const auto undrains = all_of<UndrainSlurmNode>(plan);
  ASSERT_EQ(undrains.size(), 1U);
  EXPECT_EQ(action_for(plan, "cpu-1")->events.at(0).reason, "HealthCheckPassed");
}

TEST(RemediationPlan, AReportOfThePodBeforeSaysNothingOfThisOne) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  bed.nodes["cpu-0"].extra = extra_with(false, unix_of("2026-12-03T09:00:00Z"));
  EXPECT_TRUE(bed.plan().actions.empty());
}

TEST(RemediationPlan, WithReplaceThePodGoesOnceItsJobHasEnded) {
  Bed bed(2, 2);
  bed.world.health = policy(true);
  bed.nodes["cpu-1"].extra = extra_with(false, kAfterPods);
  bed.nodes["cpu-1"].state = {"ALLOCATED"};
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-1) is pending termination for healthcheck: gpus: 3 GPUs "
            "present, Slurm registered 4");
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  const Action* drain = action_for(plan, "cpu-1");
  ASSERT_NE(drain, nullptr);
  ASSERT_EQ(drain->events.size(), 2U);
  EXPECT_EQ(drain->events[0].reason, "HealthCheckFailed");
  EXPECT_EQ(drain->events[0].message,
            "Slurm node cpu-1 of pod cpu-1 on Node k8s-1 failed its checks (HealthCheck gpu): "
            "healthcheck: gpus: 3 GPUs present, Slurm registered 4; drained, its pod is replaced "
            "once no job runs on it");

  // Drained, a job still runs: nothing more.
  bed.nodes["cpu-1"].state = {"ALLOCATED", "DRAIN"};
  bed.nodes["cpu-1"].reason = drains[0].reason;
  plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());

  // The job has ended: the pod goes, and is made again under its name.
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  plan = bed.plan();
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-1");
}

TEST(RemediationPlan, TheReplacementStaysDrainedUntilItsOwnChecksPass) {
  Bed bed(2, 2);
  bed.world.health = policy(true);
  // cpu-1 is the new pod; its node keeps the drain and the report of the pod before.
  replace_cpu_1(bed, {"IDLE", "DRAIN"},
                "slurm-operator: Pod (hpc/cpu-1) is pending termination for healthcheck: gpus: x");
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: healthcheck: awaiting the first checks of pod hpc/cpu-1");
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_EQ(plan.health->remediating, std::vector<std::string>{"cpu-1 (verifying pod cpu-1)"});

  // Its first report passes: undrained.
  bed.nodes["cpu-1"].reason = drains[0].reason;
  bed.nodes["cpu-1"].extra = extra_with(true, unix_of("2026-12-03T11:51:00Z"));
  plan = bed.plan();
  ASSERT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  EXPECT_EQ(action_for(plan, "cpu-1")->events.at(0).reason, "HealthCheckPassed");
  EXPECT_EQ(workers_healthy(bed, plan).reason, "ChecksPass");
}

TEST(RemediationPlan, AReplacementFailingAsItsPredecessorDidOnAnotherNodeIsKeptAndNoNodeCharged) {
  Bed bed(2, 2);
  bed.world.health = policy(true);
  replace_cpu_1(bed, {"IDLE", "DRAIN"},
                "slurm-operator: healthcheck: awaiting the first checks of pod hpc/cpu-1");
  bed.nodes["cpu-1"].extra = extra_with(false, unix_of("2026-12-03T11:51:00Z"));
  bed.world.failures_elsewhere["cpu-1"] = {
      {"k8s-0", api::NodeFailure{"hpc/cpu-1", "uid-1", "gpus", kAfterPods}},
      {"k8s-2", api::NodeFailure{"hpc/cpu-1", "uid-0", "gpus", kAfterPods - 600}}};
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty()) << "another replacement would fail as well";
  EXPECT_EQ(action_for(plan, "node/k8s-1"), nullptr) << "its Node is not charged";
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: healthcheck: gpus: 3 GPUs present, Slurm registered 4");
  EXPECT_EQ(action_for(plan, "cpu-1")->events.at(0).message,
            "Slurm node cpu-1 of pod cpu-1 on Node k8s-1 failed its checks (HealthCheck gpu): "
            "healthcheck: gpus: 3 GPUs present, Slurm registered 4; drained, not replaced: its "
            "predecessor (uid uid-1) failed gpus on Node k8s-0 at 2026-12-03T11:30:00Z, so the "
            "fault follows the pod (its image, its spec, or a check that cannot pass in it), not "
            "a Node, and no Node is charged with it; mend the cause, then delete the pod");
  EXPECT_EQ(plan.health->remediating,
            std::vector<std::string>{"cpu-1 (drained, the fault follows the pod: healthcheck: "
                                     "gpus: 3 GPUs present, Slurm registered 4)"});

  // Another check failed there, or the same one outside the window: the Node may be to blame.
  bed.world.failures_elsewhere["cpu-1"] = {
      {"k8s-0", api::NodeFailure{"hpc/cpu-1", "uid-1", "memory", kAfterPods}},
      {"k8s-2", api::NodeFailure{"hpc/cpu-1", "uid-0", "gpus", kAfterPods - 86400}}};
  plan = bed.plan();
  EXPECT_NE(action_for(plan, "node/k8s-1"), nullptr);
  EXPECT_EQ(all_of<DeletePod>(plan).size(), 1U);
}

TEST(RemediationPlan, TheRecordOfAReplacedPodStaysForItsReplacementsVerification) {
  Bed bed(2, 1);
  bed.world.health = policy(true);
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  slurm::Node gone;
  gone.name = "cpu-1";
  gone.state = {"DOWN", "DRAIN", "DYNAMIC_NORM"};
  gone.reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for healthcheck: gpus: x";
  gone.comment = build::pod_info(bed.world.nodeset, "cpu-1", "k8s-1").dump();
  bed.nodes["cpu-1"] = gone;
  // Its replacement is not made in this plan (it waits for something): the record stays anyway.
  bed.world.pods_wait_for = Readiness{false, "WaitingForSshKeys", "x"};
  EXPECT_TRUE(all_of<DeleteSlurmNode>(bed.plan()).empty());
  bed.nodes["cpu-1"].reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for update";
  EXPECT_EQ(all_of<DeleteSlurmNode>(bed.plan()).size(), 1U) << "an update's record goes";
  bed.nodes["cpu-1"].reason = gone.reason;
  bed.world.nodeset.spec.replicas = 1;
  EXPECT_EQ(all_of<DeleteSlurmNode>(bed.plan()).size(), 1U) << "no pod comes back: pruned";
}

TEST(RemediationPlan, TheReplacementTakesTheNameOfThePodItReplacesNotTheLowestFree) {
  Bed bed(2, 3);  // cpu-0 went in a scale-in; cpu-2 was replaced for a failed check
  bed.world.pods.erase(bed.world.pods.begin());
  bed.nodes.erase("cpu-0");
  bed.world.pods.pop_back();
  bed.nodes["cpu-2"].state = {"DOWN", "DRAIN", "DYNAMIC_NORM"};
  bed.nodes["cpu-2"].reason =
      "slurm-operator: Pod (hpc/cpu-2) is pending termination for healthcheck: gpus: x";
  bed.world.health = policy(true);
  const auto creates = all_of<CreatePod>(bed.plan());
  ASSERT_EQ(creates.size(), 1U);
  EXPECT_EQ(creates[0].name, "cpu-2");
}

TEST(RemediationPlan, TheOldPodsPreStopReasonDoesNotLetTheReplacementSkipItsChecks) {
  Bed bed(2, 2);
  bed.world.health = policy(true);
  replace_cpu_1(bed, {"DOWN", "DRAIN"}, "slurm-operator: Pod is terminating");
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: healthcheck: awaiting the first checks of pod hpc/cpu-1");
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<ResumeSlurmNode>(plan).empty());
}

TEST(RemediationPlan, ACheckThatFailsEverywhereStopsAtTheBudget) {
  Bed bed(4, 4);
  bed.world.health = policy(false, "50%");
  for (auto& [name, node] : bed.nodes) {
    node.extra = extra_with(false, kAfterPods);
  }
  NodeSetPlan plan = bed.plan();
  EXPECT_EQ(all_of<DrainSlurmNode>(plan).size(), 2U);
  ASSERT_TRUE(plan.health);
  EXPECT_EQ(plan.health->budget, 2);
  EXPECT_EQ(plan.health->waiting.size(), 2U);
  const api::Condition c = workers_healthy(bed, plan);
  EXPECT_EQ(c.reason, "BudgetExhausted");
  EXPECT_NE(c.message.find("2 of at most 2 nodes are in remediation"), std::string::npos)
      << c.message;

  // Drained ones count against the budget in the next plan too: no more drains.
  for (const auto& d : all_of<DrainSlurmNode>(plan)) {
    bed.nodes[d.node].state = {"IDLE", "DRAIN"};
    bed.nodes[d.node].reason = d.reason;
  }
  plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_EQ(plan.health->waiting.size(), 2U);
}

TEST(RemediationPlan, ASecondFailureOnANodeQuarantinesIt) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  auto node = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  node->meta.resource_version = "7";
  node->doc["metadata"]["annotations"][api::kAnnotationHealthFailures] =
      json::array({{{"pod", "hpc/cpu-0"},
                    {"uid", "uid-before"},
                    {"check", "gpus"},
                    {"at", kAfterPods - 3600}}})
          .dump();
  bed.world.kube_nodes["k8s-0"] = node;
  bed.nodes["cpu-0"].extra = extra_with(false, kAfterPods);
  const NodeSetPlan plan = bed.plan();
  const Action* patch = action_for(plan, "node/k8s-0");
  ASSERT_NE(patch, nullptr);
  const auto& change = std::get<PatchKubeNode>(patch->change);
  EXPECT_EQ(change.patch["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(change.patch["spec"]["taints"][0]["key"], api::kTaintUnhealthy);
  ASSERT_EQ(patch->events.size(), 1U);
  EXPECT_EQ(patch->events[0].reason, "NodeQuarantined");
  EXPECT_EQ(change.patch["spec"]["taints"][0]["value"], "gpus");
}

TEST(RemediationPlan, NothingBeginsWhileSlurmCannotBeAskedAndAnAdministratorsDrainStays) {
  Bed bed(1, 1);
  bed.world.health = policy(false);
  bed.nodes["cpu-0"].extra = extra_with(false, kAfterPods);
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<PatchKubeNode>(plan).empty());
  EXPECT_FALSE(plan.health);

  bed.world.slurm.health = SlurmHealth::kSynced;
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "bad DIMM, ticket 4711";
  plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
}

TEST(RemediationPlan, ANodeSetThatFollowsNoHealthCheckLosesItsConditionAndItsChecksDrain) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "slurm-operator: healthcheck: gpus: x";
  bed.world.conditions.push_back({"WorkersHealthy", "False", "Remediating", "", 3, ""});
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  EXPECT_EQ(find_condition(verdict.conditions, "WorkersHealthy"), nullptr);
}

// ---- Signals from outside

// k8s-0 with `condition` True since 11:40, and the quarantine taint with `tainted`.
// What a plan's patch of a Node says: the quarantine taint's value, the failures it keeps.
std::string quarantined_for(const PatchKubeNode& change) {
  return change.patch["spec"]["taints"][0].value("value", "");
}
std::vector<api::NodeFailure> recorded_failures(const PatchKubeNode& change) {
  return api::decode_node_failures(
      json{{"metadata", {{"annotations", change.patch["metadata"]["annotations"]}}}});
}

void node_reports(Bed& bed, const std::string& condition, bool tainted) {
  auto node = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  node->doc["status"]["conditions"] =
      json::array({{{"type", "Ready"}, {"status", "True"}},
                   {{"type", condition},
                    {"status", "True"},
                    {"reason", "XidError"},
                    {"message", "GPU 3: Xid 79, fallen off the bus"},
                    {"lastTransitionTime", "2026-12-03T11:40:00Z"}}});
  if (tainted) {
    node->doc["spec"]["taints"] =
        json::array({{{"key", api::kTaintUnhealthy}, {"effect", "NoSchedule"}}});
  }
  bed.world.kube_nodes["k8s-0"] = node;
}

TEST(SignalPlan, ANamedNodeConditionFailsItsWorkersAndQuarantinesTheNodeAtOnce) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  node_reports(bed, "GpuXidError", false);
  EXPECT_TRUE(bed.plan().actions.empty()) << "a condition the HealthCheck does not name";

  bed.world.health->signals.node_conditions = {"GpuXidError"};
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-0) is pending termination for healthcheck: "
            "node-condition:GpuXidError: GPU 3: Xid 79, fallen off the bus");
  const Action* patch = action_for(plan, "node/k8s-0");
  ASSERT_NE(patch, nullptr);
  const auto& change = std::get<PatchKubeNode>(patch->change);
  EXPECT_EQ(quarantined_for(change), "node-condition-GpuXidError")
      << "quarantineAfter 2, yet at once: the Node's own word";
  ASSERT_EQ(patch->events.size(), 1U);
  EXPECT_EQ(patch->events[0].message,
            "Tainted Node k8s-0 tightrope.slurm.net/unhealthy:NoSchedule: the Node itself "
            "reports node-condition:GpuXidError; new pods go elsewhere until an administrator "
            "removes the taint");
  const auto failures = recorded_failures(change);
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_EQ(failures[0].at, unix_of("2026-12-03T11:40:00Z"));
}

TEST(SignalPlan, ANamedDeviceTaintOnItsNodeFailsTheWorkerAndQuarantinesTheNodeAtOnce) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  bed.world.device_taints["k8s-0"] = {{"gpu.example.com", "k8s-0", "gpu-3", "gpu.example.com/xid",
                                       "79", "NoSchedule", "2026-12-07T10:00:00Z", ""},
                                      {"gpu.example.com", "k8s-0", "gpu-1",
                                       "example.com/maintenance", "hbm", "None", "", "gpu-1-hbm"}};
  EXPECT_TRUE(bed.plan().actions.empty()) << "taints the HealthCheck does not name";

  bed.world.health->signals.device_taints = {"example.com/maintenance"};
  auto drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-0) is pending termination for healthcheck: "
            "device-taint:example.com/maintenance: gpu.example.com gpu-1: hbm (None), by "
            "DeviceTaintRule gpu-1-hbm");

  bed.world.health->signals.device_taints = {"*"};
  const NodeSetPlan plan = bed.plan();
  drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-0) is pending termination for healthcheck: "
            "device-taint:gpu.example.com/xid: gpu.example.com gpu-3: 79 (NoSchedule)");
  const Action* patch = action_for(plan, "node/k8s-0");
  ASSERT_NE(patch, nullptr);
  const auto& change = std::get<PatchKubeNode>(patch->change);
  EXPECT_EQ(quarantined_for(change), "device-taint-gpu.example.com-xid")
      << "quarantineAfter 2, yet at once: a device of the machine";
  const auto failures = recorded_failures(change);
  ASSERT_EQ(failures.size(), 1U);
  EXPECT_EQ(failures[0].at, unix_of("2026-12-07T10:00:00Z")) << "when the taint was added";
}

TEST(SignalPlan, AWorkerThatStaysOnAQuarantinedNodeIsDrainedNotReplacedOntoTheSameFault) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  bed.world.health->signals.node_conditions = {"GpuXidError"};
  node_reports(bed, "GpuXidError", true);
  // Quarantined a moment ago: the pod still goes, its replacement lands elsewhere.
  EXPECT_EQ(all_of<DrainSlurmNode>(bed.plan()).at(0).reason.find("pending termination"),
            std::string("slurm-operator: Pod (hpc/cpu-0) is ").size());
  // Its pods tolerate the taint: a replacement would come back to the same fault.
  bed.world.nodeset.spec.template_.spec["tolerations"] =
      json::array({{{"key", api::kTaintUnhealthy}, {"operator", "Exists"}}});
  const std::string revision =
      build::nodeset_revision_name(bed.world.nodeset, build::NodeSetInputs{*bed.world.controller});
  bed.world.revisions = {{1, revision}};
  bed.world.pods[0].revision = revision;
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: healthcheck: node-condition:GpuXidError: GPU 3: Xid 79, fallen off "
            "the bus");
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
}

TEST(SignalPlan, ACordonRequestIsAFailedCheckOnlyWhenTheHealthCheckSaysSo) {
  Bed bed(1, 1);
  bed.world.health = policy(true);
  bed.world.pods[0].cordon_request = "NVSentinel: GPU 2 row remap pending";
  auto drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: NVSentinel: GPU 2 row remap pending")
      << "without the signal: drained while present, as Slinky does";
  bed.world.health->signals.pod_cordon_requested = true;
  drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-0) is pending termination for healthcheck: "
            "cordon-requested: NVSentinel: GPU 2 row remap pending");
}

// ---- Active checks

HealthPolicy with_active_checks(json max_concurrent = 1) {
  HealthPolicy p = policy(true);
  api::HealthCheck h;
  h.spec.active.emplace().max_concurrent = std::move(max_concurrent);
  api::apply_defaults(h);
  p.active = h.spec.active;
  return p;
}

std::string active_extra(const std::string& extra, bool ok, int64_t at,
                         const HealthPolicy& under = with_active_checks()) {
  health::Report report{ok, at, {}, active_source(under), {{"cpuGflops", 41.5}}, {}};
  if (!ok) {
    report.failed.push_back({"active:memory-bandwidth", "812.0 MB/s, below 10000"});
  }
  return health::with_report(extra, report, health::kActiveExtraKey);
}

TEST(ActiveCheckPlan, AnIdleWorkerNeverCheckedIsCheckedInItsOwnReservationWithinTheBudget) {
  Bed bed(2, 2);
  bed.world.health = with_active_checks();
  bed.nodes["cpu-0"].extra = extra_with(true, kAfterPods);
  bed.nodes["cpu-1"].extra = extra_with(true, kAfterPods);
  bed.nodes["cpu-0"].partitions = {"cpu"};
  NodeSetPlan plan = bed.plan();
  const auto starts = all_of<StartActiveCheck>(plan);
  ASSERT_EQ(starts.size(), 1U) << "maxConcurrent 1";
  const StartActiveCheck& c = starts[0];
  EXPECT_EQ(c.node, "cpu-0");
  EXPECT_EQ(c.reservation.name, "tightrope-check-cpu-0");
  EXPECT_EQ(c.reservation.nodes, "cpu-0");
  EXPECT_EQ(c.reservation.users, std::vector<std::string>{"slurm"});
  EXPECT_EQ(c.reservation.start_time, kNow);
  EXPECT_EQ(c.reservation.end_time, kNow + std::chrono::minutes(3)) << "120 s and a minute";
  EXPECT_EQ(c.job.reservation, "tightrope-check-cpu-0");
  EXPECT_EQ(c.job.partition, "cpu");
  EXPECT_EQ(c.job.required_nodes, std::vector<std::string>{"cpu-0"});
  EXPECT_EQ(c.job.time_limit, std::chrono::minutes(2));
  EXPECT_TRUE(c.job.exclusive);
  EXPECT_EQ(c.job.script.rfind("#!/bin/sh\nexec /usr/local/sbin/tightrope-health --active '{", 0),
            0U)
      << "the checks on its command line, not the mounted checks.json a minute behind";
  EXPECT_NE(c.job.script.find(R"("source":"hc-uid/)"), std::string::npos)
      << "the HealthCheck's uid and a digest of its spec.active";
  EXPECT_EQ(action_for(plan, "cpu-0")->events.at(0).reason, "ActiveCheckStarted");
  EXPECT_EQ(plan.health->steps.at("checking"), 1);
  EXPECT_EQ(workers_healthy(bed, plan).message,
            "no worker's report fails (HealthCheck gpu); active checks under way on 1 worker");

  // Started, not shown yet: it counts, and nothing more starts.
  bed.world.slurm.checks_in_flight = {{"cpu-0", "tightrope-check-cpu-0"}};
  EXPECT_TRUE(all_of<StartActiveCheck>(bed.plan()).empty());
  // Shown: the same.
  bed.world.slurm.checks_in_flight.clear();
  bed.nodes["cpu-0"].reservation = "tightrope-check-cpu-0";
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  EXPECT_TRUE(all_of<StartActiveCheck>(bed.plan()).empty());

  // The job has reported and ended: the operator ends the reservation (Slurm refuses the job).
  bed.nodes["cpu-0"].state = {"IDLE"};
  bed.nodes["cpu-0"].extra =
      active_extra(bed.nodes["cpu-0"].extra, true, unix_of("2026-12-03T11:59:00Z"));
  plan = bed.plan();
  const auto released = all_of<ReleaseReservation>(plan);
  ASSERT_EQ(released.size(), 1U);
  EXPECT_EQ(released[0].name, "tightrope-check-cpu-0");
  EXPECT_EQ(action_for(plan, "cpu-0")->events.at(0).message,
            "Active checks of cpu-0 (pod cpu-0) passed: cpuGflops 42");
  EXPECT_TRUE(all_of<StartActiveCheck>(plan).empty()) << "cpu-0's reservation still counts";
  // Gone: the other node's turn; cpu-0's next in a day.
  bed.nodes["cpu-0"].reservation.clear();
  plan = bed.plan();
  ASSERT_EQ(all_of<StartActiveCheck>(plan).size(), 1U);
  EXPECT_EQ(all_of<StartActiveCheck>(plan)[0].node, "cpu-1");
  ASSERT_TRUE(plan.look_again_at);
  EXPECT_EQ(*plan.look_again_at, *kube::parse_time("2026-12-04T11:59:00Z"));
}

TEST(ActiveCheckPlan, ABusyDrainedOrReservedNodeWaitsAndNothingStartsWhileSlurmIsAway) {
  Bed bed(3, 3);
  bed.world.health = with_active_checks(3);
  bed.nodes["cpu-0"].state = {"MIXED"};
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = "hardware check";
  bed.nodes["cpu-2"].reservation = "maintenance";
  EXPECT_TRUE(all_of<StartActiveCheck>(bed.plan()).empty());
  bed.nodes["cpu-2"].reservation.clear();
  EXPECT_EQ(all_of<StartActiveCheck>(bed.plan()).size(), 1U);
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  EXPECT_TRUE(all_of<StartActiveCheck>(bed.plan()).empty());
}

TEST(ActiveCheckPlan, ACheckReservationLeftByAGoneHealthCheckGoesOnceItsJobHasEnded) {
  Bed bed(2, 2);
  bed.world.health.reset();  // the HealthCheck deleted while cpu-0's check ran
  bed.nodes["cpu-0"].reservation = "tightrope-check-cpu-0";
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  bed.nodes["cpu-1"].reservation = "maintenance";
  EXPECT_TRUE(all_of<ReleaseReservation>(bed.plan()).empty()) << "its job ends in its time limit";
  bed.nodes["cpu-0"].state = {"IDLE"};
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  EXPECT_TRUE(all_of<ReleaseReservation>(bed.plan()).empty()) << "nothing while Slurm is away";
  bed.world.slurm.health = SlurmHealth::kSynced;
  NodeSetPlan plan = bed.plan();
  const auto released = all_of<ReleaseReservation>(plan);
  ASSERT_EQ(released.size(), 1U) << "only a check reservation of the NodeSet's own worker";
  EXPECT_EQ(released[0].name, "tightrope-check-cpu-0");
  EXPECT_EQ(action_for(plan, "cpu-0")->events.at(0).reason, "ActiveCheckReleased");
  // The same when the HealthCheck stays but no longer runs active checks.
  bed.world.health = with_active_checks();
  bed.world.health->active.reset();
  EXPECT_EQ(all_of<ReleaseReservation>(bed.plan()).size(), 1U);
}

TEST(ActiveCheckPlan, AFailingActiveCheckIsRemediatedAsAPassiveOneIs) {
  Bed bed(2, 2);
  bed.world.health = with_active_checks();
  bed.nodes["cpu-0"].extra = active_extra(extra_with(true, kAfterPods), true, kAfterPods);
  bed.nodes["cpu-1"].extra = active_extra(extra_with(true, kAfterPods), false, kAfterPods);
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-1) is pending termination for healthcheck: "
            "active:memory-bandwidth: 812.0 MB/s, below 10000");
  EXPECT_TRUE(all_of<StartActiveCheck>(plan).empty()) << "a failing node is not checked again";
  // Its job has ended with the failing report: the reservation goes as a passing one's does.
  bed.nodes["cpu-1"].reservation = "tightrope-check-cpu-1";
  const auto released = all_of<ReleaseReservation>(bed.plan());
  ASSERT_EQ(released.size(), 1U) << "not held to its end time";
  EXPECT_EQ(released[0].name, "tightrope-check-cpu-1");
}

TEST(ActiveCheckPlan, AFailureUndrainedByHandIsCheckedAgainBeforeItDrainsAgain) {
  Bed bed(1, 1);
  bed.world.health = with_active_checks();
  bed.world.health->remediation.replace = false;
  bed.nodes["cpu-0"].partitions = {"cpu"};
  // Failed half an hour ago; not drained now.
  bed.nodes["cpu-0"].extra = active_extra(extra_with(true, kAfterPods), false, kAfterPods);
  // Never drained for it (left waiting at the budget then): no record on the Node, so the
  // failure drains as ever.
  EXPECT_EQ(all_of<DrainSlurmNode>(bed.plan()).size(), 1U);

  // Drained for it (the plan kept the failure on the Node), and undrained by an administrator
  // since: checked again first, in its reservation, rather than drained again.
  auto node = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  node->doc["metadata"]["annotations"][api::kAnnotationHealthFailures] =
      json::array({{{"pod", "hpc/cpu-0"},
                    {"uid", "uid-cpu-0"},
                    {"check", "active:memory-bandwidth"},
                    {"at", kAfterPods}}})
          .dump();
  bed.world.kube_nodes["k8s-0"] = node;
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  ASSERT_EQ(all_of<StartActiveCheck>(plan).size(), 1U);
  EXPECT_EQ(action_for(plan, "cpu-0")->events.at(0).message,
            "Started the active checks of cpu-0 (pod cpu-0, undrained by hand after its failure: "
            "checked again first) in reservation tightrope-check-cpu-0 (HealthCheck gpu)");

  // The check failed again a moment ago: that drains.
  bed.nodes["cpu-0"].extra = active_extra(extra_with(true, kAfterPods), false, kJustNow);
  plan = bed.plan();
  ASSERT_EQ(all_of<DrainSlurmNode>(plan).size(), 1U);
  EXPECT_TRUE(all_of<StartActiveCheck>(plan).empty());

  // Drained by the plan, an old failure keeps it drained (replace: false) and unchecked.
  bed.nodes["cpu-0"].extra = active_extra(extra_with(true, kAfterPods), false, kAfterPods);
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason =
      "slurm-operator: healthcheck: active:memory-bandwidth: 812.0 MB/s, below 10000";
  plan = bed.plan();
  EXPECT_TRUE(all_of<StartActiveCheck>(plan).empty());
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
}

TEST(ActiveCheckPlan, ChangedActiveChecksCheckEveryWorkerAgainAndForgetTheOldVerdicts) {
  Bed bed(2, 2);
  bed.world.health = with_active_checks(2);
  HealthPolicy before = *bed.world.health;
  before.active->min_memory_bandwidth_mbps = 10000;
  ASSERT_NE(active_source(before), active_source(*bed.world.health));
  EXPECT_EQ(active_source(with_active_checks(1)), active_source(with_active_checks(2)))
      << "how many run at once is not what they check";
  // Passed an hour ago under the old checks, with a day's interval: due again at once.
  bed.nodes["cpu-0"].extra =
      active_extra(extra_with(true, kAfterPods), true, kAfterPods - 3600 + 120, before);
  // Failed the old floor: not a verdict of these checks, so nothing drains for it.
  bed.nodes["cpu-1"].extra = active_extra(extra_with(true, kAfterPods), false, kAfterPods, before);
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_EQ(all_of<StartActiveCheck>(plan).size(), 2U);
}

TEST(ActiveCheckPlan, AReplacementIsCheckedAsItsVerificationDrainIsLiftedBeforeAnyUserJob) {
  Bed bed(2, 2);
  bed.world.health = with_active_checks();
  bed.nodes["cpu-0"].extra = active_extra(extra_with(true, kAfterPods), true, kAfterPods);
  replace_cpu_1(bed, {"IDLE", "DRAIN"},
                "slurm-operator: healthcheck: awaiting the first checks of pod hpc/cpu-1");
  // The old pod's failing active report stays; the new pod's passive one passes.
  bed.nodes["cpu-1"].extra =
      active_extra(extra_with(true, unix_of("2026-12-03T11:51:00Z")), false, kAfterPods);
  const NodeSetPlan plan = bed.plan();
  std::vector<std::string> chain;
  for (const auto& a : plan.actions) {
    if (a.chain == "cpu-1") {
      chain.push_back(
          a.change.index() == Change(StartActiveCheck{}).index()
              ? "check"
              : (std::holds_alternative<UndrainSlurmNode>(a.change) ? "undrain" : "other"));
    }
  }
  ASSERT_GE(chain.size(), 2U);
  EXPECT_EQ(chain[0], "check");
  EXPECT_EQ(chain[1], "undrain");
  EXPECT_EQ(plan.health->checking, std::vector<std::string>{"cpu-1 (after replacement)"});
}

}  // namespace
}  // namespace tightrope::op
