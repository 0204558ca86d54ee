#include "operator/nodeset_plan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "api/well_known.hpp"
#include "base/text.hpp"
#include "health/active.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/build/power.hpp"
#include "operator/build/topology.hpp"
#include "operator/cluster_metrics.hpp"
#include "operator/conditions.hpp"
#include "operator/reconcile_support.hpp"
#include "slurm/gres.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

using build::join;
using nlohmann::json;

namespace {

constexpr size_t kMaxCreatesPerReconcile = 250;
constexpr std::chrono::seconds kUnregisteredGrace{120};

}  // namespace

namespace {

// The propagated conditions (types, in the flag's order) that are True on a Node, as a drain
// reason: "(<reason>: <message>); ...".
std::string node_problems(const json& kube_node, const std::vector<std::string>& types) {
  std::vector<std::string> problems;
  const json conditions = kube_node.value("/status/conditions"_json_pointer, json::array());
  for (const auto& type : types) {
    for (const auto& c : conditions) {
      if (c.value("type", "") == type && c.value("status", "") == "True") {
        problems.push_back("(" + c.value("reason", type) + ": " + c.value("message", "") + ")");
      }
    }
  }
  return without_controls(join(problems, "; "), 256);
}

// An administrator's drain of `slurm_node` shown on its Kubernetes Node: the SlurmNodeDrained
// condition and, with `taint`, a NoSchedule taint. Both follow the drain back when it is undone.
std::vector<PatchKubeNode> mirror_admin_drain(const kube::Document& kube_node,
                                              const std::string& slurm_node,
                                              const slurm::Node& node, bool drained, bool taint,
                                              const std::string& stamp) {
  std::vector<PatchKubeNode> out;
  const std::string type(api::kNodeConditionSlurmDrained);
  const json conditions = kube_node.doc.value("/status/conditions"_json_pointer, json::array());
  const json* current = nullptr;
  for (const auto& c : conditions) {
    if (c.value("type", "") == type) {
      current = &c;
    }
  }
  const std::string status = drained ? "True" : "False";
  const std::string message = drained ? "Slurm node " + slurm_node + ": " + node.reason : "";
  if ((current != nullptr || drained) &&
      (current == nullptr || current->value("status", "") != status ||
       current->value("message", "") != message)) {
    json condition = json::object();
    condition["type"] = type;
    condition["status"] = status;
    condition["reason"] = drained ? "AdminDrain" : "NotDrained";
    condition["message"] = message;
    condition["lastHeartbeatTime"] = stamp;
    condition["lastTransitionTime"] = current != nullptr && current->value("status", "") == status
                                          ? current->value("lastTransitionTime", stamp)
                                          : stamp;
    json patch = json::object();
    patch["status"]["conditions"] = json::array({condition});
    out.push_back({kube_node.meta.name, type + " condition", patch, true});
  }
  if (!taint) {
    return out;
  }
  const std::string key(api::kTaintSlurmDrained);
  json taints = json::array();
  bool has = false;
  for (const auto& t : kube_node.doc.value("/spec/taints"_json_pointer, json::array())) {
    if (t.value("key", "") == key) {
      has = true;
    } else {
      taints.push_back(t);
    }
  }
  if (has == drained) {
    return out;
  }
  if (drained) {
    json ours = json::object();
    ours["key"] = key;
    ours["value"] = slurm_node;
    ours["effect"] = "NoSchedule";
    taints.push_back(ours);
  }
  // The list is replaced whole: the resourceVersion makes it conditional on what was read.
  json patch = json::object();
  patch["metadata"]["resourceVersion"] = kube_node.meta.resource_version;
  patch["spec"]["taints"] = taints;
  out.push_back({kube_node.meta.name, "taints", patch, false});
  return out;
}

// The pod's SlurmNodeState* conditions made to mirror `node`: a strategic-merge list that adds,
// updates and deletes; empty when they already do.
json condition_patch(const WorkerPod& w, const slurm::Node& node, const std::string& stamp) {
  const std::vector<std::string> wanted = slurm_condition_types(node);
  json out = json::array();
  for (const auto& [type, have] : w.slurm_conditions) {
    if (std::find(wanted.begin(), wanted.end(), type) == wanted.end()) {
      out.push_back({{"type", type}, {"$patch", "delete"}});
    } else if (have.first != node.reason) {
      out.push_back({{"type", type},
                     {"status", "True"},
                     {"message", node.reason},
                     {"lastTransitionTime", have.second}});
    }
  }
  for (const auto& type : wanted) {
    if (w.slurm_conditions.count(type) == 0) {
      out.push_back({{"type", type},
                     {"status", "True"},
                     {"message", node.reason},
                     {"lastTransitionTime", stamp}});
    }
  }
  return out;
}

}  // namespace

std::string lost_node(const kube::Document& kube_node, const slurm::Node& node) {
  if (!node.has("DOWN") || !node.has("NOT_RESPONDING")) {
    return "";
  }
  const json conditions = kube_node.doc.value("/status/conditions"_json_pointer, json::array());
  for (const auto& c : conditions) {
    if (c.value("type", "") == "Ready" && c.value("status", "") == "Unknown") {
      const std::string since = c.value("lastTransitionTime", "");
      return "Node " + kube_node.meta.name + " has not reported" +
             (since.empty() ? "" : " since " + since) + " and Slurm shows " + node.name + " DOWN" +
             (node.reason.empty() ? "" : " (" + node.reason + ")");
    }
  }
  return "";
}

std::string gpu_shortfall(int64_t limit, const slurm::Node& node, const kube::Document* kube_node) {
  if (limit <= 0) {
    return "";
  }
  const int64_t registered = slurm::gpu_count(node.gres);
  if (registered > limit) {
    return "Slurm node " + node.name + " registered " + std::to_string(registered) +
           " GPUs, its pod is given " + std::to_string(limit) + " " +
           std::string(build::kResourceGpu);
  }
  if (kube_node == nullptr) {
    return "";
  }
  const json allocatable = kube_node->doc.value("/status/allocatable"_json_pointer, json::object());
  const auto it = allocatable.find(std::string(build::kResourceGpu));
  if (it == allocatable.end() || !it->is_string()) {
    return "";  // not reported (yet): no evidence either way
  }
  const std::string text = it->get<std::string>();
  int64_t have = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), have);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return "";
  }
  const int64_t holds = std::max(limit, registered);
  if (have >= holds) {
    return "";
  }
  return "Node " + kube_node->meta.name + " allocates " + text + " " +
         std::string(build::kResourceGpu) + ", fewer than the " + std::to_string(holds) +
         " Slurm node " + node.name + " registered and its pod holds";
}

bool down_before_pod(const slurm::Node& node, const WorkerPod& w) {
  if (!node.has("DOWN") || node.has("NOT_RESPONDING") ||
      !node.reason.starts_with("Not responding") || !node.reason_changed_at) {
    return false;
  }
  // Whole seconds both: a verdict in the pod's own second came before it (the lost pod is
  // deleted on that verdict, its replacement made at once), and no slurmd of the new pod has
  // registered and gone silent for SlurmdTimeout within that second.
  const auto created = kube::parse_time(w.created);
  return created && *node.reason_changed_at <= *created;
}

std::string slurm_reason(SlurmHealth health) {
  switch (health) {
    case SlurmHealth::kNoClient:
      return "NoSlurmClient";
    case SlurmHealth::kWaiting:
      return "WaitingForSlurm";
    case SlurmHealth::kUnreachable:
      return "SlurmUnreachable";
    case SlurmHealth::kSynced:
      break;
  }
  return "";
}

std::vector<NodeSetEvent> batch_events(std::vector<NodeSetEvent> events) {
  constexpr size_t kMessageLimit = 1024;
  using Key = std::tuple<bool, std::string, std::string>;
  std::map<Key, std::vector<std::string>> nodes;
  for (const auto& e : events) {
    if (!e.batch.empty()) {
      nodes[{e.warning, e.reason, e.batch}].push_back(e.node);
    }
  }
  std::vector<NodeSetEvent> out;
  std::set<Key> done;
  for (auto& e : events) {
    const Key key{e.warning, e.reason, e.batch};
    const auto many = nodes.find(key);
    if (e.batch.empty() || many->second.size() < 2) {
      out.push_back(std::move(e));
      continue;
    }
    if (!done.insert(key).second) {
      continue;
    }
    std::string message = e.batch + ": " + std::to_string(many->second.size()) + " nodes " +
                          slurm::compress_hostlist(many->second);
    if (message.size() > kMessageLimit) {
      message = message.substr(0, kMessageLimit - 3) + "...";
    }
    out.emplace_back(e.warning, e.reason, std::move(message), e.batch, "");
  }
  return out;
}

std::string to_string(const Change& change) {
  struct Describe {
    std::string operator()(const CreateRevision& c) const {
      return "create ControllerRevision " +
             c.revision.value("/metadata/name"_json_pointer, std::string());
    }
    std::string operator()(const DeleteRevision& c) const {
      return "delete ControllerRevision " + c.name;
    }
    std::string operator()(const SetFinalizers& c) const {
      return "set finalizers [" + join(c.finalizers, ", ") + "]";
    }
    std::string operator()(const SyncReservation& c) const {
      return (c.update ? "update Slurm reservation " : "create Slurm reservation ") +
             c.wanted.name + " on " + c.wanted.nodes + " from " +
             kube::format_time(c.wanted.start_time.value_or(slurm::Time{})) + " to " +
             kube::format_time(c.wanted.end_time.value_or(slurm::Time{}));
    }
    std::string operator()(const ReleaseReservation& c) const {
      return "delete Slurm reservation " + c.name;
    }
    std::string operator()(const StartActiveCheck& c) const {
      return "start the active checks of Slurm node " + c.node + " in reservation " +
             c.reservation.name + " until " +
             kube::format_time(c.reservation.end_time.value_or(slurm::Time{}));
    }
    std::string operator()(const CreateComputeDomain& c) const {
      return "create ComputeDomain " + c.domain.value("/metadata/name"_json_pointer, std::string());
    }
    std::string operator()(const CreateSshHostKeys&) const { return "create SSH host keys"; }
    std::string operator()(const ApplyObject& c) const {
      return "apply " + c.object.value("kind", "") + " " +
             c.object.value("/metadata/name"_json_pointer, std::string());
    }
    std::string operator()(const CreatePod& c) const {
      return "create pod " + c.name +
             (c.claims.empty() ? "" : " with " + std::to_string(c.claims.size()) + " claims");
    }
    std::string operator()(const DeletePod& c) const {
      return std::string(c.at_once ? "delete pod at once " : "delete pod ") + c.name + " (uid " +
             c.uid + "): " + c.why;
    }
    std::string operator()(const GiveClaimsToPod& c) const {
      std::vector<std::string> claims;
      for (const auto& [claim, owners] : c.owners) {
        claims.push_back(claim);
      }
      return "give claims " + join(claims, ", ") + " to pod " + c.pod;
    }
    std::string operator()(const PatchPod& c) const {
      return "patch pod " + c.name + " " + c.what + ": " + c.patch.dump();
    }
    std::string operator()(const PatchKubeNode& c) const {
      return "patch Node " + c.name + " " + c.what + ": " + c.patch.dump();
    }
    std::string operator()(const DrainSlurmNode& c) const {
      return "drain Slurm node " + c.node + ": " + c.reason;
    }
    std::string operator()(const UndrainSlurmNode& c) const {
      return "undrain Slurm node " + c.node;
    }
    std::string operator()(const ResumeSlurmNode& c) const { return "resume Slurm node " + c.node; }
    std::string operator()(const UpdateSlurmNode& c) const {
      std::vector<std::string> fields;
      if (c.update.comment) {
        fields.push_back("comment=" + *c.update.comment);
      }
      if (c.update.topology) {
        fields.push_back("topology=" + *c.update.topology);
      }
      if (c.update.features) {
        fields.push_back("features=" + join(*c.update.features, ","));
      }
      if (c.update.address) {
        fields.push_back("address=" + *c.update.address);
      }
      return "update Slurm node " + c.node + ": " + join(fields, " ");
    }
    std::string operator()(const DeleteSlurmNode& c) const { return "delete Slurm node " + c.node; }
    std::string operator()(const CreateSlurmNode& c) const {
      return "create Slurm node " + c.record;
    }
  };
  return std::visit(Describe{}, change);
}

namespace {

// The Node patch that sets its slurm-nodename label to `value` (null: removes it).
PatchKubeNode slurm_name_label(const std::string& kube_node, json value) {
  return {kube_node,
          "slurm-nodename label",
          {{"metadata", {{"labels", {{api::kLabelNodeSlurmNodeName, std::move(value)}}}}}},
          false};
}

const std::map<std::string, slurm::Node>& no_nodes() {
  static const std::map<std::string, slurm::Node> none;
  return none;
}

// Why a pod does not start, in its own words: its container's failure (an image that cannot be
// pulled), else the scheduler's; "" when neither says.
std::string pod_waits_because(const WorkerPod& w) {
  return !w.start_failure.empty()   ? w.start_failure
         : !w.unschedulable.empty() ? "unschedulable: " + w.unschedulable
                                    : std::string();
}

std::optional<build::PowerSaving> power_of(const api::NodeSet& n) {
  auto power = build::nodeset_power_saving(n);
  return power ? *power : std::nullopt;
}

int64_t nodeset_gpu_limit(const api::NodeSet& n) {
  const auto gpus = build::nodeset_gpus(n);
  return gpus ? gpus->limit : 0;
}

// plan_nodeset's work, one method a stage of the decision, in the order they run. What one stage
// decides the next reads from the members.
struct Planner {
  explicit Planner(const NodeSetWorld& w)
      : world(w),
        n(w.nodeset),
        ns(w.nodeset.metadata.namespace_name),
        daemon(w.nodeset.spec.scaling_mode == "DaemonSet"),
        in{w.controller.value_or(api::Controller{})},
        now(w.now),
        stamp(kube::format_time(w.now)),
        slurm_ok(w.slurm.health == SlurmHealth::kSynced),
        slurm_why(slurm_reason(w.slurm.health)),
        slurm_problem(w.slurm.problem),
        nodes(slurm_ok && w.slurm.snapshot.nodes ? *w.slurm.snapshot.nodes : no_nodes()),
        gpu_limit(nodeset_gpu_limit(w.nodeset)),
        health(w.health ? &*w.health : nullptr),
        power(power_of(w.nodeset)) {}

  void add(Change change, const std::string& chain, FailureEffect effect, const std::string& reason,
           std::vector<NodeSetEvent> events = {}, bool guards_rest = false) {
    plan.actions.push_back(
        {std::move(change), chain, effect, reason, std::move(events), guards_rest});
  }
  const slurm::Node* node_of(const WorkerPod& w) const {
    const auto it = nodes.find(w.hostname);
    return it == nodes.end() ? nullptr : &it->second;
  }
  // A pod that should go and cannot: DeletionBlocked, with the first reason.
  void block(const std::string& reason, const std::string& message) {
    if (plan.blocked_reason.empty()) {
      plan.blocked_reason = reason;
    }
    plan.blocked.push_back(message);
  }
  // `batch`: what the pods deleted alike in one reconcile are told as, together (batch_events).
  void delete_pod(const WorkerPod& w, const std::string& why, std::vector<NodeSetEvent> before = {},
                  const std::string& batch = "") {
    before.emplace_back(false, "DeletedPod", "Deleted pod " + w.name + ": " + why, batch,
                        w.hostname);
    add(DeletePod{w.name, w.uid, why}, w.name, FailureEffect::kDeletionBlocked, "DeleteFailed",
        std::move(before));
    deleted.insert(w.name);
    unlabel_kube_node(w);
  }
  // The pod goes: its Node's slurm-nodename label, where it names this worker, goes after it.
  void unlabel_kube_node(const WorkerPod& w) {
    const auto found = world.kube_nodes.find(w.kube_node);
    if (found == world.kube_nodes.end()) {
      return;
    }
    if (const std::string* name = found->second->meta.label(api::kLabelNodeSlurmNodeName);
        name != nullptr && *name == w.hostname) {
      add(slurm_name_label(w.kube_node, nullptr), w.name, FailureEffect::kSync, "SyncFailed");
    }
  }
  // Why the pod's Node is lost (lost_node), "" when it is not or nothing is to be done: in
  // DaemonSet mode the pod belongs to its Node and waits for it; a deletion of ours pending
  // in the cache needs no second one.
  std::string lost_pod(const WorkerPod& w) const {
    if (daemon || w.kube_node.empty() || world.expected.deletions.count(w.uid) != 0) {
      return "";
    }
    const auto kube_node = world.kube_nodes.find(w.kube_node);
    const slurm::Node* node = node_of(w);
    if (kube_node == world.kube_nodes.end() || node == nullptr) {
      return "";
    }
    return lost_node(*kube_node->second, *node);
  }
  // A pod on a lost Node, deleted at once: nothing will confirm its end, and its ordinal cannot
  // come back on another Node while it exists. Its jobs are Slurm's to requeue or fail.
  void delete_lost(const WorkerPod& w, const std::string& lost) {
    const std::string why = "its Node is lost: " + lost;
    add(DeletePod{w.name, w.uid, why, true}, w.name, FailureEffect::kDeletionBlocked,
        "DeleteFailed",
        {{true, "NodeLost",
          "Deleted pod " + w.name + " at once, to run it on another Node: " + lost}});
    deleted.insert(w.name);
    unlabel_kube_node(w);
  }
  // The operator's pod-cordon, with the mark that makes it the operator's to take back. A
  // person's pod-cordon (no mark) is neither marked nor removed.
  void set_pod_cordon(const WorkerPod& w, bool on) {
    json annotations;
    if (on && !w.cordoned) {
      annotations = {{api::kAnnotationPodCordon, "true"},
                     {api::kAnnotationPodOperatorCordon, "true"}};
    } else if (!on && w.operator_cordon) {
      annotations = {{api::kAnnotationPodCordon, nullptr},
                     {api::kAnnotationPodOperatorCordon, nullptr}};
    }
    mark_pod(w, annotations);
  }
  void mark_pod(const WorkerPod& w, const json& annotations) {
    if (!annotations.is_null() && world.expected.patches.count(w.uid) == 0) {
      add(PatchPod{w.name,
                   "cordon",
                   {{"metadata", {{"annotations", annotations}}}},
                   false,
                   w.uid,
                   w.resource_version},
          w.name, FailureEffect::kSync, "SyncFailed");
    }
  }
  void release_claims(const WorkerPod& w, const std::string& why);
  // The maintenance reservation deleted, guarding what follows in the NodeSet's chain (the
  // finalizer that marks it).
  void release_reservation(FailureEffect effect, const std::string& reason) {
    const std::string name = maintenance_reservation_name(n);
    std::vector<NodeSetEvent> events;
    if (world.slurm.reservation) {
      events.emplace_back(false, "DeletedReservation",
                          "Deleted Slurm maintenance reservation " + name);
    }
    add(ReleaseReservation{name}, "", effect, reason, std::move(events), true);
  }

  bool holds(std::string_view finalizer) const {
    return std::find(world.finalizers.begin(), world.finalizers.end(), finalizer) !=
           world.finalizers.end();
  }

  void make_prerequisites();
  void plan_deletion();
  void empty_slurm_records(std::vector<std::string>& finalizers, std::vector<NodeSetEvent>& events);
  void keep_revisions();
  void read_pods();
  void replace_exited();
  void choose();
  void follow_power(std::vector<WorkerPod>& beyond);
  std::set<int64_t> taken_ordinals() const;
  void keep_power_records();
  void remediate();
  void record_on_node(const WorkerPod& w, const health::Report& report, bool hardware);
  const std::pair<std::string, api::NodeFailure>* failed_before(
      const WorkerPod& w, const health::Report& report) const {
    const auto found = world.failures_elsewhere.find(w.name);
    if (found == world.failures_elsewhere.end() || report.failed.empty()) {
      return nullptr;
    }
    const int64_t now_s =
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    return fault_follows_pod(found->second, w.uid, report.failed.front().check, now_s,
                             health->remediation.window_seconds);
  }
  // The Kubernetes Node the pod runs on, as the cache holds it; nullptr when not known.
  const json* kube_node_doc(const WorkerPod& w) const {
    const auto found = world.kube_nodes.find(w.kube_node);
    return found == world.kube_nodes.end() ? nullptr : &found->second->doc;
  }
  void check_actively();
  void release_checks_left_behind();
  bool start_check(const WorkerPod& w, const slurm::Node& node, bool undraining);
  void keep_finalizers_and_reservation();
  void drain_and_delete();
  void create_missing();
  void mirror_the_pods_that_stay();
  void label_kube_nodes(const WorkerPod& w);
  void kubernetes_to_slurm(const WorkerPod& w, const slurm::Node& node);
  void link_slurm_node(const WorkerPod& w, const slurm::Node& node,
                       const kube::Document* kube_node);
  void tell_slurm_why_pod_waits(const WorkerPod& w, const slurm::Node& node);
  void slurm_to_pod(const WorkerPod& w, const slurm::Node& node, bool protect);
  void prune_slurm_records();
  void write_status();

  const NodeSetWorld& world;
  const api::NodeSet& n;
  const std::string& ns;
  const bool daemon;
  const build::NodeSetInputs in;
  const slurm::Time now;
  const std::string stamp;
  const bool slurm_ok;  // without a synced feed nothing that runs is deleted
  const std::string slurm_why;
  const std::string& slurm_problem;
  const std::map<std::string, slurm::Node>& nodes;
  const int64_t gpu_limit;                        // nvidia.com/gpu of each pod; 0: none
  const HealthPolicy* const health;               // the HealthCheck followed; nullptr: none
  const std::optional<build::PowerSaving> power;  // nullopt: not power-saved
  std::vector<std::string> gpu_mismatches;        // gpu_shortfall of each running pod that has one

  NodeSetPlan plan;
  std::string revision;
  std::vector<WorkerPod> pods;    // with deadlines, and the operator's deletions as terminating
  std::vector<WorkerPod> active;  // neither terminating nor finished, in the order they would go
  std::set<std::string> deleted;  // pods this plan deletes: nothing more is written to them
  std::map<std::string, std::string> eligible;  // DaemonSet mode: Node name -> hostname
  int64_t want = 0;
  std::vector<int64_t> powered;  // power saving: the ordinals whose nodes Slurm powers up
  std::map<std::string, std::string> condemned;  // pod -> why it goes
  // Pods that stay whose Slurm node a health check keeps drained: pod -> (reason, its event).
  std::map<std::string, std::pair<std::string, NodeSetEvent>> health_drains;
  // Pods condemned for a failed check: the event their drain is recorded with.
  std::map<std::string, NodeSetEvent> health_failed;
  std::set<std::string> outdated_pods;    // ScheduledUpdate: waiting for the window
  std::set<std::string> fresh_hostnames;  // of the pods this plan creates
  std::set<int64_t> replacing_ordinals;   // made again for a failed check (create_missing)
  std::set<std::string> checking;         // hostnames under active checks, this plan's starts too
  int64_t slurm_idle = 0;
  int64_t slurm_allocated = 0;
  int64_t slurm_down = 0;
  int64_t slurm_drain = 0;
  // Deletion: kDeletionPatience has passed since the NodeSet was deleted.
  bool patience_spent = false;
};

// whenScaled: Delete: a pod removed by a scale-in takes its claims with it (the pod becomes
// their owner, so garbage collection deletes them after the pod).
void Planner::release_claims(const WorkerPod& w, const std::string& why) {
  if (!why.starts_with("scale-in") ||
      n.spec.persistent_volume_claim_retention_policy.when_scaled != "Delete") {
    return;
  }
  const std::string suffix =
      daemon ? w.hostname : build::nodeset_padded_ordinal(n, std::max<int64_t>(w.ordinal, 0));
  GiveClaimsToPod give{w.name, w.uid, {}};
  for (const auto& claim : build::build_nodeset_claims(n, suffix)) {
    json owners = claim["metadata"].value("ownerReferences", json::array());
    owners.push_back({{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", w.name}, {"uid", w.uid}});
    give.owners[claim["metadata"].value("name", "")] = owners;
  }
  if (!give.owners.empty()) {
    add(std::move(give), w.name, FailureEffect::kSync, "SyncFailed");
  }
}

// What the pods need besides themselves, made before them (execute creates no pod after a
// failed kApply action): the ComputeDomain, spec.ssh's host keys and sshd_config.
void Planner::make_prerequisites() {
  if (world.compute_domain_absent) {
    add(CreateComputeDomain{build::build_compute_domain(n)}, "prerequisites", FailureEffect::kApply,
        "ComputeDomainFailed");
  }
  if (!n.spec.ssh.enabled) {
    return;
  }
  if (world.ssh_host_keys_absent) {
    add(CreateSshHostKeys{}, "prerequisites", FailureEffect::kApply, "ApplyFailed");
  }
  if (!world.ssh_config_current) {
    add(ApplyObject{build::build_nodeset_ssh_config_map(n)}, "prerequisites", FailureEffect::kApply,
        "ApplyFailed");
  }
}

void Planner::keep_revisions() {
  // The current revision, kept as a ControllerRevision; older ones beyond the history limit go.
  revision = build::nodeset_revision_name(n, in);
  plan.revision = revision;
  int64_t highest = 0;
  bool have_revision = false;
  std::vector<std::pair<int64_t, std::string>> older;
  for (const auto& [number, name] : world.revisions) {
    highest = std::max(highest, number);
    if (name == revision) {
      have_revision = true;
    } else {
      older.emplace_back(number, name);
    }
  }
  if (!have_revision) {
    add(CreateRevision{build::build_controller_revision(n, in, highest + 1)}, "",
        FailureEffect::kApply, "ApplyFailed");
  }
  std::set<std::string> revisions_in_use = {revision};
  for (const auto& w : world.pods) {
    revisions_in_use.insert(w.revision);
  }
  std::sort(older.begin(), older.end());
  int64_t unused = 0;
  for (const auto& [number, name] : older) {
    unused += revisions_in_use.count(name) == 0 ? 1 : 0;
  }
  for (const auto& [number, name] : older) {
    if (unused <= n.spec.revision_history_limit) {
      break;
    }
    if (revisions_in_use.count(name) == 0) {
      add(DeleteRevision{name}, "revision/" + name, FailureEffect::kSync, "PruneFailed");
      --unused;
    }
  }
}

// Slurm's side of each pod: when its work ends; and the first pod that cannot start.
void Planner::read_pods() {
  std::map<std::string, slurm::Time> deadlines;
  std::map<std::string, slurm::Time> ends;
  if (slurm_ok && world.slurm.snapshot.jobs) {
    deadlines = node_deadlines(*world.slurm.snapshot.jobs, nodes);
    ends = node_last_job_ends(*world.slurm.snapshot.jobs);
  }
  pods = world.pods;
  for (auto& w : pods) {
    if (!world.adopted_revision.empty() && w.revision == world.adopted_revision) {
      w.revision = revision;  // adopted: current until the spec changes
    }
    if (const auto it = deadlines.find(w.hostname); it != deadlines.end()) {
      w.deadline = it->second;
    }
    if (const auto it = ends.find(w.hostname); it != ends.end()) {
      w.last_job_end = it->second;
    }
    // Deleted by the operator, not yet shown so by the cache.
    if (world.expected.deletions.count(w.uid) != 0) {
      w.terminating = true;
    }
  }
  // The first stuck pod speaks for all: with a bad image every pod fails the same way, and with
  // a GPU NodeSet on Nodes without GPUs none is placed for the same reason.
  const auto first_of = [&](std::string WorkerPod::*why) {
    std::string out;
    size_t count = 0;
    for (const auto& w : pods) {
      if (!w.terminating && !(w.*why).empty() && count++ == 0) {
        out = "pod " + w.name + ": " + w.*why;
      }
    }
    if (count > 1) {
      out += " (and " + std::to_string(count - 1) + " more pods)";
    }
    return out;
  };
  plan.failing = first_of(&WorkerPod::start_failure);
  plan.unschedulable = first_of(&WorkerPod::unschedulable);
}

void Planner::replace_exited() {
  // Pods whose slurmd has exited hold no job: they are replaced.
  for (const auto& w : pods) {
    if (const std::string lost = lost_pod(w); !lost.empty()) {
      delete_lost(w, lost);
      ++plan.terminating;
    } else if (w.terminating) {
      ++plan.terminating;
    } else if (w.phase == "Failed" || w.phase == "Succeeded") {
      delete_pod(w, "its slurmd exited (phase " + w.phase + ")");
      ++plan.terminating;
    } else {
      active.push_back(w);
    }
  }
}

void Planner::choose() {
  // DaemonSet mode: one pod on each Node the pod template accepts (by hostname), replicas
  // ignored.
  if (daemon) {
    auto probe =
        build::build_nodeset_pod(n, in, build::PodIdentity{"probe", "probe", "", "probe"}, "");
    const json spec = probe ? (*probe)["spec"] : json::object();
    for (const auto& [name, node] : world.kube_nodes) {
      if (!node->meta.deleting && build::daemon_node_eligible(spec, node->doc)) {
        eligible[name] = build::daemon_pod_hostname(node->doc);
      }
    }
  }

  // Which pods go (choose_victims), in the order they go.
  want = daemon ? static_cast<int64_t>(eligible.size()) : n.spec.replicas.value_or(1);
  std::vector<WorkerPod> beyond;  // power saving: pods over the maximum, scaled in
  if (power) {
    follow_power(beyond);
  }
  plan.want = want;
  // A victim drained a moment ago keeps its place though the snapshot does not show it yet.
  std::map<std::string, slurm::Node> with_drains;
  const std::map<std::string, slurm::Node>* ordered = &nodes;
  if (!world.slurm.drains_in_flight.empty()) {
    with_drains = nodes;
    for (const auto& [name, reason] : world.slurm.drains_in_flight) {
      if (const auto it = with_drains.find(name); it != with_drains.end()) {
        if (!it->second.drain()) {
          it->second.state.emplace_back("DRAIN");
        }
        it->second.reason = reason;
      }
    }
    ordered = &with_drains;
  }
  // Power saving: the pods that stay are those Slurm keeps powered; only updates replace them.
  const int64_t keep = power ? static_cast<int64_t>(active.size()) : want;
  Victims victims = choose_victims(n, std::move(active), *ordered, keep, revision, eligible);
  condemned = std::move(victims.condemned);
  outdated_pods = std::move(victims.outdated);
  active = std::move(victims.order);
  for (auto& w : beyond) {
    condemned.try_emplace(w.name, "scale-in");
    active.push_back(std::move(w));
  }
}

// Power saving: Slurm decides which nodes are up. A pod runs for each node of an ordinal below
// spec.replicas that Slurm powers up or keeps up; the pod of a node it powered down goes at once,
// without a drain (Slurm powers down only idle nodes, and a drain would keep it from powering the
// node up again), and the node's record stays for Slurm to power up. Nothing is deleted while
// Slurm cannot be read. `want` becomes the number of powered nodes.
void Planner::follow_power(std::vector<WorkerPod>& beyond) {
  const int64_t most = n.spec.replicas.value_or(1);
  std::vector<WorkerPod> kept;
  for (auto& w : active) {
    if (w.ordinal < 0 || w.ordinal >= most) {
      beyond.push_back(std::move(w));
      continue;
    }
    const slurm::Node* node = node_of(w);
    if (node == nullptr || !powered_down(*node)) {
      kept.push_back(std::move(w));
      continue;
    }
    std::vector<NodeSetEvent> before;
    if (resume_timed_out(*node)) {
      std::string why = pod_waits_because(w);
      if (why.empty()) {
        why = w.ready ? "its slurmd did not register in time" : "it was not ready in time";
      }
      before.emplace_back(true, "ResumeTimedOut",
                          "Slurm gave up powering up node " + w.hostname + " (" + node->reason +
                              "), its job requeued: pod " + w.name + " " + why);
    }
    delete_pod(w, "Slurm powered its node " + w.hostname + " down", std::move(before),
               "Deleted the pods of Slurm nodes that Slurm powered down");
    ++plan.terminating;
  }
  active = std::move(kept);
  for (int64_t ordinal = 0; ordinal < most; ++ordinal) {
    const auto node = nodes.find(build::nodeset_pod_hostname(n, ordinal));
    if (node != nodes.end() && !powered_down(node->second)) {
      powered.push_back(ordinal);
    }
  }
  want = static_cast<int64_t>(powered.size());
}

// The ordinals of the pods there are, and of those created but not in the cache yet.
std::set<int64_t> Planner::taken_ordinals() const {
  std::set<int64_t> taken;
  for (const auto& w : pods) {
    taken.insert(w.ordinal);
  }
  for (const auto& name : world.expected.creations) {
    taken.insert(build::nodeset_pod_ordinal(n, name));
  }
  return taken;
}

// Power saving: Slurm knows every node up to spec.replicas, powered down until it gives one a
// job; one over it that is powered down goes. A node that gave up coming up (ResumeTimeout) is
// made resumable again, for Slurm to power up when its requeued job is given it.
void Planner::keep_power_records() {
  if (!power || !slurm_ok) {
    return;
  }
  const int64_t most = n.spec.replicas.value_or(1);
  std::set<std::string> hostnames;
  const std::set<int64_t> taken = taken_ordinals();
  size_t creates = 0;
  for (int64_t ordinal = 0; ordinal < most; ++ordinal) {
    const std::string hostname = build::nodeset_pod_hostname(n, ordinal);
    hostnames.insert(hostname);
    const auto node = nodes.find(hostname);
    if (node != nodes.end()) {
      if (resume_timed_out(node->second)) {
        add(ResumeSlurmNode{hostname}, "slurm/" + hostname, FailureEffect::kSync,
            "SlurmUpdateFailed",
            {{false, "PowerSavingResumed",
              "Slurm node " + hostname +
                  " may be powered up again: Slurm powers it up when it gives it a job"}});
      } else if (taken.count(ordinal) == 0 && stale_down_while_powered_down(node->second)) {
        // A pod that went on terminating after its node was powered down (or a pod of an
        // earlier cluster of the same name, whose preStop reached this slurmctld).
        add(ResumeSlurmNode{hostname}, "slurm/" + hostname, FailureEffect::kSync,
            "SlurmUpdateFailed",
            {{false, "PowerSavingResumed",
              "Slurm node " + hostname + " may be powered up again: it was set DOWN (" +
                  node->second.reason + ") and no pod of it is left"}});
      }
      continue;
    }
    if (taken.count(ordinal) != 0 || creates >= kMaxCreatesPerReconcile) {
      continue;  // a pod of it registers the node itself
    }
    auto record = build::cloud_node_record(n, ordinal);
    if (!record) {
      if (plan.unbuildable.empty()) {
        plan.unbuildable = record.error();
      }
      return;
    }
    ++creates;
    add(CreateSlurmNode{hostname, *record}, "slurm/" + hostname, FailureEffect::kSync,
        "SlurmUpdateFailed");
  }
  const std::string feature = n.slurm_name();
  for (const auto& [name, node] : nodes) {
    if (hostnames.count(name) == 0 && node.has("CLOUD") && node.has("POWERED_DOWN") &&
        !node.busy() &&
        std::find(node.features.begin(), node.features.end(), feature) != node.features.end()) {
      add(DeleteSlurmNode{name}, "slurm/" + name, FailureEffect::kSync, "SlurmUpdateFailed",
          {{false, "PowerSavingNodeDeleted",
            "Deleted powered-down Slurm node " + name + ": beyond spec.replicas (" +
                std::to_string(most) + ")"}});
    }
  }
}

std::string follows_pod_words(const std::pair<std::string, api::NodeFailure>& before) {
  return "; drained, not replaced: its predecessor (uid " + before.second.uid + ") failed " +
         before.second.check + " on Node " + before.first + " at " +
         kube::format_time(slurm::Time(std::chrono::seconds(before.second.at))) +
         ", so the fault follows the pod (its image, its spec, or a check that cannot pass in "
         "it), not a Node, and no Node is charged with it; mend the cause, then delete the pod";
}

void Planner::remediate() {
  // A pod whose own report fails is drained, within the budget; with replace, its pod goes once
  // idle. A replacement stays drained until its own first report passes. Nothing begins or ends
  // while Slurm cannot be asked: its nodes are unknown, and the plan fails closed.
  if (health == nullptr || !slurm_ok) {
    return;
  }
  const api::Remediation& r = health->remediation;
  const bool replace = r.replace.value_or(true);
  auto& outlook = plan.health.emplace();
  outlook.budget = max_unavailable(r.max_unhealthy, want);
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::set<std::string> held;  // hostnames drained for a check: in remediation
  for (const auto& w : pods) {
    if (const slurm::Node* node = node_of(w);
        node != nullptr && awaits_verification(*node, health)) {
      held.insert(w.hostname);
    }
  }
  for (const auto& w : active) {
    const slurm::Node* node = node_of(w);
    if (node == nullptr || w.kube_node.empty() || w.phase != "Running") {
      continue;
    }
    auto report = pod_report(*node, w.created, *health);
    if (report && undrained_after_failure(*node, *report, w, kube_node_doc(w), *health, now_s)) {
      report = passive_report(*node, w.created, *health);  // checked again first (check_actively)
    }
    ++outlook.running;
    outlook.unreported += report ? 0 : 1;
    // A signal from outside fails the worker as a check would; a Node condition is the
    // machine's: its Node is quarantined at once, and a pod that stays on it (it tolerates the
    // taint, or is pinned there) is drained, not replaced onto the same fault.
    bool hardware = false;
    bool stays = false;
    if (!report || report->ok) {
      const json* kube_node = kube_node_doc(w);
      const auto taints = world.device_taints.find(w.kube_node);
      if (auto signal = signal_report(
              w, kube_node,
              taints == world.device_taints.end() ? std::vector<DeviceTaint>{} : taints->second,
              *health, now_s)) {
        report = std::move(signal->report);
        hardware = signal->hardware;
        // Where the replacement cannot go elsewhere, replacing it changes nothing.
        stays = hardware &&
                (daemon || n.spec.pin_to_node || tolerates_quarantine(n.spec.template_.spec));
      }
    }
    if (report && !report->ok) {
      const std::string reason = health_reason(*report);
      // The check its predecessor failed on another Node: no Node is to blame, and replacing
      // it again would only charge (and quarantine) one healthy Node after another.
      const auto* before = hardware ? nullptr : failed_before(w, *report);
      stays = stays || before != nullptr;
      if (held.count(w.hostname) == 0) {
        // A check that fails everywhere stops here: at most the budget is ever drained by it.
        if (static_cast<int64_t>(held.size()) >= outlook.budget) {
          outlook.waiting.push_back(w.hostname + " (" + reason + ")");
          ++outlook.steps["waiting"];
          continue;
        }
        held.insert(w.hostname);
      }
      const NodeSetEvent failed{
          true, "HealthCheckFailed",
          "Slurm node " + w.hostname + " of pod " + w.name + " on Node " + w.kube_node +
              " failed its checks (HealthCheck " + health->name + "): " + reason +
              (before != nullptr ? follows_pod_words(*before)
               : replace         ? "; drained, its pod is replaced once no job runs on it"
                                 : "; drained")};
      if (replace && !stays) {
        condemned.try_emplace(w.name, reason);
        health_failed.emplace(w.name, failed);
      } else {
        health_drains[w.name] = {with_operator_prefix(reason), failed};
      }
      const char* step = replace && !stays ? "replacing" : "drained";
      ++outlook.steps[step];
      outlook.remediating.push_back(w.hostname + " (" + step +
                                    (before != nullptr ? ", the fault follows the pod" : "") +
                                    ": " + reason + ")");
      if (before == nullptr) {
        record_on_node(w, *report, hardware);
      }
    } else if (!report && awaits_verification(*node, health)) {
      const std::string key = kube::object_key(ns, w.name);
      health_drains[w.name] = {
          with_operator_prefix(verifying_reason(key)),
          {false, "HealthCheckVerifying",
           "Keeping " + w.hostname + " drained until the checks of its new pod " + w.name +
               " pass"}};
      ++outlook.steps["verifying"];
      outlook.remediating.push_back(w.hostname + " (verifying pod " + w.name + ")");
    }
  }
}

// The failure recorded on the pod's Node (once per pod), and the Node quarantined once it has
// failed quarantineAfter times within the window: its pods' replacements land elsewhere.
void Planner::record_on_node(const WorkerPod& w, const health::Report& report, bool hardware) {
  const auto found = world.kube_nodes.find(w.kube_node);
  if (found == world.kube_nodes.end()) {
    return;
  }
  const api::Remediation& r = health->remediation;
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const api::NodeFailure failure{kube::object_key(ns, w.name), w.uid,
                                 report.failed.empty() ? "" : report.failed.front().check,
                                 report.at};
  const auto record = record_failure(*found->second, failure, r, now_s, hardware);
  if (!record) {
    return;
  }
  std::vector<NodeSetEvent> events;
  if (record->quarantines) {
    const std::string why = hardware
                                ? "the Node itself reports " + failure.check
                                : std::to_string(record->counted) + " failed checks within " +
                                      std::to_string(r.window_seconds) + " s (quarantineAfter " +
                                      std::to_string(r.quarantine_after) + ")";
    events.emplace_back(true, "NodeQuarantined",
                        "Tainted Node " + w.kube_node + " " + std::string(api::kTaintUnhealthy) +
                            ":NoSchedule: " + why +
                            "; new pods go elsewhere until an administrator removes the taint");
  }
  add(PatchKubeNode{w.kube_node,
                    record->quarantines ? "health failures and quarantine taint"
                                        : "health failures",
                    record->patch, false},
      "node/" + w.kube_node, FailureEffect::kSync, "SyncFailed", std::move(events));
}

void Planner::check_actively() {
  // Idle workers due for their active checks get them, at most maxConcurrent of the NodeSet at
  // once: a reservation of the node alone, then the check job in it, which writes its report; the
  // reservation goes once the report is in. A replacement's check starts as its verification drain
  // is lifted (kubernetes_to_slurm), so that no user's job reaches it first. Nothing while Slurm
  // cannot be asked.
  if (!slurm_ok) {
    return;
  }
  if (health == nullptr || !health->active || !plan.health) {
    release_checks_left_behind();
    return;
  }
  for (const auto& w : pods) {
    if (const slurm::Node* node = node_of(w);
        node != nullptr && node->reservation == health::check_reservation(w.hostname)) {
      checking.insert(w.hostname);
    }
  }
  for (const auto& [node, reservation] : world.slurm.checks_in_flight) {
    checking.insert(node);
  }
  plan.health->steps["checking"] = static_cast<int64_t>(checking.size());
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  for (const auto& w : pods) {  // by ordinal: the lowest first
    const slurm::Node* node = node_of(w);
    if (node == nullptr) {
      continue;
    }
    if (!node->drain()) {
      start_check(w, *node, false);
    }
    const auto last = active_report(*node, w.created, *health);
    // The job has reported and ended: its reservation goes (Slurm refuses while the job runs;
    // without the operator it ends at its end time).
    if (last && !node->busy() && node->reservation == health::check_reservation(w.hostname) &&
        !check_due(*node, w.created, *health, now_s)) {
      std::string figures;
      for (const auto& [name, value] : last->measured) {
        figures += (figures.empty() ? "" : ", ") + name + " " + std::to_string(std::lround(value));
      }
      std::vector<NodeSetEvent> events;
      if (last->ok) {
        events.emplace_back(false, "ActiveCheckPassed",
                            "Active checks of " + w.hostname + " (pod " + w.name + ") passed" +
                                (figures.empty() ? "" : ": " + figures));
      }
      add(ReleaseReservation{node->reservation}, w.name, FailureEffect::kSync, "ActiveCheckFailed",
          std::move(events));
    }
    // No event says a check is due: the plan looks again then.
    if (last) {
      const slurm::Time due =
          slurm::Time(std::chrono::seconds(last->at + health->active->interval_seconds));
      if (due > now && (!plan.look_again_at || due < *plan.look_again_at)) {
        plan.look_again_at = due;
      }
    }
  }
}

// No HealthCheck runs active checks on this NodeSet any more (deleted, or its spec.active
// removed): a check reservation left on a worker's node goes once its job has ended, as it would
// after its report. A check still running is left to end within its time limit, its report
// read by nothing; the reservation would otherwise hold the node from users' jobs until its end.
void Planner::release_checks_left_behind() {
  for (const auto& w : pods) {
    const slurm::Node* node = node_of(w);
    if (node == nullptr || node->busy() ||
        node->reservation != health::check_reservation(w.hostname)) {
      continue;
    }
    add(ReleaseReservation{node->reservation}, w.name, FailureEffect::kSync, "ActiveCheckFailed",
        {{false, "ActiveCheckReleased",
          "Released reservation " + node->reservation + " of " + w.hostname + " (pod " + w.name +
              "): no HealthCheck runs active checks on this NodeSet any more"}});
  }
}

// Starts the pod's active checks when they are due, the node can be taken and the budget allows;
// whether it did.
bool Planner::start_check(const WorkerPod& w, const slurm::Node& node, bool undraining) {
  if (health == nullptr || !health->active || !slurm_ok || !plan.health || !w.ready ||
      w.terminating || w.kube_node.empty() || condemned.count(w.name) != 0 ||
      checking.count(w.hostname) != 0) {
    return false;
  }
  const api::ActiveChecks& a = *health->active;
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const auto report = pod_report(node, w.created, *health);
  const bool again =
      report && undrained_after_failure(node, *report, w, kube_node_doc(w), *health, now_s);
  if (static_cast<int64_t>(checking.size()) >= max_unavailable(a.max_concurrent, want) ||
      !check_ready(node, undraining) || (!again && !check_due(node, w.created, *health, now_s))) {
    return false;
  }
  if (report && !report->ok && !again) {
    return false;  // remediation has it
  }
  const char* why = undraining ? "after replacement"
                    : again    ? "undrained by hand after its failure: checked again first"
                               : "scheduled";
  add(StartActiveCheck{w.hostname, check_reservation(w.hostname, a, now), check_job(node, *health)},
      w.name, FailureEffect::kSync, "ActiveCheckFailed",
      {{false, "ActiveCheckStarted",
        "Started the active checks of " + w.hostname + " (pod " + w.name + ", " + why +
            ") in reservation " + health::check_reservation(w.hostname) + " (HealthCheck " +
            health->name + ")"}});
  checking.insert(w.hostname);
  ++plan.health->steps["checking"];
  plan.health->checking.push_back(w.hostname + " (" + why + ")");
  return true;
}

void Planner::keep_finalizers_and_reservation() {
  // Finalizers: slurm-nodes always (a deleted NodeSet's pods go drain-first, as a scale-in's);
  // the reservation's while one may exist.
  const auto finalizers_with = [](std::string_view finalizer, bool hold,
                                  std::vector<std::string> list) {
    const bool present = std::find(list.begin(), list.end(), finalizer) != list.end();
    if (hold && !present) {
      list.emplace_back(finalizer);
    } else if (!hold && present) {
      std::erase(list, std::string(finalizer));
    }
    return list;
  };
  const std::vector<std::string> finalizers =
      finalizers_with(api::kFinalizerNodeSetSlurmNodes, true, world.finalizers);

  // ScheduledUpdate: outdated pods are replaced inside the maintenance reservation, made while
  // any is left and removed after; the finalizer marks that one may exist. A pod already
  // drained for an update goes on; one that is not ready holds no job and goes at once.
  const bool scheduled = n.spec.update_strategy.type == "ScheduledUpdate";
  const bool holds_reservation = holds(api::kFinalizerNodeSetReservation);
  const std::string maint = maintenance_reservation_name(n);
  const auto reservation_state = [&](bool created, const std::string& reason,
                                     const std::string& message) {
    plan.reservation = api::Condition{"ReservationCreated",
                                      created ? "True" : "False",
                                      reason,
                                      message,
                                      n.metadata.generation,
                                      ""};
  };
  std::vector<const WorkerPod*> outdated;
  for (const auto& w : active) {
    if (outdated_pods.count(w.name) != 0) {
      outdated.push_back(&w);
    }
  }
  bool finalizers_written = false;
  if (scheduled && outdated.empty()) {
    reservation_state(false, "NoUpdatePending", "every pod is at revision " + revision);
  } else if (scheduled && !slurm_ok) {
    reservation_state(false, slurm_why, slurm_problem);
  } else if (scheduled) {
    std::vector<std::string> hostnames;
    for (const WorkerPod* w : outdated) {
      if (node_of(*w) != nullptr) {
        hostnames.push_back(w->hostname);
      }
    }
    auto wanted = maintenance_reservation(n, hostnames, now);
    if (!wanted) {
      reservation_state(false, "InvalidWindow", wanted.error());
    } else if (hostnames.empty()) {
      reservation_state(false, "WaitingForSlurmNodes",
                        "no outdated pod has registered its Slurm node yet");
    } else {
      if (!holds_reservation) {
        add(SetFinalizers{finalizers_with(api::kFinalizerNodeSetReservation, true, finalizers)}, "",
            FailureEffect::kReservation, "ApplyFailed", {}, true);
        finalizers_written = true;
      }
      // Nodes follow the outdated pods. Slurm moves a recurring window on by itself, so only a
      // one-time window that has not begun follows the spec's times.
      const std::optional<slurm::Reservation>& have = world.slurm.reservation;
      std::pair<slurm::Time, slurm::Time> window{*wanted->start_time, *wanted->end_time};
      bool settled_in_slurm = false;
      if (!have) {
        add(SyncReservation{*wanted, std::nullopt}, "", FailureEffect::kReservation,
            "SlurmUpdateFailed",
            {{false, "CreatedReservation",
              "Created Slurm maintenance reservation " + wanted->name + " on " + wanted->nodes +
                  " from " + kube::format_time(*wanted->start_time) + " to " +
                  kube::format_time(*wanted->end_time)}});
      } else {
        const auto have_nodes =
            slurm::expand_hostlist(have->nodes).value_or(std::vector<std::string>{});
        const bool nodes_differ = std::set<std::string>(have_nodes.begin(), have_nodes.end()) !=
                                  std::set<std::string>(hostnames.begin(), hostnames.end());
        const bool times_differ =
            !recurring_reservation(wanted->flags) && have->start_time && *have->start_time > now &&
            (have->start_time != wanted->start_time || have->end_time != wanted->end_time);
        if (nodes_differ || times_differ) {
          slurm::ReservationUpdate update;
          if (nodes_differ) {
            update.nodes = wanted->nodes;
          }
          if (times_differ) {
            update.start_time = wanted->start_time;
            update.end_time = wanted->end_time;
          }
          add(SyncReservation{*wanted, update}, "", FailureEffect::kReservation,
              "SlurmUpdateFailed");
        }
        if (!times_differ) {
          window = {have->start_time.value_or(window.first),
                    have->end_time.value_or(window.second)};
          settled_in_slurm = true;
        }
      }
      plan.reservation_changed = !settled_in_slurm;
      const bool open = window.first <= now && now < window.second;
      if (!open && now < window.first) {
        plan.window_opens = window.first;
      }
      reservation_state(true, open ? "WindowOpen" : "Scheduled",
                        "Slurm reservation " + maint + " on " + wanted->nodes + " from " +
                            kube::format_time(window.first) + " to " +
                            kube::format_time(window.second));
      // Outdated pods go once Slurm shows the window open; a reservation just made or moved is
      // read again first.
      if (open && settled_in_slurm) {
        for (const WorkerPod* w : outdated) {
          condemned[w->name] = "scheduled update";
        }
      }
    }
  }
  if (holds_reservation && (!scheduled || outdated.empty()) && slurm_ok) {
    release_reservation(FailureEffect::kReservation, "RemovalFailed");
    add(SetFinalizers{finalizers_with(api::kFinalizerNodeSetReservation, false, finalizers)}, "",
        FailureEffect::kReservation, "RemovalFailed");
    finalizers_written = true;
  }
  if (!finalizers_written && finalizers != world.finalizers) {
    add(SetFinalizers{finalizers}, "", FailureEffect::kSync, "SyncFailed");
  }
}

void Planner::drain_and_delete() {
  // Drain, wait, delete. Fail-closed at every step where Slurm's answer is missing.
  for (const auto& w : active) {
    const auto it = condemned.find(w.name);
    if (it == condemned.end()) {
      continue;
    }
    const std::string& why = it->second;
    if (w.kube_node.empty() || w.phase == "Pending") {
      release_claims(w, why);
      delete_pod(w, "not running yet (" + why + ")", {},
                 "Deleted pods not running yet (" + why + ")");
      continue;
    }
    if (!slurm_ok) {
      block(slurm_why, "pod " + w.name + " kept: " + slurm_problem);
      continue;
    }
    const slurm::Node* node = node_of(w);
    if (node == nullptr) {
      // A Slurm that answers and has no node of its name runs no job there; one just registered
      // may not be in the snapshot yet, so a ready pod gets the grace a pod that stays gets
      // (mirror_the_pods_that_stay) before it is taken for one Slurm lost.
      const auto since = kube::parse_time(w.ready_since);
      if (!w.ready) {
        delete_pod(w, "its slurmd never registered (" + why + ")");
      } else if (since && *since + kUnregisteredGrace <= now) {
        release_claims(w, why);
        delete_pod(w, "Slurm has no node " + w.hostname + ", so it runs no job (" + why + ")");
      } else {
        block("SlurmNodeNotFound", "pod " + w.name + " kept: Slurm has no node " + w.hostname +
                                       " yet, so the operator cannot tell whether it runs jobs");
      }
      continue;
    }
    if (drain_needed(*node)) {
      std::vector<NodeSetEvent> events;
      if (const auto failed = health_failed.find(w.name); failed != health_failed.end()) {
        events.push_back(failed->second);
      }
      events.emplace_back(false, "DrainingPod",
                          "Draining Slurm node " + w.hostname + " of pod " + w.name +
                              " before deleting it (" + why + ")",
                          "Draining Slurm nodes before deleting their pods (" + why + ")",
                          w.hostname);
      add(DrainSlurmNode{w.hostname, condemned_reason(kube::object_key(ns, w.name), why),
                         node->reason},
          w.name, FailureEffect::kDeletionBlocked, "SlurmUpdateFailed", std::move(events), true);
      // pod-cordon marks a pod that waits for its jobs; an idle node's pod goes once the feed
      // shows the drain (a scale-in of a thousand idle pods is a thousand deletions, no patches).
      if (node->busy()) {
        set_pod_cordon(w, true);
      }
      plan.draining.push_back(w.name);
      continue;
    }
    if (!slurm_drained(*node)) {
      set_pod_cordon(w, true);  // a job came between the snapshot and the drain
      plan.draining.push_back(w.name);
      continue;
    }
    if (w.last_job_end && now < *w.last_job_end + kJobEndSaved) {
      // Its job's end may not be on slurmctld's disk yet (kJobEndSaved).
      plan.draining.push_back(w.name);
      const slurm::Time saved = *w.last_job_end + kJobEndSaved;
      plan.look_again_at = std::min(plan.look_again_at.value_or(saved), saved);
      continue;
    }
    release_claims(w, why);
    delete_pod(w, "its Slurm node " + w.hostname + " is drained and idle (" + why + ")", {},
               "Deleted pods whose Slurm nodes are drained and idle (" + why + ")");
  }
}

void Planner::create_missing() {
  // New pods: DaemonSet mode, one on each eligible Node without one; else in the lowest free
  // ordinals. Pods on their way out (deleted just now included) still hold their names and
  // Nodes: their replacements wait for them to go.
  size_t creates = 0;
  const auto create_pod = [&](Result<json, std::string> pod, const std::string& name,
                              const std::string& claim_suffix) {
    ++creates;
    if (world.pods_wait_for) {
      // Without its claim template or its Secrets the pod could never start: not made yet.
      plan.awaits_prerequisite = true;
      return;
    }
    if (!pod) {
      if (plan.unbuildable.empty()) {
        plan.unbuildable = pod.error();
      }
      return;
    }
    fresh_hostnames.insert((*pod)["spec"].value("hostname", name));
    CreatePod create{name, (*pod)["spec"].value("hostname", name), std::move(*pod), {}};
    // Its claims first: the scheduler waits for them, and they outlive the pod.
    create.claims = build::build_nodeset_claims(n, claim_suffix);
    add(std::move(create), name, FailureEffect::kCreate, "CreateFailed");
  };
  if (daemon) {
    std::set<std::string> served;
    for (const auto& w : pods) {
      served.insert(w.target_node);
    }
    for (const auto& [node, hostname] : eligible) {
      if (served.count(node) != 0 || creates >= kMaxCreatesPerReconcile) {
        continue;
      }
      const std::string name = build::daemon_pod_name(n, hostname);
      if (world.expected.creations.count(name) != 0) {
        continue;
      }
      create_pod(
          build::build_nodeset_pod(n, in, build::PodIdentity{name, hostname, "", hostname}, node),
          name, hostname);
    }
  }
  const int64_t present = static_cast<int64_t>(active.size()) + plan.terminating +
                          static_cast<int64_t>(world.expected.creations.size());
  int64_t missing = daemon ? 0 : want - present;
  const std::set<int64_t> taken = taken_ordinals();
  if (power) {
    // The nodes Slurm powers up (follow_power); a pod still going holds its ordinal.
    for (const int64_t ordinal : powered) {
      if (creates >= kMaxCreatesPerReconcile) {
        break;
      }
      if (taken.count(ordinal) != 0) {
        continue;
      }
      create_pod(build::build_nodeset_pod(n, in, ordinal, ""), build::nodeset_pod_name(n, ordinal),
                 build::nodeset_padded_ordinal(n, ordinal));
    }
    return;
  }
  // First the ordinals of pods replaced for a failed check: the replacement registers into the
  // drained record, which holds it out of Slurm's hands until its own checks pass (remediate).
  // The cheap test first: this runs over every Slurm node of the cluster.
  std::vector<int64_t> order;
  for (const auto& [name, node] : nodes) {
    if (daemon || missing <= 0 || !awaits_verification(node, health)) {
      continue;
    }
    const json info = json::parse(node.comment, nullptr, false);
    if (info.is_object() && info.value("nodeSetUID", "") == n.metadata.uid) {
      const int64_t ordinal = build::nodeset_pod_ordinal(n, info.value("podName", ""));
      if (ordinal >= 0 && taken.count(ordinal) == 0) {
        order.push_back(ordinal);
      }
    }
  }
  const size_t replacements = order.size();
  for (int64_t ordinal = 0; static_cast<int64_t>(order.size() - replacements) < missing;
       ++ordinal) {
    if (taken.count(ordinal) == 0 &&
        std::find(order.begin(), order.end(), ordinal) == order.end()) {
      order.push_back(ordinal);
    }
  }
  for (size_t i = 0; i < order.size() && missing > 0 && creates < kMaxCreatesPerReconcile; ++i) {
    const int64_t ordinal = order[i];
    if (i < replacements) {
      replacing_ordinals.insert(ordinal);
    }
    std::string pinned;
    if (n.spec.pin_to_node) {
      const auto pin = n.status.ordinal_to_node.find(std::to_string(ordinal));
      if (pin != n.status.ordinal_to_node.end() && world.kube_nodes.count(pin->second) != 0) {
        pinned = pin->second;
      }
    }
    create_pod(build::build_nodeset_pod(n, in, ordinal, pinned),
               build::nodeset_pod_name(n, ordinal), build::nodeset_padded_ordinal(n, ordinal));
    --missing;
  }
}

// slurm-bridge places the pods Slurm schedules on the Node whose slinky.slurm.net/slurm-nodename
// label names the Slurm node: a Node that runs this worker alone and has no such label gets its
// name, and a Node whose label names this worker, which runs elsewhere now, loses it. A label
// naming anything else (an administrator's, another NodeSet's worker) is left as it is.
void Planner::label_kube_nodes(const WorkerPod& w) {
  if (const auto found = world.labelled_nodes.find(w.hostname);
      found != world.labelled_nodes.end() && !w.kube_node.empty()) {
    for (const auto& node : found->second) {
      if (node != w.kube_node) {
        add(slurm_name_label(node, nullptr), "node/" + node, FailureEffect::kSync, "SyncFailed");
      }
    }
  }
  const auto kube_node = world.kube_nodes.find(w.kube_node);
  const auto workers = world.workers_on_node.find(w.kube_node);
  if (w.terminating || kube_node == world.kube_nodes.end() ||
      workers == world.workers_on_node.end() || workers->second != 1 ||
      kube_node->second->meta.label(api::kLabelNodeSlurmNodeName) != nullptr) {
    return;
  }
  add(slurm_name_label(w.kube_node, w.hostname), "node/" + w.kube_node, FailureEffect::kSync,
      "SyncFailed");
}

void Planner::mirror_the_pods_that_stay() {
  // The pods that stay: Kubernetes cordons reach Slurm, Slurm's state reaches the pods.
  const bool protect = n.spec.workload_disruption_protection.value_or(true);
  for (const auto& w : active) {
    const bool going = condemned.count(w.name) != 0;
    if (w.ready) {
      ++plan.ready;
      const auto since = kube::parse_time(w.ready_since);
      if (!since || *since + std::chrono::seconds(n.spec.min_ready_seconds) <= now) {
        ++plan.available;
      }
    }
    if (w.revision == revision) {
      ++plan.updated;
    }
    if (!going && deleted.count(w.name) == 0) {
      label_kube_nodes(w);
    }
    const slurm::Node* node = node_of(w);
    if (node == nullptr) {
      // Ready (slurmd answers) yet unknown to a Slurm that answers: slurmd registered nowhere
      // this cluster sees. It holds no job; after a grace period it is replaced.
      const auto since = kube::parse_time(w.ready_since);
      if (slurm_ok && !going && w.ready && since && *since + kUnregisteredGrace <= now &&
          deleted.count(w.name) == 0) {
        delete_pod(w, "Slurm never registered its node " + w.hostname,
                   {{true, "SlurmNodeNotRegistered",
                     "Pod " + w.name + " has been ready for " +
                         std::to_string(kUnregisteredGrace.count()) + " s but Slurm has no node " +
                         w.hostname + ": replacing it"}});
      }
      continue;
    }
    const std::string base = node->base_state();
    slurm_idle += base == "IDLE" ? 1 : 0;
    slurm_allocated += base == "ALLOCATED" || base == "MIXED" ? 1 : 0;
    slurm_down += base == "DOWN" ? 1 : 0;
    slurm_drain += node->drain() ? 1 : 0;

    if (!going && !w.kube_node.empty() && w.phase == "Running") {
      kubernetes_to_slurm(w, *node);
    } else if (power && !going && deleted.count(w.name) == 0) {
      tell_slurm_why_pod_waits(w, *node);
    }

    // Slurm → the pod; a pod deleted now would answer 404, or take a write it is about to lose.
    // A pod written to whose write the cache does not show yet would get the same write again.
    if (deleted.count(w.name) == 0 && world.expected.patches.count(w.uid) == 0) {
      slurm_to_pod(w, *node, protect);
    }
  }
  if (gpu_limit > 0 && slurm_ok) {
    plan.gpu_counts =
        gpu_mismatches.empty()
            ? api::Condition{"GpuCountsMatch",
                             "True",
                             "CountsMatch",
                             "no Slurm node of a running pod offers more than the " +
                                 std::to_string(gpu_limit) + " " +
                                 std::string(build::kResourceGpu) +
                                 " its pod holds and its Node allocates",
                             n.metadata.generation,
                             ""}
            : api::Condition{
                  "GpuCountsMatch",
                  "False",
                  "GpuCountMismatch",
                  gpu_mismatches.front() +
                      (gpu_mismatches.size() > 1
                           ? " (and " + std::to_string(gpu_mismatches.size() - 1) + " more)"
                           : "") +
                      "; drained until they agree",
                  n.metadata.generation,
                  ""};
  }
}

// Whether every "<topology>:<unit>" of `wanted` is among the node's `current` ones.
bool within_topology(const std::string& current, const std::string& wanted) {
  const auto items = [](const std::string& list) {
    std::set<std::string> out;
    std::istringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
      if (!item.empty()) {
        out.insert(item);
      }
    }
    return out;
  };
  const auto have = items(current);
  const auto want = items(wanted);
  return std::includes(have.begin(), have.end(), want.begin(), want.end());
}

// A running pod's Kubernetes side reaches Slurm: a cordon drains (an administrator's drain is
// never touched), an uncordon undoes the operator's drain; an administrator's drain shows on
// the Node when asked; the node's comment links it to its pod, its topology and features follow
// the Node's annotations.
void Planner::kubernetes_to_slurm(const WorkerPod& w, const slurm::Node& node) {
  const std::string key = kube::object_key(ns, w.name);
  const auto found = world.kube_nodes.find(w.kube_node);
  const kube::Document* kube_node = found == world.kube_nodes.end() ? nullptr : found->second.get();
  const bool cordoned =
      kube_node != nullptr && kube_node->doc.value("/spec/unschedulable"_json_pointer, false);
  // The propagated conditions name a cordon's problem (Slinky); with drain_on_node_conditions
  // they drain by themselves, as a cordon would.
  const std::string problems =
      kube_node != nullptr ? node_problems(kube_node->doc, world.propagated_node_conditions) : "";
  const bool problem_drains = world.drain_on_node_conditions && !problems.empty();
  // Slurm would hand out GPUs the pod does not have: its node is drained until the counts agree.
  const std::string gpus = gpu_shortfall(gpu_limit, node, kube_node);
  if (!gpus.empty()) {
    gpu_mismatches.push_back(gpus);
  }
  const bool gpu_drains = !gpus.empty();
  const auto checked_drain = health_drains.find(w.name);
  const bool health_drains_it = checked_drain != health_drains.end();
  const bool admin = !node.reason.empty() && !operator_reason(node.reason);
  // A drain asked for on the pod itself: kubectl slurm drain's reason, or a health check's
  // pod-cordon-requested ("true", or its reason). Each is kept by the operator like a cordon.
  const bool cordon_requested = !w.cordon_request.empty();
  const bool requested = !w.drain_request.empty() || cordon_requested;
  // A pod-cordon set by a person (Slinky's guide) holds the drain until it is removed. One
  // without the operator's mark whose node the operator drained for its Node's cordon
  // ("Node (<node>) was cordoned", the text Slinky and earlier releases wrote without a mark)
  // is the operator's: it goes with the cordon.
  const bool legacy = w.cordoned && !w.operator_cordon && node.drain() &&
                      node.reason.starts_with(with_operator_prefix("Node (" + w.kube_node + ")"));
  const bool by_hand = w.cordoned && !w.operator_cordon && !legacy;
  if (legacy) {
    mark_pod(w, {{api::kAnnotationPodOperatorCordon, "true"}});
  }
  if ((cordoned || problem_drains || gpu_drains || health_drains_it || requested || by_hand) &&
      !admin) {
    const bool named = kube_node != nullptr &&
                       !build::annotation(kube_node->doc, api::kAnnotationNodeCordonReason).empty();
    const std::string pod_words = w.hostname + " (pod " + w.name + ")";
    // Slinky's order for a cordon: the Node's annotation, its problems, a default. A person's
    // pod-cordon names itself, so that its drain outlives the cordon.
    std::string reason;
    NodeSetEvent event{false, "", ""};
    if (by_hand) {
      reason = with_operator_prefix("Pod (" + key + ") was cordoned");
      event = {false, "PodCordon",
               "Drained " + pod_words + ": the pod is annotated " +
                   std::string(api::kAnnotationPodCordon) + "=true"};
    } else if (cordoned) {
      reason = !named && !problems.empty() ? with_operator_prefix(problems)
                                           : cordon_reason(kube_node->doc, key);
      event = {false, "NodeCordon",
               "Kubernetes node " + w.kube_node + " is cordoned: drained " + pod_words};
    } else if (health_drains_it) {
      std::tie(reason, event) = checked_drain->second;
    } else if (gpu_drains) {
      reason = with_operator_prefix("GPU count: " + gpus);
      event = {true, "GpuCountMismatch", gpus + ": drained " + pod_words};
    } else if (problem_drains) {
      reason = with_operator_prefix(problems);
      event = {
          false, "NodeProblem",
          "Kubernetes node " + w.kube_node + " reports " + problems + ": drained " + pod_words};
    } else if (cordon_requested) {
      const bool plain = w.plain_cordon_request();
      reason = with_operator_prefix(plain ? "Pod (" + key + ") cordon was requested"
                                          : without_controls(w.cordon_request, 256));
      event = {false, "CordonRequested",
               "Drained " + pod_words + " as " + std::string(api::kAnnotationPodCordonRequested) +
                   " asks" + (plain ? "" : ": " + without_controls(w.cordon_request, 256))};
    } else {
      reason = with_operator_prefix(without_controls(w.drain_request, 256));
      event = {false, "DrainRequested",
               "Drained " + pod_words + " as asked: " + without_controls(w.drain_request, 256)};
    }
    if (!node.drain() || node.reason != reason) {
      add(DrainSlurmNode{w.hostname, reason, node.reason}, w.name, FailureEffect::kDeletionBlocked,
          "SlurmUpdateFailed", {event});
    }
    set_pod_cordon(w, true);
  } else if (!cordoned && !problem_drains && !gpu_drains && !health_drains_it && !requested &&
             !by_hand) {
    if (node.drain() && operator_reason(node.reason)) {
      const bool checked = health_drained(node);
      if (checked) {
        // A replacement's first check, or one due since the checks changed: started before the
        // undrain, so no user's job comes first (start_check does nothing when none is due).
        start_check(w, node, true);
      }
      add(UndrainSlurmNode{w.hostname, node.reason}, w.name, FailureEffect::kDeletionBlocked,
          "SlurmUpdateFailed",
          {checked
               ? NodeSetEvent{false, "HealthCheckPassed",
                              "Undrained " + w.hostname + " (pod " + w.name + "): " +
                                  (health != nullptr ? "its checks pass"
                                                     : "its NodeSet follows no HealthCheck now")}
               : NodeSetEvent{false, "NodeUncordon",
                              "Undrained " + w.hostname + " (pod " + w.name +
                                  "): the operator's drain no longer applies"}});
    } else if (stale_registration_drain(node)) {
      add(UndrainSlurmNode{w.hostname, node.reason}, w.name, FailureEffect::kSync,
          "SlurmUpdateFailed",
          {{false, "SlurmNodeReregistered",
            "Undrained " + w.hostname + " (pod " + w.name + "): slurmctld drained it for \"" +
                node.reason + "\", and it has since registered as configured"}});
    } else if (node.has("DOWN") && !node.has("NOT_RESPONDING") && operator_reason(node.reason) &&
               w.ready) {
      // Down from a previous pod's preStop; this pod's slurmd runs.
      add(ResumeSlurmNode{w.hostname}, w.name, FailureEffect::kSync, "SlurmUpdateFailed");
    } else if (w.ready && down_before_pod(node, w)) {
      add(ResumeSlurmNode{w.hostname}, w.name, FailureEffect::kSync, "SlurmUpdateFailed",
          {{false, "SlurmNodeReturned",
            "Resumed " + w.hostname + " (pod " + w.name + "): Slurm set it DOWN (" + node.reason +
                ") before this pod was created, and this pod's slurmd has registered"}});
    }
    if (!legacy) {
      set_pod_cordon(w, false);
    }
  }
  if (kube_node != nullptr && world.mirror_slurm_drains != OperatorOptions::DrainMirror::kNone) {
    for (auto& patch : mirror_admin_drain(
             *kube_node, w.hostname, node, admin && node.drain(),
             world.mirror_slurm_drains == OperatorOptions::DrainMirror::kTaint, stamp)) {
      add(std::move(patch), "node/" + w.kube_node, FailureEffect::kSync, "SyncFailed");
    }
  }
  link_slurm_node(w, node, kube_node);
}

// Power saving: the node of a pod that cannot start says why in its comment, beside the pod link,
// for `scontrol show node` to show what the job given it waits for (its reason is Slurm's, for
// DOWN and DRAIN). Once the pod runs, link_slurm_node writes the link alone again.
void Planner::tell_slurm_why_pod_waits(const WorkerPod& w, const slurm::Node& node) {
  const std::string why = pod_waits_because(w);
  if (why.empty()) {
    return;
  }
  json info = build::pod_info(n, w.name, w.kube_node);
  info["waiting"] = "pod " + w.name + " " + why;
  slurm::NodeUpdate update;
  update.comment = info.dump();
  if (node.comment != *update.comment) {
    add(UpdateSlurmNode{w.hostname, std::move(update)}, w.name, FailureEffect::kSync,
        "SlurmUpdateFailed");
  }
}

// The Slurm node's record follows its pod and Node: the pod link in its comment, its topology
// and features from the Node's annotations, its address from the running pod.
void Planner::link_slurm_node(const WorkerPod& w, const slurm::Node& node,
                              const kube::Document* kube_node) {
  // The pod <-> node link, in the node's comment.
  const std::string info = build::pod_info(n, w.name, w.kube_node).dump();
  slurm::NodeUpdate link;
  if (node.comment != info) {
    link.comment = info;
  }
  if (kube_node != nullptr) {
    // The Node's annotation, else its NVLink clique's block.
    const std::string topology = build::node_topology(kube_node->doc, world.topology_blocks);
    // Never an empty topology: it would unset what the admin configured. Slurm may list
    // the node's place in other topologies beside it.
    if (!topology.empty() && !within_topology(node.topology, topology)) {
      link.topology = topology;
    }
    // The Node's features.slinky.slurm.net/spec as k8s/<feature>; the node's other
    // features (its NodeSet's, the admin's) stay.
    const std::string spec = build::annotation(kube_node->doc, api::kAnnotationNodeFeaturesSpec);
    const auto wanted = node_features(spec, node.features);
    if (wanted != node.features) {
      link.features = wanted;
      link.active_features = node_features(spec, node.active_features);
    }
  }
  // The slurmd of an earlier pod of this name that registered after this pod's (its Node cut
  // off, then back, before its kubelet stopped it) took the node's address: once it stops,
  // slurmctld pings a dead address and calls the node not responding while this pod's slurmd
  // runs, which registers again only when it restarts. The address goes back to this pod.
  // A NodeSet that names its nodes' addresses itself (NodeAddr in extraConf) keeps them.
  const bool moved = w.ready && !w.terminating && !w.ip.empty() && !node.address.empty() &&
                     node.address != w.ip &&
                     n.spec.extra_conf.find("NodeAddr") == std::string::npos;
  if (moved) {
    link.address = w.ip;
  }
  if (link.comment || link.topology || link.features || link.address) {
    std::vector<NodeSetEvent> events;
    if (moved) {
      events.emplace_back(true, "SlurmNodeAddressTaken",
                          "Slurm node " + w.hostname + " was reached at " + node.address +
                              ", not at its pod " + w.name + " (" + w.ip +
                              "): a slurmd of an earlier pod registered after it; set back");
    }
    add(UpdateSlurmNode{w.hostname, link}, w.name, FailureEffect::kSync, "SlurmUpdateFailed",
        std::move(events));
  }
}

// Slurm's state reaches the pod: its SlurmNodeState* conditions and the pod-protect label.
void Planner::slurm_to_pod(const WorkerPod& w, const slurm::Node& node, bool protect) {
  if (json conditions = condition_patch(w, node, stamp); !conditions.empty()) {
    add(PatchPod{w.name,
                 "conditions",
                 {{"status", {{"conditions", conditions}}}},
                 true,
                 w.uid,
                 w.resource_version},
        w.name, FailureEffect::kSync, "SyncFailed");
  }
  // The work on the node, in one patch: the protect label that keeps the pod out of a
  // disruption, and when the work is expected to end.
  json work = json::object();
  const bool protect_wanted = protect && node.busy();
  if (w.protect_label != protect_wanted) {
    work["labels"][api::kLabelNodeSetPodProtect] = protect_wanted ? json("true") : json(nullptr);
  }
  if (const std::string deadline = pod_deadline_annotation(w.deadline);
      w.deadline_annotation != deadline) {
    work["annotations"][api::kAnnotationPodDeadline] =
        deadline.empty() ? json(nullptr) : json(deadline);
  }
  // The Node autoscalers' marks follow the same work; one the pod template sets is the site's
  // and stays as it is.
  const auto autoscaler_mark = [&](std::string_view key, const std::string& has,
                                   const char* busy_value) {
    const std::string wanted = protect_wanted ? busy_value : "";
    if (has != wanted && n.spec.template_.metadata.annotations.count(std::string(key)) == 0) {
      work["annotations"][key] = wanted.empty() ? json(nullptr) : json(wanted);
    }
  };
  autoscaler_mark(api::kAnnotationSafeToEvict, w.safe_to_evict, "false");
  autoscaler_mark(api::kAnnotationDoNotDisrupt, w.do_not_disrupt, "true");
  if (!work.empty()) {
    add(PatchPod{w.name, "work", {{"metadata", work}}, false, w.uid, w.resource_version}, w.name,
        FailureEffect::kSync, "SyncFailed");
  }
}

void Planner::prune_slurm_records() {
  // pruneSlurmNodeRecords: NodeNotFound: the Slurm record of a pod of this NodeSet that is gone
  // (its comment names the NodeSet, no pod has its name, no slurmd answers for it, no job on
  // it) is deleted, so sinfo lists what exists. Never a record a pod is coming back to.
  if (slurm_ok && n.spec.prune_slurm_node_records == "NodeNotFound") {
    std::set<std::string> hostnames = fresh_hostnames;
    for (const auto& w : pods) {
      hostnames.insert(w.hostname);
    }
    // Nor one a pod created before, not in the cache yet, registers under: a deletion planned
    // from the old record's DOWN could take the record its new slurmd just made.
    for (const auto& name : world.expected.creations) {
      if (const int64_t ordinal = build::nodeset_pod_ordinal(n, name); !daemon && ordinal >= 0) {
        hostnames.insert(build::nodeset_pod_hostname(n, ordinal));
      }
    }
    for (const auto& [name, node] : nodes) {
      const json info = json::parse(node.comment, nullptr, false);
      if (hostnames.count(name) != 0 || (power && node.has("CLOUD")) || !info.is_object() ||
          info.value("nodeSetUID", "") != n.metadata.uid || node.busy() ||
          !(node.has("DOWN") || node.has("NOT_RESPONDING"))) {
        continue;
      }
      // A pod replaced for a failed check comes back under its name (create_missing): its record
      // keeps the drain until the new pod's own checks pass (remediate).
      if (awaits_verification(node, health) &&
          replacing_ordinals.count(build::nodeset_pod_ordinal(n, info.value("podName", ""))) != 0) {
        continue;
      }
      add(DeleteSlurmNode{name}, "slurm/" + name, FailureEffect::kSync, "SlurmUpdateFailed",
          {{false, "DefunctSlurmNodePruned",
            "Deleted Slurm node " + name + ": its pod " + info.value("podName", "") + " is gone"}});
    }
  }
}

void Planner::plan_deletion() {
  plan.deleting = true;
  std::vector<std::string> finalizers = world.finalizers;
  std::vector<NodeSetEvent> events;
  const bool cluster_goes = !world.controller || world.controller_deleting;
  patience_spent = world.deleting_since && now - *world.deleting_since > kDeletionPatience;
  std::vector<std::string> left;

  if (holds(api::kFinalizerNodeSetReservation)) {
    const std::string maint = maintenance_reservation_name(n);
    if (slurm_ok) {
      release_reservation(FailureEffect::kDeletionBlocked, "SlurmUpdateFailed");
      std::erase(finalizers, std::string(api::kFinalizerNodeSetReservation));
    } else if (!world.controller) {
      // No Controller left to reach Slurm through, ever: an administrator's scontrol is.
      events.emplace_back(true, "ReservationLeft",
                          "No Controller " + n.spec.controller_ref.name +
                              " to reach Slurm: " + "reservation " + maint +
                              " is left for scontrol delete reservation=" + maint);
      std::erase(finalizers, std::string(api::kFinalizerNodeSetReservation));
    } else {
      block(slurm_why, "Slurm maintenance reservation " + maint + " kept: " + slurm_problem);
      left.emplace_back("the maintenance reservation");
    }
  }

  if (holds(api::kFinalizerNodeSetSlurmNodes)) {
    if (cluster_goes) {
      std::erase(finalizers, std::string(api::kFinalizerNodeSetSlurmNodes));
    } else {
      // Every pod that is not already going is condemned, in scale-in order.
      read_pods();
      replace_exited();
      std::sort(active.begin(), active.end(), condemn_before);
      for (const auto& w : active) {
        condemned[w.name] = "NodeSet deletion";
      }
      drain_and_delete();
      const auto going = static_cast<size_t>(plan.terminating);
      const size_t staying = active.size() + world.expected.creations.size();
      // Pods deleted that do not end hold nothing the operator could still save.
      if (staying > 0 || (going > 0 && !patience_spent)) {
        std::string message = std::to_string(staying + going) + " pods left";
        if (!plan.draining.empty()) {
          message += ", waiting for the jobs on " + join(plan.draining, ", ") + " to end";
        } else if (going > 0) {
          message += ", " + std::to_string(going) + " terminating";
        }
        left.push_back(message);
      } else {
        empty_slurm_records(finalizers, events);
        if (!plan.deletion_left.empty()) {
          left.push_back(plan.deletion_left);
        }
      }
    }
  }
  plan.deletion_left = join(left, "; ");
  if (finalizers != world.finalizers) {
    // Last in the NodeSet's own chain: a failed release or record deletion before it keeps it.
    add(SetFinalizers{finalizers}, "", FailureEffect::kDeletionBlocked, "RemovalFailed",
        std::move(events));
    plan.releases_nodeset = finalizers.empty();
  }
}

// pruneSlurmNodeRecords NodeNotFound: the records of the NodeSet's pods, now gone, are deleted
// before its slurm-nodes finalizer goes; Never leaves them, DOWN, as a scale-in does.
void Planner::empty_slurm_records(std::vector<std::string>& finalizers,
                                  std::vector<NodeSetEvent>& events) {
  const auto release = [&] {
    std::erase(finalizers, std::string(api::kFinalizerNodeSetSlurmNodes));
  };
  // A power-saved NodeSet's records are the operator's own, made before any pod.
  if (n.spec.prune_slurm_node_records != "NodeNotFound" && !power) {
    release();
    return;
  }
  if (!slurm_ok) {
    block(slurm_why, "its Slurm node records cannot be deleted: " + slurm_problem +
                         " (the NodeSet stays until Slurm answers; to let it go now, delete "
                         "them with scontrol delete nodename=... and remove its finalizer " +
                         std::string(api::kFinalizerNodeSetSlurmNodes) + ")");
    plan.deletion_left = "its Slurm node records";
    return;
  }
  // A record is the NodeSet's when its comment names the NodeSet, or, without such a comment (a
  // slurmd that registered again clears it), when it carries the NodeSet's feature, which each
  // of its slurmd registers with and no other NodeSet of the cluster can.
  const std::string feature = n.slurm_name();
  std::vector<std::string> busy;
  std::vector<std::string> deleting;
  for (const auto& [name, node] : nodes) {
    const json info = json::parse(node.comment, nullptr, false);
    const bool linked = info.is_object() && info.contains("nodeSetUID");
    const bool ours = linked ? info.value("nodeSetUID", "") == n.metadata.uid
                             : std::find(node.features.begin(), node.features.end(), feature) !=
                                   node.features.end();
    if (!ours) {
      continue;
    }
    if (node.busy()) {
      busy.push_back(name);
      continue;
    }
    deleting.push_back(name);
    add(DeleteSlurmNode{name}, "", FailureEffect::kDeletionBlocked, "SlurmUpdateFailed",
        {{false, "SlurmNodeDeleted", "Deleted Slurm node " + name + ": its NodeSet is deleted"}},
        true);
  }
  if (!busy.empty() && !patience_spent) {
    plan.deletion_left = "Slurm node records still busy with no pod left: " + join(busy, ", ");
    return;
  }
  if (!busy.empty()) {
    events.emplace_back(
        true, "SlurmNodesLeft",
        "Slurm node records left, busy " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::minutes>(kDeletionPatience).count()) +
            " min after their pods went: " + join(busy, ", ") +
            " (scontrol delete nodename=... once idle)");
  }
  if (!deleting.empty()) {
    plan.deletion_left = "deleting Slurm node records " + join(deleting, ", ");
  }
  release();
}

void Planner::write_status() {
  // pinToNode: where each ordinal runs, kept while its pod is away and its node exists.
  json ordinal_to_node = json::object();
  if (n.spec.pin_to_node && !daemon) {
    for (const auto& [ordinal, node] : n.status.ordinal_to_node) {
      int64_t number = -1;
      const auto [end, ec] =
          std::from_chars(ordinal.data(), ordinal.data() + ordinal.size(), number);
      if (ec == std::errc() && number < want && world.kube_nodes.count(node) != 0) {
        ordinal_to_node[ordinal] = node;
      }
    }
    for (const auto& w : active) {
      if (w.ordinal >= 0 && w.ordinal < want && !w.kube_node.empty() && w.phase == "Running") {
        ordinal_to_node[std::to_string(w.ordinal)] = w.kube_node;
      }
    }
  }

  plan.replicas = static_cast<int64_t>(active.size());
  plan.status = {
      {"replicas", plan.replicas},
      {"readyReplicas", plan.ready},
      {"availableReplicas", plan.available},
      {"updatedReplicas", plan.updated},
      {"unavailableReplicas", std::max<int64_t>(0, want - plan.available)},
      {"desired", want},
      {"slurmIdle", slurm_idle},
      {"slurmAllocated", slurm_allocated},
      {"slurmDown", slurm_down},
      {"slurmDrain", slurm_drain},
      // Adopted: the revision its pods are at, as the operator before wrote it.
      {"nodeSetHash", world.adopted_revision.empty() ? revision : world.adopted_revision},
      {"ordinalToNode", ordinal_to_node},
      {"selector", build::nodeset_selector(n.metadata.name)}};
  for (const auto& [k, v] : plan.status.items()) {
    if (!world.status.contains(k) || world.status[k] != v) {
      plan.status_changed = true;
    }
  }
}

}  // namespace

NodeSetPlan plan_nodeset(const NodeSetWorld& world) {
  Planner p(world);
  if (world.deleting_since) {
    p.plan_deletion();
    return std::move(p.plan);
  }
  if (!world.controller) {
    p.plan.stop = Readiness{false, "ControllerNotFound",
                            "Controller " + p.ns + "/" + world.nodeset.spec.controller_ref.name +
                                " (spec.controllerRef) does not exist"};
    return std::move(p.plan);
  }
  if (auto conf = build::slurmd_conf(world.nodeset); !conf) {
    p.plan.stop = Readiness{false, "InvalidConfig", conf.error()};
    return std::move(p.plan);
  }
  if (auto power = build::nodeset_power_saving(world.nodeset); !power) {
    p.plan.stop = Readiness{false, "InvalidConfig", power.error().to_string()};
    return std::move(p.plan);
  }
  p.make_prerequisites();
  p.keep_revisions();
  p.read_pods();
  p.replace_exited();
  p.choose();
  p.remediate();
  p.check_actively();
  p.keep_finalizers_and_reservation();
  p.drain_and_delete();
  p.create_missing();
  p.keep_power_records();
  p.mirror_the_pods_that_stay();
  p.prune_slurm_records();
  p.write_status();
  return std::move(p.plan);
}

}  // namespace tightrope::op
