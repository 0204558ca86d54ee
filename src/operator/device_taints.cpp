#include "operator/device_taints.hpp"

#include <algorithm>

namespace tightrope::op {

using kube::string_at;
using nlohmann::json;

namespace {

json taint_of(simdjson::dom::element t) {
  return {{"key", string_at(t, "key")},
          {"value", string_at(t, "value")},
          {"effect", string_at(t, "effect")},
          {"timeAdded", string_at(t, "timeAdded")}};
}

DeviceTaint make_taint(const json& spec, const std::string& device, const json& taint,
                       const std::string& rule) {
  return {spec.value("driver", ""),
          spec.value("pool", ""),
          device,
          taint.value("key", ""),
          taint.value("value", ""),
          taint.value("effect", ""),
          taint.value("timeAdded", ""),
          rule};
}

// A DeviceTaintRule's selector: every field it sets must match; without one, nothing does.
bool selects(const json& rule, const json& spec, const std::string& device) {
  const auto selector = rule.find("spec");
  if (selector == rule.end() || !selector->contains("deviceSelector")) {
    return false;
  }
  const json& s = (*selector)["deviceSelector"];
  const auto field_matches = [&](const char* field, const std::string& value) {
    return !s.contains(field) || s.value(field, "") == value;
  };
  return field_matches("driver", spec.value("driver", "")) &&
         field_matches("pool", spec.value("pool", "")) && field_matches("device", device);
}

}  // namespace

kube::DecodeResult decode_slice_taints(simdjson::dom::element object, kube::Document* out) {
  if (auto meta = kube::decode_meta(object, &out->meta); !meta) {
    return meta;
  }
  json spec = json::object();
  simdjson::dom::element s;
  if (object["spec"].get(s) == simdjson::SUCCESS) {
    spec["nodeName"] = string_at(s, "nodeName");
    spec["driver"] = string_at(s, "driver");
    spec["pool"] = string_at(s["pool"], "name");
    json devices = json::array();
    simdjson::dom::array list;
    if (!spec["nodeName"].get<std::string>().empty() &&
        s["devices"].get(list) == simdjson::SUCCESS) {
      for (const auto d : list) {
        json device = {{"name", string_at(d, "name")}, {"taints", json::array()}};
        simdjson::dom::array taints;
        if (d["taints"].get(taints) == simdjson::SUCCESS) {
          for (const auto t : taints) {
            device["taints"].push_back(taint_of(t));
          }
        }
        devices.push_back(std::move(device));
      }
    }
    spec["devices"] = std::move(devices);
  }
  out->doc = {{"spec", std::move(spec)}};
  return std::monostate{};
}

std::vector<std::string> slice_node(const kube::Document& slice) {
  const std::string node = slice.doc.value("/spec/nodeName"_json_pointer, std::string());
  if (node.empty()) {
    return {};
  }
  return {node};
}

std::vector<DeviceTaint> device_taints(const std::vector<const json*>& slices,
                                       const std::vector<const json*>& rules) {
  std::vector<DeviceTaint> out;
  for (const json* slice : slices) {
    const json spec = slice->value("spec", json::object());
    for (const auto& d : spec.value("devices", json::array())) {
      const std::string name = d.value("name", "");
      for (const auto& t : d.value("taints", json::array())) {
        out.push_back(make_taint(spec, name, t, ""));
      }
      for (const json* rule : rules) {
        if (selects(*rule, spec, name)) {
          out.push_back(make_taint(spec, name,
                                   rule->value("/spec/taint"_json_pointer, json::object()),
                                   rule->value("/metadata/name"_json_pointer, std::string())));
        }
      }
    }
  }
  return out;
}

bool taint_wanted(const std::string& key, const std::vector<std::string>& wanted) {
  return std::any_of(wanted.begin(), wanted.end(),
                     [&](const std::string& w) { return w == "*" || w == key; });
}

}  // namespace tightrope::op
