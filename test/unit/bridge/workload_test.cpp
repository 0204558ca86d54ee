#include "bridge/workload.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "bridge/placement.hpp"
#include "bridge/well_known.hpp"

namespace tightrope::bridge {
namespace {

using nlohmann::json;

Pod decode(const json& doc) {
  simdjson::dom::parser parser;
  const std::string text = doc.dump();
  simdjson::dom::element element = parser.parse(text);
  Pod pod;
  EXPECT_TRUE(decode_pod(element, &pod).ok());
  return pod;
}

json pod_doc(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name}}},
          {"spec",
           {{"schedulerName", "slurm-bridge-scheduler"},
            {"containers",
             {{{"name", "main"},
               {"resources",
                {{"requests", {{"cpu", "1500m"}, {"memory", "1Gi"}}},
                 {"limits", {{"nvidia.com/gpu", "2"}}}}}},
              {{"name", "side"}, {"resources", {{"limits", {{"cpu", "500m"}}}}}}}},
            {"initContainers",
             {{{"name", "init"}, {"resources", {{"requests", {{"memory", "3Gi"}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

TEST(DecodePod, AddsContainersTakesTheLargerInitAndCountsGpus) {
  const Pod pod = decode(pod_doc("a"));
  EXPECT_EQ(pod.requests.cpu_milli, 2000);
  EXPECT_EQ(pod.requests.memory_bytes, int64_t{3} << 30);
  EXPECT_EQ(pod.requests.gpus, 2);
  EXPECT_EQ(pod.phase, "Pending");
  EXPECT_FALSE(pod.finalizer);
  EXPECT_FALSE(pod.bound());
}

TEST(DecodePod, KeepsOnlyTheAnnotationsTheBridgeReads) {
  json doc = pod_doc("a");
  doc["metadata"]["annotations"] = {{"slurmjob.slinky.slurm.net/account", "physics"},
                                    {"kubectl.kubernetes.io/last-applied-configuration", "{}"}};
  doc["metadata"]["finalizers"] = {"scheduler.slinky.slurm.net/finalizer"};
  const Pod pod = decode(doc);
  EXPECT_EQ(pod.annotations.size(), 1U);
  EXPECT_TRUE(pod.finalizer);
}

TEST(GroupOf, PodGroupThenLeaderWorkerSetThenGangJobThenThePod) {
  Pod pod = decode(pod_doc("w-0"));
  EXPECT_EQ(group_of(pod, nullptr), (GroupKey{"ml", "Pod", "w-0"}));
  BatchJob job;
  job.meta.name = "train";
  job.indexed = true;
  job.parallelism = 4;
  job.completions = 4;
  pod.meta.owner_references = {{"batch/v1", "Job", "train", "uid", true}};
  EXPECT_EQ(group_of(pod, &job), (GroupKey{"ml", "Job", "train"}));
  EXPECT_EQ(group_size(group_of(pod, &job), pod, &job, std::nullopt), 4);
  job.parallelism = 2;  // not all at once: one job a pod
  EXPECT_EQ(group_of(pod, &job).kind, "Pod");
  pod.meta.labels = {{std::string(kLabelLwsName), "llm"}, {std::string(kLabelLwsGroupIndex), "1"}};
  pod.annotations[std::string(kAnnotationLwsSize)] = "3";
  const GroupKey lws = group_of(pod, &job);
  EXPECT_EQ(lws, (GroupKey{"ml", "LeaderWorkerSet", "llm-1"}));
  EXPECT_EQ(group_size(lws, pod, &job, std::nullopt), 3);
  pod.meta.labels.emplace_back(std::string(kLabelPodGroup), "gang");
  EXPECT_EQ(group_of(pod, &job), (GroupKey{"ml", "PodGroup", "gang"}));
  EXPECT_EQ(group_size(group_of(pod, &job), pod, &job, 4), 4);
  EXPECT_EQ(GroupKey::parse("ml/PodGroup/gang"), (GroupKey{"ml", "PodGroup", "gang"}));
  EXPECT_EQ(GroupKey::parse("ml/PodGroup"), std::nullopt);
}

TEST(JobOptions, EachBadAnnotationIsAnErrorOnItsField) {
  JobOptions options;
  const Annotations a = {{"slurmjob.slinky.slurm.net/timelimit", "ten"},
                         {"slurmjob.slinky.slurm.net/exclusive", "yes"},
                         {"slurmjob.slinky.slurm.net/mem-per-node", "lots"},
                         {"slurmjob.slinky.slurm.net/acount", "physics"},
                         {"slurmjob.slinky.slurm.net/partition", "gpu"},
                         {"other.io/x", "y"}};
  const api::FieldErrors errors = parse_job_options(a, &options);
  ASSERT_EQ(errors.size(), 4U);
  EXPECT_EQ(errors[0].field, "metadata.annotations[slurmjob.slinky.slurm.net/acount]");
  EXPECT_NE(errors[0].message.find("known: account"), std::string::npos);
  EXPECT_EQ(errors[1].field, "metadata.annotations[slurmjob.slinky.slurm.net/exclusive]");
  EXPECT_EQ(options.partition, "gpu");
}

TEST(ToExternalJob, OnePodATaskOnWholeNodesWithTheWorkloadsOptions) {
  const Pod a = decode(pod_doc("train-0"));
  const Pod b = decode(pod_doc("train-1"));
  BatchJob job;
  job.active_deadline_seconds = 90;
  JobDefaults defaults{"bridge", "kubernetes", "alice", {}};
  const Annotations options = {{"slurmjob.slinky.slurm.net/account", "physics"},
                               {"slurmjob.slinky.slurm.net/priority", "100"}};
  const auto out = to_external_job({"ml", "Job", "train"}, {&a, &b}, options, defaults, &job);
  ASSERT_TRUE(out.ok()) << api::join(out.error());
  EXPECT_EQ(out->name, "ml/train");
  EXPECT_EQ(out->partition, "bridge");
  EXPECT_EQ(out->account, "physics");
  EXPECT_EQ(out->user, "alice");
  EXPECT_EQ(out->tasks, 2);
  EXPECT_EQ(out->min_nodes, 2);
  EXPECT_EQ(out->tasks_per_node, 1);
  EXPECT_EQ(out->cpus_per_task, 2);
  EXPECT_EQ(out->memory_per_cpu_mib, 1536);
  EXPECT_EQ(out->tres_per_task, "gres/gpu:2");
  EXPECT_EQ(out->priority, 100);
  EXPECT_EQ(out->time_limit, std::chrono::minutes(2));
  const auto claim = JobClaim::decode(out->admin_comment);
  ASSERT_TRUE(claim.has_value());
  EXPECT_EQ(claim->group, "ml/Job/train");
  EXPECT_EQ(claim->pods, (std::vector<std::string>{"ml/train-0", "ml/train-1"}));
}

TEST(ToExternalJob, AUserTheNamespaceMayNotUseIsRefused) {
  const Pod a = decode(pod_doc("p"));
  JobDefaults defaults{"bridge", "", "", {"bob"}};
  const Annotations options = {{"slurmjob.slinky.slurm.net/user-id", "root"}};
  const auto out = to_external_job({"ml", "Pod", "p"}, {&a}, options, defaults, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error()[0].message.find("may not run jobs as \"root\""), std::string::npos);
  defaults.allowed_users = {"*"};
  EXPECT_TRUE(to_external_job({"ml", "Pod", "p"}, {&a}, options, defaults, nullptr).ok());
}

TEST(ToExternalJob, SharedNodesLetSlurmPackTasks) {
  const Pod a = decode(pod_doc("a"));
  const Pod b = decode(pod_doc("b"));
  const Annotations options = {{"slurmjob.slinky.slurm.net/exclusive", "false"}};
  const auto out = to_external_job({"ml", "PodGroup", "g"}, {&a, &b}, options, {}, nullptr);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->exclusive);
  EXPECT_EQ(out->min_nodes, 1);
  EXPECT_EQ(out->max_nodes, 2);
  EXPECT_FALSE(out->tasks_per_node.has_value());
}

Node node(const std::string& name) {
  Node n;
  n.meta.name = name;
  n.ready = true;
  n.allocatable = {8000, int64_t{32} << 30, 4};
  return n;
}

TEST(Placement, TaintsSelectorsReadinessAndSizeExcludeNodes) {
  Pod pod = decode(pod_doc("a"));
  Node fits = node("k1");
  fits.taints = {{std::string(kTaintManagedNode), "slurm-bridge-scheduler", "NoExecute"}};
  Node tainted = node("k2");
  tainted.taints = {{"gpu-broken", "", "NoSchedule"}};
  Node small = node("k3");
  small.allocatable.gpus = 1;
  Node down = node("k4");
  down.ready = false;
  Node labelled = node("k5");
  labelled.meta.labels = {{std::string(kLabelSlurmNodeName), "slurm-k5"}};
  pod.node_selector = {{"zone", "a"}};
  EXPECT_EQ(excluded_nodes({&pod}, {&fits, &tainted, &small, &down, &labelled}),
            (std::vector<std::string>{"k1", "k2", "k3", "k4", "slurm-k5"}));
  pod.node_selector.clear();
  pod.tolerations = {{"gpu-broken", "Exists", "", ""}};
  EXPECT_EQ(excluded_nodes({&pod}, {&fits, &tainted, &small, &down}),
            (std::vector<std::string>{"k3", "k4"}));
  EXPECT_NE(unfit_reason(pod, small).find("1 GPUs allocatable, the pod needs 2"),
            std::string::npos);
  // A cordon is Slurm's to wait out (it drains the node), not a reason to exclude it.
  Node cordoned = node("k6");
  cordoned.taints = {{"node.kubernetes.io/unschedulable", "", "NoSchedule"}};
  EXPECT_EQ(unfit_reason(pod, cordoned), "");
}

TEST(Placement, BoundPodsKeepTheirNodeAndTheRestFillSlotsInIndexOrder) {
  Pod p0 = decode(pod_doc("w-a"));
  Pod p1 = decode(pod_doc("w-b"));
  Pod p2 = decode(pod_doc("w-c"));
  p0.annotations[std::string(kAnnotationCompletionIndex)] = "2";
  p1.annotations[std::string(kAnnotationCompletionIndex)] = "0";
  p2.node_name = "k1";
  const auto out = assign_pods({&p0, &p1, &p2}, {{"k1", 1}, {"k2", 1}, {"k3", 1}});
  EXPECT_EQ(out, (std::map<std::string, std::string>{{"w-b", "k2"}, {"w-a", "k3"}}));
  const auto packed = assign_pods({&p0, &p1}, {{"k9", 2}});
  EXPECT_EQ(packed.size(), 2U);
}

}  // namespace
}  // namespace tightrope::bridge
