#include "operator/watches.hpp"

#include <optional>

#include "api/well_known.hpp"
#include "operator/nodeset_plan.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

bool references_in(const json& value, const std::string& name, bool in_ref) {
  if (value.is_object()) {
    if (in_ref && value.value("name", json()) == name) {
      return true;
    }
    for (const auto& [key, child] : value.items()) {
      const bool ref = key.size() > 3 && (key.ends_with("Ref") || key.ends_with("Refs"));
      if ((ref || (in_ref && child.is_array())) && references_in(child, name, ref || in_ref)) {
        return true;
      }
      if (!ref && child.is_object() && references_in(child, name, false)) {
        return true;
      }
    }
  } else if (value.is_array() && in_ref) {
    for (const auto& item : value) {
      if (references_in(item, name, true)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool references(const json& spec, const std::string& name) {
  return references_in(spec, name, false);
}

std::vector<kube::Request> referencing(const ResourceCache& cache, const kube::ResourceType& type,
                                       const std::string& ns, const std::string& name) {
  std::vector<kube::Request> out;
  for (const auto& doc : cache.list(type, ns)) {
    const auto spec = doc->doc.find("spec");
    if (spec != doc->doc.end() && references(*spec, name)) {
      out.push_back({ns, doc->meta.name});
    }
  }
  return out;
}

std::string owning(const kube::ObjectMeta& meta, const std::string& kind) {
  const kube::OwnerReference* owner = meta.controller_ref();
  return owner != nullptr && owner->kind == kind ? owner->name : "";
}

std::vector<kube::Request> controller_named(const kube::Document& object) {
  const std::string name = object.doc.value("/spec/controllerRef/name"_json_pointer, std::string());
  if (name.empty()) {
    return {};
  }
  return {{object.meta.namespace_name, name}};
}

bool spec_changed(const kube::Document& before, const kube::Document& after) {
  const auto part = [](const kube::Document& d, const char* pointer) {
    return d.doc.value(json::json_pointer(pointer), json());
  };
  return before.meta.generation != after.meta.generation ||
         before.meta.deleting != after.meta.deleting || before.meta.labels != after.meta.labels ||
         part(before, "/metadata/annotations") != part(after, "/metadata/annotations") ||
         // Objects without a generation (a CRD served without the status subresource): the spec.
         (after.meta.generation == 0 && part(before, "/spec") != part(after, "/spec"));
}

std::vector<kube::Request> nodesets_on_node(const ResourceCache& cache, const std::string& node) {
  std::vector<kube::Request> out;
  for (const auto& nodeset : cache.list_all(resources::nodesets())) {
    if (nodeset->doc.value("/spec/scalingMode"_json_pointer, std::string()) == "DaemonSet") {
      out.push_back({nodeset->meta.namespace_name, nodeset->meta.name});
    }
  }
  for (const auto& pod : cache.pods_by_index(cache_index::kNode, node)) {
    const kube::OwnerReference* owner = pod->meta.controller_ref();
    if (owner != nullptr && owner->kind == "NodeSet") {
      out.push_back({pod->meta.namespace_name, owner->name});
    }
  }
  return out;
}

std::string gpu_clique(const kube::Document& node) {
  return node.doc.value("/metadata/labels"_json_pointer, json::object())
      .value(std::string(api::kLabelGpuClique), std::string());
}

bool pod_drain_changed(const CachedPod& before, const CachedPod& after) {
  const auto drain = [](const CachedPod& p) -> std::optional<CachedPod::Condition> {
    for (const auto& c : p.conditions) {
      if (c.type == std::string(kSlurmConditionPrefix) + "Drain") {
        return c;
      }
    }
    return std::nullopt;
  };
  const auto a = drain(before);
  const auto b = drain(after);
  return a.has_value() != b.has_value() ||
         (a && (a->status != b->status || a->reason != b->reason || a->message != b->message));
}

bool node_health_changed(const kube::Document& before, const kube::Document& after) {
  const auto shown = [](const kube::Document& node) {
    json taint;
    for (const auto& t : node.doc.value("/spec/taints"_json_pointer, json::array())) {
      if (t.value("key", "") == api::kTaintUnhealthy) {
        taint = t;
      }
    }
    return std::make_pair(node.doc.value("/metadata/annotations"_json_pointer, json::object())
                              .value(std::string(api::kAnnotationHealthFailures), std::string()),
                          taint);
  };
  return shown(before) != shown(after);
}

}  // namespace tightrope::op
