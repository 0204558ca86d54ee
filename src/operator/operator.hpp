// The operator's controllers wired to their watches: informers for the six kinds and for what
// the operator owns or reads (ConfigMaps, Secrets, Services, StatefulSets, Deployments, slurmd
// Pods, ControllerRevisions, Nodes), a controller per kind, and one more that owns each
// cluster's Slurm connection (whose change feed enqueues the NodeSets of its cluster, and whose
// reach, when it changes, the Controller). start() after construction; stop()
// before destruction. A kube::Manager runs it: leader election, the HTTP endpoints, signals.
#pragma once

#include <memory>
#include <vector>

#include "base/metrics.hpp"
#include "kube/controller.hpp"
#include "kube/events.hpp"
#include "kube/manager.hpp"
#include "operator/cache.hpp"
#include "operator/health.hpp"
#include "operator/log_hints.hpp"
#include "operator/nodeset.hpp"
#include "operator/reconcilers.hpp"
#include "operator/runtime.hpp"
#include "operator/slurm_connection.hpp"

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
  // The controllers, their informers and every mapping between them.
  void wire();
  void make_controllers();
  void wire_slurm();    // the Slurm connections' changes
  void wire_nodes();    // Kubernetes Nodes: cluster-wide
  void wire_devices();  // DRA devices' taints (ResourceSlices, DeviceTaintRules): cluster-wide
  struct NamespaceInformers {
    kube::Informer<kube::Document>* controller_inf;
    kube::Informer<kube::Document>* nodeset_inf;
    kube::Informer<kube::Document>* restapi_inf;
    kube::Informer<kube::Document>* accounting_inf;
    kube::Informer<kube::Document>* loginset_inf;
    kube::Informer<kube::Document>* token_inf;
    // Null when the HealthCheck CRD was not installed as the operator started.
    kube::Informer<kube::Document>* health_inf;
    kube::Informer<kube::MetaOnly>* secrets;
    kube::Informer<kube::MetaOnly>* config_maps;
    kube::Informer<kube::MetaOnly>* services;
    kube::Informer<kube::MetaOnly>* stateful_sets;
    kube::Informer<kube::MetaOnly>* deployments;
    kube::Informer<CachedPod>* worker_pods;
    kube::Informer<kube::Document>* revisions;
  };
  // One watched namespace's informers (every kind, with the cache's indexes), then who each
  // of their changes wakes.
  NamespaceInformers watch_namespace(const std::string& ns);
  void wire_namespace(const NamespaceInformers& in);
  void wire_health_checks(const NamespaceInformers& in);  // where the CRD is served
  // The NodeSets of one Controller, as the cache has them.
  std::vector<ResourceCache::Ptr> nodesets_of(const std::string& ns,
                                              const std::string& controller) const;

  // Before slurm_: its feeds report here until they stop.
  std::unique_ptr<ClusterMetrics> cluster_metrics_;  // with metrics only
  SlurmClients slurm_;
  LogHints log_hints_;  // after slurm_: its followers hint slurm_'s feeds until they stop
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
  HealthCheckReconciler health_reconciler_;
  NodeSetReconciler nodeset_reconciler_;
  SlurmConnectionReconciler connection_reconciler_;
  std::vector<std::unique_ptr<kube::Controller>> controllers_;
  struct {
    kube::Controller* controllers = nullptr;
    kube::Controller* restapis = nullptr;
    kube::Controller* accountings = nullptr;
    kube::Controller* loginsets = nullptr;
    kube::Controller* tokens = nullptr;
    kube::Controller* health_checks = nullptr;
    kube::Controller* nodesets = nullptr;
    kube::Controller* connections = nullptr;
  } by_kind_;  // the controllers_ above, by the kind each reconciles
  bool controllers_running_ = false;
};

}  // namespace tightrope::op
