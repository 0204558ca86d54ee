// The NodeSet controller: slurmd pods managed directly (lowest free ordinal first), and the two
// systems kept in step. Slurm → Kubernetes: each pod carries SlurmNodeState* conditions, busy
// pods the pod-protect label, the NodeSet Slurm's counts. Kubernetes → Slurm: a cordoned node's
// slurmd pods are drained, and undrained on uncordon when the drain was the operator's.
//
// A pod leaves only after its Slurm node is drained and idle (scale-in and updates alike), and
// fail-closed: when Slurm cannot be asked, or does not know a running pod's node, nothing is
// deleted and the NodeSet's DeletionBlocked condition says why. The cluster's Slurm change feed and
// the Kubernetes watches enqueue NodeSets; the periodic resync is a safety net.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <semaphore>
#include <set>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "base/result.hpp"
#include "operator/nodeset_metrics.hpp"
#include "operator/nodeset_plan.hpp"
#include "operator/reconcile_support.hpp"
#include "slurm/client.hpp"
#include "slurm/model.hpp"

namespace tightrope::op {

// What the operator did to a NodeSet's pods that its cache has not shown yet (the
// "expectations" of Kubernetes' ReplicaSet controller): pods it created and pods it deleted.
// Until the cache shows them, a reconcile counts a created pod as there and a deleted one as
// terminating, so it never creates, deletes or writes twice. One the cache never confirms lapses
// after `ttl`. Safe for concurrent reconciles of different NodeSets.
class PodExpectations {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PodExpectations(std::chrono::seconds ttl = std::chrono::seconds(120)) : ttl_(ttl) {}

  void created(const std::string& nodeset, const std::string& pod, Clock::time_point now);
  void deleted(const std::string& nodeset, const std::string& pod_uid, Clock::time_point now);
  // A pod written to (conditions, labels) when the cache showed it at `resource_version`: until
  // the cache shows another version, what was written is not seen yet.
  void patched(const std::string& nodeset, const std::string& pod_uid,
               const std::string& resource_version, Clock::time_point now);

  // Forgets what the cache now shows (`cached`: the NodeSet's pods in the cache) and what has
  // lapsed; returns the rest.
  PendingPods pending(const std::string& nodeset, const std::vector<WorkerPod>& cached,
                      Clock::time_point now);
  void forget(const std::string& nodeset);
  void forget_all();

 private:
  struct Entry {
    std::map<std::string, Clock::time_point> creations;
    std::map<std::string, Clock::time_point> deletions;
    std::map<std::string, std::pair<std::string, Clock::time_point>> patches;
  };
  std::chrono::seconds ttl_;
  std::mutex mu_;
  std::map<std::string, Entry> by_nodeset_;
};

// Writes to Slurm nodes the operator made that the change feed's snapshot may not show yet: a
// reconcile that follows its own at once plans from the snapshot before them. Each is kept,
// with the value the node will show, until the snapshot shows it (or `seen_within` has passed).
// Safe for concurrent reconciles.
//  - Drains (drains_in_flight): a node just drained for a scale-in would be taken for one still
//    running and a second condemned; the scale-in order counts them (SlurmView::
//    drains_in_flight). Nothing else does: a stale snapshot's IDLE with a fresh drain would read
//    as drained and idle, and let a pod go.
//  - Active checks started (checks_in_flight): their reservation, not shown yet, counts in the
//    budget of checks at once, and the node is not taken for a second check.
class WritesInFlight {
 public:
  using Clock = std::chrono::steady_clock;
  // Whether a snapshot's node shows the write's value.
  using Shown = bool (*)(const slurm::Node& node, const std::string& value);
  WritesInFlight(std::chrono::seconds seen_within, Shown shown)
      : seen_within_(seen_within), shown_(shown) {}

  void written(const std::string& nodeset, const std::string& node, const std::string& value,
               Clock::time_point now);
  // Undone since (an undrain, a resume): no longer in flight.
  void undone(const std::string& nodeset, const std::string& node);
  // The writes to `nodeset`'s nodes that `nodes` does not show yet: Slurm node -> value.
  // Forgets what it shows and what has lapsed.
  std::map<std::string, std::string> pending(const std::string& nodeset,
                                             const std::map<std::string, slurm::Node>& nodes,
                                             Clock::time_point now);
  void forget(const std::string& nodeset);
  std::chrono::seconds seen_within() const { return seen_within_; }

 private:
  const std::chrono::seconds seen_within_;
  const Shown shown_;
  std::mutex mu_;
  // nodeset -> Slurm node -> (value, when written)
  std::map<std::string, std::map<std::string, std::pair<std::string, Clock::time_point>>>
      by_nodeset_;
};
// A drain, by its reason; shown once the node is drained with it.
WritesInFlight drains_in_flight();
// An active check started, by its reservation; shown once the node is in it.
WritesInFlight checks_in_flight();

// A reconcile in three stages: observe (the cache, the feed's Slurm snapshot, the
// expectations) into a NodeSetWorld, plan_nodeset, then execute the plan's actions, record their
// events, and publish status and conditions as conclude says.
class NodeSetReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
  // Where each reconcile's outcome goes as metrics; none without.
  void use_metrics(NodeSetMetrics* metrics) { metrics_ = metrics; }
  // A new term as leader: another leader may have created or deleted pods since this one's
  // writes, so what it expected of them is dropped rather than waited out.
  void forget_expectations() { expectations_.forget_all(); }

 private:
  NodeSetMetrics* metrics_ = nullptr;
  PodExpectations expectations_;
  WritesInFlight drains_ = drains_in_flight();
  WritesInFlight checks_ = checks_in_flight();
  // Slurm REST writes in flight at once, all NodeSets together.
  std::counting_semaphore<> slurm_writes_{4};
  NodeSetWorld observe(const kube::Document& nodeset, api::NodeSet n, const std::string& key);
  // Moved from another operator (reconcile_support.hpp, adoption): a NodeSet Tightrope never
  // reconciled, whose status names the revision that operator made its pods at (nodeSetHash, at
  // the current generation) and some pod carries, has that revision adopted: its pods count as
  // current until the spec changes, and none is replaced for Tightrope's own way of naming
  // revisions. Recorded on `n` as well; an error when it could not be recorded.
  kube::Result<Done> adopt_revision(const kube::Document& nodeset, api::NodeSet& n);
  // spec.ssh: whether the host keys Secret (made once) is absent and the sshd_config ConfigMap
  // is as last applied; why pods must wait when the sssd.conf Secret or the keys cannot be read.
  std::optional<Readiness> read_ssh(NodeSetWorld& world);
  // Why new pods must wait for slurmctld to run a configuration with the NodeSet in it
  // (build::slurmctld_lacks_nodeset); nullopt when it does, or when slurmctld is external.
  std::optional<Readiness> slurmctld_has_loaded(const api::NodeSet& n, const api::Controller& c);
  // Runs the actions through execute_actions (nodeset_execute.hpp), writing with perform and
  // recording each success's events; returns those that failed.
  std::vector<ActionFailure> execute(const std::string& key, const kube::ObjectReference& self,
                                     const NodeSetWorld& world, const std::vector<Action>& actions);
  // One action; an error message when it failed.
  std::optional<std::string> perform(const std::string& key, const NodeSetWorld& world,
                                     const Action& action);
  // The writes of each Change, as the overloads of one visitor: to Kubernetes and to Slurm.
  auto kube_writes(const std::string& key, const NodeSetWorld& world);
  auto slurm_writes(const std::string& key, const NodeSetWorld& world);

  // A NodeSet being deleted whose spec cannot be read: its pods and finalizers stay, and
  // DeletionBlocked, Ready and a Warning event say why and the ways out.
  kube::ReconcileOutcome keep_unreadable(const kube::Document& nodeset,
                                         const api::FieldErrors& errors);
};

}  // namespace tightrope::op
