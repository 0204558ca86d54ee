// The reconcilers of the five kinds besides NodeSet. Each reads its resource from the cache,
// gathers what its builder needs (Secrets, ConfigMaps, the Controller), applies the built
// objects, prunes what is no longer wanted, and reports Ready with a reason for every cause of
// not being ready. A reconcile is safe to repeat and to interrupt at any line.
#pragma once

#include "kube/controller.hpp"
#include "operator/cache.hpp"
#include "operator/runtime.hpp"

namespace tightrope::op {

class ControllerReconciler : public kube::Reconciler {
 public:
  ControllerReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  Runtime& runtime_;
  const ResourceCache& cache_;
};

class RestApiReconciler : public kube::Reconciler {
 public:
  RestApiReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  Runtime& runtime_;
  const ResourceCache& cache_;
};

class AccountingReconciler : public kube::Reconciler {
 public:
  AccountingReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  Runtime& runtime_;
  const ResourceCache& cache_;
};

class LoginSetReconciler : public kube::Reconciler {
 public:
  LoginSetReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  Runtime& runtime_;
  const ResourceCache& cache_;
};

class TokenReconciler : public kube::Reconciler {
 public:
  TokenReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  Runtime& runtime_;
  const ResourceCache& cache_;
};

}  // namespace tightrope::op
