// Kinds and the REST paths that serve them. A ResourceType names what the API server calls a
// resource ("pods" in "v1", "nodesets" in "slinky.slurm.net/v1beta1"); the built-in ones are
// constants, others (CRDs) are found through discovery (discovery.hpp).
#pragma once

#include <string>
#include <string_view>

namespace tightrope::kube {

struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // plural, lower case
  std::string kind;
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  bool operator==(const ResourceType&) const = default;
};

// The path of a collection or of one object: /api/v1/namespaces/ns/pods[/name[/subresource]].
// An empty namespace with a namespaced type is the collection across all namespaces.
std::string resource_path(const ResourceType& type, std::string_view namespace_name,
                          std::string_view name = {}, std::string_view subresource = {});

// Percent-encodes a query parameter value.
std::string url_escape(std::string_view value);

namespace resources {
// Built-in types every controller here uses; their plurals never change, so no discovery.
const ResourceType& pods();
const ResourceType& nodes();
const ResourceType& namespaces();
const ResourceType& config_maps();
const ResourceType& secrets();
const ResourceType& services();
const ResourceType& service_accounts();
const ResourceType& events();
const ResourceType& pod_templates();
const ResourceType& persistent_volumes();
const ResourceType& persistent_volume_claims();
const ResourceType& deployments();
const ResourceType& stateful_sets();
const ResourceType& controller_revisions();
const ResourceType& leases();
const ResourceType& pod_disruption_budgets();
const ResourceType& custom_resource_definitions();
}  // namespace resources

}  // namespace tightrope::kube
