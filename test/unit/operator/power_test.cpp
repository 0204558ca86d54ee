// Power saving: what a power-saved NodeSet's annotations mean and refuse, the powered-down record
// slurmctld is given for each node, slurm.conf's power-saving settings, and the plan that runs a
// pod exactly for each node Slurm powers up.
#include "operator/build/power.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "nodeset_bed.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/nodeset_plan.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using api::testing::decoded;
using nlohmann::json;
using testing::all_of;
using testing::Bed;

constexpr const char* kLimits =
    "  slurmd:\n    resources:\n      limits: {cpu: 1500m, memory: 4Gi}\n";

api::NodeSet nodeset(const std::string& name, const std::string& annotations,
                     const std::string& spec = kLimits) {
  return decoded(api::decode_nodeset(
      api::testing::yaml_to_json("apiVersion: slinky.slurm.net/v1beta1\n"
                                 "kind: NodeSet\n"
                                 "metadata:\n"
                                 "  name: " +
                                 name + "\n  namespace: hpc\n" +
                                 (annotations.empty() ? "" : "  annotations:\n" + annotations) +
                                 "spec:\n"
                                 "  controllerRef: {name: slurm}\n"
                                 "  replicas: 3\n"
                                 "  partition: {enabled: true}\n" +
                                 spec)
          .front()));
}

const std::string kPowered = "    tightrope.slurm.net/suspend-time-seconds: \"120\"\n";

std::string error_of(const api::NodeSet& n) {
  const auto power = build::nodeset_power_saving(n);
  return power ? std::string() : power.error().to_string();
}

TEST(PowerSaving, IsOffWithoutSuspendTimeAndReadsItsSecondsWithDefaults) {
  EXPECT_FALSE(*build::nodeset_power_saving(nodeset("cpu", "")));
  const auto power = build::nodeset_power_saving(nodeset("cpu", kPowered));
  ASSERT_TRUE(power && *power);
  EXPECT_EQ(**power, (build::PowerSaving{120, 300, 30}));
  const auto tuned = build::nodeset_power_saving(
      nodeset("cpu", kPowered + "    tightrope.slurm.net/resume-timeout-seconds: \"900\"\n"
                                "    tightrope.slurm.net/suspend-timeout-seconds: \"10\"\n"));
  EXPECT_EQ(**tuned, (build::PowerSaving{120, 900, 10}));
}

TEST(PowerSaving, RefusesWhatSlurmCouldNotDoNamingTheField) {
  EXPECT_EQ(error_of(nodeset("cpu", "    tightrope.slurm.net/suspend-time-seconds: 2m\n")),
            "metadata.annotations[tightrope.slurm.net/suspend-time-seconds]: must be whole "
            "seconds from 30 to 86400, not \"2m\"");
  EXPECT_EQ(error_of(nodeset("cpu", "    tightrope.slurm.net/resume-timeout-seconds: \"60\"\n")),
            "metadata.annotations[tightrope.slurm.net/resume-timeout-seconds]: has no effect "
            "without tightrope.slurm.net/suspend-time-seconds, which turns power saving on");
  EXPECT_EQ(error_of(nodeset("cpu", kPowered, "")),
            "spec.slurmd.resources.limits[cpu]: a power-saved NodeSet needs its slurmd "
            "container's cpu limit: Slurm is told each node's size before any pod of it exists");
  EXPECT_EQ(
      error_of(nodeset("cpu", kPowered, "  slurmd:\n    resources:\n      limits: {cpu: \"2\"}\n")),
      "spec.slurmd.resources.limits[memory]: a power-saved NodeSet needs its slurmd "
      "container's memory limit: Slurm is told each node's size before any pod of it "
      "exists");
  EXPECT_NE(error_of(nodeset("cpu", kPowered, std::string(kLimits) + "  scalingMode: DaemonSet\n"))
                .find("spec.scalingMode: power saving needs StatefulSet mode"),
            std::string::npos);
}

TEST(PowerSaving, EachNodeIsAPoweredDownRecordSizedFromTheLimits) {
  const auto n = nodeset("cpu", kPowered);
  EXPECT_EQ(*build::cloud_node_record(n, 2),
            "NodeName=cpu-2 State=CLOUD CPUs=2 RealMemory=4096 Features=cpu");
  // extraConf's own size wins: the record says what slurmd would.
  const auto sized =
      nodeset("cpu", kPowered, std::string(kLimits) + "  extraConf: CPUs=1 Weight=5\n");
  EXPECT_EQ(*build::cloud_node_record(sized, 0),
            "NodeName=cpu-0 State=CLOUD RealMemory=4096 CPUs=1 Features=cpu Weight=5");
}

TEST(PowerSaving, GpusOfNodesSlurmMakesAreNamedWithTheirDeviceFiles) {
  const std::string gpu_limits =
      "  slurmd:\n    resources:\n      limits: {cpu: \"1\", memory: 1Gi, nvidia.com/gpu: 4}\n";
  const std::string typed = "    tightrope.slurm.net/gpu-type: h100\n";
  const std::string files =
      "    tightrope.slurm.net/gres-conf: \"Name=gpu File=/dev/nvidia[0-3]\"\n";
  const auto n = nodeset("gpu", kPowered + typed + files, gpu_limits);
  EXPECT_EQ(*build::cloud_node_record(n, 0),
            "NodeName=gpu-0 State=CLOUD CPUs=1 RealMemory=1024 Features=gpu Gres=gpu:h100:4");
  build::ControllerInputs in;
  in.nodesets = {n};
  const std::string gres = build::build_gres_conf(testing::controller(), in).value_or("");
  EXPECT_NE(gres.find("NodeName=gpu-[0-1023] AutoDetect=off\n"
                      "NodeName=gpu-[0-1023] Name=gpu File=/dev/nvidia[0-3] Type=h100\n"),
            std::string::npos)
      << gres;
  // Slurm cannot autodetect for the nodes it makes, and ignores GPUs without files.
  const std::vector<std::string> unnamed = {
      "", "    tightrope.slurm.net/gres-autodetect: nvml\n",
      "    tightrope.slurm.net/gres-conf: \"Name=gpu Count=4\"\n"};
  for (const std::string& without : unnamed) {
    const auto refused =
        build::nodeset_gpus(nodeset("gpu", kPowered + typed + without, gpu_limits));
    ASSERT_FALSE(refused) << without;
    EXPECT_NE(refused.error().to_string().find("must be named with their device files"),
              std::string::npos);
  }
  EXPECT_EQ(build::nodeset_gpus(nodeset("gpu", typed, gpu_limits))->autodetect, "full")
      << "without power saving slurmd autodetects";
}

TEST(PowerSaving, SlurmdSaysItBootedAndItsPodNeverDownsAPoweredDownNode) {
  const build::NodeSetInputs in{testing::controller()};
  const auto powered = *build::build_nodeset_pod(nodeset("cpu", kPowered), in, 0, "");
  json slurmd;
  for (const auto& container : powered["spec"]["containers"]) {
    if (container["name"] == "slurmd") {
      slurmd = container;
    }
  }
  EXPECT_EQ(slurmd["args"][1], "-b");
  EXPECT_NE(slurmd.dump().find("*POWERED_DOWN*|*POWERING_DOWN*) exit 0"), std::string::npos);
  const auto plain = *build::build_nodeset_pod(nodeset("cpu", ""), in, 0, "");
  EXPECT_EQ(plain.dump().find("\"-b\""), std::string::npos);
  EXPECT_NE(build::nodeset_revision_name(nodeset("cpu", kPowered), in),
            build::nodeset_revision_name(nodeset("cpu", ""), in))
      << "turning power saving on rolls the workers onto slurmd -b";
}

// Every value `key` has in slurm.conf, in order.
std::vector<std::string> values_of(const std::string& text, const std::string& key) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      if (word.starts_with(key + "=")) {
        out.push_back(word.substr(key.size() + 1));
      }
    }
  }
  return out;
}

TEST(PowerSaving, SlurmConfPowersThePowerSavedPartitionAndKeepsTheOthersUp) {
  const api::Controller c = testing::controller();
  build::ControllerInputs in;
  in.nodesets = {nodeset("cpu", ""), nodeset("gpu", kPowered)};
  std::string conf = build::build_slurm_conf(c, in);
  EXPECT_EQ(values_of(conf, "SuspendTime"), (std::vector<std::string>{"120", "INFINITE", "120"}))
      << conf;
  EXPECT_EQ(values_of(conf, "ResumeProgram"), std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(values_of(conf, "SuspendExcParts"), std::vector<std::string>{"cpu"});
  EXPECT_NE(conf.find("PartitionName=gpu Nodes=gpu SuspendTime=120 ResumeTimeout=300 "
                      "SuspendTimeout=30"),
            std::string::npos)
      << conf;
  // The administrator's exclusions join the operator's; without power saving, theirs alone.
  auto admin = c;
  admin.spec.extra_conf = "SuspendExcParts=debug\n";
  EXPECT_EQ(values_of(build::build_slurm_conf(admin, in), "SuspendExcParts"),
            std::vector<std::string>{"cpu,debug"});
  in.nodesets.pop_back();
  conf = build::build_slurm_conf(admin, in);
  EXPECT_TRUE(values_of(conf, "SuspendTime").empty()) << conf;
  EXPECT_EQ(values_of(conf, "SuspendExcParts"), std::vector<std::string>{"debug"});
}

// A power-saved NodeSet of 3 whose first `pods` pods run on powered-up CLOUD nodes.
Bed power_bed(int pods) {
  Bed bed(3, pods);
  auto& n = bed.world.nodeset;
  n.metadata.annotations[std::string(api::kAnnotationSuspendTime)] = "120";
  n.spec.slurmd = json::parse(R"({"resources":{"limits":{"cpu":"1","memory":"1Gi"}}})");
  const std::string revision =
      build::nodeset_revision_name(n, build::NodeSetInputs{*bed.world.controller});
  bed.world.revisions = {{1, revision}};
  for (auto& w : bed.world.pods) {
    w.revision = revision;
  }
  for (auto& [name, node] : bed.nodes) {
    node.state = {"IDLE", "CLOUD", "DYNAMIC_NORM"};
  }
  return bed;
}

slurm::Node cloud_node(const std::string& name, std::vector<std::string> state) {
  slurm::Node node;
  node.name = name;
  node.state = std::move(state);
  node.features = {"cpu"};
  return node;
}

TEST(PowerSavingPlan, SlurmKnowsEveryNodeUpToTheMaximumPoweredDownAndNoPodRuns) {
  Bed bed = power_bed(0);
  NodeSetPlan plan = bed.plan();
  const auto records = all_of<CreateSlurmNode>(plan);
  ASSERT_EQ(records.size(), 3U);
  EXPECT_EQ(records[1].record, "NodeName=cpu-1 State=CLOUD CPUs=1 RealMemory=1024 Features=cpu");
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
  EXPECT_EQ(plan.want, 0);
  // Made: nothing more while Slurm keeps them down.
  for (const char* name : {"cpu-0", "cpu-1", "cpu-2"}) {
    bed.nodes[name] = cloud_node(name, {"IDLE", "CLOUD", "POWERED_DOWN", "DYNAMIC_NORM"});
  }
  plan = bed.plan();
  EXPECT_TRUE(plan.actions.empty()) << to_string(plan.actions.front().change);
}

TEST(PowerSavingPlan, ANodeSlurmPowersUpGetsItsOwnPodWhateverItsOrdinal) {
  Bed bed = power_bed(0);
  bed.nodes["cpu-0"] = cloud_node("cpu-0", {"IDLE", "CLOUD", "POWERED_DOWN"});
  bed.nodes["cpu-1"] = cloud_node("cpu-1", {"IDLE", "CLOUD", "POWERED_DOWN"});
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"ALLOCATED", "CLOUD", "NOT_RESPONDING", "POWERING_UP"});
  const NodeSetPlan plan = bed.plan();
  const auto creates = all_of<CreatePod>(plan);
  ASSERT_EQ(creates.size(), 1U);
  EXPECT_EQ(creates[0].name, "cpu-2");
  EXPECT_EQ(plan.want, 1);
}

TEST(PowerSavingPlan, APoweredDownNodesPodGoesWithoutADrainAndItsRecordStays) {
  Bed bed = power_bed(2);
  bed.nodes["cpu-1"].state = {"IDLE", "CLOUD", "POWERED_DOWN", "DYNAMIC_NORM"};
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"IDLE", "CLOUD", "POWERED_DOWN"});
  const NodeSetPlan plan = bed.plan();
  const auto deletes = all_of<DeletePod>(plan);
  ASSERT_EQ(deletes.size(), 1U);
  EXPECT_EQ(deletes[0].name, "cpu-1");
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<DeleteSlurmNode>(plan).empty());
  EXPECT_TRUE(all_of<CreatePod>(plan).empty());
}

TEST(PowerSavingPlan, ABusyNodeKeepsItsPodWhateverSlurmPlans) {
  Bed bed = power_bed(1);
  bed.nodes["cpu-0"].state = {"ALLOCATED", "CLOUD", "POWER_DOWN"};
  bed.nodes["cpu-1"] = cloud_node("cpu-1", {"IDLE", "CLOUD", "POWERED_DOWN"});
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"IDLE", "CLOUD", "POWERED_DOWN"});
  const NodeSetPlan plan = bed.plan();
  EXPECT_TRUE(all_of<DeletePod>(plan).empty());
  EXPECT_TRUE(all_of<DrainSlurmNode>(plan).empty());
}

TEST(PowerSavingPlan, ANodeThatNeverCameUpLosesItsPodWithItsReasonAndIsMadeResumable) {
  Bed bed = power_bed(1);
  auto& w = bed.world.pods[0];
  w.phase = "Pending";
  w.ready = false;
  w.start_failure = "container slurmd: ImagePullBackOff: image \"nope\" not found";
  slurm::Node& node = bed.nodes["cpu-0"];
  node.state = {"DOWN", "CLOUD", "POWERED_DOWN"};
  node.reason = "ResumeTimeout reached";
  bed.nodes["cpu-1"] = cloud_node("cpu-1", {"IDLE", "CLOUD", "POWERED_DOWN"});
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"IDLE", "CLOUD", "POWERED_DOWN"});
  const NodeSetPlan plan = bed.plan();
  ASSERT_EQ(all_of<DeletePod>(plan).size(), 1U);
  const auto resumes = all_of<ResumeSlurmNode>(plan);
  ASSERT_EQ(resumes.size(), 1U);
  EXPECT_EQ(resumes[0].node, "cpu-0");
  bool told = false;
  for (const auto& a : plan.actions) {
    for (const auto& e : a.events) {
      if (e.reason == "ResumeTimedOut") {
        told = true;
        EXPECT_NE(e.message.find("ImagePullBackOff"), std::string::npos) << e.message;
      }
    }
  }
  EXPECT_TRUE(told);
}

TEST(PowerSavingPlan, APoweredDownNodeAPodsPreStopSetDownIsResumedOnceNoPodOfItIsLeft) {
  Bed bed = power_bed(1);
  // cpu-1 and cpu-2: DOWN from the preStop of pods of an earlier cluster of the same name.
  for (const char* name : {"cpu-0", "cpu-1", "cpu-2"}) {
    bed.nodes[name] = cloud_node(name, {"DOWN", "CLOUD", "POWERED_DOWN"});
    bed.nodes[name].reason = "slurm-operator: Pod is terminating";
  }
  const NodeSetPlan plan = bed.plan();
  std::vector<std::string> resumed;
  for (const auto& r : all_of<ResumeSlurmNode>(plan)) {
    resumed.push_back(r.node);
  }
  EXPECT_EQ(resumed, (std::vector<std::string>{"cpu-1", "cpu-2"}))
      << "cpu-0 has a pod: its own preStop may still be at work";
  // An administrator's DOWN is theirs.
  Bed admin = power_bed(0);
  for (const char* name : {"cpu-0", "cpu-1", "cpu-2"}) {
    admin.nodes[name] = cloud_node(name, {"DOWN", "CLOUD", "POWERED_DOWN"});
    admin.nodes[name].reason = "bad fan";
  }
  EXPECT_TRUE(all_of<ResumeSlurmNode>(admin.plan()).empty());
}

TEST(PowerSavingPlan, ANodeWhosePodCannotStartSaysWhyInItsCommentUntilItRuns) {
  Bed bed = power_bed(1);
  auto& w = bed.world.pods[0];
  w.phase = "Pending";
  w.ready = false;
  w.kube_node.clear();
  w.unschedulable = "0/1 nodes are available: 1 Insufficient cpu.";
  bed.nodes["cpu-0"].state = {"ALLOCATED", "CLOUD", "NOT_RESPONDING", "POWERING_UP"};
  bed.nodes["cpu-1"] = cloud_node("cpu-1", {"IDLE", "CLOUD", "POWERED_DOWN"});
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"IDLE", "CLOUD", "POWERED_DOWN"});
  NodeSetPlan plan = bed.plan();
  auto updates = all_of<UpdateSlurmNode>(plan);
  ASSERT_EQ(updates.size(), 1U);
  const json comment = json::parse(updates[0].update.comment.value_or("{}"));
  EXPECT_EQ(comment["podName"], "cpu-0");
  EXPECT_EQ(comment["waiting"],
            "pod cpu-0 unschedulable: 0/1 nodes are available: 1 Insufficient cpu.");
  EXPECT_TRUE(all_of<DeletePod>(plan).empty()) << "Slurm decides when it has waited enough";
  // Told: nothing more until the pod's words change.
  bed.nodes["cpu-0"].comment = *updates[0].update.comment;
  plan = bed.plan();
  EXPECT_TRUE(all_of<UpdateSlurmNode>(plan).empty());
}

TEST(PowerSavingPlan, ALoweredMaximumScalesInAsUsualAndDeletesThePoweredDownRecordsOverIt) {
  Bed bed = power_bed(2);
  bed.world.nodeset.spec.replicas = 1;
  bed.world.revisions = {{1, build::nodeset_revision_name(
                                 bed.world.nodeset, build::NodeSetInputs{*bed.world.controller})}};
  bed.nodes["cpu-2"] = cloud_node("cpu-2", {"IDLE", "CLOUD", "POWERED_DOWN"});
  const NodeSetPlan plan = bed.plan();
  const auto drains = all_of<DrainSlurmNode>(plan);
  ASSERT_EQ(drains.size(), 1U);
  EXPECT_EQ(drains[0].node, "cpu-1");
  const auto deleted = all_of<DeleteSlurmNode>(plan);
  ASSERT_EQ(deleted.size(), 1U);
  EXPECT_EQ(deleted[0].node, "cpu-2");
}

}  // namespace
}  // namespace tightrope::op
