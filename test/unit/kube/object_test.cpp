#include "kube/object.hpp"

#include <gtest/gtest.h>

#include "kube/store.hpp"

namespace tightrope::kube {
namespace {

constexpr const char* kPod = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {
    "name": "gpu-0", "namespace": "slurm", "uid": "u-1", "resourceVersion": "42", "generation": 3,
    "labels": {"app.kubernetes.io/name": "slurmd", "tier": "gpu"},
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
    "ownerReferences": [{"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "name": "gpu",
                         "uid": "ns-1", "controller": true}],
    "deletionTimestamp": "2026-12-02T10:00:00Z",
    "managedFields": [{"manager": "kube-scheduler", "operation": "Update", "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]
  },
  "spec": {"nodeName": "host-a"}
})";

simdjson::dom::element parse(simdjson::dom::parser& parser, const char* text) {
  simdjson::dom::element doc = parser.parse(text, std::strlen(text));
  return doc;
}

TEST(ObjectMeta, DecodesIdentityLabelsAndOwners) {
  simdjson::dom::parser parser;
  ObjectMeta meta;
  ASSERT_TRUE(decode_meta(parse(parser, kPod), &meta));
  EXPECT_EQ(meta.key(), "slurm/gpu-0");
  EXPECT_EQ(meta.uid, "u-1");
  EXPECT_EQ(meta.resource_version, "42");
  EXPECT_EQ(meta.generation, 3);
  EXPECT_TRUE(meta.deleting);
  ASSERT_NE(meta.label("tier"), nullptr);
  EXPECT_EQ(*meta.label("tier"), "gpu");
  EXPECT_EQ(meta.label("absent"), nullptr);
  ASSERT_NE(meta.controller_ref(), nullptr);
  EXPECT_EQ(meta.controller_ref()->kind, "NodeSet");
}

TEST(ObjectMeta, AnObjectWithoutANameIsRefused) {
  simdjson::dom::parser parser;
  ObjectMeta meta;
  EXPECT_FALSE(decode_meta(parse(parser, R"({"metadata":{"namespace":"x"}})"), &meta));
  EXPECT_FALSE(decode_meta(parse(parser, R"({"metadata":7})"), &meta));
  EXPECT_FALSE(decode_meta(parse(parser, R"({})"), &meta));
}

TEST(Document, KeepsTheWholeObjectButItsManagedFields) {
  simdjson::dom::parser parser;
  Document doc;
  ASSERT_TRUE(decode_document(parse(parser, kPod), &doc));
  EXPECT_EQ(doc.doc["spec"]["nodeName"], "host-a");
  EXPECT_EQ(doc.doc["metadata"]["generation"], 3);
  EXPECT_EQ(doc.doc["metadata"]["labels"]["tier"], "gpu");
  EXPECT_FALSE(doc.doc["metadata"].contains("managedFields"));
}

// A projection keeps what its controller reads and nothing else.
struct PodNode {
  ObjectMeta meta;
  std::string node_name;
};

DecodeResult decode_pod_node(simdjson::dom::element object, PodNode* out) {
  if (auto ok = decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  simdjson::dom::element spec;
  if (object["spec"].get(spec) == simdjson::SUCCESS) {
    out->node_name = string_at(spec, "nodeName");
  }
  return std::monostate{};
}

TEST(Projection, ReadsOnlyTheFieldsItNames) {
  simdjson::dom::parser parser;
  PodNode pod;
  ASSERT_TRUE(decode_pod_node(parse(parser, kPod), &pod));
  EXPECT_EQ(pod.node_name, "host-a");
}

std::shared_ptr<const PodNode> pod(const std::string& name, const std::string& node,
                                   const std::string& owner) {
  auto p = std::make_shared<PodNode>();
  p->meta.namespace_name = "slurm";
  p->meta.name = name;
  p->meta.owner_references.push_back({"v1", "NodeSet", "x", owner, true});
  p->node_name = node;
  return p;
}

TEST(Store, IndexesFollowPutsAndErases) {
  Store<PodNode> store;
  store.add_index("node", [](const PodNode& p) { return std::vector<std::string>{p.node_name}; });
  store.add_index(index::kOwnerUid, index::by_owner_uid<PodNode>);
  store.put("slurm/a", pod("a", "host-1", "o1"));
  store.put("slurm/b", pod("b", "host-1", "o2"));
  EXPECT_EQ(store.by_index("node", "host-1").size(), 2U);
  store.put("slurm/b", pod("b", "host-2", "o2"));  // moved
  EXPECT_EQ(store.by_index("node", "host-1").size(), 1U);
  EXPECT_EQ(store.by_index("node", "host-2").size(), 1U);
  EXPECT_EQ(store.by_index(index::kOwnerUid, "o2").size(), 1U);
  auto gone = store.erase("slurm/a");
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone->meta.name, "a");
  EXPECT_TRUE(store.by_index("node", "host-1").empty());
  EXPECT_EQ(store.erase("slurm/a"), nullptr);
  EXPECT_EQ(store.size(), 1U);
  EXPECT_TRUE(store.by_index("no-such-index", "x").empty());
}

TEST(Store, AReaderKeepsTheObjectItGotWhileItIsReplaced) {
  Store<PodNode> store;
  store.put("slurm/a", pod("a", "host-1", "o"));
  auto held = store.get("slurm/a");
  store.put("slurm/a", pod("a", "host-9", "o"));
  EXPECT_EQ(held->node_name, "host-1");
  EXPECT_EQ(store.get("slurm/a")->node_name, "host-9");
}

}  // namespace
}  // namespace tightrope::kube
