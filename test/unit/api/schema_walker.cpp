#include "schema_walker.hpp"

#include <algorithm>

namespace tightrope::api::testing {
namespace {

using nlohmann::json;

constexpr const char* kUnknownField = "unknownField";

bool flag(const json& schema, const char* name) {
  const auto it = schema.find(name);
  return it != schema.end() && it->is_boolean() && it->get<bool>();
}
bool preserves_unknown(const json& schema) {
  return flag(schema, "x-kubernetes-preserve-unknown-fields");
}
bool int_or_string(const json& schema) {
  return flag(schema, "x-kubernetes-int-or-string");
}
std::string type_of(const json& schema) {
  return schema.value("type", "");
}

const json* properties(const json& schema) {
  const auto it = schema.find("properties");
  return it != schema.end() && it->is_object() ? &*it : nullptr;
}
const json* additional_properties(const json& schema) {
  const auto it = schema.find("additionalProperties");
  return it != schema.end() && it->is_object() ? &*it : nullptr;
}

std::string json_type(const json& value) {
  if (value.is_number_integer()) {
    return "integer";
  }
  if (value.is_number()) {
    return "number";
  }
  return value.type_name();
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") {
    return value.is_object();
  }
  if (type == "array") {
    return value.is_array();
  }
  if (type == "string") {
    return value.is_string();
  }
  if (type == "integer") {
    return value.is_number_integer();
  }
  if (type == "number") {
    return value.is_number();
  }
  if (type == "boolean") {
    return value.is_boolean();
  }
  return false;
}

void walk(const json& value, const json& schema, const std::string& path, Findings& out) {
  if (int_or_string(schema)) {
    if (!value.is_number_integer() && !value.is_string()) {
      out.push_back(path + ": is " + json_type(value) + ", the schema says int-or-string");
    }
    return;
  }
  const std::string type = type_of(schema);
  if (!has_type(value, type)) {
    out.push_back(path + ": is " + json_type(value) + ", the schema says " + type);
    return;
  }
  if (const auto it = schema.find("enum"); it != schema.end()) {
    if (std::find(it->begin(), it->end(), value) == it->end()) {
      out.push_back(path + ": " + value.dump() + " is not one of " + it->dump());
    }
  }
  if (type == "array") {
    for (size_t i = 0; i < value.size(); ++i) {
      walk(value[i], schema.at("items"), path + "[" + std::to_string(i) + "]", out);
    }
    return;
  }
  if (type != "object") {
    return;
  }
  const json* props = properties(schema);
  const json* additional = additional_properties(schema);
  for (const auto& [name, field] : value.items()) {
    std::string at = path;
    at += ".";
    at += name;
    if (props != nullptr && props->contains(name)) {
      walk(field, props->at(name), at, out);
    } else if (additional != nullptr) {
      walk(field, *additional, at, out);
    } else if (!preserves_unknown(schema)) {
      out.push_back(at + ": not in the schema");
    }
  }
}

json sample_of(const json& schema) {
  const json fallback = schema.value("default", json());
  if (const auto it = schema.find("enum"); it != schema.end()) {
    for (const auto& option : *it) {
      if (option != fallback) {
        return option;
      }
    }
    return it->front();
  }
  const std::string type = type_of(schema);
  if (type == "boolean") {
    // A default of true needs false to show that the field was read.
    return !(fallback.is_boolean() && fallback.get<bool>());
  }
  if (type == "integer") {
    int64_t n = 3;
    n = std::max(n, schema.value("minimum", n));
    n = std::min(n, schema.value("maximum", n));
    return n;
  }
  if (type == "number") {
    return 2.5;
  }
  return "x";
}

void collect(const json& schema, const json::json_pointer& pointer, const std::string& path,
             std::vector<Leaf>& out) {
  if (int_or_string(schema)) {
    out.push_back({path, pointer, 3});
    return;
  }
  const std::string type = type_of(schema);
  if (type == "object") {
    const json* props = properties(schema);
    if (props != nullptr) {
      for (const auto& [name, field] : props->items()) {
        std::string at = path;
        at += ".";
        at += name;
        collect(field, pointer / name, at, out);
      }
    }
    if (const json* additional = additional_properties(schema)) {
      out.push_back({path, pointer, {{"key", sample_of(*additional)}}});
    } else if (preserves_unknown(schema)) {
      out.push_back({path + "." + kUnknownField, pointer / kUnknownField, "x"});
    }
    return;
  }
  if (type == "array") {
    const json& items = schema.at("items");
    if (type_of(items) == "object") {
      collect(items, pointer / 0, path + "[0]", out);
    } else {
      out.push_back({path, pointer, json::array({sample_of(items)})});
    }
    return;
  }
  out.push_back({path, pointer, sample_of(schema)});
}

}  // namespace

Findings outside_schema(const json& value, const json& schema, const std::string& path) {
  Findings out;
  walk(value, schema, path, out);
  return out;
}

std::vector<Leaf> leaves(const json& schema, const json::json_pointer& pointer,
                         const std::string& path) {
  std::vector<Leaf> out;
  collect(schema, pointer, path, out);
  return out;
}

const json* resolve_json_path(const json& root_schema, const std::string& path) {
  const json* node = &root_schema;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      const size_t end = path.find_first_of(".[", i);
      const std::string name = path.substr(i, end == std::string::npos ? end : end - i);
      const json* props = properties(*node);
      if (props == nullptr || !props->contains(name)) {
        return nullptr;
      }
      node = &props->at(name);
      if (node == &root_schema.at("properties").at("metadata")) {
        return node;  // ObjectMeta: the API server's own, not described by the CRD
      }
      i = end == std::string::npos ? path.size() : end;
    } else if (path[i] == '[') {
      const size_t end = path.find(']', i);
      if (end == std::string::npos || type_of(*node) != "array") {
        return nullptr;
      }
      node = &node->at("items");
      i = end + 1;
    } else {
      return nullptr;
    }
  }
  return node;
}

void apply_schema_defaults(json& value, const json& schema) {
  if (value.is_object()) {
    if (const json* props = properties(schema)) {
      for (const auto& [name, field] : props->items()) {
        if (!value.contains(name) && field.contains("default")) {
          value[name] = field.at("default");
        }
      }
      for (const auto& [name, field] : props->items()) {
        if (value.contains(name)) {
          apply_schema_defaults(value[name], field);
        }
      }
    }
    if (const json* additional = additional_properties(schema)) {
      for (auto& [name, field] : value.items()) {
        apply_schema_defaults(field, *additional);
      }
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (auto& item : value) {
      apply_schema_defaults(item, schema.at("items"));
    }
  }
}

}  // namespace tightrope::api::testing
