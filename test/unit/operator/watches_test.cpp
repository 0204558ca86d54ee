// The operator's watch mappings, each a function of the changed object: what a change wakes.
#include "operator/watches.hpp"

#include <gtest/gtest.h>

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
  kube::Document pod;
  pod.meta.namespace_name = "hpc";
  pod.doc = {{"spec", {{"nodeName", "k8s-1"}}}};
  EXPECT_EQ(cache_index::node_of(pod), std::vector<std::string>{"k8s-1"});
  pod.doc["spec"].erase("nodeName");
  EXPECT_TRUE(cache_index::node_of(pod).empty()) << "an unscheduled pod is on no Node";
  EXPECT_EQ(cache_index::controller_of(nodeset(1)), std::vector<std::string>{"hpc/slurm"});
}

}  // namespace
}  // namespace tightrope::op
