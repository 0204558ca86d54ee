#include "kube/resource.hpp"

namespace tightrope::kube {

std::string resource_path(const ResourceType& type, std::string_view namespace_name,
                          std::string_view name, std::string_view subresource) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !namespace_name.empty()) {
    path.append("/namespaces/").append(namespace_name);
  }
  path.append("/").append(type.resource);
  if (!name.empty()) {
    path.append("/").append(url_escape(name));
    if (!subresource.empty()) {
      path.append("/").append(subresource);
    }
  }
  return path;
}

std::string url_escape(std::string_view value) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '_' || u == '.' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4U]);
      out.push_back(kHex[u & 0xFU]);
    }
  }
  return out;
}

namespace resources {
namespace {
ResourceType make(std::string group, std::string version, std::string resource, std::string kind,
                  bool namespaced) {
  return ResourceType{std::move(group), std::move(version), std::move(resource), std::move(kind),
                      namespaced};
}
}  // namespace

// Function-local statics: no static initialisation order to get wrong.
const ResourceType& pods() {
  static const ResourceType t = make("", "v1", "pods", "Pod", true);
  return t;
}
const ResourceType& nodes() {
  static const ResourceType t = make("", "v1", "nodes", "Node", false);
  return t;
}
const ResourceType& namespaces() {
  static const ResourceType t = make("", "v1", "namespaces", "Namespace", false);
  return t;
}
const ResourceType& config_maps() {
  static const ResourceType t = make("", "v1", "configmaps", "ConfigMap", true);
  return t;
}
const ResourceType& secrets() {
  static const ResourceType t = make("", "v1", "secrets", "Secret", true);
  return t;
}
const ResourceType& services() {
  static const ResourceType t = make("", "v1", "services", "Service", true);
  return t;
}
const ResourceType& service_accounts() {
  static const ResourceType t = make("", "v1", "serviceaccounts", "ServiceAccount", true);
  return t;
}
const ResourceType& events() {
  static const ResourceType t = make("", "v1", "events", "Event", true);
  return t;
}
const ResourceType& pod_templates() {
  static const ResourceType t = make("", "v1", "podtemplates", "PodTemplate", true);
  return t;
}
const ResourceType& persistent_volumes() {
  static const ResourceType t = make("", "v1", "persistentvolumes", "PersistentVolume", false);
  return t;
}
const ResourceType& persistent_volume_claims() {
  static const ResourceType t =
      make("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true);
  return t;
}
const ResourceType& deployments() {
  static const ResourceType t = make("apps", "v1", "deployments", "Deployment", true);
  return t;
}
const ResourceType& stateful_sets() {
  static const ResourceType t = make("apps", "v1", "statefulsets", "StatefulSet", true);
  return t;
}
const ResourceType& controller_revisions() {
  static const ResourceType t =
      make("apps", "v1", "controllerrevisions", "ControllerRevision", true);
  return t;
}
const ResourceType& leases() {
  static const ResourceType t = make("coordination.k8s.io", "v1", "leases", "Lease", true);
  return t;
}
const ResourceType& pod_disruption_budgets() {
  static const ResourceType t =
      make("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true);
  return t;
}
const ResourceType& custom_resource_definitions() {
  static const ResourceType t = make("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                     "CustomResourceDefinition", false);
  return t;
}
}  // namespace resources

}  // namespace tightrope::kube
