// The manifests in deploy/samples are what a Slinky user writes: each decodes, passes validation
// once defaulted, fits its CRD's schema, and comes back from the codec as it was written.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "schema_walker.hpp"
#include "support.hpp"

namespace tightrope::api::testing {
namespace {

using nlohmann::json;

struct Sample {
  std::string file;
  json doc;
};

std::vector<Sample> samples() {
  std::vector<Sample> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(source_dir() / "deploy" / "samples")) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    for (json& doc : load_yaml_file(entry.path())) {
      out.push_back({entry.path().filename().string(), std::move(doc)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Sample& a, const Sample& b) { return a.file < b.file; });
  return out;
}

const Kind& kind_of(const Sample& sample) {
  const Kind* kind = find_kind(sample.doc.value("kind", ""));
  if (kind == nullptr) {
    throw std::runtime_error(sample.file + ": not a kind of the operator's");
  }
  return *kind;
}

TEST(Samples, ThereIsOneForEveryKindInTheSlurmNamespace) {
  std::set<std::string> seen;
  for (const Sample& sample : samples()) {
    EXPECT_EQ(sample.doc.value("apiVersion", ""), kind_of(sample).api_version()) << sample.file;
    EXPECT_EQ(sample.doc["metadata"].value("namespace", ""), "slurm") << sample.file;
    seen.insert(kind_of(sample).name);
  }
  for (const Kind& kind : kinds()) {
    EXPECT_TRUE(seen.contains(kind.name)) << "no sample " << kind.name;
  }
}

TEST(Samples, DecodeAndValidateOnceDefaulted) {
  for (const Sample& sample : samples()) {
    const FieldErrors errors = kind_of(sample).check(sample.doc);
    EXPECT_TRUE(errors.empty()) << sample.file << ": " << join(errors);
  }
}

TEST(Samples, FitTheirCrdsSchema) {
  for (const Sample& sample : samples()) {
    const json schema = root_schema(load_crd(kind_of(sample)));
    for (const auto& [name, value] : sample.doc.items()) {
      if (name == "spec" || name == "status") {
        for (const auto& finding : outside_schema(value, schema.at("properties").at(name), name)) {
          ADD_FAILURE() << sample.file << ": " << finding;
        }
      } else if (!schema.at("properties").contains(name)) {
        ADD_FAILURE() << sample.file << ": " << name << " is not a top-level field";
      }
    }
  }
}

TEST(Samples, ComeBackFromTheCodecAsWritten) {
  for (const Sample& sample : samples()) {
    const auto out = kind_of(sample).round_trip(sample.doc);
    ASSERT_TRUE(out) << sample.file << ": " << join(out.error());
    EXPECT_EQ(out->at("spec"), sample.doc.at("spec"))
        << sample.file << ": " << json::diff(sample.doc.at("spec"), out->at("spec")).dump();
  }
}

TEST(Samples, TheControllerIsNamedSlurmAndEveryoneRefersToIt) {
  for (const Sample& sample : samples()) {
    const json& spec = sample.doc.at("spec");
    if (sample.doc.at("kind") == "Controller") {
      EXPECT_EQ(sample.doc["metadata"]["name"], "slurm");
    } else if (spec.contains("controllerRef")) {
      EXPECT_EQ(spec["controllerRef"]["name"], "slurm") << sample.file;
    }
  }
}

TEST(YamlToJson, TypesPlainScalarsAndKeepsQuotedOnesAsStrings) {
  const auto docs = yaml_to_json(
      "a: 1\nb: '1'\nc: true\nd: \"true\"\ne: 2.5\nf: ~\ng: 25%\nh: |\n  x\n  y\ni: [1, x]\n"
      "---\nz: 0\n");
  ASSERT_EQ(docs.size(), 2U);
  EXPECT_EQ(docs[0], json({{"a", 1},
                           {"b", "1"},
                           {"c", true},
                           {"d", "true"},
                           {"e", 2.5},
                           {"f", nullptr},
                           {"g", "25%"},
                           {"h", "x\ny\n"},
                           {"i", json::array({1, "x"})}}));
  EXPECT_EQ(docs[1], json({{"z", 0}}));
}

}  // namespace
}  // namespace tightrope::api::testing
