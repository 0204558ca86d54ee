// HealthCheck's reconciler (docs/health.md): each NodeSet the HealthCheck selects gets its
// checks in ConfigMap <nodeset>-health, which the NodeSet's slurmd pods mount; a NodeSet no
// longer selected loses it. The cluster's slurm.conf lines come from the Controller's
// reconciler (health_check_interval in its inputs). Remediation is the NodeSet's planner's.
#pragma once

#include <string>
#include <vector>

#include "api/types.hpp"
#include "operator/cache.hpp"
#include "operator/reconcile_support.hpp"

namespace tightrope::op {

class HealthCheckReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

// The HealthChecks of a namespace as the cache holds them, with their defaults; those that do
// not decode are left out (their own reconcile says why). Empty when the operator does not
// watch the kind (its CRD was not there when the operator started).
std::vector<api::HealthCheck> health_checks_in(const ResourceCache& cache, const std::string& ns);

}  // namespace tightrope::op
