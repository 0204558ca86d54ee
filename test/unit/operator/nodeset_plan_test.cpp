// The NodeSet controller's plan, table by table: a world in (pods, Slurm's snapshot, Nodes,
// expectations), actions and a verdict out. No client, no cluster: each case is what a bed would
// take minutes to stage.
#include "operator/nodeset_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "nodeset_bed.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/conditions.hpp"
#include "samples.hpp"
#include "slurm/client.hpp"
#include "slurm/codec.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

using api::testing::decoded;

using testing::action_for;
using testing::all_of;
using testing::Bed;
using testing::controller;
using testing::kNow;
using testing::nodeset;

TEST(NodeSetPlan, ASteadyNodeSetWritesNothing) {
  Bed bed(2, 2);
  const NodeSetPlan plan = bed.plan();
  for (const auto& a : plan.actions) {
    ADD_FAILURE() << to_string(a.change);
  }
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  EXPECT_TRUE(verdict.readiness.ready) << verdict.readiness.message;
  EXPECT_EQ(verdict.readiness.reason, "AllReady");
}

TEST(NodeSetPlan, EveryNodeSetHoldsTheFinalizerThatEmptiesItDrainFirst) {
  Bed bed(2, 2);
  bed.world.finalizers.clear();
  const NodeSetPlan plan = bed.plan();
  const auto finalizers = all_of<SetFinalizers>(plan);
  ASSERT_EQ(finalizers.size(), 1U) << "pruneSlurmNodeRecords Never too: deletion waits for jobs";
  EXPECT_EQ(finalizers[0].finalizers,
            std::vector<std::string>{std::string(api::kFinalizerNodeSetSlurmNodes)});
}

TEST(NodeSetPlan, AScaleInDrainsTheVictimAndDeletesNothingYet) {
  Bed bed(1, 2);
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-1");
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in");
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_EQ(plan.draining, std::vector<std::string>{"cpu-1"});
  const Action* first = action_for(plan, "cpu-1");
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(std::holds_alternative<DrainSlurmNode>(first->change));
  EXPECT_TRUE(first->guards_rest);
  // An idle node's pod goes once the drain shows: no pod-cordon patch for so short a time.
  EXPECT_TRUE(all_of<PatchPod>(plan).empty());
  ASSERT_EQ(first->events.size(), 1U);
  EXPECT_EQ(first->events[0].reason, "DrainingPod");
  EXPECT_EQ(first->events[0].node, "cpu-1");
  EXPECT_FALSE(first->events[0].batch.empty());
}

TEST(NodeSetPlan, AVictimThatRunsAJobIsDrainedFirstThenMarkedWithPodCordon) {
  Bed bed(1, 2);
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  bed.nodes["cpu-1"].state = {"ALLOCATED"};
  const NodeSetPlan plan = bed.plan();
  // The drain comes first in the pod's chain and guards the cordon after it.
  const Action* first = action_for(plan, "cpu-1");
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(std::holds_alternative<DrainSlurmNode>(first->change));
  EXPECT_TRUE(first->guards_rest);
  const auto patches = all_of<PatchPod>(plan);
  const auto cordon = [](const PatchPod& p) { return p.what == "cordon"; };
  EXPECT_EQ(std::count_if(patches.begin(), patches.end(), cordon), 1);
  // A job that came after the plan's snapshot: the next plan marks the draining pod.
  Bed later(1, 2);
  later.nodes["cpu-1"].state = {"ALLOCATED", "DRAIN"};
  later.nodes["cpu-1"].reason =
      "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  const auto later_patches = all_of<PatchPod>(later.plan());
  EXPECT_EQ(std::count_if(later_patches.begin(), later_patches.end(), cordon), 1);
}

TEST(NodeSetPlan, SlurmIsWorthReadingAfterAWriteOrWhenAReadyPodsNodeIsNotKnownYet) {
  Bed bed(2, 2);
  EXPECT_FALSE(slurm_worth_reading(bed.world, bed.plan().actions)) << "a steady NodeSet";
  Bed scale_in(1, 2);
  EXPECT_TRUE(slurm_worth_reading(scale_in.world, scale_in.plan().actions)) << "it drains";
  Bed fresh(2, 2);
  fresh.nodes.erase("cpu-1");  // registered (the pod is ready), not read yet: no line tells
  fresh.world.slurm.snapshot.nodes =
      std::make_shared<const std::map<std::string, slurm::Node>>(fresh.nodes);
  EXPECT_TRUE(slurm_worth_reading(fresh.world, {}));
}

TEST(NodeSetPlan, EventsOfPodsDeletedAlikeAreOneEventNamingTheirNodes) {
  std::vector<NodeSetEvent> events;
  for (int i = 0; i < 300; ++i) {
    const std::string node = "cpu-" + std::to_string(i);
    events.push_back({false, "DeletedPod", "Deleted pod " + node, "Deleted idle pods", node});
    events.push_back({false, "DrainingPod", "Draining " + node, "Draining nodes", node});
  }
  events.push_back({true, "ResumeTimedOut", "Slurm gave up cpu-9", "", ""});
  events.push_back(
      {false, "DeletedPod", "Deleted pod gpu-0", "Deleted powered-down pods", "gpu-0"});
  const auto out = batch_events(events);
  ASSERT_EQ(out.size(), 4U);
  EXPECT_EQ(out[0].message, "Deleted idle pods: 300 nodes cpu-[0-299]");
  EXPECT_EQ(out[1].message, "Draining nodes: 300 nodes cpu-[0-299]");
  EXPECT_EQ(out[2].message, "Slurm gave up cpu-9");
  EXPECT_EQ(out[3].message, "Deleted pod gpu-0") << "one of its kind keeps its own words";
  // A list too long for an event's 1 KiB is cut there.
  std::vector<NodeSetEvent> scattered;
  for (int i = 0; i < 1000; i += 2) {
    scattered.push_back({false, "DeletedPod", "", "Deleted", "cpu-" + std::to_string(i)});
  }
  const auto cut = batch_events(scattered);
  ASSERT_EQ(cut.size(), 1U);
  EXPECT_EQ(cut[0].message.size(), 1024U);
  EXPECT_TRUE(cut[0].message.starts_with("Deleted: 500 nodes cpu-[0,2,4,"));
}

TEST(NodeSetPlan, AVictimDrainedAMomentAgoKeepsItsPlaceAndIsNotTakenForIdle) {
  Bed bed(1, 2);
  // cpu-0 goes first by the scale-in order (its job ends sooner); cpu-1 was drained by the
  // reconcile before, which the snapshot, a poll old, does not show yet.
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  bed.nodes["cpu-1"].state = {"ALLOCATED"};
  slurm::Job soon;
  soon.id = 1;
  soon.state = {"RUNNING"};
  soon.nodes = "cpu-0";
  soon.end_time = kNow + std::chrono::minutes(1);
  slurm::Job later = soon;
  later.id = 2;
  later.nodes = "cpu-1";
  later.end_time = kNow + std::chrono::minutes(5);
  bed.jobs = {{1, soon}, {2, later}};
  bed.world.slurm.drains_in_flight = {
      {"cpu-1", "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in"}};
  NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U) << "the victim's drain again (idempotent), no second victim";
  EXPECT_EQ(drains[0].node, "cpu-1");
  EXPECT_TRUE(all_of<DeletePod>(plan).empty()) << "a drain in flight is not a drained node";
  // Idle by the snapshot: still not deleted on the strength of a drain the snapshot lacks.
  bed.nodes["cpu-1"].state = {"IDLE"};
  bed.jobs.erase(2);
  plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
}

TEST(NodeSetPlan, ADrainedIdleVictimIsDeletedByUidAndGetsNoOtherWrite) {
  Bed bed(1, 2);
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  bed.world.pods[1].slurm_conditions = {};  // stale: a write would be due if it stayed
  const NodeSetPlan plan = bed.plan();
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-1");
  EXPECT_EQ(deletes[0].uid, "uid-cpu-1");
  for (const auto& a : plan.actions) {
    if (a.chain == "cpu-1") {
      EXPECT_TRUE(std::holds_alternative<DeletePod>(a.change)) << to_string(a.change);
    }
  }
}

// The Kubernetes Node `name` of the bed, with the slurm-nodename label `value`.
void label_node(Bed& bed, const std::string& name, const std::string& value) {
  auto node = std::make_shared<kube::Document>(*bed.world.kube_nodes[name]);
  node->meta.labels = {{std::string(api::kLabelNodeSlurmNodeName), value}};
  bed.world.kube_nodes[name] = node;
}

std::vector<std::pair<std::string, json>> label_patches(const NodeSetPlan& plan) {
  std::vector<std::pair<std::string, json>> out;
  for (const auto& c : all_of<PatchKubeNode>(plan)) {
    if (c.what == "slurm-nodename label") {
      out.emplace_back(c.name,
                       c.patch["metadata"]["labels"][std::string(api::kLabelNodeSlurmNodeName)]);
    }
  }
  return out;
}

TEST(NodeSetPlan, ANodeThatRunsOneWorkerAloneIsLabelledWithItsSlurmNodeForTheBridge) {
  Bed bed(2, 2);
  bed.world.workers_on_node = {{"k8s-0", 1}, {"k8s-1", 2}};
  using Patches = std::vector<std::pair<std::string, json>>;
  EXPECT_EQ(label_patches(bed.plan()), (Patches{{"k8s-0", "cpu-0"}}))
      << "k8s-1 runs another worker beside cpu-1";
  label_node(bed, "k8s-0", "someone-elses");
  EXPECT_TRUE(label_patches(bed.plan()).empty()) << "a label of another's stays";
  // cpu-1 ran on k8s-7 before, whose label still names it: it goes.
  bed.world.labelled_nodes = {{"cpu-1", {"k8s-1", "k8s-7"}}};
  EXPECT_EQ(label_patches(bed.plan()), (Patches{{"k8s-7", nullptr}}));
}

TEST(NodeSetPlan, AWorkersLabelGoesFromItsNodeWithThePod) {
  Bed bed(1, 2);
  label_node(bed, "k8s-1", "cpu-1");
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(all_of<DeletePod>(plan).size(), 1U);
  EXPECT_EQ(label_patches(plan), (std::vector<std::pair<std::string, json>>{{"k8s-1", nullptr}}));
  std::vector<std::string> chain;
  for (const auto& a : plan.actions) {
    if (a.chain == "cpu-1") {
      chain.push_back(to_string(a.change));
    }
  }
  ASSERT_EQ(chain.size(), 2U);
  EXPECT_TRUE(chain[0].starts_with("delete pod cpu-1")) << "the label after the pod, not before";
}

TEST(NodeSetPlan, AVictimWhoseJobEndedJustNowWaitsUntilSlurmctldHasSavedTheEnd) {
  Bed bed(1, 2);
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  slurm::Job ended;
  ended.id = 7;
  ended.state = {"COMPLETED"};
  ended.nodes = "cpu-1";
  ended.end_time = kNow - std::chrono::seconds(3);
  bed.jobs[7] = ended;
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_EQ(plan.draining, std::vector<std::string>{"cpu-1"});
  ASSERT_TRUE(plan.look_again_at);
  EXPECT_EQ(*plan.look_again_at, *ended.end_time + kJobEndSaved);
  // Nothing in Slurm will change meanwhile: the NodeSet looks again when the wait is over.
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  ASSERT_TRUE(verdict.next);
  EXPECT_EQ(verdict.next->requeue_after, std::chrono::milliseconds(7200));

  bed.world.now = *ended.end_time + kJobEndSaved;
  plan = bed.plan();
  ASSERT_EQ(all_of<DeletePod>(plan).size(), 1U);
  EXPECT_FALSE(plan.look_again_at);
}

TEST(NodeSetPlan, AVictimWithAJobIsDrainedButKept) {
  Bed bed(1, 2);
  bed.nodes["cpu-1"].state = {"ALLOCATED", "DRAIN"};
  bed.nodes["cpu-1"].reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_EQ(plan.draining, std::vector<std::string>{"cpu-1"});
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  EXPECT_EQ(verdict.readiness.reason, "Draining");
  EXPECT_EQ(verdict.readiness.message, "waiting for the jobs on cpu-1 to end");
}

TEST(NodeSetPlan, NothingRunningGoesWhileSlurmIsUnreachable) {
  Bed bed(0, 2);
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  bed.world.slurm.problem = "slurmrestd does not answer: connection refused";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  const api::Condition* blocked = find_condition(verdict.conditions, "DeletionBlocked");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->status, "True");
  EXPECT_EQ(blocked->reason, "SlurmUnreachable");
  // In the order they would go: the higher ordinal first.
  EXPECT_EQ(blocked->message,
            "pod cpu-1 kept: slurmrestd does not answer: connection refused; pod cpu-0 kept: "
            "slurmrestd does not answer: connection refused");
  EXPECT_FALSE(verdict.readiness.ready);
  EXPECT_EQ(verdict.readiness.reason, "DeletionBlocked");
  ASSERT_TRUE(verdict.next);
  EXPECT_EQ(verdict.next->requeue_after, std::chrono::seconds(5));
}

TEST(NodeSetPlan, AVictimSlurmDoesNotKnowIsKeptThroughTheGraceThenTakenForOneWithoutJobs) {
  Bed bed(1, 2);
  bed.nodes.erase("cpu-1");
  bed.world.pods[1].ready_since = "2026-12-03T11:59:00Z";  // ready a minute ago
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_EQ(plan.blocked_reason, "SlurmNodeNotFound");

  bed.world.pods[1].ready_since = "2026-12-03T11:00:00Z";  // an hour: Slurm lost it
  plan = bed.plan();
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-1");
  EXPECT_TRUE(plan.blocked.empty());
}

TEST(NodeSetPlan, AFailedDrainBlocksDeletionAndSaysWhy) {
  Bed bed(1, 2);
  const NodeSetPlan plan = bed.plan();
  const Action* drain = action_for(plan, "cpu-1");
  ASSERT_NE(drain, nullptr);
  const NodeSetVerdict verdict =
      conclude(bed.world, plan, {{drain, to_string(drain->change) + ": slurmrestd 502"}}, "stamp");
  const api::Condition* blocked = find_condition(verdict.conditions, "DeletionBlocked");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->reason, "SlurmUpdateFailed");
  EXPECT_EQ(blocked->message,
            "drain Slurm node cpu-1: slurm-operator: Pod (hpc/cpu-1) is pending termination for "
            "scale-in: slurmrestd 502");
}

TEST(NodeSetPlan, MissingPodsTakeTheLowestFreeOrdinalsAndNoneIsCreatedTwice) {
  Bed bed(3, 0);
  bed.world.expected.creations = {"cpu-0"};
  const NodeSetPlan plan = bed.plan();
  const auto creates = all_of<CreatePod>(plan);
  ASSERT_EQ(creates.size(), 2U);
  EXPECT_EQ(creates[0].name, "cpu-1");
  EXPECT_EQ(creates[1].name, "cpu-2");
}

TEST(NodeSetPlan, APodTheOperatorDeletedGetsNoWriteAndIsNotReplacedEarly) {
  Bed bed(2, 2);
  bed.nodes["cpu-1"].state = {"ALLOCATED"};  // a write would be due
  bed.world.expected.deletions = {"uid-cpu-1"};
  const NodeSetPlan plan = bed.plan();
  EXPECT_EQ(action_for(plan, "cpu-1"), nullptr);
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
  EXPECT_EQ(plan.terminating, 1);
}

TEST(NodeSetPlan, APodWrittenToIsNotWrittenAgainBeforeTheCacheShowsIt) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  bed.world.expected.patches = {"uid-cpu-0"};
  EXPECT_TRUE(all_of<PatchPod>(bed.plan()).empty());
}

TEST(NodeSetPlan, SlurmStateReachesThePodConditionsAndProtectLabel) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  const NodeSetPlan plan = bed.plan();
  const auto patches = all_of<PatchPod>(plan);
  ASSERT_EQ(patches.size(), 2U);
  EXPECT_EQ(patches[0].what, "conditions");
  EXPECT_TRUE(patches[0].status);
  EXPECT_EQ(patches[0].patch["status"]["conditions"],
            json::parse(R"([{"type":"SlurmNodeStateIdle","$patch":"delete"},
                            {"type":"SlurmNodeStateAllocated","status":"True","message":"",
                             "lastTransitionTime":"2026-12-03T12:00:00Z"}])"));
  EXPECT_EQ(patches[1].what, "work");
  EXPECT_EQ(patches[1].patch["metadata"]["labels"][std::string(api::kLabelNodeSetPodProtect)],
            "true");
  // Busy, and the job that keeps it so is not in the snapshot: its work never ends.
  EXPECT_EQ(patches[1].patch["metadata"]["annotations"][std::string(api::kAnnotationPodDeadline)],
            "9999-12-31T23:59:59Z");
  // Nor may a Node autoscaler take its Node.
  EXPECT_EQ(patches[1].patch["metadata"]["annotations"][std::string(api::kAnnotationSafeToEvict)],
            "false");
  EXPECT_EQ(patches[1].patch["metadata"]["annotations"][std::string(api::kAnnotationDoNotDisrupt)],
            "true");
}

TEST(NodeSetPlan, TheNodeAutoscalersMarksFollowTheWorkUnlessThePodTemplateSetsThem) {
  Bed bed(1, 1);
  bed.world.nodeset.spec.template_.metadata.annotations[std::string(api::kAnnotationSafeToEvict)] =
      "true";
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  const auto patches = all_of<PatchPod>(bed.plan());
  const auto work = std::find_if(patches.begin(), patches.end(),
                                 [](const PatchPod& p) { return p.what == "work"; });
  ASSERT_NE(work, patches.end());
  const json& annotations = work->patch["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(std::string(api::kAnnotationSafeToEvict)))
      << "the site's own choice";
  EXPECT_EQ(annotations[std::string(api::kAnnotationDoNotDisrupt)], "true");
}

TEST(NodeSetPlan, ThePodDeadlineIsTheEndOfItsLastJobAndGoesWithTheWork) {
  Bed bed(1, 1);
  bed.world.pods[0].protect_label = true;
  bed.world.pods[0].safe_to_evict = "false";
  bed.world.pods[0].do_not_disrupt = "true";
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  slurm::Job job;
  job.id = 7;
  job.state = {"RUNNING"};
  job.nodes = "cpu-0";
  job.start_time = kNow;
  job.time_limit = std::chrono::minutes(30);
  job.end_time = kNow + std::chrono::minutes(30);
  bed.jobs[7] = job;
  auto patches = all_of<PatchPod>(bed.plan());
  ASSERT_EQ(patches.size(), 2U);
  EXPECT_EQ(patches[1].patch, json::parse(R"({"metadata":{"annotations":
      {"nodeset.slinky.slurm.net/pod-deadline":"2026-12-03T12:30:00Z"}}})"));

  // Written already: nothing more to say.
  bed.world.pods[0].deadline_annotation = "2026-12-03T12:30:00Z";
  patches = all_of<PatchPod>(bed.plan());
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].what, "conditions");

  // The job is done: the annotation and the protect label go.
  bed.jobs.clear();
  bed.nodes["cpu-0"].state = {"IDLE"};
  bed.world.pods[0].slurm_conditions = {{"SlurmNodeStateIdle", {"", "2026-12-03T11:00:00Z"}}};
  patches = all_of<PatchPod>(bed.plan());
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].patch, json::parse(R"({"metadata":{
      "labels":{"nodeset.slinky.slurm.net/pod-protect":null},
      "annotations":{"nodeset.slinky.slurm.net/pod-deadline":null,
                     "cluster-autoscaler.kubernetes.io/safe-to-evict":null,
                     "karpenter.sh/do-not-disrupt":null}}})"));
}

TEST(NodeSetPlan, ACordonedNodeDrainsItsSlurmNodeAndUncordonUndrains) {
  Bed bed(1, 1);
  auto cordoned = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  cordoned->doc["spec"]["unschedulable"] = true;
  bed.world.kube_nodes["k8s-0"] = cordoned;
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-0");
  EXPECT_TRUE(drains[0].reason.starts_with("slurm-operator: "));

  // Uncordoned again, the operator's drain still there.
  auto uncordoned = std::make_shared<kube::Document>(*cordoned);
  uncordoned->doc["spec"]["unschedulable"] = false;
  bed.world.kube_nodes["k8s-0"] = uncordoned;
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = drains[0].reason;
  plan = bed.plan();
  const auto undrains = all_of<UndrainSlurmNode>(plan);
  ASSERT_EQ(undrains.size(), 1U);
  EXPECT_EQ(undrains[0].node, "cpu-0");
}

const std::string kPodCordon(api::kAnnotationPodCordon);
const std::string kOperatorCordon(api::kAnnotationPodOperatorCordon);

std::vector<PatchPod> cordon_patches(const NodeSetPlan& plan) {
  std::vector<PatchPod> out;
  for (auto& p : all_of<PatchPod>(plan)) {
    if (p.what == "cordon") {
      out.push_back(p);
    }
  }
  return out;
}

// The operator's drain undone, its pod-cordon and mark removed.
void expect_taken_back(const NodeSetPlan& plan) {
  EXPECT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  const auto patches = cordon_patches(plan);
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"],
            json({{kPodCordon, nullptr}, {kOperatorCordon, nullptr}}));
}

// Nothing drained, undrained or cordoned.
bool no_drain_writes(const NodeSetPlan& plan) {
  return all_of<DrainSlurmNode>(plan).empty() && all_of<UndrainSlurmNode>(plan).empty() &&
         cordon_patches(plan).empty();
}

TEST(NodeSetPlan, TheOperatorsPodCordonIsMarkedAndGoesWithTheCordon) {
  Bed bed(1, 1);
  auto cordoned = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  cordoned->doc["spec"]["unschedulable"] = true;
  bed.world.kube_nodes["k8s-0"] = cordoned;
  auto patches = cordon_patches(bed.plan());
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"],
            json({{kPodCordon, "true"}, {kOperatorCordon, "true"}}));

  bed.world.pods[0].cordoned = true;
  bed.world.pods[0].operator_cordon = true;
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason =
      "slurm-operator: Node (k8s-0) was cordoned, Pod (hpc/cpu-0) must be cordoned";
  auto uncordoned = std::make_shared<kube::Document>(*cordoned);
  uncordoned->doc["spec"]["unschedulable"] = false;
  bed.world.kube_nodes["k8s-0"] = uncordoned;
  expect_taken_back(bed.plan());
}

TEST(NodeSetPlan, APersonsPodCordonDrainsUntilItIsRemovedWhateverTheNodeDoes) {
  Bed bed(1, 1);
  bed.world.pods[0].cordoned = true;  // kubectl annotate pod cpu-0 pod-cordon=true
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: Pod (hpc/cpu-0) was cordoned");
  EXPECT_TRUE(cordon_patches(plan).empty()) << "neither marked nor removed";
  const Action* a = action_for(plan, "cpu-0");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->events.size(), 1U);
  EXPECT_EQ(a->events[0].reason, "PodCordon");

  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = drains[0].reason;
  EXPECT_TRUE(no_drain_writes(bed.plan()));
  // Its Node cordoned, then uncordoned: the person's drain and annotation stay.
  auto cordoned = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  cordoned->doc["spec"]["unschedulable"] = true;
  bed.world.kube_nodes["k8s-0"] = cordoned;
  EXPECT_TRUE(no_drain_writes(bed.plan()));
  auto uncordoned = std::make_shared<kube::Document>(*cordoned);
  uncordoned->doc["spec"]["unschedulable"] = false;
  bed.world.kube_nodes["k8s-0"] = uncordoned;
  EXPECT_TRUE(no_drain_writes(bed.plan()));

  // kubectl annotate pod cpu-0 pod-cordon-: undrained.
  bed.world.pods[0].cordoned = false;
  plan = bed.plan();
  EXPECT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  EXPECT_TRUE(cordon_patches(plan).empty());
}

TEST(NodeSetPlan, APodCordonRequestDrainsUntilTheRequesterTakesItBack) {
  Bed bed(1, 1);
  bed.world.pods[0].cordon_request = "true";
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: Pod (hpc/cpu-0) cordon was requested");
  const Action* a = action_for(plan, "cpu-0");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->events.size(), 1U);
  EXPECT_EQ(a->events[0].reason, "CordonRequested");
  auto patches = cordon_patches(plan);
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"],
            json({{kPodCordon, "true"}, {kOperatorCordon, "true"}}))
      << "the request itself is the requester's: never removed";

  // A reason in the request is the drain's reason.
  bed.world.pods[0].cordon_request = "[HC] GPU 3: Xid 79";
  drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: [HC] GPU 3: Xid 79");

  // Taken back: undrained, the operator's pod-cordon goes.
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = drains[0].reason;
  bed.world.pods[0].cordoned = true;
  bed.world.pods[0].operator_cordon = true;
  bed.world.pods[0].cordon_request.clear();
  expect_taken_back(bed.plan());
}

TEST(NodeSetPlan, AnUnmarkedPodCordonOfAnEarlierNodeCordonIsTakenAsTheOperators) {
  // A pod Slinky's operator (or an earlier Tightrope) cordoned for its Node's cordon.
  Bed bed(1, 1);
  bed.world.pods[0].cordoned = true;
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason =
      "slurm-operator: Node (k8s-0) was cordoned, Pod (hpc/cpu-0) must be cordoned";
  const NodeSetPlan plan = bed.plan();
  EXPECT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  const auto patches = cordon_patches(plan);
  ASSERT_EQ(patches.size(), 1U);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"], json({{kOperatorCordon, "true"}}));
}

// Node k8s-<i> as the node lifecycle controller leaves it once the kubelet stops reporting.
void silence_kubelet(Bed& bed, const std::string& kube_node) {
  auto silent = std::make_shared<kube::Document>(*bed.world.kube_nodes[kube_node]);
  silent->doc["status"]["conditions"] =
      json::array({{{"type", "Ready"},
                    {"status", "Unknown"},
                    {"reason", "NodeStatusUnknown"},
                    {"lastTransitionTime", "2026-12-03T11:58:00Z"}}});
  bed.world.kube_nodes[kube_node] = silent;
}

TEST(NodeSetPlan, APodOnALostNodeIsDeletedAtOnceWhenSlurmAgreesTheNodeIsGone) {
  Bed bed(2, 2);
  silence_kubelet(bed, "k8s-1");
  bed.nodes["cpu-1"].state = {"DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"};
  bed.nodes["cpu-1"].reason = "Not responding";
  const NodeSetPlan plan = bed.plan();
  const auto deletions = all_of<DeletePod>(plan);
  ASSERT_EQ(deletions.size(), 1U);
  EXPECT_EQ(deletions[0].name, "cpu-1");
  EXPECT_EQ(deletions[0].uid, "uid-cpu-1");
  EXPECT_TRUE(deletions[0].at_once);
  const Action* a = action_for(plan, "cpu-1");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->events.size(), 1U);
  EXPECT_TRUE(a->events[0].warning);
  EXPECT_EQ(a->events[0].reason, "NodeLost");
  EXPECT_EQ(a->events[0].message,
            "Deleted pod cpu-1 at once, to run it on another Node: Node k8s-1 has not reported "
            "since 2026-12-03T11:58:00Z and Slurm shows cpu-1 DOWN (Not responding)");
  // Nothing else is written to it (no condition mirrored onto a pod that is going).
  for (const auto& action : plan.actions) {
    if (action.chain == "cpu-1") {
      EXPECT_TRUE(std::holds_alternative<DeletePod>(action.change)) << to_string(action.change);
    }
  }
  EXPECT_EQ(to_string(deletions[0])
                .rfind("delete pod at once cpu-1 (uid uid-cpu-1): its Node is lost", 0),
            0U);
}

TEST(NodeSetPlan, APodIsLostOnlyWhenBothTheKubeletAndSlurmSaySo) {
  // The kubelet silent, Slurm still reaching slurmd (a kubelet cut off from the API server
  // only): its jobs run, the pod stays.
  Bed silent(1, 1);
  silence_kubelet(silent, "k8s-0");
  silent.nodes["cpu-0"].state = {"ALLOCATED", "DYNAMIC_NORM"};
  EXPECT_TRUE(all_of<DeletePod>(silent.plan()).empty());
  // Slurm's node not responding but not DOWN yet (within SlurmdTimeout): it stays.
  silent.nodes["cpu-0"].state = {"IDLE", "NOT_RESPONDING", "DYNAMIC_NORM"};
  EXPECT_TRUE(all_of<DeletePod>(silent.plan()).empty());
  // Slurm says DOWN, the kubelet reports (slurmd crashed or was stopped): its kubelet restarts it.
  Bed reporting(1, 1);
  auto ready = std::make_shared<kube::Document>(*reporting.world.kube_nodes["k8s-0"]);
  ready->doc["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  reporting.world.kube_nodes["k8s-0"] = ready;
  reporting.nodes["cpu-0"].state = {"DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"};
  EXPECT_TRUE(all_of<DeletePod>(reporting.plan()).empty());
}

TEST(NodeSetPlan, NoPodIsTakenForLostWhileSlurmCannotBeAsked) {
  Bed bed(1, 1);
  silence_kubelet(bed, "k8s-0");
  bed.nodes["cpu-0"].state = {"DOWN", "NOT_RESPONDING"};
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  EXPECT_TRUE(all_of<DeletePod>(bed.plan()).empty());
}

TEST(NodeSetPlan, ALostPodAlreadyTerminatingIsDeletedAtOnceButOnlyOnce) {
  // The taint manager evicted it after tolerationSeconds: it has a deletionTimestamp no kubelet
  // will ever act on.
  Bed bed(1, 1);
  silence_kubelet(bed, "k8s-0");
  bed.nodes["cpu-0"].state = {"DOWN", "NOT_RESPONDING"};
  bed.world.pods[0].terminating = true;
  auto deletions = all_of<DeletePod>(bed.plan());
  ASSERT_EQ(deletions.size(), 1U);
  EXPECT_TRUE(deletions[0].at_once);
  // Ours, not yet out of the cache: not deleted twice, and no replacement before it is gone.
  bed.world.expected.deletions.insert("uid-cpu-0");
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
}

TEST(NodeSetPlan, ANodeDownForAnEarlierPodsSilenceIsResumedOnceTheNewPodRegisters) {
  // The replacement of a lost pod (created 10:00:00) registered: Slurm keeps the node DOWN for
  // the old slurmd's silence (ReturnToService=0).
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = {"DOWN", "DYNAMIC_NORM"};
  bed.nodes["cpu-0"].reason = "Not responding";
  bed.nodes["cpu-0"].reason_changed_at = *kube::parse_time("2026-12-03T09:59:00Z");
  NodeSetPlan plan = bed.plan();
  const auto resumes = all_of<ResumeSlurmNode>(plan);
  ASSERT_EQ(resumes.size(), 1U);
  EXPECT_EQ(resumes[0].node, "cpu-0");
  const Action* a = action_for(plan, "cpu-0");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->events.size(), 1U);
  EXPECT_EQ(a->events[0].reason, "SlurmNodeReturned");
  // Slurm's verdict and the replacement in one second (the lost pod goes on that verdict, its
  // replacement is made at once; both times are whole seconds): still the old slurmd's silence.
  bed.nodes["cpu-0"].reason_changed_at = *kube::parse_time("2026-12-03T10:00:00Z");
  EXPECT_EQ(all_of<ResumeSlurmNode>(bed.plan()).size(), 1U);
  // Not while it still does not answer, not before the pod is Ready, and never for a silence of
  // this pod's own slurmd (a crash its kubelet restarts is for a person to look at).
  bed.nodes["cpu-0"].state = {"DOWN", "NOT_RESPONDING", "DYNAMIC_NORM"};
  EXPECT_TRUE(all_of<ResumeSlurmNode>(bed.plan()).empty());
  bed.nodes["cpu-0"].state = {"DOWN", "DYNAMIC_NORM"};
  bed.world.pods[0].ready = false;
  EXPECT_TRUE(all_of<ResumeSlurmNode>(bed.plan()).empty());
  bed.world.pods[0].ready = true;
  bed.nodes["cpu-0"].reason_changed_at = *kube::parse_time("2026-12-03T10:30:00Z");
  EXPECT_TRUE(all_of<ResumeSlurmNode>(bed.plan()).empty());
  // An administrator's DOWN is theirs.
  bed.nodes["cpu-0"].reason = "bad DIMM";
  bed.nodes["cpu-0"].reason_changed_at = *kube::parse_time("2026-12-03T09:59:00Z");
  EXPECT_TRUE(all_of<ResumeSlurmNode>(bed.plan()).empty());
}

TEST(NodeSetPlan, ADaemonSetModePodWaitsForItsLostNode) {
  Bed bed(1, 1);
  bed.world.nodeset.spec.scaling_mode = "DaemonSet";
  bed.world.pods[0].mode = "DaemonSet";
  silence_kubelet(bed, "k8s-0");
  bed.nodes["cpu-0"].state = {"DOWN", "NOT_RESPONDING"};
  for (const auto& d : all_of<DeletePod>(bed.plan())) {
    EXPECT_FALSE(d.at_once) << to_string(d);
  }
}

TEST(NodeSetPlan, ADrainRequestOnAPodDrainsWithItsReasonAndItsRemovalUndrains) {
  Bed bed(1, 1);
  bed.world.pods[0].drain_request = "bad DIMM\nslot 3";
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: bad DIMMslot 3");
  const auto cordons = all_of<PatchPod>(plan);
  ASSERT_EQ(cordons.size(), 1U);
  EXPECT_EQ(cordons[0].what, "cordon");

  EXPECT_EQ(drains[0].seen_reason, "");  // what the write checks Slurm's node against

  // Drained as asked: nothing more to do while the request stays.
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = drains[0].reason;
  bed.world.pods[0].cordoned = true;
  bed.world.pods[0].operator_cordon = true;
  EXPECT_TRUE(all_of<DrainSlurmNode>(bed.plan()).empty());

  // The request withdrawn: the operator's drain is undone.
  bed.world.pods[0].drain_request.clear();
  plan = bed.plan();
  const auto undrains = all_of<UndrainSlurmNode>(plan);
  ASSERT_EQ(undrains.size(), 1U);
  EXPECT_EQ(undrains[0].seen_reason, drains[0].reason);
}

// Everything the plan would send, written as JSON: what nlohmann::json::dump() cannot write
// (bytes that are not UTF-8) would throw in the reconcile and stall the NodeSet.
void expect_writable(const NodeSetPlan& plan) {
  for (const auto& a : plan.actions) {
    if (const auto* d = std::get_if<DrainSlurmNode>(&a.change)) {
      slurm::NodeUpdate update;
      update.state = {"DRAIN"};
      update.reason = d->reason;
      EXPECT_NO_THROW((void)slurm::encode_node_update(update, slurm::kV0044).dump());
    }
    if (const auto* p = std::get_if<PatchPod>(&a.change)) {
      EXPECT_NO_THROW((void)p->patch.dump());
    }
    for (const auto& e : a.events) {
      EXPECT_NO_THROW((void)json(e.message).dump());
    }
  }
}

TEST(NodeSetPlan, ADrainRequestCutAtItsLimitIsCutBetweenCharacters) {
  Bed bed(1, 1);
  // Its 256-byte limit falls inside the third "ü".
  bed.world.pods[0].drain_request = std::string(251, 'x') + "\xC3\xBC\xC3\xBC\xC3\xBC";
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: " + std::string(251, 'x') + "\xC3\xBC\xC3\xBC");
  expect_writable(plan);
}

TEST(NodeSetPlan, AnAdministratorsReasonWithControlBytesReachesThePodAsPrintableText) {
  // As slurmrestd would pass on `scontrol update reason=...` typed with escapes and in Latin-1.
  const std::vector<std::string> fields = slurm::node_fields(slurm::kV0044);
  const auto answer = slurm::read_answer(
      "GET /nodes", 200,
      R"({"nodes":[{"name":"cpu-0","state":["IDLE","DRAIN"],"reason":"\u001b[31mfan\nL)"
      "\xFC"
      R"(fter"}]})",
      &fields);
  ASSERT_TRUE(answer) << answer.error().message;
  const auto list = slurm::decode_nodes(answer->doc, slurm::kV0044);
  ASSERT_TRUE(list) << list.error().message;
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = list->nodes.at(0).state;
  bed.nodes["cpu-0"].reason = list->nodes.at(0).reason;
  const NodeSetPlan plan = bed.plan();
  expect_writable(plan);
  const auto patches = all_of<PatchPod>(plan);
  ASSERT_FALSE(patches.empty());
  EXPECT_EQ(patches[0].what, "conditions");
  bool shown = false;
  for (const auto& c : patches[0].patch["status"]["conditions"]) {
    shown = shown || c.value("message", "") ==
                         " [31mfan L\xEF\xBF\xBD"
                         "fter";
  }
  EXPECT_TRUE(shown) << patches[0].patch.dump();
  // Never taken for the operator's own drain: it is kept, not undone.
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
}

TEST(NodeSetPlan, ADrainRequestNeverOverwritesAnAdministratorsDrain) {
  Bed bed(1, 1);
  bed.world.pods[0].drain_request = "maintenance";
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "replacing a fan";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
}

// The Bed's NodeSet, its pods asking for four GPUs each; its Nodes allocate four.
void give_gpus(Bed& bed, const std::string& gres) {
  json spec = api::encode(bed.world.nodeset);
  spec["spec"]["slurmd"]["resources"]["limits"]["nvidia.com/gpu"] = 4;
  bed.world.nodeset = decoded(api::decode_nodeset(spec));
  const std::string revision =
      build::nodeset_revision_name(bed.world.nodeset, build::NodeSetInputs{*bed.world.controller});
  bed.world.revisions = {{1, revision}};
  for (auto& w : bed.world.pods) {
    w.revision = revision;
    bed.nodes[w.hostname].gres = gres;
    auto node = std::make_shared<kube::Document>(*bed.world.kube_nodes[w.kube_node]);
    node->doc["status"]["allocatable"]["nvidia.com/gpu"] = "4";
    bed.world.kube_nodes[w.kube_node] = node;
  }
}

TEST(NodeSetPlan, AGpuTheNodeNoLongerAllocatesDrainsItsSlurmNodeUntilItIsBack) {
  Bed bed(2, 2);
  give_gpus(bed, "gpu:nvidia_h100_80gb_hbm3:4(S:0-1)");
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  ASSERT_TRUE(plan.gpu_counts);
  EXPECT_EQ(plan.gpu_counts->status, "True");

  // A GPU falls off the bus on k8s-1: its device plugin reports three.
  auto lost = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-1"]);
  lost->doc["status"]["allocatable"]["nvidia.com/gpu"] = "3";
  bed.world.kube_nodes["k8s-1"] = lost;
  plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-1");
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: GPU count: Node k8s-1 allocates 3 nvidia.com/gpu, fewer than the 4 "
            "Slurm node cpu-1 registered and its pod holds");
  const Action* drain = action_for(plan, "cpu-1");
  ASSERT_NE(drain, nullptr);
  ASSERT_EQ(drain->events.size(), 1U);
  EXPECT_TRUE(drain->events[0].warning);
  EXPECT_EQ(drain->events[0].reason, "GpuCountMismatch");
  ASSERT_TRUE(plan.gpu_counts);
  EXPECT_EQ(plan.gpu_counts->status, "False");
  EXPECT_EQ(plan.gpu_counts->reason, "GpuCountMismatch");
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "2026-12-03T12:00:00Z");
  const api::Condition* shown = find_condition(verdict.conditions, "GpuCountsMatch");
  ASSERT_NE(shown, nullptr);
  EXPECT_EQ(shown->message,
            "Node k8s-1 allocates 3 nvidia.com/gpu, fewer than the 4 Slurm node "
            "cpu-1 registered and its pod holds; drained until they agree");

  // The GPU comes back: the operator's drain goes, nobody else's would.
  bed.world.kube_nodes["k8s-1"] = bed.world.kube_nodes["k8s-0"];
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-1"].reason = drains[0].reason;
  plan = bed.plan();
  EXPECT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);
  EXPECT_EQ(plan.gpu_counts->status, "True");
}

TEST(NodeSetPlan, ASlurmNodeThatRegisteredMoreGpusThanItsPodHoldsIsDrained) {
  Bed bed(1, 1);
  give_gpus(bed, "gpu:nvidia_h100_80gb_hbm3:8(S:0-1)");
  const auto drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: GPU count: Slurm node cpu-0 registered 8 GPUs, its pod is given 4 "
            "nvidia.com/gpu");
  // An administrator's drain is left as it is.
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "swapping GPU 3";
  EXPECT_TRUE(all_of<DrainSlurmNode>(bed.plan()).empty());
}

TEST(NodeSetPlan, ANodeSetWithoutGpusHasNoGpuCondition) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].gres = "gpu:8";  // a privileged pod's autodetection: nothing to hold it to
  const NodeSetPlan plan = bed.plan();
  EXPECT_FALSE(plan.gpu_counts);
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
}

TEST(NodeSetPlan, APropagatedNodeConditionDrainsWithItsReasonAndUndrainsWhenItClears) {
  Bed bed(1, 1);
  bed.world.propagated_node_conditions = {"CPUProblem", "GPUProblem"};
  bed.world.drain_on_node_conditions = true;
  auto troubled = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  troubled->doc["status"]["conditions"] = json::parse(R"([
      {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"},
      {"type": "GPUProblem", "status": "True", "reason": "GpuCountMismatch",
       "message": "Node has 3, expected 4"},
      {"type": "CPUProblem", "status": "True", "reason": "BadCPU", "message": "CPU 17: MCE"},
      {"type": "DiskProblem", "status": "True", "reason": "Full", "message": "not propagated"}])");
  bed.world.kube_nodes["k8s-0"] = troubled;
  NodeSetPlan plan = bed.plan();
  auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  // In the order of the flag, as Slinky writes them.
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: (BadCPU: CPU 17: MCE); (GpuCountMismatch: Node has 3, expected 4)");

  // Cordoned as well, with a reason of its own: the annotation speaks.
  auto cordoned = std::make_shared<kube::Document>(*troubled);
  cordoned->doc["spec"]["unschedulable"] = true;
  cordoned->doc["metadata"]["annotations"][std::string(api::kAnnotationNodeCordonReason)] =
      "GPU swap";
  bed.world.kube_nodes["k8s-0"] = cordoned;
  drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: GPU swap");

  // The problems clear: the operator's drain goes.
  auto healthy = std::make_shared<kube::Document>(*troubled);
  healthy->doc["status"]["conditions"][1]["status"] = "False";
  healthy->doc["status"]["conditions"][2]["status"] = "False";
  bed.world.kube_nodes["k8s-0"] = healthy;
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "slurm-operator: (BadCPU: CPU 17: MCE)";
  plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  ASSERT_EQ(all_of<UndrainSlurmNode>(plan).size(), 1U);

  // Without the flag a condition is only a condition.
  bed.world.propagated_node_conditions.clear();
  bed.world.kube_nodes["k8s-0"] = troubled;
  bed.nodes["cpu-0"].state = {"IDLE"};
  bed.nodes["cpu-0"].reason.clear();
  EXPECT_TRUE(all_of<DrainSlurmNode>(bed.plan()).empty());
}

TEST(NodeSetPlan, APropagatedNodeConditionNamesTheDrainOfACordonAsInSlinky) {
  Bed bed(1, 1);
  bed.world.propagated_node_conditions = {"GPUProblem"};
  auto troubled = std::make_shared<kube::Document>(*bed.world.kube_nodes["k8s-0"]);
  troubled->doc["status"]["conditions"] = json::parse(R"([
      {"type": "GPUProblem", "status": "True", "reason": "GpuXid", "message": "Xid 79"}])");
  bed.world.kube_nodes["k8s-0"] = troubled;
  EXPECT_TRUE(bed.plan().actions.empty()) << "the condition alone drains nothing";
  auto cordoned = std::make_shared<kube::Document>(*troubled);
  cordoned->doc["spec"]["unschedulable"] = true;
  bed.world.kube_nodes["k8s-0"] = cordoned;
  const auto drains = all_of<DrainSlurmNode>(bed.plan());
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].reason, "slurm-operator: (GpuXid: Xid 79)");
}

TEST(NodeSetPlan, AnAdministratorsDrainIsNeverUndone) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-0"].reason = "bad DIMM";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<UndrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
}

TEST(NodeSetPlan, ADrainForAnOlderGresConfGoesOnceTheNodeRegistersAsConfigured) {
  Bed bed(1, 1);
  // slurmd registered with a gres.conf from before its NodeSet's lines: slurmctld drained it.
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN", "INVALID_REG"};
  bed.nodes["cpu-0"].reason = "gres/gpu count reported lower than configured (0 < 4)";
  EXPECT_TRUE(all_of<UndrainSlurmNode>(bed.plan()).empty());
  // slurmctld reconfigured, slurmd fetched the new files and registered its GPUs.
  bed.nodes["cpu-0"].state = {"IDLE", "DRAIN"};
  const NodeSetPlan plan = bed.plan();
  const auto undrains = all_of<UndrainSlurmNode>(plan);
  ASSERT_EQ(undrains.size(), 1U);
  EXPECT_EQ(undrains[0].node, "cpu-0");
  // An administrator's drain of the same node, in other words, stays.
  bed.nodes["cpu-0"].reason = "GPU 2 reported lower clocks";
  EXPECT_TRUE(all_of<UndrainSlurmNode>(bed.plan()).empty());
}

TEST(NodeSetPlan, AFailedConditionPatchMakesTheNodeSetRetry) {
  Bed bed(1, 1);
  bed.nodes["cpu-0"].reason = "maintenance soon";
  const NodeSetPlan plan = bed.plan();
  ASSERT_FALSE(plan.actions.empty());
  const Action& patch = plan.actions.front();
  const NodeSetVerdict verdict =
      conclude(bed.world, plan, {{&patch, to_string(patch.change) + ": 500"}}, "stamp");
  EXPECT_EQ(verdict.readiness.reason, "SyncFailed");
  ASSERT_TRUE(verdict.next);
  EXPECT_TRUE(verdict.next->requeue);
}

TEST(NodeSetPlan, AScheduledUpdateMakesItsReservationUnderAFinalizerAndWaitsForSlurmToShowIt) {
  Bed bed(1, 1);
  bed.world.nodeset.spec.update_strategy.type = "ScheduledUpdate";
  bed.world.nodeset.spec.update_strategy.scheduled_update.start_time = "2026-12-03T11:30:00Z";
  bed.world.nodeset.spec.update_strategy.scheduled_update.duration = "2h";
  bed.world.pods[0].revision = "old";
  NodeSetPlan plan = bed.plan();
  ASSERT_GE(plan.actions.size(), 2U);
  // The finalizer first, guarding the reservation: none is ever made that a deletion forgets.
  const auto* finalizers = std::get_if<SetFinalizers>(&plan.actions[0].change);
  ASSERT_NE(finalizers, nullptr);
  EXPECT_TRUE(plan.actions[0].guards_rest);
  EXPECT_NE(std::find(finalizers->finalizers.begin(), finalizers->finalizers.end(),
                      std::string(api::kFinalizerNodeSetReservation)),
            finalizers->finalizers.end());
  const auto* made = std::get_if<SyncReservation>(&plan.actions[1].change);
  ASSERT_NE(made, nullptr);
  EXPECT_FALSE(made->update);
  EXPECT_EQ(made->wanted.nodes, "cpu-0");
  // Open by the spec, but the pod goes only once Slurm shows the window.
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  ASSERT_TRUE(verdict.next);
  EXPECT_EQ(verdict.next->requeue_after, std::chrono::seconds(1));

  bed.world.finalizers = finalizers->finalizers;
  bed.world.slurm.reservation = made->wanted;
  plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_TRUE(drains[0].reason.ends_with("for scheduled update")) << drains[0].reason;
  verdict = conclude(bed.world, plan, {}, "stamp");
  EXPECT_EQ(find_condition(verdict.conditions, "ReservationCreated")->reason, "WindowOpen");
}

TEST(NodeSetPlan, PodsOfAnAdoptedRevisionAreCurrentAndNoneIsReplacedOrRevisionPruned) {
  // Moved from Slinky's operator: its pods carry its own revision hash.
  Bed bed(2, 2);
  bed.world.nodeset.spec.revision_history_limit = 0;
  bed.world.revisions.emplace_back(0, "cpu-slinky");
  for (auto& w : bed.world.pods) {
    w.revision = "6d7f9c8b5";
  }
  bed.world.revisions.emplace_back(1, "6d7f9c8b5");
  bed.world.adopted_revision = "6d7f9c8b5";
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  for (const auto& gone : all_of<DeleteRevision>(plan)) {
    EXPECT_NE(gone.name, "6d7f9c8b5") << "the adopted pods' revision is in use";
  }
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  EXPECT_TRUE(verdict.readiness.ready) << verdict.readiness.message;
  EXPECT_EQ(plan.status.value("updatedReplicas", int64_t{0}), 2);

  // Once the spec moves past the adoption, they are outdated and roll as any others.
  bed.world.adopted_revision.clear();
  plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(plan.status.value("updatedReplicas", int64_t{0}), 0);
}

TEST(NodeSetPlan, ANodeAddressAnEarlierPodsSlurmdTookGoesBackToThePodThatRuns) {
  Bed bed(2, 2);
  bed.world.pods[0].ip = "10.244.2.7";
  bed.world.pods[1].ip = "10.244.1.4";
  bed.nodes["cpu-0"].address = "10.244.2.7";
  bed.nodes["cpu-1"].address = "10.244.3.9";  // the cut-off Node's old pod registered again
  const auto updates = all_of<UpdateSlurmNode>(bed.plan());
  ASSERT_EQ(updates.size(), 1U);
  EXPECT_EQ(updates[0].node, "cpu-1");
  EXPECT_EQ(updates[0].update.address, "10.244.1.4");
  // Not for a pod on its way out, nor one whose slurmd is not ready yet.
  bed.world.pods[1].terminating = true;
  EXPECT_TRUE(all_of<UpdateSlurmNode>(bed.plan()).empty());
  bed.world.pods[1].terminating = false;
  bed.world.pods[1].ready = false;
  EXPECT_TRUE(all_of<UpdateSlurmNode>(bed.plan()).empty());
}

TEST(NodeSetPlan, AMissingControllerStopsThePlan) {
  Bed bed(1, 1);
  bed.world.controller.reset();
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty());
  ASSERT_TRUE(plan.stop);
  EXPECT_EQ(plan.stop->reason, "ControllerNotFound");
}

TEST(NodeSetPlan, PodsNoNodeCanTakeAreReportedWithTheSchedulersWords) {
  Bed bed(2, 2);
  // A GPU NodeSet on Nodes without GPUs: the scheduler says so on each pod.
  const json pending = {
      {"metadata", {{"name", "cpu-1"}, {"uid", "uid-cpu-1"}}},
      {"spec", json::object()},
      {"status",
       {{"phase", "Pending"},
        {"conditions",
         {{{"type", "PodScheduled"},
           {"status", "False"},
           {"reason", "Unschedulable"},
           {"message", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}}}}};
  const WorkerPod decoded_pod = worker_pod(bed.world.nodeset, testing::cached_pod(pending));
  EXPECT_EQ(decoded_pod.unschedulable, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.");
  bed.world.pods[1].phase = "Pending";
  bed.world.pods[1].ready = false;
  bed.world.pods[1].kube_node.clear();
  bed.world.pods[1].target_node.clear();
  bed.world.pods[1].unschedulable = decoded_pod.unschedulable;
  bed.nodes.erase("cpu-1");
  const NodeSetPlan plan = bed.plan();
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  EXPECT_EQ(verdict.readiness.reason, "PodsUnschedulable");
  EXPECT_EQ(verdict.readiness.message,
            "pod cpu-1: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.");
}

TEST(NodeSetPlan, ANodeSetThatWouldRegisterGpusItsPodsLackMakesNoPod) {
  Bed bed(2, 0);
  bed.world.nodeset.spec.slurmd["resources"]["limits"]["nvidia.com/gpu"] = 2;
  bed.world.nodeset.spec.extra_conf = "Gres=gpu:h100:8";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty());
  ASSERT_TRUE(plan.stop);
  EXPECT_EQ(plan.stop->reason, "InvalidConfig");
  EXPECT_NE(plan.stop->message.find("registers 8 GPUs"), std::string::npos) << plan.stop->message;
}

TEST(NodeSetPlan, PodsWaitForTheirComputeDomainAndTheNodeSetSaysWhy) {
  Bed bed(2, 1);
  bed.world.pods_wait_for =
      Readiness{false, "WaitingForComputeDomain", "ComputeDomain cpu-imex (status: NotReady)"};
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
  EXPECT_TRUE(plan.awaits_prerequisite);
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  EXPECT_EQ(verdict.readiness.reason, "WaitingForComputeDomain");
  // The pod that runs is still looked after.
  EXPECT_EQ(plan.ready, 1);
}

TEST(NodeSetPlan, AnAbsentComputeDomainIsPlannedAndItsFailureIsTheReadyReason) {
  Bed bed(1, 1);
  bed.world.compute_domain_absent = true;
  const NodeSetPlan plan = bed.plan();
  const Action* made = action_for(plan, "prerequisites");
  ASSERT_NE(made, nullptr);
  ASSERT_TRUE(std::holds_alternative<CreateComputeDomain>(made->change));
  EXPECT_EQ(made->on_failure, FailureEffect::kApply);
  const NodeSetVerdict verdict =
      conclude(bed.world, plan, {{made, to_string(made->change) + ": forbidden"}}, "stamp");
  EXPECT_EQ(verdict.readiness.reason, "ComputeDomainFailed");
  EXPECT_EQ(verdict.readiness.message, "create ComputeDomain cpu-imex: forbidden");
}

TEST(NodeSetPlan, SshHostKeysAreMadeWhenAbsentAndTheSshdConfigOnlyWhenItChanged) {
  Bed bed(1, 1);
  bed.world.nodeset.spec.ssh.enabled = true;
  const auto prerequisites = [&] {
    std::vector<std::string> made;
    for (const auto& a : bed.plan().actions) {
      if (a.chain == "prerequisites") {
        made.push_back(to_string(a.change));
      }
    }
    return made;
  };
  EXPECT_TRUE(prerequisites().empty()) << "both there and current: nothing";
  bed.world.ssh_host_keys_absent = true;
  bed.world.ssh_config_current = false;
  EXPECT_EQ(prerequisites(),
            (std::vector<std::string>{"create SSH host keys", "apply ConfigMap cpu-ssh-config"}));
}

// ---- Deletion: a scale-in to nothing, then the records, then the finalizers ----

// A deleted NodeSet, `minutes` after its deletionTimestamp.
void deleting(Bed& bed, int minutes = 0) {
  bed.world.deleting_since = kNow - std::chrono::minutes(minutes);
}

std::vector<std::string> without(std::vector<std::string> list, std::string_view item) {
  std::erase(list, std::string(item));
  return list;
}

TEST(NodeSetDeletion, EveryPodIsDrainedFirstAndOnlyADrainedIdleOneIsDeleted) {
  Bed bed(2, 3);
  deleting(bed);
  bed.nodes["cpu-1"].state = {"IDLE", "DRAIN"};
  bed.nodes["cpu-2"].state = {"ALLOCATED", "DRAIN"};
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-0");
  EXPECT_EQ(drains[0].reason,
            "slurm-operator: Pod (hpc/cpu-0) is pending termination for NodeSet deletion");
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-1");
  EXPECT_EQ(deletes[0].uid, "uid-cpu-1");
  EXPECT_TRUE(all_of<SetFinalizers>(plan).empty()) << "pods are left";
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
  EXPECT_FALSE(plan.releases_nodeset);
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  EXPECT_EQ(verdict.readiness.reason, "Deleting");
  EXPECT_EQ(verdict.readiness.message, "3 pods left, waiting for the jobs on cpu-0, cpu-2 to end");
  ASSERT_TRUE(verdict.next);
  EXPECT_EQ(verdict.next->requeue_after, std::chrono::seconds(5));
}

TEST(NodeSetDeletion, NothingRunningGoesAndNoFinalizerIsReleasedWhileSlurmIsAway) {
  for (const int minutes : {0, 60}) {
    Bed bed(2, 2);
    deleting(bed, minutes);
    bed.world.slurm.health = SlurmHealth::kUnreachable;
    bed.world.slurm.problem = "slurmrestd does not answer: timed out";
    const NodeSetPlan plan = bed.plan();
    EXPECT_TRUE(plan.actions.empty()) << to_string(plan.actions.front().change);
    const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
    const api::Condition* blocked = find_condition(verdict.conditions, "DeletionBlocked");
    ASSERT_NE(blocked, nullptr);
    EXPECT_EQ(blocked->status, "True");
    EXPECT_EQ(blocked->reason, "SlurmUnreachable");
    EXPECT_EQ(verdict.readiness.reason, "DeletionBlocked");
  }
}

TEST(NodeSetDeletion, APodNotRunningYetGoesWithoutSlurm) {
  Bed bed(1, 1);
  deleting(bed);
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  bed.world.pods[0].phase = "Pending";
  bed.world.pods[0].kube_node.clear();
  const NodeSetPlan plan = bed.plan();
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-0");
}

TEST(NodeSetDeletion, APodSlurmDoesNotKnowFollowsTheScaleInRule) {
  Bed bed(1, 1);
  deleting(bed);
  bed.nodes.clear();
  bed.world.pods[0].ready_since = "2026-12-03T11:59:30Z";
  EXPECT_EQ(bed.plan().blocked_reason, "SlurmNodeNotFound");
  // Seen in the e2e: a pod whose record had been pruned held its NodeSet's deletion for ever.
  bed.world.pods[0].ready_since = "2026-12-03T11:00:00Z";
  EXPECT_EQ(all_of<DeletePod>(bed.plan()).size(), 1U);
}

TEST(NodeSetDeletion, ANodeBeingUndrainedIsDrainedAgainInADeletionAsInAScaleIn) {
  for (const bool deleted : {false, true}) {
    Bed bed(deleted ? 1 : 0, 1);
    if (deleted) {
      deleting(bed);
    }
    bed.nodes["cpu-0"].state = {"IDLE", "DRAIN", "UNDRAIN"};
    const NodeSetPlan plan = bed.plan();
    EXPECT_EQ(all_of<DrainSlurmNode>(plan).size(), 1U) << (deleted ? "deletion" : "scale-in");
    EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  }
}

TEST(NodeSetDeletion, WithNoPodLeftTheRecordsGoFirstThenTheFinalizerInOneGuardedChain) {
  Bed bed(2, 2);
  deleting(bed);
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  bed.world.pods.clear();
  slurm::Node stranger;
  stranger.name = "other-0";
  stranger.state = {"IDLE"};
  stranger.features = {"other"};
  bed.nodes["other-0"] = stranger;
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(plan.actions.size(), 3U);
  for (size_t i = 0; i < 2; ++i) {
    const auto* removal = std::get_if<DeleteSlurmNode>(&plan.actions[i].change);
    ASSERT_NE(removal, nullptr) << to_string(plan.actions[i].change);
    EXPECT_EQ(removal->node, "cpu-" + std::to_string(i));
    EXPECT_EQ(plan.actions[i].chain, "");
    EXPECT_TRUE(plan.actions[i].guards_rest) << "a record not deleted keeps the finalizer";
  }
  const auto* finalizers = std::get_if<SetFinalizers>(&plan.actions[2].change);
  ASSERT_NE(finalizers, nullptr);
  EXPECT_EQ(plan.actions[2].chain, "");
  EXPECT_TRUE(finalizers->finalizers.empty());
  EXPECT_TRUE(plan.releases_nodeset);
}

TEST(NodeSetDeletion, ARecordSlurmDidNotDeleteBlocksAndKeepsTheNodeSet) {
  Bed bed(1, 1);
  deleting(bed);
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  bed.world.pods.clear();
  const NodeSetPlan plan = bed.plan();
  ASSERT_FALSE(plan.actions.empty());
  const Action& removal = plan.actions.front();
  const NodeSetVerdict verdict = conclude(
      bed.world, plan,
      {{&removal, to_string(removal.change) + ": slurmrestd: Operation timed out"}}, "stamp");
  const api::Condition* blocked = find_condition(verdict.conditions, "DeletionBlocked");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->status, "True");
  EXPECT_EQ(blocked->reason, "SlurmUpdateFailed");
  EXPECT_EQ(blocked->message, "delete Slurm node cpu-0: slurmrestd: Operation timed out");
  EXPECT_EQ(verdict.readiness.reason, "DeletionBlocked");
}

TEST(NodeSetDeletion, RecordsSlurmCannotBeAskedToDeleteKeepTheFinalizerAndSayTheWayOut) {
  Bed bed(1, 0);
  deleting(bed, 60);
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  bed.world.slurm.problem = "slurmrestd does not answer: timed out";
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty());
  const NodeSetVerdict verdict = conclude(bed.world, plan, {}, "stamp");
  const api::Condition* blocked = find_condition(verdict.conditions, "DeletionBlocked");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->reason, "SlurmUnreachable");
  EXPECT_NE(blocked->message.find("scontrol delete nodename"), std::string::npos);
  EXPECT_NE(blocked->message.find(api::kFinalizerNodeSetSlurmNodes), std::string::npos);
}

TEST(NodeSetDeletion, NeverPruningLeavesTheRecordsAndReleasesOnceThePodsAreGone) {
  Bed bed(1, 0);
  deleting(bed);
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(plan.actions.size(), 1U);
  EXPECT_TRUE(all_of<DeleteSlurmNode>(plan).empty());
  EXPECT_TRUE(std::get<SetFinalizers>(plan.actions[0].change).finalizers.empty());
}

TEST(NodeSetDeletion, BusyRecordsWithNoPodAreWaitedForThenLeftWithAWarning) {
  Bed bed(1, 1);
  bed.world.pods.clear();
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  bed.nodes["cpu-0"].state = {"ALLOCATED"};
  deleting(bed, 1);
  NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty());
  EXPECT_EQ(plan.deletion_left, "Slurm node records still busy with no pod left: cpu-0");

  deleting(bed, 4);
  plan = bed.plan();
  ASSERT_EQ(plan.actions.size(), 1U);
  const Action& release = plan.actions[0];
  EXPECT_TRUE(std::get<SetFinalizers>(release.change).finalizers.empty());
  ASSERT_EQ(release.events.size(), 1U);
  EXPECT_TRUE(release.events[0].warning);
  EXPECT_EQ(release.events[0].reason, "SlurmNodesLeft");
}

TEST(NodeSetDeletion, PodsThatDoNotEndAreWaitedForOnlyThroughThePatience) {
  Bed bed(1, 1);
  bed.world.pods[0].terminating = true;
  deleting(bed, 1);
  EXPECT_TRUE(bed.plan().actions.empty());
  deleting(bed, 4);
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(plan.actions.size(), 1U);
  EXPECT_TRUE(std::get<SetFinalizers>(plan.actions[0].change).finalizers.empty());
}

TEST(NodeSetDeletion, APodJustCreatedIsWaitedFor) {
  Bed bed(1, 0);
  deleting(bed);
  bed.world.expected.creations = {"cpu-0"};
  EXPECT_TRUE(bed.plan().actions.empty());
}

TEST(NodeSetDeletion, TheWholeClusterGoingReleasesAtOnce) {
  for (const bool gone : {false, true}) {
    Bed bed(2, 2);
    deleting(bed);
    bed.world.slurm.health = SlurmHealth::kUnreachable;
    if (gone) {
      bed.world.controller.reset();
    } else {
      bed.world.controller_deleting = true;
    }
    const NodeSetPlan plan = bed.plan();
    ASSERT_EQ(plan.actions.size(), 1U);
    EXPECT_TRUE(std::get<SetFinalizers>(plan.actions[0].change).finalizers.empty());
    EXPECT_TRUE(plan.releases_nodeset);
  }
}

TEST(NodeSetDeletion, TheReservationGoesBeforeItsFinalizerAndPodsDoNotWaitForIt) {
  Bed bed(1, 1);
  deleting(bed);
  const std::string reservation(api::kFinalizerNodeSetReservation);
  bed.world.finalizers.push_back(reservation);
  bed.world.slurm.reservation = slurm::Reservation{};
  const NodeSetPlan plan = bed.plan();
  const Action* first = action_for(plan, "");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(std::get<ReleaseReservation>(first->change).name, "SlurmOperatorMaint-cpu");
  EXPECT_TRUE(first->guards_rest);
  const auto finalizers = all_of<SetFinalizers>(plan);
  ASSERT_EQ(finalizers.size(), 1U);
  EXPECT_EQ(finalizers[0].finalizers, without(bed.world.finalizers, reservation));
  EXPECT_EQ(all_of<DrainSlurmNode>(plan).size(), 1U);
}

TEST(NodeSetDeletion, AReservationSlurmCannotBeAskedToDeleteKeepsItsFinalizer) {
  Bed bed(1, 0);
  deleting(bed);
  bed.world.finalizers.push_back(std::string(api::kFinalizerNodeSetReservation));
  bed.world.slurm.health = SlurmHealth::kUnreachable;
  bed.world.slurm.problem = "slurmrestd does not answer";
  const NodeSetPlan plan = bed.plan();
  const auto finalizers = all_of<SetFinalizers>(plan);
  ASSERT_EQ(finalizers.size(), 1U) << "the pods are gone: slurm-nodes goes, the reservation's not";
  EXPECT_EQ(finalizers[0].finalizers,
            std::vector<std::string>{std::string(api::kFinalizerNodeSetReservation)});
  EXPECT_EQ(plan.blocked_reason, "SlurmUnreachable");
}

TEST(NodeSetDeletion, AFinalizerReleasedByNobodyElseIsLeftAlone) {
  Bed bed(1, 0);
  deleting(bed);
  bed.world.finalizers.push_back("example.com/keep");
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(all_of<SetFinalizers>(plan).size(), 1U);
  EXPECT_EQ(all_of<SetFinalizers>(plan)[0].finalizers,
            std::vector<std::string>{"example.com/keep"});
  EXPECT_FALSE(plan.releases_nodeset) << "it stays: its status is still written";
}

TEST(NodeSetDeletion, AnUnreadableSpecNamesTheFieldAndTheWaysOut) {
  const Readiness why = unreadable_deletion("hpc/cpu", "spec.replicas: must be an integer",
                                            {std::string(api::kFinalizerNodeSetSlurmNodes)});
  EXPECT_FALSE(why.ready);
  EXPECT_EQ(why.reason, "InvalidSpec");
  EXPECT_TRUE(why.message.starts_with("spec.replicas: must be an integer: NodeSet hpc/cpu is "))
      << why.message;
  EXPECT_NE(why.message.find("kubectl edit nodeset"), std::string::npos);
  EXPECT_NE(why.message.find(api::kFinalizerNodeSetSlurmNodes), std::string::npos);
}

TEST(NodeSetPlan, ARecordIsNotPrunedWhileThePodThatRegistersItIsBeingCreated) {
  Bed bed(1, 0);
  bed.world.nodeset.spec.prune_slurm_node_records = "NodeNotFound";
  slurm::Node old;
  old.name = "cpu-0";
  old.state = {"DOWN", "DYNAMIC_NORM"};
  old.comment = build::pod_info(bed.world.nodeset, "cpu-0", "k8s-0").dump();
  bed.nodes["cpu-0"] = old;
  bed.world.expected.creations = {"cpu-0"};
  EXPECT_TRUE(all_of<DeleteSlurmNode>(bed.plan()).empty());
  bed.world.expected.creations.clear();
  bed.world.nodeset.spec.replicas = 0;
  EXPECT_EQ(all_of<DeleteSlurmNode>(bed.plan()).size(), 1U) << "no pod coming: pruned";
}

TEST(NodeSetPlan, ActionsReadAsSentences) {
  EXPECT_EQ(to_string(DrainSlurmNode{"cpu-1", "slurm-operator: why", ""}),
            "drain Slurm node cpu-1: slurm-operator: why");
  EXPECT_EQ(to_string(DeletePod{"cpu-1", "u1", "scale-in"}), "delete pod cpu-1 (uid u1): scale-in");
  slurm::NodeUpdate link;
  link.topology = "topo-switch:s1";
  EXPECT_EQ(to_string(UpdateSlurmNode{"cpu-1", link}),
            "update Slurm node cpu-1: topology=topo-switch:s1");
}

}  // namespace
}  // namespace tightrope::op
