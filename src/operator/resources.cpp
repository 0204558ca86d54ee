#include "operator/resources.hpp"

#include <array>

namespace tightrope::op::resources {

namespace {
kube::ResourceType slinky(const char* plural, const char* kind) {
  return {"slinky.slurm.net", "v1beta1", plural, kind, true};
}
}  // namespace

const kube::ResourceType& controllers() {
  static const auto t = slinky("controllers", "Controller");
  return t;
}
const kube::ResourceType& nodesets() {
  static const auto t = slinky("nodesets", "NodeSet");
  return t;
}
const kube::ResourceType& loginsets() {
  static const auto t = slinky("loginsets", "LoginSet");
  return t;
}
const kube::ResourceType& restapis() {
  static const auto t = slinky("restapis", "RestApi");
  return t;
}
const kube::ResourceType& accountings() {
  static const auto t = slinky("accountings", "Accounting");
  return t;
}
const kube::ResourceType& tokens() {
  static const auto t = slinky("tokens", "Token");
  return t;
}
const kube::ResourceType& health_checks() {
  static const kube::ResourceType t{"tightrope.slurm.net", "v1alpha1", "healthchecks",
                                    "HealthCheck", true};
  return t;
}

const kube::ResourceType& service_monitors() {
  static const kube::ResourceType t{"monitoring.coreos.com", "v1", "servicemonitors",
                                    "ServiceMonitor", true};
  return t;
}

const kube::ResourceType& compute_domains() {
  static const kube::ResourceType t{"resource.nvidia.com", "v1beta1", "computedomains",
                                    "ComputeDomain", true};
  return t;
}
const kube::ResourceType& resource_claim_templates() {
  static const kube::ResourceType t{"resource.k8s.io", "v1", "resourceclaimtemplates",
                                    "ResourceClaimTemplate", true};
  return t;
}

const kube::ResourceType& resource_slices() {
  static const kube::ResourceType t{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice",
                                    false};
  return t;
}
const kube::ResourceType& device_taint_rules() {
  static const kube::ResourceType t{"resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule",
                                    false};
  return t;
}

const kube::ResourceType* for_object(const std::string& api_version, const std::string& kind) {
  const std::array<const kube::ResourceType*, 16> known = {
      &kube::resources::config_maps(),
      &kube::resources::pods(),
      &kube::resources::controller_revisions(),
      &kube::resources::secrets(),
      &kube::resources::services(),
      &kube::resources::stateful_sets(),
      &kube::resources::deployments(),
      &kube::resources::pod_disruption_budgets(),
      &service_monitors(),
      &compute_domains(),
      &controllers(),
      &nodesets(),
      &loginsets(),
      &restapis(),
      &accountings(),
      &health_checks()};
  for (const auto* t : known) {
    if (t->api_version() == api_version && t->kind == kind) {
      return t;
    }
  }
  return tokens().kind == kind && tokens().api_version() == api_version ? &tokens() : nullptr;
}

}  // namespace tightrope::op::resources
