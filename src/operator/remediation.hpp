// The rules of health-check remediation (docs/health.md, "Remediation, step by step"): which
// report speaks for a pod, the reasons its Slurm node is drained with, and the failures a
// Kubernetes Node keeps until it is quarantined. Pure: the NodeSet's planner decides with them.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"
#include "health/checks.hpp"
#include "kube/object.hpp"
#include "operator/device_taints.hpp"
#include "slurm/model.hpp"

namespace tightrope::op {

struct WorkerPod;

// Every reason of a drain for a health check carries this after the operator's prefix: a drain,
// a replacement ("... is pending termination for healthcheck: ..."), a verification.
inline constexpr std::string_view kHealthReason = "healthcheck: ";

// The HealthCheck a NodeSet follows, as its planner needs it.
struct HealthPolicy {
  std::string name;
  std::string uid;                          // what its checks' reports carry as their source
  api::Remediation remediation;             // defaulted
  std::optional<api::ActiveChecks> active;  // defaulted; nullopt: no active checks
  api::HealthSignals signals;
};

// The report on a pod's Slurm node that speaks for the pod: the policy's checks found it (its
// source), in this pod, at or after the pod was made (a replacement inherits its node's Extra
// until its first run writes; a HealthCheck made anew finds the report of the one before).
// The passive checks' report, unless the active checks' last one failed: then that one.
// nullopt: none yet.
std::optional<health::Report> pod_report(const slurm::Node& node, const std::string& pod_created,
                                         const HealthPolicy& policy);
// The passive checks' report that speaks for the pod (as pod_report's, whatever the active
// checks found).
std::optional<health::Report> passive_report(const slurm::Node& node,
                                             const std::string& pod_created,
                                             const HealthPolicy& policy);
// Whether an administrator undrained the node after the plan drained it for this failing active
// report: the node is not drained, the report is older than its job and five minutes (the plan
// drains within seconds), and the pod's Node keeps the failure as the plan recorded it when it
// drained (a node a broken check left waiting at the budget has no such record). The plan then
// checks it again, in its reservation, instead of draining it again.
bool undrained_after_failure(const slurm::Node& node, const health::Report& active,
                             const WorkerPod& w, const nlohmann::json* kube_node,
                             const HealthPolicy& policy, int64_t now);
// What the active checks' reports carry as their source: the HealthCheck's uid and a digest of
// its spec.active, so that a report found under other checks (a floor since raised) is not taken
// for one of these, and a change checks every worker again.
std::string active_source(const HealthPolicy& policy);
// Whether the policy's checks found the report, whichever spec.active they ran.
bool from_policy(const health::Report& report, const HealthPolicy& policy);
// The active checks' last report that speaks for the pod (as pod_report's), found under the
// policy's present spec.active; nullopt: none yet.
std::optional<health::Report> active_report(const slurm::Node& node, const std::string& pod_created,
                                            const HealthPolicy& policy);

// A failure the policy's signals see on a pod (docs/health.md, "Signals from outside"): a Node
// condition it names, True on the pod's Node, or a device taint it names on a device of that
// Node (both the machine's: `hardware`), else the pod's pod-cordon-requested. As a report of the
// policy's checks, found when the condition last changed or the taint was added (the request:
// `now`). nullopt: none.
struct Signal {
  health::Report report;
  bool hardware = false;
};
std::optional<Signal> signal_report(const WorkerPod& w, const nlohmann::json* kube_node,
                                    const std::vector<DeviceTaint>& node_device_taints,
                                    const HealthPolicy& policy, int64_t now);
// Whether pods of this spec tolerate the quarantine taint: their replacement would land on a
// quarantined Node again.
bool tolerates_quarantine(const nlohmann::json& pod_spec);

// ---- Active checks (docs/health.md, "Active checks")

// Whether a running pod's node is due for its active checks at `now` (unix seconds): never
// checked in this pod (after a replacement, with afterReplacement), or last checked an interval
// ago. Not whether it can be taken now (check_ready).
bool check_due(const slurm::Node& node, const std::string& pod_created, const HealthPolicy& policy,
               int64_t now);
// Whether the node can be taken for its check now: no job on it, in no reservation, not drained
// (or drained only until the new pod's checks pass, which this plan undrains), responding.
bool check_ready(const slurm::Node& node, bool undrained_by_this_plan);
// The reservation of one node's check, from now until the job's time limit and a minute more,
// for the user the operator's token names (SlurmUser).
slurm::Reservation check_reservation(const std::string& node, const api::ActiveChecks& active,
                                     slurm::Time now);
// The check job: tightrope-health --active on that node, in that reservation, with the checks
// and the policy's uid on its command line (the worker's mounted checks.json may be a minute
// behind a HealthCheck just made or changed).
slurm::JobSubmission check_job(const slurm::Node& node, const HealthPolicy& policy);

// The value of the quarantine taint for a check: a label value ("script:fans" -> "script-fans").
std::string taint_value(const std::string& check);
// "healthcheck: gpus: 3 GPUs present, Slurm registered 4 (and 1 more)", without the operator's
// prefix: Slurm's reason, and the why of a replacement.
std::string health_reason(const health::Report& report);
// "healthcheck: awaiting the first checks of pod hpc/gpu-0": a replacement, drained until its
// own report passes.
std::string verifying_reason(const std::string& pod_key);
// Drained by the operator for a health check, at any step.
bool health_drained(const slurm::Node& node);
// A node whose pod went for a failed check and whose next pod must pass before it takes jobs:
// drained for a check, or drained or down by the operator (the old pod's preStop writes its own
// reason) with a failing report of the policy's checks.
bool awaits_verification(const slurm::Node& node, const HealthPolicy* policy);
// The step a node drained for a check is at: "replacing" (its pod goes once idle), "verifying"
// (a new pod's first report is awaited) or "drained".
std::string health_step(const std::string& reason);

// How many failures a Node keeps, the newest: enough for any quarantineAfter a site sets.
inline constexpr size_t kNodeFailuresKept = 16;

// How many of them count at `now`: within the window.
int64_t failures_within(const std::vector<api::NodeFailure>& failures, int64_t now,
                        int64_t window_seconds);
// An earlier pod of the same name failing the same check on another Node within the window:
// the fault follows the pod (its image, its spec, a check that cannot pass in it), not a Node.
// `elsewhere`: (Node, failure) as other Nodes record them. The newest such; nullptr when none.
const std::pair<std::string, api::NodeFailure>* fault_follows_pod(
    const std::vector<std::pair<std::string, api::NodeFailure>>& elsewhere, const std::string& uid,
    const std::string& check, int64_t now, int64_t window_seconds);
// Whether the Node carries the quarantine taint.
bool quarantined(const nlohmann::json& kube_node);

// What a failing pod's Node is to get: its failure recorded (once per pod), and the quarantine
// taint once quarantineAfter of them fall within the window. One merge patch, conditional on the
// Node's resourceVersion (the taint list is replaced whole); nullopt when the Node has both.
struct NodeRecord {
  nlohmann::json patch;
  bool records = false;      // the failure is new to the Node
  bool quarantines = false;  // the taint is new
  int64_t counted = 0;       // failures within the window, this one included
};
// `at_once`: a hardware signal, which quarantines whatever the count.
std::optional<NodeRecord> record_failure(const kube::Document& kube_node,
                                         const api::NodeFailure& failure,
                                         const api::Remediation& remediation, int64_t now,
                                         bool at_once = false);

// ---- What a HealthCheck's status shows

// The status.remediations entry of a pod whose Slurm node a check keeps drained, from the
// SlurmNodeStateDrain condition that mirrors Slurm's reason onto the pod; nullopt for any other.
std::optional<api::NodeRemediation> pod_remediation(const std::string& nodeset, const WorkerPod& w);
// The status.kubeNodes entry of a Node whose recorded failures within the window include one of
// `pods` (namespace/name; `owns` says whether a pod key is one of the HealthCheck's); nullopt
// when none does.
std::optional<api::KubeNodeHealth> kube_node_health(
    const nlohmann::json& kube_node, const std::function<bool(const std::string&)>& owns,
    int64_t window_seconds, int64_t now);

}  // namespace tightrope::op
