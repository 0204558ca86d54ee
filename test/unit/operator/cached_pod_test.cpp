// A worker pod as the operator's cache keeps it: what the projection holds, and that the
// controller and the doctor read the same in it as in the whole pod.
#include "operator/cached_pod.hpp"

#include <gtest/gtest.h>

#include "kube/time.hpp"
#include "operator/diagnosis.hpp"
#include "operator/nodeset_plan.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

// A worker pod as the API server serves it, with what the cache drops: containers, volumes,
// tolerations, managed fields, running containers' statuses.
json whole_pod(const std::string& name, const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "slurm"},
            {"uid", "uid-" + name},
            {"resourceVersion", "42"},
            {"creationTimestamp", "2026-12-04T11:00:00Z"},
            {"labels",
             {{"app.kubernetes.io/name", "slurmd"},
              {"app.kubernetes.io/instance", "workers"},
              {"slinky.slurm.net/cluster", "slurm"},
              {"controller-revision-hash", "workers-1"},
              {"nodeset.slinky.slurm.net/pod-hostname", name}}},
            {"annotations",
             {{"nodeset.slinky.slurm.net/pod-cordon", "true"},
              {"nodeset.slinky.slurm.net/pod-deletion-cost", "-5"},
              {"kubectl.kubernetes.io/last-applied-configuration", std::string(4096, 'x')}}},
            {"ownerReferences", json::array({{{"apiVersion", "slinky.slurm.net/v1beta1"},
                                              {"kind", "NodeSet"},
                                              {"name", "workers"},
                                              {"uid", "uid-workers"},
                                              {"controller", true}}})},
            {"managedFields", json::array({{{"manager", "slurm-operator"}}})}}},
          {"spec",
           {{"nodeName", node},
            {"hostname", name},
            {"containers", json::array({{{"name", "slurmd"}, {"image", "slurmd:26.05"}}})},
            {"volumes", json::array({{{"name", "spool"}, {"emptyDir", json::object()}}})},
            {"tolerations", json::array({{{"operator", "Exists"}}})},
            {"affinity",
             {{"nodeAffinity",
               {{"requiredDuringSchedulingIgnoredDuringExecution",
                 {{"nodeSelectorTerms",
                   json::array({{{"matchFields",
                                  json::array({{{"key", "metadata.name"},
                                                {"operator", "In"},
                                                {"values", json::array({node})}}})}}})}}}}}}}}},
          {"status",
           {{"phase", "Running"},
            {"startTime", "2026-12-04T11:00:02Z"},
            {"conditions", json::array({{{"type", "Ready"},
                                         {"status", "True"},
                                         {"lastTransitionTime", "2026-12-04T11:00:05Z"}},
                                        {{"type", "SlurmNodeStateIdle"},
                                         {"status", "True"},
                                         {"message", "idle"},
                                         {"lastTransitionTime", "2026-12-04T11:00:06Z"}}})},
            {"containerStatuses",
             json::array({{{"name", "slurmd"},
                           {"restartCount", 0},
                           {"state", {{"running", {{"startedAt", "2026-12-04T11:00:03Z"}}}}}}})}}}};
}

json crash_looping(json pod) {
  pod["status"]["conditions"][0]["status"] = "False";
  pod["status"]["containerStatuses"] = json::array(
      {{{"name", "slurmd"},
        {"restartCount", 7},
        {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 5m0s"}}}}},
        {"lastState",
         {{"terminated",
           {{"exitCode", 1}, {"message", "error: slurmd initialization failed\n"}}}}}}});
  return pod;
}

TEST(CachedPod, KeepsWhatItsReadersReadAndNotTheRest) {
  json whole = crash_looping(whole_pod("w-0", "k8s-0"));
  whole["status"]["initContainerStatuses"] =
      json::array({{{"name", "logfile"}, {"state", {{"running", json::object()}}}}});
  const CachedPod pod = testing::cached_pod(whole);
  EXPECT_EQ(pod.meta.key(), "slurm/w-0");
  EXPECT_EQ(pod.created, "2026-12-04T11:00:00Z");
  EXPECT_EQ(pod.node_name, "k8s-0");
  EXPECT_EQ(pod.affinity_node, "k8s-0");
  EXPECT_EQ(pod.start_time, "2026-12-04T11:00:02Z");
  ASSERT_NE(pod.annotation("nodeset.slinky.slurm.net/pod-cordon"), nullptr);
  EXPECT_EQ(pod.annotation("kubectl.kubernetes.io/last-applied-configuration"), nullptr);
  ASSERT_NE(pod.condition("SlurmNodeStateIdle"), nullptr);
  EXPECT_EQ(pod.condition("SlurmNodeStateIdle")->message, "idle");
  ASSERT_EQ(pod.waiting.size(), 1U) << "a running init container says nothing";
  EXPECT_EQ(pod.waiting[0].restarts, 7);
  EXPECT_EQ(pod.waiting[0].last_exit_code, 1);

  json pulling = whole_pod("w-1", "k8s-0");
  pulling["status"]["containerStatuses"][0]["state"] = {
      {"waiting", {{"reason", "ErrImagePull"}, {"message", "not found"}}}};
  pulling["status"]["containerStatuses"][0]["lastState"] = {{"terminated", {{"exitCode", 2}}}};
  EXPECT_FALSE(testing::cached_pod(pulling).waiting.at(0).last_exit_code)
      << "a last exit is kept for a crash loop only";
}

TEST(CachedPod, TheControllerReadsAWorkerPodFromIt) {
  api::NodeSet n;
  n.metadata.name = "w";
  const WorkerPod w = worker_pod(n, testing::cached_pod(crash_looping(whole_pod("w-0", "k8s-0"))));
  EXPECT_EQ(w.uid, "uid-w-0");
  EXPECT_EQ(w.phase, "Running");
  EXPECT_FALSE(w.ready);
  EXPECT_EQ(w.ready_since, "2026-12-04T11:00:05Z");
  EXPECT_TRUE(w.cordoned);
  EXPECT_EQ(w.deletion_cost, -5);
  EXPECT_EQ(w.revision, "workers-1");
  EXPECT_EQ(w.target_node, "k8s-0");
  EXPECT_EQ(w.resource_version, "42");
  EXPECT_EQ(w.slurm_conditions.at("SlurmNodeStateIdle").first, "idle");
  EXPECT_EQ(w.start_failure,
            "container slurmd: CrashLoopBackOff: exit code 1: error: slurmd initialization failed");
  const WorkerPod bare = worker_pod(n, testing::cached_pod({{"metadata", {{"name", "w-3"}}}}));
  EXPECT_EQ(bare.phase, "Pending") << "no phase written yet";
  EXPECT_EQ(bare.hostname, "w-3") << "no spec.hostname: the pod's name";
}

TEST(CachedPod, TheDoctorFindsTheSameInTheProjectionAsInTheWholePod) {
  DiagnosisInputs in;
  in.now = *kube::parse_time("2026-12-04T12:00:00Z");
  in.namespace_name = "slurm";
  in.controller = {{"metadata", {{"name", "slurm"}, {"namespace", "slurm"}}}};
  in.nodesets = {{{"metadata", {{"name", "workers"}, {"namespace", "slurm"}}},
                  {"status", {{"nodeSetHash", "workers-2"}}}}};
  json unschedulable = whole_pod("w-2", "");
  unschedulable["spec"].erase("nodeName");
  unschedulable["status"] = {
      {"phase", "Pending"},
      {"conditions", json::array({{{"type", "PodScheduled"},
                                   {"status", "False"},
                                   {"reason", "Unschedulable"},
                                   {"message", "0/1 nodes are available"}}})}};
  json deleting = whole_pod("w-3", "k8s-1");
  deleting["metadata"]["deletionTimestamp"] = "2026-12-04T11:59:00Z";
  const std::vector<json> whole = {
      whole_pod("w-0", "k8s-1"), crash_looping(whole_pod("w-1", "k8s-1")), unschedulable, deleting};
  in.kube_nodes = {{{"metadata", {{"name", "k8s-1"}}}, {"spec", {{"unschedulable", true}}}}};
  auto nodes = std::make_shared<std::map<std::string, slurm::Node>>();
  (*nodes)["w-0"].name = "w-0";
  (*nodes)["w-0"].state = {"IDLE"};
  in.snapshot.nodes = nodes;
  in.snapshot.jobs = std::make_shared<std::map<int64_t, slurm::Job>>();

  // The operator runs operator_checks(); every check of the catalog is compared, so that one
  // added to them later reads a projected pod as it reads a whole one.
  const auto run = [&](const std::vector<json>& pods) {
    DiagnosisInputs with = in;
    with.pods = pods;
    return doctor::diagnose(diagnosis_view(std::move(with)));
  };
  std::vector<json> projected;
  for (const auto& p : whole) {
    projected.push_back(pod_document(testing::cached_pod(p)));
  }
  const auto expected = run(whole);
  const auto found = run(projected);
  std::string checks;
  for (const auto& f : problems(expected)) {
    checks += f.check + " ";
  }
  // The pods give the checks something to find.
  for (const char* check : {"pod-failing", "pod-unschedulable", "worker-not-registered",
                            "cordon-drain-mismatch", "config-drift"}) {
    EXPECT_NE(checks.find(check), std::string::npos) << check << " not in " << checks;
  }
  ASSERT_EQ(found.size(), expected.size());
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].check, expected[i].check);
    EXPECT_EQ(found[i].subject, expected[i].subject);
    EXPECT_EQ(found[i].message, expected[i].message);
    EXPECT_EQ(found[i].evidence, expected[i].evidence) << found[i].check;
    EXPECT_EQ(found[i].fix, expected[i].fix);
  }
}

}  // namespace
}  // namespace tightrope::op
