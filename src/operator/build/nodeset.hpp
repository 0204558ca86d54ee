// What a NodeSet becomes: one slurmd pod per ordinal (the operator manages pods itself, no
// StatefulSet underneath), the ControllerRevision that names the pods' current template, and the
// per-cluster worker Service and disruption budget that every NodeSet of a Controller shares.
// Pure: the reconciler decides which ordinals exist and applies what comes out.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"
#include "base/result.hpp"

namespace tightrope::op::build {

struct NodeSetInputs {
  api::Controller controller;
};

// "<nodeset>-<ordinal>", the ordinal zero-padded to spec.ordinalPadding digits.
std::string nodeset_padded_ordinal(const api::NodeSet& n, int64_t ordinal);
std::string nodeset_pod_name(const api::NodeSet& n, int64_t ordinal);
// The pod's hostname and so its Slurm node name: the template's hostname (a prefix) followed by
// the padded ordinal, else the pod's name.
std::string nodeset_pod_hostname(const api::NodeSet& n, int64_t ordinal);
// The ordinal in a NodeSet pod's name, or -1 when the name is not "<nodeset>-<digits>".
int64_t nodeset_pod_ordinal(const api::NodeSet& n, const std::string& pod_name);

// Shared by every NodeSet of a Controller: the headless Service that gives worker pods DNS
// names, and the PodDisruptionBudget that keeps evictions off pods running jobs.
// status.selector: the label query of the NodeSet's pods, for the scale subresource (HPA), its
// keys in order as Kubernetes (and so Slinky) writes a label set.
std::string nodeset_selector(const std::string& nodeset_name);
std::string worker_service_name(const api::Controller& c);  // slurm-workers-<controller>
std::string worker_pdb_name(const api::Controller& c);      // slurm-workers-pdb-<controller>

// The `--conf` of a dynamic slurmd: Features=<slurm name>[,extraConf features] and the other
// extraConf Key=Value words, sorted by key. An empty value is refused (an empty Topology=
// swallows the next word in Slurm), as is a word without '='.
Result<std::string, std::string> slurmd_conf(const api::NodeSet& n);

// What decides a pod's revision: its template and everything else the pod is built from.
nlohmann::json nodeset_revision_data(const api::NodeSet& n, const NodeSetInputs& in);
// "<nodeset>-<10 hex digits of its hash>": the ControllerRevision's name and the pods'
// controller-revision-hash label.
std::string nodeset_revision_name(const api::NodeSet& n, const NodeSetInputs& in);
nlohmann::json build_controller_revision(const api::NodeSet& n, const NodeSetInputs& in,
                                         int64_t revision);

// Who a pod is: its name, hostname (its Slurm node name) and, in StatefulSet mode, its padded
// ordinal (the pod-index label).
struct PodIdentity {
  std::string name;
  std::string hostname;
  std::string index;
  std::string claim_suffix;  // what its claims' names end with ("" for the name's own suffix)
};

// spec.ssh: sshd in the slurmd container, SSSD for users, pam_slurm_adopt letting in only users
// with a job on the node (the slurmd image starts them when the host keys are mounted). The
// NodeSet's pods share its host keys, made once, and its sshd_config.
std::string nodeset_host_keys_name(const api::NodeSet& n);   // <nodeset>-ssh-host-keys
std::string nodeset_ssh_config_name(const api::NodeSet& n);  // <nodeset>-ssh-config
// The checks of the HealthCheck that selects the NodeSet (docs/health.md), mounted optionally
// at /etc/tightrope/health in every pod, so that adding or changing a HealthCheck rolls none.
std::string nodeset_health_config_name(const api::NodeSet& n);  // <nodeset>-health
inline constexpr std::string_view kHealthConfigDir = "/etc/tightrope/health";
nlohmann::json build_nodeset_host_keys_secret(const api::NodeSet& n,
                                              const std::map<std::string, std::string>& keys);
nlohmann::json build_nodeset_ssh_config_map(const api::NodeSet& n);

// DaemonSet mode: the hostname of the pod on `node` (the Node's
// nodeset.slinky.slurm.net/hostname-override annotation, else its name up to the first '.'),
// and the pod's name, "<nodeset>-<hostname>" (one pod a node, so the name is known before it
// exists and a stale cache cannot create a second).
std::string daemon_pod_hostname(const nlohmann::json& node);
std::string daemon_pod_name(const api::NodeSet& n, const std::string& hostname);
// Whether a pod with `pod_spec` belongs on `node` in DaemonSet mode: its nodeSelector and
// required node affinity match, and it tolerates the node's NoSchedule and NoExecute taints (the
// taints of a node's conditions, which a DaemonSet tolerates, aside). Cordoned nodes keep their
// pod: a cordon drains it in Slurm.
bool daemon_node_eligible(const nlohmann::json& pod_spec, const nlohmann::json& node);

Result<nlohmann::json, std::string> build_nodeset_pod(const api::NodeSet& n,
                                                      const NodeSetInputs& in,
                                                      const PodIdentity& identity,
                                                      const std::string& pinned_node);
// The pod of one ordinal; with `pinned_node` (pinToNode) it may run on that node only. Fails
// only when extraConf is malformed.
Result<nlohmann::json, std::string> build_nodeset_pod(const api::NodeSet& n,
                                                      const NodeSetInputs& in, int64_t ordinal,
                                                      const std::string& pinned_node = "");

// volumeClaimTemplates: the claim of template `claim` for a pod, "<claim>-<nodeset>-<suffix>"
// (the padded ordinal, or in DaemonSet mode the hostname), and the PVC itself. With
// whenDeleted: Delete the NodeSet owns it (deleted with the NodeSet); whenScaled is applied by
// the reconciler when it removes a pod.
std::string nodeset_claim_name(const api::NodeSet& n, const std::string& claim,
                               const std::string& suffix);
std::vector<nlohmann::json> build_nodeset_claims(const api::NodeSet& n, const std::string& suffix);

// Owned by every NodeSet of the cluster (non-controller references): the Service and budget go
// when the last NodeSet goes.
nlohmann::json build_worker_service(const api::Controller& c,
                                    const std::vector<api::NodeSet>& nodesets);
nlohmann::json build_worker_pdb(const api::Controller& c,
                                const std::vector<api::NodeSet>& nodesets);

// The JSON kept in a Slurm node's comment to link it to its pod (the keys Slinky writes).
nlohmann::json pod_info(const api::NodeSet& n, const std::string& pod_name,
                        const std::string& kube_node);

}  // namespace tightrope::op::build
