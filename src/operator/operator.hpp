// The operator's controllers wired to their watches: informers for the six kinds and for what
// the operator owns or reads (ConfigMaps, Secrets, Services, StatefulSets, Deployments, slurmd
// Pods, ControllerRevisions, Nodes), a controller per kind, and the Slurm clients they share
// (whose change feeds enqueue the NodeSets of their cluster). start() after construction; stop()
// before destruction. A kube::Manager runs it: leader election, the HTTP endpoints, signals.
#pragma once

#include <memory>
#include <vector>

#include "base/metrics.hpp"
#include "kube/controller.hpp"
#include "kube/events.hpp"
#include "kube/manager.hpp"
#include "operator/cache.hpp"
#include "operator/nodeset.hpp"
#include "operator/reconcilers.hpp"
#include "operator/runtime.hpp"

namespace tightrope::op {

class Operator final : public kube::Runnable {
 public:
  Operator(kube::Client& client, kube::EventRecorder& events, OperatorOptions options,
           metrics::Registry* metrics);
  ~Operator() override;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Starts the informers (at once: a standby keeps warm caches) and, with start_controllers,
  // the controllers.
  void start_informers() override;
  bool wait_for_sync(std::chrono::milliseconds timeout) override;
  void start_controllers() override;
  void stop_controllers() override;
  void stop() override;
  bool synced() const override;

  SlurmClients& slurm_clients() { return slurm_; }

 private:
  void wire();

  // Before slurm_: its feeds report here until they stop.
  std::unique_ptr<ClusterMetrics> cluster_metrics_;  // with metrics only
  SlurmClients slurm_;
  Runtime runtime_;
  kube::InformerFactory factory_;
  ResourceCache cache_;
  metrics::Registry* metrics_;
  std::unique_ptr<NodeSetMetrics> nodeset_metrics_;  // with metrics only
  std::vector<kube::InformerBase*> informers_;

  ControllerReconciler controller_reconciler_;
  RestApiReconciler restapi_reconciler_;
  AccountingReconciler accounting_reconciler_;
  LoginSetReconciler loginset_reconciler_;
  TokenReconciler token_reconciler_;
  NodeSetReconciler nodeset_reconciler_;
  std::vector<std::unique_ptr<kube::Controller>> controllers_;
  bool controllers_running_ = false;
};

}  // namespace tightrope::op
