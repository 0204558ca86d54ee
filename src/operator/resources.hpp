// The Kubernetes resource types the operator reads and writes: Slinky's six kinds (their plurals
// are fixed by the CRDs in deploy/crds, so no discovery is needed) and ServiceMonitor.
#pragma once

#include <string>

#include "kube/resource.hpp"

namespace tightrope::op::resources {

const kube::ResourceType& controllers();
const kube::ResourceType& nodesets();
const kube::ResourceType& loginsets();
const kube::ResourceType& restapis();
const kube::ResourceType& accountings();
const kube::ResourceType& tokens();
// Tightrope's own (tightrope.slurm.net/v1alpha1).
const kube::ResourceType& health_checks();
const kube::ResourceType& service_monitors();  // monitoring.coreos.com/v1
// NVIDIA's DRA driver's IMEX domains, and the claim templates it makes for them.
const kube::ResourceType& compute_domains();           // resource.nvidia.com/v1beta1
const kube::ResourceType& resource_claim_templates();  // resource.k8s.io/v1
// DRA devices and their taints (a HealthCheck's deviceTaints signal): cluster-scoped.
const kube::ResourceType& resource_slices();     // resource.k8s.io/v1
const kube::ResourceType& device_taint_rules();  // resource.k8s.io/v1 (Kubernetes 1.37)

// The type of an object the operator builds, from its apiVersion and kind; nullptr for a kind
// it never writes.
const kube::ResourceType* for_object(const std::string& api_version, const std::string& kind);

}  // namespace tightrope::op::resources
