#include "support.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "api/defaults.hpp"
#include "api/validation.hpp"

namespace tightrope::api::testing {
namespace {

using nlohmann::json;

// A plain scalar under YAML 1.2's core schema, which is what a Kubernetes client reads
// `replicas: 2` or `enabled: true` as.
json plain_scalar(const std::string& text) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kTrue("^(true|True|TRUE)$");
  static const std::regex kFalse("^(false|False|FALSE)$");
  static const std::regex kDecimal("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(text, kNull)) {
    return nullptr;
  }
  if (std::regex_match(text, kTrue)) {
    return true;
  }
  if (std::regex_match(text, kFalse)) {
    return false;
  }
  if (std::regex_match(text, kDecimal)) {
    return std::stoll(text);
  }
  if (std::regex_match(text, kFloat)) {
    return std::stod(text);
  }
  return text;
}

json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) {
        out[entry.first.as<std::string>()] = to_json(entry.second);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        out.push_back(to_json(item));
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      // "?" marks a plain scalar; quoted, block and !!str scalars are strings as written.
      return node.Tag() == "?" ? plain_scalar(node.Scalar()) : json(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

template <typename T>
Kind make_kind(std::string name, std::string plural, Decoded<T> (*decode)(const json&)) {
  Kind kind;
  kind.name = std::move(name);
  kind.plural = std::move(plural);
  const bool ours = std::is_same_v<T, HealthCheck>;
  kind.group = std::string(ours ? kTightropeGroup : kGroup);
  kind.version = std::string(ours ? kTightropeVersion : kVersion);
  kind.round_trip = [decode](const json& doc) -> Decoded<json> {
    auto object = decode(doc);
    if (!object) {
      return fail(object.error());
    }
    return encode(*object);
  };
  kind.defaulted = [decode](const json& doc) -> Decoded<json> {
    auto object = decode(doc);
    if (!object) {
      return fail(object.error());
    }
    apply_defaults(*object);
    return encode(*object);
  };
  kind.check = [decode](const json& doc) -> FieldErrors {
    auto object = decode(doc);
    if (!object) {
      return object.error();
    }
    apply_defaults(*object);
    return validate(*object);
  };
  return kind;
}

}  // namespace

std::filesystem::path source_dir() {
  return TIGHTROPE_SOURCE_DIR;
}

std::vector<json> yaml_to_json(const std::string& text) {
  std::vector<json> out;
  for (const YAML::Node& doc : YAML::LoadAll(text)) {
    if (!doc.IsNull()) {
      out.push_back(to_json(doc));
    }
  }
  return out;
}

std::vector<json> load_yaml_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string());
  }
  std::stringstream text;
  text << in.rdbuf();
  return yaml_to_json(text.str());
}

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> all = {
      make_kind("Controller", "controllers", &decode_controller),
      make_kind("NodeSet", "nodesets", &decode_nodeset),
      make_kind("LoginSet", "loginsets", &decode_loginset),
      make_kind("RestApi", "restapis", &decode_restapi),
      make_kind("Accounting", "accountings", &decode_accounting),
      make_kind("Token", "tokens", &decode_token),
      make_kind("HealthCheck", "healthchecks", &decode_health_check),
  };
  return all;
}

const Kind* find_kind(std::string_view name) {
  for (const Kind& kind : kinds()) {
    if (kind.name == name) {
      return &kind;
    }
  }
  return nullptr;
}

json load_crd(const Kind& kind) {
  const auto path = source_dir() / "deploy" / "crds" / (kind.group + "_" + kind.plural + ".yaml");
  const auto docs = load_yaml_file(path);
  if (docs.size() != 1) {
    throw std::runtime_error(path.string() + ": expected one document");
  }
  return docs.front();
}

const json& root_schema(const json& crd) {
  return crd.at("spec").at("versions").at(0).at("schema").at("openAPIV3Schema");
}

}  // namespace tightrope::api::testing
