// Walks a CRD's structural OpenAPI schema next to a JSON object, the way the API server prunes
// and defaults: what of an object the schema does not know, which leaves the schema has, where
// a printer column's JSONPath lands, and the schema's defaults applied to an object. Knows
// nothing of any one kind.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tightrope::api::testing {

// One problem with one field, for a test to print: "spec.ha.backups: not in the schema".
using Findings = std::vector<std::string>;

// Everything in `value` that `schema` would prune or reject by type or enum. Below an object
// with x-kubernetes-preserve-unknown-fields, fields the schema does not list are accepted
// without looking further. `path` names `value` in the findings ("spec").
Findings outside_schema(const nlohmann::json& value, const nlohmann::json& schema,
                        const std::string& path);

// A field of the schema that holds a value rather than named fields: a string, an integer, a
// boolean, a map, a list of scalars, an opaque (preserve-unknown-fields) object, or an unknown
// field of an object that preserves them.
struct Leaf {
  std::string path;                      // "spec.metrics.serviceMonitor.endpoints[0].path"
  nlohmann::json::json_pointer pointer;  // where it sits in a whole resource
  nlohmann::json sample;                 // a value of the leaf's type that is not its default
};

// The leaves under `schema`, whose place in the resource is `pointer` / `path`. A list of
// objects contributes the leaves of one element (index 0).
std::vector<Leaf> leaves(const nlohmann::json& schema, const nlohmann::json::json_pointer& pointer,
                         const std::string& path);

// The schema node a printer column or scale JSONPath (".status.conditions[?(@.type==\"Ready\")]
// .status") refers to, or null when the path leaves the schema. Paths into .metadata resolve to
// the metadata node itself.
const nlohmann::json* resolve_json_path(const nlohmann::json& root_schema, const std::string& path);

// The defaults of `schema` applied to `value`, as the API server does on reading a request:
// an absent property with a default takes it, then defaulting continues into every present
// property (including those just defaulted).
void apply_schema_defaults(nlohmann::json& value, const nlohmann::json& schema);

}  // namespace tightrope::api::testing
