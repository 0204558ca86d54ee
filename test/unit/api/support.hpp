// Test helpers for the slinky.slurm.net resources: YAML manifests as JSON (how the API server
// reads them), the CRDs in deploy/crds, and one entry per kind that ties a kind to its codec,
// defaults and validation so a test can run over all six.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.hpp"
#include "api/defaults.hpp"

namespace tightrope::api {

// How GoogleTest prints a FieldError in a failed comparison.
inline void PrintTo(const FieldError& error, std::ostream* os) {
  *os << error.to_string();
}

}  // namespace tightrope::api

namespace tightrope::api::testing {

// The repository root (deploy/ lives there).
std::filesystem::path source_dir();

// Every document of a YAML text as JSON. Plain scalars follow YAML 1.2's core schema (true,
// 3, 2.5 and null are typed); quoted and block scalars stay strings. Throws YAML::Exception on
// malformed text.
std::vector<nlohmann::json> yaml_to_json(const std::string& text);
std::vector<nlohmann::json> load_yaml_file(const std::filesystem::path& path);

// What a test needs of one kind.
struct Kind {
  std::string name;     // "NodeSet"
  std::string plural;   // "nodesets"
  std::string group;    // "slinky.slurm.net"
  std::string version;  // "v1beta1"
  std::string api_version() const { return group + "/" + version; }
  // decode, then encode: the JSON the operator would write back.
  std::function<Decoded<nlohmann::json>(const nlohmann::json&)> round_trip;
  // decode, apply_defaults, encode.
  std::function<Decoded<nlohmann::json>(const nlohmann::json&)> defaulted;
  // decode, apply_defaults, validate: decode errors, else validation errors.
  std::function<FieldErrors(const nlohmann::json&)> check;
};
const std::vector<Kind>& kinds();
inline void PrintTo(const Kind& kind, std::ostream* os) {
  *os << kind.name;
}
const Kind* find_kind(std::string_view name);

// A decoded resource with its defaults applied; throws std::runtime_error listing the decode
// errors (tests build their inputs from literals that must decode).
template <typename T>
T decoded(Decoded<T> result) {
  if (!result) {
    throw std::runtime_error(join(result.error()));
  }
  apply_defaults(*result);
  return std::move(*result);
}

// deploy/crds/<group>_<plural>.yaml as JSON.
nlohmann::json load_crd(const Kind& kind);
// The CRD's openAPIV3Schema of its only version.
const nlohmann::json& root_schema(const nlohmann::json& crd);

}  // namespace tightrope::api::testing
