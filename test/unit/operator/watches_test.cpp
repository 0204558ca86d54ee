// The operator's watch mappings, each a function of the changed object: what a change wakes.
#include "operator/watches.hpp"

#include <gtest/gtest.h>

#include "operator/cache.hpp"
#include "operator/resources.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

kube::Document nodeset(int64_t generation, json status = json::object()) {
  kube::Document d;
  d.meta.namespace_name = "hpc";
  d.meta.name = "cpu";
  d.meta.generation = generation;
  d.doc = {{"metadata", {{"name", "cpu"}, {"namespace", "hpc"}}},
           {"spec", {{"controllerRef", {{"name", "slurm"}}}, {"replicas", 2}}},
           {"status", std::move(status)}};
  return d;
}

TEST(Watches, ANodeSetsStatusWriteWakesNoController) {
  const kube::Document before = nodeset(3, {{"slurmIdle", 2}});
  const kube::Document counted = nodeset(3, {{"slurmIdle", 1}, {"slurmAllocated", 1}});
  EXPECT_FALSE(spec_changed(before, counted));
}

TEST(Watches, ASpecChangeADeletionOrALabelWakesTheController) {
  const kube::Document before = nodeset(3);
  EXPECT_TRUE(spec_changed(before, nodeset(4)));
  kube::Document deleted = nodeset(3);
  deleted.meta.deleting = true;
  EXPECT_TRUE(spec_changed(before, deleted));
  kube::Document labelled = nodeset(3);
  labelled.meta.labels = {{"team", "a"}};
  EXPECT_TRUE(spec_changed(before, labelled));
  kube::Document annotated = nodeset(3);
  annotated.doc["metadata"]["annotations"] = {{"example.com/x", "1"}};
  EXPECT_TRUE(spec_changed(before, annotated));
}

TEST(Watches, AnObjectWakesTheControllerItNamesAndNoneWhenItNamesNone) {
  const auto named = controller_named(nodeset(1));
  ASSERT_EQ(named.size(), 1U);
  EXPECT_EQ(named[0].key(), "hpc/slurm");
  kube::Document bare = nodeset(1);
  bare.doc["spec"].erase("controllerRef");
  EXPECT_TRUE(controller_named(bare).empty());
}

TEST(Watches, AReferenceIsAnyRefOrRefsFieldAtAnyDepthAndNothingElse) {
  const json spec = {{"slurmKeyRef", {{"name", "slurm-key"}, {"key", "slurm.key"}}},
                     {"configFileRefs", {{{"name", "extra"}}}},
                     {"template", {{"spec", {{"volumes", {{{"name", "scratch"}}}}}}}},
                     {"storageConfig", {{"passwordKeyRef", {{"name", "db-password"}}}}}};
  EXPECT_TRUE(references(spec, "slurm-key"));
  EXPECT_TRUE(references(spec, "extra"));
  EXPECT_TRUE(references(spec, "db-password"));
  EXPECT_FALSE(references(spec, "scratch")) << "a volume's name is no reference";
  EXPECT_FALSE(references(spec, "slurm.key"));
}

TEST(Watches, AnOwnedObjectMapsToItsControllingOwnerOfTheKind) {
  kube::ObjectMeta meta;
  meta.owner_references = {{"slinky.slurm.net/v1beta1", "Controller", "slurm", "c-uid", true}};
  EXPECT_EQ(owning(meta, "Controller"), "slurm");
  EXPECT_EQ(owning(meta, "NodeSet"), "");
}

TEST(CacheIndex, APodIsFoundByItsNodeAndAnObjectByTheControllerItNames) {
  CachedPod pod;
  pod.meta.namespace_name = "hpc";
  pod.node_name = "k8s-1";
  EXPECT_EQ(cache_index::node_of(pod), std::vector<std::string>{"k8s-1"});
  pod.node_name.clear();
  EXPECT_TRUE(cache_index::node_of(pod).empty()) << "an unscheduled pod is on no Node";
  EXPECT_EQ(cache_index::controller_of(nodeset(1)), std::vector<std::string>{"hpc/slurm"});
}

// The operator's cache of NodeSets and worker pods, filled by hand (the informers never start).
struct Cache {
  kube::Client client{testing::unreached_api_server()};
  kube::Informer<kube::Document> nodesets{client, resources::nodesets(), "hpc",
                                          kube::decode_document};
  kube::Informer<CachedPod> pods{client, kube::resources::pods(), "hpc", decode_cached_pod};
  ResourceCache cache;
  Cache() {
    pods.store().add_index(cache_index::kNode, cache_index::node_of);
    cache.add(resources::nodesets(), &nodesets);
    cache.add_pods(&pods);
  }
  void put(kube::Document nodeset_doc) {
    const std::string key = nodeset_doc.meta.key();
    nodesets.store().put(key, std::make_shared<kube::Document>(std::move(nodeset_doc)));
  }
  void put_pod(const std::string& name, const std::string& node, const std::string& owner_kind) {
    auto pod = std::make_shared<CachedPod>();
    pod->meta.namespace_name = "hpc";
    pod->meta.name = name;
    pod->meta.owner_references = {{"v1", owner_kind, "cpu", "uid-cpu", true}};
    pod->node_name = node;
    const std::string key = pod->meta.key();
    pods.store().put(key, std::move(pod));
  }
};

kube::Document node(const std::string& name) {
  kube::Document d;
  d.meta.name = name;
  return d;
}

TEST(Watches, ANodeWakesTheNodeSetsOfItsPodsAndEveryDaemonSetModeNodeSet) {
  Cache c;
  c.put(nodeset(1));
  c.put_pod("cpu-0", "k8s-1", "NodeSet");
  c.put_pod("cpu-1", "k8s-2", "NodeSet");
  c.put_pod("login-0", "k8s-1", "LoginSet");
  const auto woken = nodesets_on_node(c.cache, "k8s-1");
  ASSERT_EQ(woken.size(), 1U) << "the NodeSet of cpu-0, not the LoginSet's pod";
  EXPECT_EQ(woken[0].key(), "hpc/cpu");
  EXPECT_TRUE(nodesets_on_node(c.cache, "k8s-3").empty()) << "no pod there";

  kube::Document everywhere = nodeset(1);
  everywhere.meta.name = "gpu";
  everywhere.doc["spec"]["scalingMode"] = "DaemonSet";
  c.put(everywhere);
  const auto on_empty = nodesets_on_node(c.cache, "k8s-3");
  ASSERT_EQ(on_empty.size(), 1U) << "a DaemonSet-mode NodeSet may want a pod on any Node";
  EXPECT_EQ(on_empty[0].key(), "hpc/gpu");
}

TEST(Watches, AHealthCheckWakesOnAWorkersDrainConditionAndNotOnItsOtherConditions) {
  CachedPod before;
  before.conditions = {{"Ready", "True", "", "", "t0"}};
  CachedPod ready_again = before;
  ready_again.conditions[0].last_transition = "t1";
  EXPECT_FALSE(pod_drain_changed(before, ready_again));
  CachedPod drained = before;
  drained.conditions.push_back(
      {"SlurmNodeStateDrain", "True", "", "healthcheck: script:fans: fan 3 stopped", "t1"});
  EXPECT_TRUE(pod_drain_changed(before, drained));
  CachedPod replacing = drained;
  replacing.conditions[1].message =
      "slinky-0 is pending termination for healthcheck: script:fans: fan 3 stopped";
  EXPECT_TRUE(pod_drain_changed(drained, replacing)) << "the step is in the words";
  EXPECT_TRUE(pod_drain_changed(replacing, before));
}

TEST(Watches, AHealthCheckWakesOnANodesKeptFailuresOrQuarantineAndNotOnAHeartbeat) {
  kube::Document before = node("k8s-1");
  before.doc = {{"metadata", {{"name", "k8s-1"}}}, {"status", {{"phase", "Running"}}}};
  kube::Document heartbeat = before;
  heartbeat.doc["status"]["conditions"] = json::array({{{"type", "Ready"}}});
  EXPECT_FALSE(node_health_changed(before, heartbeat));
  kube::Document failed = before;
  failed.doc["metadata"]["annotations"]["tightrope.slurm.net/health-failures"] = "[]";
  EXPECT_TRUE(node_health_changed(before, failed));
  kube::Document quarantined = failed;
  quarantined.doc["spec"]["taints"] = json::array(
      {{{"key", "tightrope.slurm.net/unhealthy"}, {"value", "fans"}, {"effect", "NoSchedule"}}});
  EXPECT_TRUE(node_health_changed(failed, quarantined));
  kube::Document cordoned = failed;
  cordoned.doc["spec"]["taints"] =
      json::array({{{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}}});
  EXPECT_FALSE(node_health_changed(failed, cordoned));
}

}  // namespace
}  // namespace tightrope::op
