// Golden files for the builders: Kubernetes objects rendered as a readable YAML stream, the
// fixed inputs of one case read from its input.yaml, and the compare-or-rewrite step
// (UPDATE_GOLDEN=1 rewrites). Test support only: knows the api codec, not the reconcilers.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op::testing {

// The objects as a YAML stream, one "---" document each, keys sorted, block style. A string
// is plain only when every YAML reader (1.1 as kubectl's, 1.2 as ours) reads it back as that
// string; multi-line strings are literal blocks with the chomping that keeps them exact.
std::string to_yaml_stream(const std::vector<nlohmann::json>& objects,
                           const std::string& header_comment);

// test/unit/operator/testdata/<name>.
std::filesystem::path case_dir(const std::string& name);

// A case's input.yaml: the resources (decoded and defaulted as the reconcilers do), the data of
// its ConfigMaps, and the one "GoldenInputs" document for what the reconciler would read from
// the cluster (key texts, a password, fixed times).
class CaseInput {
 public:
  explicit CaseInput(const std::string& name);

  std::vector<api::Controller> controllers() const;
  std::vector<api::NodeSet> nodesets() const;
  std::vector<api::Accounting> accountings() const;
  std::vector<api::RestApi> restapis() const;
  std::vector<api::LoginSet> loginsets() const;
  std::vector<api::Token> tokens() const;
  // ConfigMap name -> data.
  std::map<std::string, std::map<std::string, std::string>> config_maps() const;
  // A field of the GoldenInputs document; null when absent.
  const nlohmann::json& fixed(const std::string& field) const;

 private:
  std::vector<nlohmann::json> docs_of(const std::string& kind) const;
  std::vector<nlohmann::json> docs_;
  nlohmann::json fixed_ = nlohmann::json::object();
};

// Compares `actual` with the golden file, or rewrites the file when UPDATE_GOLDEN=1.
void expect_golden(const std::filesystem::path& file, const std::string& actual);

}  // namespace tightrope::op::testing
