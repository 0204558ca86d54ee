// The NodeSet controller's decisions, as pure functions of what it observed (NodeSetWorld): which
// pods go and when, what Slurm and Kubernetes are told, what the status says. A reconcile
// observes (nodeset.cpp), plans (nodeset_plan.cpp, by the rules of nodeset_rules.cpp over the
// pods of nodeset_pods.cpp), executes the plan's Actions (nodeset_execute.cpp) and concludes
// (nodeset_conclude.cpp); nothing here writes or reads a client, so every decision is
// table-tested without a cluster.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "api/types.hpp"
#include "base/result.hpp"
#include "kube/controller.hpp"
#include "kube/object.hpp"
#include "operator/cached_pod.hpp"
#include "operator/confinement.hpp"
#include "operator/remediation.hpp"
#include "operator/runtime.hpp"
#include "slurm/feed.hpp"
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
  std::string ip;           // status.podIP, "" until the kubelet writes it
  bool ready = false;
  std::string ready_since;  // the Ready condition's lastTransitionTime
  std::string created;
  std::string resource_version;  // as the cache has it
  bool terminating = false;
  bool cordoned = false;         // annotation pod-cordon=true
  bool operator_cordon = false;  // annotation operator-cordon=true: the operator set pod-cordon
  // A drain asked for with pod-cordon-requested: "true", or its reason; "" if none ("false").
  std::string cordon_request;
  // "true": a request with no words of its own (any other text is the reason).
  bool plain_cordon_request() const { return cordon_request == "true" || cordon_request == "True"; }
  // An administrator asked for its Slurm node to be drained (annotation drain-reason), "" if not.
  std::string drain_request;
  // Why a container cannot start ("container slurmd: ErrImagePull: ..."), "" when none is stuck.
  std::string start_failure;
  // Why the scheduler finds no Node for it (PodScheduled=False, Unschedulable: "0/3 nodes are
  // available: 3 Insufficient nvidia.com/gpu."), "" when it is placed or still being placed.
  std::string unschedulable;
  int64_t deletion_cost = 0;
  // When the work on its Slurm node is expected to end (node_deadlines); nullopt: no work.
  std::optional<slurm::Time> deadline;
  // When the last job that ran on its Slurm node ended (node_last_job_ends); nullopt: none the
  // snapshot holds.
  std::optional<slurm::Time> last_job_end;
  // Its SlurmNodeState* conditions as the pod has them: type -> (message, lastTransitionTime).
  std::map<std::string, std::pair<std::string, std::string>> slurm_conditions;
  bool protect_label = false;       // nodeset.slinky.slurm.net/pod-protect=true
  std::string deadline_annotation;  // nodeset.slinky.slurm.net/pod-deadline as the pod has it
  // cluster-autoscaler's safe-to-evict and Karpenter's do-not-disrupt as the pod has them.
  std::string safe_to_evict;
  std::string do_not_disrupt;
};

// The pod-deadline annotation of a deadline: RFC 3339 in UTC; a node whose work never ends (a
// job without a time limit) reads 9999-12-31T23:59:59Z; "" (no annotation) without work.
std::string pod_deadline_annotation(const std::optional<slurm::Time>& deadline);

// A pod as the cache has it, read for the controller: the same projection, with what the
// NodeSet's spec and the pod's words mean (its ordinal, its Slurm node, its scale-in keys).
WorkerPod worker_pod(const api::NodeSet& n, const CachedPod& pod);
// The revision a pod was made at: Tightrope's `controller-revision-hash` label, else the
// `controller.kubernetes.io/hash` that Slinky's operator writes (Kubernetes' history package);
// "" for neither.
std::string pod_revision(const kube::ObjectMeta& meta);

// When each Slurm node's work is expected to end: the latest end of its running jobs (Slurm's
// end_time; a job without a time limit never ends). A node that Slurm shows busy but whose jobs
// the snapshot lacks never ends either: unseen jobs do not make a node idle.
std::map<std::string, slurm::Time> node_deadlines(const std::map<int64_t, slurm::Job>& jobs,
                                                  const std::map<std::string, slurm::Node>& nodes);
// When the last job that ran on each Slurm node ended (Slurm keeps ended jobs for MinJobAge).
std::map<std::string, slurm::Time> node_last_job_ends(const std::map<int64_t, slurm::Job>& jobs);

// slurmctld saves a changed job within SAVE_MAX_WAIT (5 s) of its last save, batched, so a
// slurmctld killed sooner after a job ended recovers the job as still running. If the pod of
// its node is gone by then, the node looks failed and Slurm runs the job again: a pod whose job
// ended less than this ago waits (the margin covers a slow StateSaveLocation).
inline constexpr auto kJobEndSaved = std::chrono::seconds(10);

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
std::string container_start_failure(const CachedPod& pod);

// maxUnavailable (an integer or "N%") of `replicas`, rounded up, at least 1.
int64_t max_unavailable(const nlohmann::json& value, int64_t replicas);

// The pod conditions that mirror a Slurm node: exactly one base state
// (SlurmNodeStateIdle, ...Allocated, ...) and one per flag (...Drain, ...NotResponding, ...),
// each True with Slurm's reason as message.
std::vector<std::string> slurm_condition_types(const slurm::Node& node);

// Why a pod's Node is lost, "" when it is not: the kubelet has stopped reporting (the Node's
// Ready condition Unknown, which the node lifecycle controller sets after its grace period) and
// Slurm has reached the same verdict on its own (the pod's node DOWN and NOT_RESPONDING, after
// SlurmdTimeout). "Node e2e-node-2 has not reported since 2026-12-06T09:30:00Z and Slurm shows
// slinky-1 DOWN (Not responding)". One side alone is never enough: a kubelet that lost the API
// server may still run a slurmd that runs jobs, and a slurmd Slurm cannot reach may still be
// restarted by its kubelet.
std::string lost_node(const kube::Document& kube_node, const slurm::Node& node);

// Why a GPU pod's Slurm node offers GPUs its pod does not have, "" when it does not: Slurm
// registered (gpu_count of its Gres) more than the pod's `limit` of nvidia.com/gpu (its slurmd sees
// devices it was not given), or the Node now allocates fewer than the pod holds (a GPU fell off the
// bus and its device plugin marked it unhealthy). "Node gpu-node-1 allocates 3 nvidia.com/gpu,
// fewer than the 4 Slurm node gpu-0 registered and its pod holds". Pods without a limit have no
// count to hold Slurm to: "".
std::string gpu_shortfall(int64_t limit, const slurm::Node& node, const kube::Document* kube_node);

// A node Slurm set DOWN because an earlier slurmd stopped answering ("Not responding", before
// the pod `w` was created) that answers again: the DOWN is about a slurmd that no longer
// exists, as after a lost Node (lost_node), and the pod's slurmd has registered. Slurm's own
// ReturnToService=0 (its default) keeps such a node DOWN until someone resumes it.
bool down_before_pod(const slurm::Node& node, const WorkerPod& w);

// Drained: DRAIN and no work left. Only then may its pod go.
bool slurm_drained(const slurm::Node& node);
// Power saving (build/power.hpp): Slurm has powered the node down, or is powering it down, and
// it holds no work. Its pod goes without a drain, which would keep Slurm from powering it up.
bool powered_down(const slurm::Node& node);
// Slurm gave up waiting for the node to come up (ResumeTimeout): DOWN and powered down, with
// Slurm's reason. Its job is requeued; the node waits for `scontrol update state=resume`.
bool resume_timed_out(const slurm::Node& node);
// Power saving: a powered-down node set DOWN by the operator's side (a pod's preStop, "Pod is
// terminating"): with no pod of it left, nothing runs there and Slurm may power it up again.
bool stale_down_while_powered_down(const slurm::Node& node);
// A node whose pod is to go must be drained (again): not DRAIN, or DRAIN being undone (UNDRAIN).
// Scale-in, updates and deletion alike.
bool drain_needed(const slurm::Node& node);

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
// A drain or undrain is planned from the change feed's snapshot, up to a poll old, in which the
// node's reason was `seen`: true when Slurm's node `now` has another's reason since (an
// administrator drained it meanwhile), which the write must not overwrite or undo.
bool reason_changed_by_another(const slurm::Node& now, const std::string& seen);
// The reason of a drain for deletion: "pending termination" marks a pod the operator is taking
// away, so a later reconcile (or a restarted operator) knows it from Slurm alone. `key`: the
// pod's namespace/name; `why`: "scale-in", "update", "NodeSet deletion", ...
std::string condemned_reason(const std::string& key, const std::string& why);
// A drain slurmctld set when the node registered fewer GRES than its Gres= (its slurmd had an
// older gres.conf), which a later registration has since answered: the node may be undrained.
bool stale_registration_drain(const slurm::Node& node);

// Slurm repeats a reservation with one of these flags (HOURLY, DAILY, ...), moving its window on
// by itself.
bool recurring_reservation(const std::vector<std::string>& flags);
// `text` as a reason the operator gives Slurm: with its prefix (operator_reason).
std::string with_operator_prefix(const std::string& text);
// The pod conditions that mirror a Slurm node's state: SlurmNodeStateIdle, ...Drain, ...
inline constexpr std::string_view kSlurmConditionPrefix = "SlurmNodeState";

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

// ---- Observe: what a reconcile knows ----

// DeletionBlocked's reason while Slurm cannot be asked: NoSlurmClient, WaitingForSlurm,
// SlurmUnreachable ("" when it can).
std::string slurm_reason(SlurmHealth health);

struct SlurmView {
  // Whether the cluster's Slurm can be asked (SlurmClients::reach). Only kSynced lets a running
  // pod go.
  SlurmHealth health = SlurmHealth::kNoClient;
  std::string reason;   // SlurmReachable's reason ("" in tests: told from health)
  std::string problem;  // why it is not kSynced
  // One poll's nodes and jobs, shared with the feed (never copied); empty unless kSynced.
  slurm::SlurmSnapshot snapshot;
  // Drains this operator wrote that the snapshot does not show yet (WritesInFlight): Slurm node
  // -> reason. Only the scale-in order counts them.
  std::map<std::string, std::string> drains_in_flight;
  // Active checks this operator started that the snapshot does not show yet (WritesInFlight):
  // Slurm node -> its check's reservation.
  std::map<std::string, std::string> checks_in_flight;
  // ScheduledUpdate: the maintenance reservation as Slurm has it, read when the NodeSet holds
  // its reservation finalizer; nullopt when absent or not read.
  std::optional<slurm::Reservation> reservation;
};

// What the operator did that its cache does not show yet (PodExpectations).
struct PendingPods {
  std::set<std::string> creations;  // pod names the cache does not have yet
  std::set<std::string> deletions;  // pod uids the cache still shows alive
  std::set<std::string> patches;    // pod uids written to, the write not in the cache yet
};

struct NodeSetWorld {
  api::NodeSet nodeset;  // defaulted and valid
  std::vector<std::string> finalizers;
  std::string resource_version;
  nlohmann::json status = nlohmann::json::object();  // as stored
  std::vector<api::Condition> conditions;            // as stored
  std::optional<api::Controller> controller;         // nullopt: it does not exist
  // Its ControllerRevisions: (revision number, name).
  std::vector<std::pair<int64_t, std::string>> revisions;
  std::vector<WorkerPod> pods;  // the cache's, decoded
  // The revision adopted from another operator while the spec is as it was adopted
  // (reconcile_support.hpp): its pods count as current. "" when none.
  std::string adopted_revision;
  PendingPods expected;
  // The Kubernetes Nodes, by name, as the cache holds them (shared, not copied): every one in
  // DaemonSet mode, else those its pods run on and its ordinals are pinned to.
  std::map<std::string, std::shared_ptr<const kube::Document>> kube_nodes;
  // The DRA device taints on devices of those Nodes, by Node: read only for a HealthCheck whose
  // signals name device taints.
  std::map<std::string, std::vector<DeviceTaint>> device_taints;
  // The health failures other Nodes record of its pods' names, by pod name: (Node, failure).
  // A replacement that fails the check its predecessor failed on another Node carries its
  // fault with it. Read only while it follows a HealthCheck.
  std::map<std::string, std::vector<std::pair<std::string, api::NodeFailure>>> failures_elsewhere;
  // The Nodes whose slinky.slurm.net/slurm-nodename label names one of its pods' hostnames, by
  // hostname; and how many worker pods (of any NodeSet) run on each Node its pods run on.
  std::map<std::string, std::vector<std::string>> labelled_nodes;
  std::map<std::string, size_t> workers_on_node;
  // The blocks of the Controller's generated topology.yaml: a Node's clique joins one of these.
  std::set<std::string> topology_blocks;
  // How the Controller's slurm.conf and cgroup.conf track and hold jobs; nullopt when they
  // cannot be read (JobsConfined then stays as it was).
  std::optional<ConfinementConfig> confinement;
  // Why new pods cannot be made yet: the NodeSet's ComputeDomain cannot take them (its CRD is
  // not installed, its claim template not made), or spec.ssh's Secrets are not there; nullopt
  // when nothing is missing. New pods wait; the rest of the plan goes on.
  std::optional<Readiness> pods_wait_for;
  // What the pods need that the plan makes (observe only reads): the ComputeDomain the NodeSet
  // asks for is absent; spec.ssh's host keys Secret is absent; its sshd_config ConfigMap is not
  // as last applied.
  bool compute_domain_absent = false;
  bool ssh_host_keys_absent = false;
  bool ssh_config_current = true;
  SlurmView slurm;
  OperatorOptions::DrainMirror mirror_slurm_drains = OperatorOptions::DrainMirror::kNone;
  std::vector<std::string> propagated_node_conditions;  // OperatorOptions
  bool drain_on_node_conditions = false;                // OperatorOptions
  // The HealthCheck the NodeSet follows (build::selecting_health_check); nullopt: none.
  std::optional<HealthPolicy> health;
  slurm::Time now;
  // Set while the NodeSet is being deleted: its metadata.deletionTimestamp.
  std::optional<slurm::Time> deleting_since;
  // Its Controller is being deleted too: the whole cluster goes, slurmctld and its jobs with it.
  bool controller_deleting = false;
};

// ---- Plan: what is to be done ----

// Each Action is one write. A failed one ends its chain (the actions of one pod, or of the
// NodeSet itself, run in order); chains run side by side.
struct CreateRevision {
  nlohmann::json revision;
};
struct DeleteRevision {
  std::string name;
};
struct SetFinalizers {
  std::vector<std::string> finalizers;
};
struct SyncReservation {
  slurm::Reservation wanted;
  std::optional<slurm::ReservationUpdate> update;  // nullopt: create it
};
struct ReleaseReservation {
  std::string name;
};
struct CreateComputeDomain {  // created once: its spec is immutable
  nlohmann::json domain;
};
struct CreateSshHostKeys {};  // spec.ssh: generated and created once, never written over
struct ApplyObject {          // server-side apply of an object the NodeSet owns
  nlohmann::json object;
};
struct CreatePod {  // its claims first
  std::string name;
  std::string hostname;
  nlohmann::json pod;
  std::vector<nlohmann::json> claims;
};
struct DeletePod {  // with its uid as precondition
  std::string name;
  std::string uid;
  std::string why;
  // Grace period 0: the pod's Node is lost (lost_node), no kubelet will ever confirm an end.
  bool at_once = false;
};
struct GiveClaimsToPod {  // whenScaled: Delete: the claims go with the pod
  std::string pod;
  std::string uid;
  std::map<std::string, nlohmann::json> owners;  // claim -> its ownerReferences, the pod's too
};
struct PatchPod {
  std::string name;
  std::string what;  // "conditions", "cordon", "work" (the protect label, the deadline)
  nlohmann::json patch;
  bool status = false;  // through the status subresource, strategic merge
  std::string uid;
  std::string seen_version;  // the resourceVersion the plan saw: the write is pending until
                             // the cache shows another
};
struct PatchKubeNode {
  std::string name;
  std::string what;  // "SlurmNodeDrained condition", "taints"
  nlohmann::json patch;
  bool status = false;
};
struct DrainSlurmNode {
  std::string node;
  std::string reason;
  std::string seen_reason;  // the node's reason in the snapshot the plan was made from
};
struct UndrainSlurmNode {
  std::string node;
  std::string seen_reason;
};
struct ResumeSlurmNode {
  std::string node;
};
struct UpdateSlurmNode {
  std::string node;
  slurm::NodeUpdate update;
};
struct DeleteSlurmNode {
  std::string node;
};
struct CreateSlurmNode {  // power saving: a powered-down node, as cloud_node_record says
  std::string node;
  std::string record;
};
// An active check (docs/health.md): the node's reservation, then the check job in it. A
// reservation of that name already there is a check already started: nothing more is done.
struct StartActiveCheck {
  std::string node;
  slurm::Reservation reservation;
  slurm::JobSubmission job;
};

using Change = std::variant<CreateRevision, DeleteRevision, SetFinalizers, SyncReservation,
                            ReleaseReservation, CreateComputeDomain, CreateSshHostKeys, ApplyObject,
                            CreatePod, DeletePod, GiveClaimsToPod, PatchPod, PatchKubeNode,
                            DrainSlurmNode, UndrainSlurmNode, ResumeSlurmNode, UpdateSlurmNode,
                            DeleteSlurmNode, CreateSlurmNode, StartActiveCheck>;

// What a failed action means for the NodeSet's status.
enum class FailureEffect {
  kDeletionBlocked,  // DeletionBlocked=True with the action's reason
  kCreate,           // Ready=False CreateFailed
  kReservation,      // ReservationCreated with the action's reason
  kApply,            // Ready=False with the action's reason; no pod is created after it
  kSync,             // Ready=False SyncFailed: a mirror of state fell behind
};

struct NodeSetEvent {
  NodeSetEvent() = default;
  NodeSetEvent(bool is_warning, std::string why, std::string text, std::string batch_text = "",
               std::string slurm_node = "")
      : warning(is_warning),
        reason(std::move(why)),
        message(std::move(text)),
        batch(std::move(batch_text)),
        node(std::move(slurm_node)) {}
  bool warning = false;
  std::string reason;
  std::string message;
  // Where one reconcile does the same to many pods (a scale-in drains and deletes hundreds),
  // the events of the same reason and `batch` become one: "<batch>: <n> nodes <hostlist>",
  // `node` the Slurm node each one names. Empty: recorded as it is.
  std::string batch;
  std::string node;
};

// The events of one reconcile's successful actions as they are recorded: those of one reason and
// batch text, two or more, as one event naming their nodes (in the order of the first); the rest
// as they are. Kubernetes caps an event's message at 1 KiB: a long node list is cut there.
std::vector<NodeSetEvent> batch_events(std::vector<NodeSetEvent> events);

struct Action {
  Change change;
  std::string chain;  // the pod it concerns, or "" for the NodeSet itself
  FailureEffect on_failure = FailureEffect::kSync;
  std::string failure_reason;        // the condition reason a failure reports
  std::vector<NodeSetEvent> events;  // recorded once it succeeded
  // Whether its failure skips the rest of its chain: a pod is cordoned only once drained, a
  // reservation made only under its finalizer.
  bool guards_rest = false;
};

// "drain Slurm node slinky-1: slurm-operator: Pod (slurm/slinky-1) is pending termination for
// scale-in", "delete pod slurm/slinky-1 (uid ...): ...", for the debug log and failures.
std::string to_string(const Change& change);

// Where health-check remediation stands in a NodeSet (NodeSetPlan::health).
struct HealthOutlook {
  int64_t budget = 0;                    // maxUnhealthy of the NodeSet's pods
  std::vector<std::string> remediating;  // "cpu-1 (replacing: healthcheck: gpus: ...)"
  std::vector<std::string> waiting;      // failing, over the budget: "cpu-2 (healthcheck: ...)"
  int64_t running = 0;     // pods whose slurmd runs and is registered: those that report
  int64_t unreported = 0;  // of them, those without a report of these checks yet
  // Nodes by step: drained, replacing, verifying, waiting, and under active checks (checking);
  // every step present.
  std::map<std::string, int64_t> steps{
      {"drained", 0}, {"replacing", 0}, {"verifying", 0}, {"waiting", 0}, {"checking", 0}};
  std::vector<std::string> checking;  // "cpu-1 (after replacement)", "cpu-2 (scheduled)"
};

struct NodeSetPlan {
  std::vector<Action> actions;
  // A spec problem or a missing Controller: nothing else is planned; Ready says why.
  std::optional<Readiness> stop;
  // Why pods that should go cannot (fail-closed): DeletionBlocked's message, by first reason.
  std::vector<std::string> blocked;
  std::string blocked_reason;
  std::vector<std::string> draining;          // pods waiting for their jobs to end
  std::string failing;                        // the first pod that cannot start, and how many more
  std::string unschedulable;                  // the first pod no Node can take, and how many more
  std::string unbuildable;                    // why a pod that is wanted cannot be built
  std::optional<api::Condition> reservation;  // ReservationCreated; nullopt: removed
  // GpuCountsMatch for a NodeSet whose pods hold GPUs, while Slurm answers; nullopt: as it was.
  std::optional<api::Condition> gpu_counts;
  // Health-check remediation, while the NodeSet follows a HealthCheck and Slurm answers
  // (nullopt otherwise): WorkersHealthy says it.
  std::optional<HealthOutlook> health;
  std::optional<slurm::Time> window_opens;   // the update waits for the maintenance window
  std::optional<slurm::Time> look_again_at;  // a pod may go then (kJobEndSaved), no event says so
  nlohmann::json status = nlohmann::json::object();
  int64_t want = 0;
  int64_t replicas = 0;
  int64_t ready = 0;
  int64_t available = 0;
  int64_t updated = 0;
  int64_t terminating = 0;
  std::string revision;
  // Deletion (plan_deletion): what is left to do, for Ready's message ("" when nothing), and
  // whether the plan lets go of the NodeSet's last finalizer (it is gone after: no status).
  std::string deletion_left;
  bool deleting = false;
  bool releases_nodeset = false;
  bool awaits_prerequisite = false;  // pods are wanted, but pods_wait_for says why not
  bool reservation_changed = false;  // look again soon: the window follows Slurm
  bool status_changed = false;
};

// How long a deleted NodeSet waits for what it cannot make go and where nothing can be lost:
// pods that were deleted and do not end (their Node is gone), Slurm node records still busy
// with no pod left.
inline constexpr auto kDeletionPatience = std::chrono::minutes(3);

// The NodeSet's plan. A NodeSet being deleted (deleting_since) is emptied as a scale-in to
// nothing: its pods go drain-first, by the same rule and fail-closed, then, with
// pruneSlurmNodeRecords NodeNotFound, the Slurm node records they leave; each of its
// finalizers is released only once what it guards is done, or when its Controller is deleted
// too (slurmctld and the jobs end with the cluster).
NodeSetPlan plan_nodeset(const NodeSetWorld& world);

// Whether the feed should read Slurm now rather than at its pace: a Slurm write is among the
// actions, or a pod is ready (its slurmd registered) and Slurm's snapshot lacks its node. A
// registration is no line in slurmctld's log, and so no hint (log_hints.hpp).
bool slurm_worth_reading(const NodeSetWorld& world, const std::vector<Action>& actions);

// A NodeSet being deleted whose spec cannot be read (`errors`: field and reason) keeps its pods
// and finalizers: DeletionBlocked's reason (InvalidSpec) and message, with the ways out.
Readiness unreadable_deletion(const std::string& nodeset_key, const std::string& errors,
                              const std::vector<std::string>& finalizers);

// ---- After execution ----

struct ActionFailure {
  const Action* action;
  std::string message;  // "<to_string>: <error>"
};

struct NodeSetVerdict {
  std::vector<api::Condition> conditions;
  Readiness readiness;
  kube::ReconcileOutcome next;
};

// The conditions, readiness and next look of a NodeSet from its plan and the actions that
// failed.
NodeSetVerdict conclude(const NodeSetWorld& world, const NodeSetPlan& plan,
                        const std::vector<ActionFailure>& failures, const std::string& stamp);

}  // namespace tightrope::op
