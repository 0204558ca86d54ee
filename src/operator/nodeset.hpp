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
#include <set>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "base/result.hpp"
#include "operator/reconcile_support.hpp"
#include "slurm/client.hpp"
#include "slurm/model.hpp"

namespace tightrope::op {

// What the controller needs to know of one of its pods.
struct WorkerPod {
  std::string name;
  std::string uid;
  int64_t ordinal = -1;
  std::string phase;        // Pending, Running, Succeeded, Failed, Unknown
  std::string kube_node;    // spec.nodeName; "" while unscheduled
  std::string hostname;     // the Slurm node name
  std::string revision;     // controller-revision-hash
  std::string mode;         // the scaling-mode label: StatefulSet or DaemonSet
  std::string target_node;  // the Node it is bound or pinned to ("" while unscheduled)
  bool ready = false;
  std::string ready_since;  // the Ready condition's lastTransitionTime
  std::string created;
  bool terminating = false;
  bool cordoned = false;  // annotation pod-cordon=true
  // Why a container cannot start ("container slurmd: ErrImagePull: ..."), "" when none is stuck.
  std::string start_failure;
  int64_t deletion_cost = 0;
  // When the work on its Slurm node is expected to end (node_deadlines); nullopt: no work.
  std::optional<slurm::Time> deadline;
};

// When each Slurm node's work is expected to end: the latest end of its running jobs (Slurm's
// end_time; a job without a time limit never ends). A node that Slurm shows busy but whose jobs
// the snapshot lacks never ends either: unseen jobs do not make a node idle.
std::map<std::string, slurm::Time> node_deadlines(const std::map<int64_t, slurm::Job>& jobs,
                                                  const std::map<std::string, slurm::Node>& nodes);

// Slinky's scale-in order, first difference wins: unscheduled, then Pending < Unknown <
// Running, not ready, lower pod-deletion-cost, earlier job deadline (no jobs first), cordoned,
// higher ordinal, more recently ready, newer. True when `a` goes before `b`.
bool condemn_before(const WorkerPod& a, const WorkerPod& b);

// A NodeSet as the Slurm change feed's listener knows it: its name and the feature each of its
// Slurm nodes registers with (NodeSet::slurm_name).
struct NodeSetFeature {
  std::string name;
  std::string feature;
};
// The NodeSets (names) that `changed` Slurm nodes belong to, by the node's comment (its pod
// link names the NodeSet) or its features; nullopt when a node belongs to none of them, so
// that every NodeSet looks (a record just made, one of a NodeSet not cached yet).
std::optional<std::set<std::string>> nodesets_touched(const std::vector<NodeSetFeature>& nodesets,
                                                      const std::vector<slurm::Node>& changed);

// Which of a NodeSet's pods go, and why. Pure: the reconcile drains and deletes them.
struct Victims {
  // The pods in the order they go: those whose Slurm node the operator already drained for
  // deletion first (they keep their place), then condemn_before.
  std::vector<WorkerPod> order;
  // pod -> why: "scale-in", "scale-in: a second pod on <Node>", "update", "the scaling mode
  // changed", ...
  std::map<std::string, std::string> condemned;
  // ScheduledUpdate: outdated pods that wait for the maintenance window.
  std::set<std::string> outdated;
};
// `active`: the pods neither terminating nor finished; `nodes`: Slurm's, by name; `want`: the
// pods the NodeSet wants (replicas, or the eligible Nodes in DaemonSet mode); `eligible`: the
// Nodes a DaemonSet-mode pod may run on. The excess over `want` goes in scale-in order (pods of
// the other scaling mode always; DaemonSet mode: pods on Nodes no longer eligible and all but
// the oldest of several on one Node), then RollingUpdate replaces old revisions within
// maxUnavailable.
Victims choose_victims(const api::NodeSet& n, std::vector<WorkerPod> active,
                       const std::map<std::string, slurm::Node>& nodes, int64_t want,
                       const std::string& revision,
                       const std::map<std::string, std::string>& eligible);

// The Progressing message of a NodeSet whose pods (not terminating) are not yet what it wants:
// "scaling in to 0 pods: 20 left, 20 ready, 5 terminating", "1 of 2 pods ready, all at revision
// r", ...
std::string progress_message(int64_t pods, int64_t want, int64_t ready, int64_t updated,
                             int64_t terminating, const std::string& revision);

// Why one of the pod's containers waits and will not start by itself (an image that cannot be
// pulled, a crash loop, a bad config), from the container statuses the pod cache keeps; ""
// when no container is stuck.
std::string container_start_failure(const nlohmann::json& pod);

// maxUnavailable (an integer or "N%") of `replicas`, rounded up, at least 1.
int64_t max_unavailable(const nlohmann::json& value, int64_t replicas);

// The pod conditions that mirror a Slurm node: exactly one base state
// (SlurmNodeStateIdle, ...Allocated, ...) and one per flag (...Drain, ...NotResponding, ...),
// each True with Slurm's reason as message.
std::vector<std::string> slurm_condition_types(const slurm::Node& node);

// Drained: DRAIN and no work left. Only then may its pod go.
bool slurm_drained(const slurm::Node& node);

// The reason the operator gives Slurm for a cordoned Kubernetes node: the node's
// node-cordon-reason annotation (control characters dropped, at most 256 characters), else a
// default naming the node and pod. Always with the operator's prefix.
std::string cordon_reason(const nlohmann::json& kube_node, const std::string& pod_key);
// A Slurm node's features with the Kubernetes Node's features.slinky.slurm.net/spec ("a,b")
// as k8s/a, k8s/b: features of its own (not k8s/) kept, in order, then the annotation's.
std::vector<std::string> node_features(const std::string& spec,
                                       const std::vector<std::string>& current);
// True when `reason` is one the operator wrote (it may undo it); an administrator's never is.
bool operator_reason(const std::string& reason);

// ScheduledUpdate: outdated pods are replaced inside a Slurm maintenance reservation named
// SlurmOperatorMaint-<nodeset>, which exists while an update is pending.
std::string maintenance_reservation_name(const api::NodeSet& n);
// That reservation over `nodes` (Slurm node names): MAINT and IGNORE_JOBS (it is made while
// jobs run; nothing new starts in it), then the spec's flags, for user slurm, from startTime
// for duration. A one-time window that has begun starts now; a recurring one (HOURLY, DAILY,
// WEEKDAY, WEEKEND, WEEKLY) keeps its start with FORCE_START. An error says why there is none:
// startTime does not parse, or a one-time window has ended.
Result<slurm::Reservation, std::string> maintenance_reservation(const api::NodeSet& n,
                                                                std::vector<std::string> nodes,
                                                                slurm::Time now);

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

  struct Pending {
    std::set<std::string> creations;  // pod names the cache does not have yet
    std::set<std::string> deletions;  // pod uids the cache still shows alive
  };
  // Forgets what the cache now shows (`cached`: the NodeSet's pods in the cache) and what has
  // lapsed; returns the rest.
  Pending pending(const std::string& nodeset, const std::vector<WorkerPod>& cached,
                  Clock::time_point now);
  void forget(const std::string& nodeset);

 private:
  struct Entry {
    std::map<std::string, Clock::time_point> creations;
    std::map<std::string, Clock::time_point> deletions;
  };
  std::chrono::seconds ttl_;
  std::mutex mu_;
  std::map<std::string, Entry> by_nodeset_;
};

class NodeSetReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  PodExpectations expectations_;
  // The worker Service and PDB: every NodeSet reconcile builds them, a change or every five
  // minutes writes them.

  kube::ReconcileOutcome finish_deletion(const kube::Document& nodeset);
  // With the slurm-nodes finalizer: deletes the NodeSet's pods, then the Slurm node records they
  // leave; nullopt once done (or given up on, after 3 minutes), else when to look again.
  std::optional<kube::ReconcileOutcome> remove_slurm_nodes(const kube::Document& nodeset,
                                                           const api::NodeSet& n);
  // Adds or removes the reservation finalizer.
  Result<Done, std::string> hold_finalizer(const kube::Document& nodeset,
                                           std::string_view finalizer, bool hold);
  // Makes the maintenance reservation as wanted (nodes, and the window while it has not begun);
  // its window as Slurm has it.
  Result<std::pair<slurm::Time, slurm::Time>, std::string> sync_reservation(
      slurm::Client& client, const slurm::Reservation& wanted, const kube::ObjectReference& self);
  // Deletes it; gone already is fine.
  Result<Done, std::string> release_reservation(slurm::Client& client, const std::string& name,
                                                const kube::ObjectReference& self);
};

}  // namespace tightrope::op
