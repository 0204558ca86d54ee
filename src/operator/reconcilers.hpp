// The reconcilers of the five kinds besides NodeSet. Each reads its resource from the cache,
// gathers what its builder needs (Secrets, ConfigMaps, the Controller), applies the built
// objects, prunes what is no longer wanted, and reports Ready with a reason for every cause of
// not being ready. A reconcile is safe to repeat and to interrupt at any line.
#pragma once

#include "operator/reconcile_support.hpp"

namespace tightrope::op {

class ControllerReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

class RestApiReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

class AccountingReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

class LoginSetReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

class TokenReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

}  // namespace tightrope::op
