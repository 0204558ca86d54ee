#include "operator/build/compute_domain.hpp"

#include "api/well_known.hpp"
#include "operator/build/common.hpp"

namespace tightrope::op::build {

using nlohmann::json;

bool wants_compute_domain(const api::NodeSet& n) {
  const auto it = n.metadata.annotations.find(std::string(api::kAnnotationComputeDomain));
  return it != n.metadata.annotations.end() && it->second == "true";
}

std::string compute_domain_name(const api::NodeSet& n) {
  return n.metadata.name + "-imex";
}

std::string channel_template_name(const api::NodeSet& n) {
  return n.metadata.name + "-imex-channel";
}

json build_compute_domain(const api::NodeSet& n) {
  json labels = component_labels("slurmd", n.metadata.name, "worker");
  labels[api::kLabelCluster] = n.spec.controller_ref.name;
  json spec = json::object();
  // 0: the domain follows the pods that claim it, as NVIDIA runs it.
  spec["numNodes"] = 0;
  spec["channel"]["allocationMode"] = "All";
  spec["channel"]["resourceClaimTemplate"]["name"] = channel_template_name(n);
  return {{"apiVersion", kComputeDomainApiVersion},
          {"kind", "ComputeDomain"},
          {"metadata", object_meta(compute_domain_name(n), n.metadata.namespace_name, labels,
                                   {"NodeSet", n.metadata.name, n.metadata.uid})},
          {"spec", spec}};
}

void add_channel_claim(const api::NodeSet& n, json& pod) {
  json& spec = pod["spec"];
  json& claims = spec["resourceClaims"];
  if (!claims.is_array()) {
    claims = json::array();
  }
  for (const auto& claim : claims) {
    if (claim.value("name", std::string()) == kComputeDomainClaim) {
      return;
    }
  }
  json claim = json::object();
  claim["name"] = kComputeDomainClaim;
  claim["resourceClaimTemplateName"] = channel_template_name(n);
  claims.push_back(claim);
  for (auto& container : spec["containers"]) {
    if (container.value("name", std::string()) == "slurmd") {
      json& uses = container["resources"]["claims"];
      if (!uses.is_array()) {
        uses = json::array();
      }
      uses.push_back({{"name", kComputeDomainClaim}});
    }
  }
}

}  // namespace tightrope::op::build
