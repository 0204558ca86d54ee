// The CRDs in deploy/crds and the codec in src/api describe the same resources: every field the
// codec writes is in the schema (the API server would prune it otherwise), and every field of
// the schema is read and written back by the codec (a user's setting would be lost otherwise).
#include <gtest/gtest.h>

#include <set>

#include "api/codec.hpp"
#include "maximal.hpp"
#include "schema_walker.hpp"
#include "support.hpp"

namespace tightrope::api::testing {
namespace {

using nlohmann::json;

json maximal(const std::string& kind) {
  if (kind == "Controller") {
    return encode(maximal_controller());
  }
  if (kind == "NodeSet") {
    return encode(maximal_nodeset());
  }
  if (kind == "LoginSet") {
    return encode(maximal_loginset());
  }
  if (kind == "RestApi") {
    return encode(maximal_restapi());
  }
  if (kind == "Accounting") {
    return encode(maximal_accounting());
  }
  if (kind == "Token") {
    return encode(maximal_token());
  }
  return encode(maximal_health_check());
}

std::vector<Leaf> spec_and_status_leaves(const json& schema) {
  const json& props = schema.at("properties");
  auto out = leaves(props.at("spec"), json::json_pointer("/spec"), "spec");
  const auto status = leaves(props.at("status"), json::json_pointer("/status"), "status");
  out.insert(out.end(), status.begin(), status.end());
  return out;
}

class EachKind : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    crd_ = load_crd(GetParam());
    schema_ = root_schema(crd_);
  }
  json crd_;
  json schema_;
};

TEST_P(EachKind, EveryFieldTheCodecWritesIsInTheSchema) {
  const json doc = maximal(GetParam().name);
  ASSERT_TRUE(doc.contains("status")) << "the maximal object has a status";
  for (const char* part : {"spec", "status"}) {
    for (const auto& finding :
         outside_schema(doc.at(part), schema_.at("properties").at(part), part)) {
      ADD_FAILURE() << GetParam().name << " " << finding;
    }
  }
}

// Guards the test above: a field added to the schema and to the codec but not to the maximal
// object would otherwise go unchecked.
TEST_P(EachKind, TheMaximalObjectSetsEveryLeafOfTheSchema) {
  const json doc = maximal(GetParam().name);
  for (const Leaf& leaf : spec_and_status_leaves(schema_)) {
    if (leaf.path.ends_with(".unknownField")) {
      continue;
    }
    EXPECT_TRUE(doc.contains(leaf.pointer)) << GetParam().name << " " << leaf.path;
  }
}

TEST_P(EachKind, EveryLeafOfTheSchemaSurvivesDecodeAndEncode) {
  const Kind& kind = GetParam();
  const auto all = spec_and_status_leaves(schema_);
  ASSERT_FALSE(all.empty());
  for (const Leaf& leaf : all) {
    json doc = {{"apiVersion", kind.api_version()},
                {"kind", kind.name},
                {"metadata", {{"name", "sample"}, {"namespace", "slurm"}}}};
    doc[leaf.pointer] = leaf.sample;
    const auto out = kind.round_trip(doc);
    if (!out) {
      ADD_FAILURE() << kind.name << " " << leaf.path << " = " << leaf.sample.dump()
                    << ": decode failed: " << join(out.error());
      continue;
    }
    if (!out->contains(leaf.pointer)) {
      ADD_FAILURE() << kind.name << " " << leaf.path << " = " << leaf.sample.dump()
                    << " is dropped: " << out->dump();
      continue;
    }
    EXPECT_EQ(out->at(leaf.pointer), leaf.sample) << kind.name << " " << leaf.path;
  }
}

TEST_P(EachKind, PrinterColumnsPointAtSchemaFieldsOfTheirType) {
  const json& columns = crd_.at("spec").at("versions").at(0).at("additionalPrinterColumns");
  std::set<std::string> names;
  for (const json& column : columns) {
    const std::string name = column.at("name");
    const std::string path = column.at("jsonPath");
    EXPECT_TRUE(names.insert(name).second) << "column " << name << " twice";
    const json* node = resolve_json_path(schema_, path);
    ASSERT_NE(node, nullptr) << GetParam().name << " column " << name << ": " << path;
    if (path.starts_with(".metadata.")) {
      EXPECT_EQ(path, ".metadata.creationTimestamp");
      continue;
    }
    const std::string type = column.at("type");
    EXPECT_EQ(node->value("type", ""), type == "date" ? "string" : type)
        << GetParam().name << " column " << name << ": " << path;
  }
  EXPECT_TRUE(names.contains("AGE"));
}

TEST_P(EachKind, DescribesOneNamespacedVersionWithAStatusSubresource) {
  const Kind& kind = GetParam();
  const json& spec = crd_.at("spec");
  EXPECT_EQ(crd_.at("apiVersion"), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd_.at("kind"), "CustomResourceDefinition");
  EXPECT_EQ(crd_.at("metadata").at("name"), kind.plural + "." + kind.group);
  EXPECT_EQ(spec.at("group"), kind.group);
  EXPECT_EQ(spec.at("scope"), "Namespaced");
  EXPECT_EQ(spec.at("names").at("kind"), kind.name);
  EXPECT_EQ(spec.at("names").at("listKind"), kind.name + "List");
  EXPECT_EQ(spec.at("names").at("plural"), kind.plural);
  ASSERT_EQ(spec.at("versions").size(), 1U);
  const json& version = spec.at("versions").at(0);
  EXPECT_EQ(version.at("name"), kind.version);
  EXPECT_EQ(version.at("served"), true);
  EXPECT_EQ(version.at("storage"), true);
  EXPECT_TRUE(version.at("subresources").contains("status"));
  EXPECT_EQ(schema_.at("properties").at("metadata"), json({{"type", "object"}}));
}

TEST_P(EachKind, StatusConditionsAreAListKeyedByType) {
  const json& conditions = schema_.at("properties").at("status").at("properties").at("conditions");
  EXPECT_EQ(conditions.at("x-kubernetes-list-type"), "map");
  EXPECT_EQ(conditions.at("x-kubernetes-list-map-keys"), json::array({"type"}));
  // The API server insists that a list-map key is required.
  const json& required = conditions.at("items").at("required");
  EXPECT_NE(std::find(required.begin(), required.end(), "type"), required.end());
}

std::string kind_name(const ::testing::TestParamInfo<Kind>& param) {
  return param.param.name;
}

INSTANTIATE_TEST_SUITE_P(Crds, EachKind, ::testing::ValuesIn(kinds()), kind_name);

TEST(Crds, ShortNamesAreSlinkys) {
  const std::map<std::string, json> expected = {
      {"Controller", {"slurmctld"}}, {"NodeSet", {"nss", "slurmd"}}, {"LoginSet", {"lss", "sackd"}},
      {"RestApi", {"slurmrestd"}},   {"Accounting", {"slurmdbd"}},   {"Token", {"jwt"}},
      {"HealthCheck", {"hc"}},  // Tightrope's own
  };
  for (const Kind& kind : kinds()) {
    EXPECT_EQ(load_crd(kind).at("spec").at("names").at("shortNames"), expected.at(kind.name))
        << kind.name;
  }
}

TEST(Crds, OnlyNodeSetAndLoginSetScaleAndTheirPathsAreInTheSchema) {
  for (const Kind& kind : kinds()) {
    const json crd = load_crd(kind);
    const json& subresources = crd.at("spec").at("versions").at(0).at("subresources");
    const bool scales = kind.name == "NodeSet" || kind.name == "LoginSet";
    ASSERT_EQ(subresources.contains("scale"), scales) << kind.name;
    if (!scales) {
      continue;
    }
    const json& scale = subresources.at("scale");
    EXPECT_EQ(scale.at("specReplicasPath"), ".spec.replicas");
    EXPECT_EQ(scale.at("statusReplicasPath"), ".status.replicas");
    EXPECT_EQ(scale.at("labelSelectorPath"), ".status.selector");
    const json& schema = root_schema(crd);
    for (const auto& [path, type] :
         {std::pair{".spec.replicas", "integer"}, std::pair{".status.replicas", "integer"},
          std::pair{".status.selector", "string"}}) {
      const json* node = resolve_json_path(schema, path);
      ASSERT_NE(node, nullptr) << kind.name << " " << path;
      EXPECT_EQ(node->at("type"), type) << kind.name << " " << path;
    }
  }
}

// The walker itself: a field the schema lacks, a wrong type and a value outside an enum are
// reported; unknown fields under preserve-unknown-fields are not.
TEST(SchemaWalker, ReportsUnknownFieldsWrongTypesAndEnumsButNotOpaqueContent) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"mode", {{"type", "string"}, {"enum", {"A", "B"}}}},
        {"count", {{"type", "integer"}}},
        {"opaque", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  const json value = {
      {"mode", "C"}, {"count", "3"}, {"extra", 1}, {"opaque", {{"anything", {{"goes", 1}}}}}};
  const auto findings = outside_schema(value, schema, "spec");
  EXPECT_EQ(findings, (Findings{"spec.count: is string, the schema says integer",
                                "spec.extra: not in the schema",
                                "spec.mode: \"C\" is not one of [\"A\",\"B\"]"}));
}

TEST(SchemaWalker, ResolvesAFilteredConditionPath) {
  const json schema = root_schema(load_crd(*find_kind("NodeSet")));
  const json* node = resolve_json_path(schema, ".status.conditions[?(@.type==\"Ready\")].status");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->at("type"), "string");
  EXPECT_EQ(resolve_json_path(schema, ".status.nope"), nullptr);
  EXPECT_EQ(resolve_json_path(schema, ".spec.replicas[0]"), nullptr);
}

}  // namespace
}  // namespace tightrope::api::testing
