// Slinky's well-known labels, annotations, finalizers and reason prefix: Tightrope writes and
// reads the same keys, so tools that know Slinky's keep working.
#pragma once

#include <string_view>

namespace tightrope::api {

inline constexpr std::string_view kLabelName = "app.kubernetes.io/name";
inline constexpr std::string_view kLabelInstance = "app.kubernetes.io/instance";
inline constexpr std::string_view kLabelComponent = "app.kubernetes.io/component";
inline constexpr std::string_view kLabelPartOf = "app.kubernetes.io/part-of";
inline constexpr std::string_view kLabelManagedBy = "app.kubernetes.io/managed-by";
// The revision a worker pod was made at: Tightrope's (and a StatefulSet's) label, then the one
// Slinky's operator writes (Kubernetes' history package). The first one present counts.
inline constexpr std::string_view kLabelRevision = "controller-revision-hash";
inline constexpr std::string_view kLabelSlinkyRevision = "controller.kubernetes.io/hash";
inline constexpr std::string_view kLabelCluster = "slinky.slurm.net/cluster";

inline constexpr std::string_view kLabelControllerActive = "controller.slinky.slurm.net/active";
inline constexpr std::string_view kLabelNodeSetPodName = "nodeset.slinky.slurm.net/pod-name";
inline constexpr std::string_view kLabelNodeSetPodIndex = "nodeset.slinky.slurm.net/pod-index";
inline constexpr std::string_view kLabelNodeSetPodHostname =
    "nodeset.slinky.slurm.net/pod-hostname";
inline constexpr std::string_view kLabelNodeSetPodProtect = "nodeset.slinky.slurm.net/pod-protect";
inline constexpr std::string_view kLabelNodeSetScalingMode =
    "nodeset.slinky.slurm.net/scaling-mode";
inline constexpr std::string_view kLabelLoginSetPodName = "loginset.slinky.slurm.net/pod-name";

// A worker pod whose Slurm node is to be drained. A person may set it (Slinky's guide: removing
// it undrains); the operator sets it with kAnnotationPodOperatorCordon for a cause of its own.
inline constexpr std::string_view kAnnotationPodCordon = "nodeset.slinky.slurm.net/pod-cordon";
// A health check's or automation's request that the pod's Slurm node be drained (Slinky 1.3):
// "true", or the reason itself. The requester owns it; removing it undoes the drain.
inline constexpr std::string_view kAnnotationPodCordonRequested =
    "nodeset.slinky.slurm.net/pod-cordon-requested";
// Tightrope's own: the operator set pod-cordon (a cordoned Node, a drain request, a Node
// condition) and takes it back when the cause goes; a pod-cordon without it is a person's.
inline constexpr std::string_view kAnnotationPodOperatorCordon =
    "tightrope.slurm.net/operator-cordon";
// Tightrope's own: an administrator's request (kubectl slurm drain) that the operator drain this
// worker pod's Slurm node, with the reason; removing it undoes the drain.
inline constexpr std::string_view kAnnotationPodDrainReason = "tightrope.slurm.net/drain-reason";
inline constexpr std::string_view kAnnotationPodDeletionCost =
    "nodeset.slinky.slurm.net/pod-deletion-cost";
inline constexpr std::string_view kAnnotationPodDeadline = "nodeset.slinky.slurm.net/pod-deadline";
// On a Kubernetes Node that runs one worker: that worker's Slurm node (Slinky's slurm-bridge
// reads it to place the pods Slurm schedules).
inline constexpr std::string_view kLabelNodeSlurmNodeName = "slinky.slurm.net/slurm-nodename";
// The Node autoscalers' own: set on a worker pod while its Slurm node has work, so that neither
// cluster-autoscaler nor Karpenter takes its Node away (the PDB only stops evictions).
inline constexpr std::string_view kAnnotationSafeToEvict =
    "cluster-autoscaler.kubernetes.io/safe-to-evict";
inline constexpr std::string_view kAnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt";
inline constexpr std::string_view kAnnotationNodeCordonReason =
    "nodeset.slinky.slurm.net/node-cordon-reason";
inline constexpr std::string_view kAnnotationNodeTopologySpec = "topology.slinky.slurm.net/spec";
inline constexpr std::string_view kAnnotationNodeFeaturesSpec = "features.slinky.slurm.net/spec";
inline constexpr std::string_view kAnnotationNodeHostnameOverride =
    "nodeset.slinky.slurm.net/hostname-override";

// Pod template annotations whose change rolls the pods that mount what they hash.
inline constexpr std::string_view kAnnotationSlurmConfigHash = "slinky.slurm.net/slurm-config-hash";
inline constexpr std::string_view kAnnotationSlurmKeyHash = "slinky.slurm.net/slurm-key-hash";
inline constexpr std::string_view kAnnotationJwtKeyHash = "slinky.slurm.net/jwt-key-hash";
inline constexpr std::string_view kAnnotationSlurmdbdConfHash =
    "slinky.slurm.net/slurmdbd-conf-hash";
inline constexpr std::string_view kAnnotationSshdConfHash = "slinky.slurm.net/sshd-conf-hash";
inline constexpr std::string_view kAnnotationSssdConfHash = "slinky.slurm.net/sssd-conf-hash";
inline constexpr std::string_view kAnnotationSshHostKeysHash =
    "slinky.slurm.net/ssh-host-keys-hash";
// Tightrope's own, on the Controller's "<cr>-config" ConfigMap: the slurm-config-hash that a
// slurmctld pod template carries when its pods mount this content.
inline constexpr std::string_view kAnnotationControllerConfigHash =
    "tightrope.slurm.net/config-hash";
// Tightrope's own, on a resource it took over from another operator of these kinds (Slinky's):
// the generation at which it adopted what that operator made, kept as it is until the spec
// moves past it; on a NodeSet also the pods' revision it adopted (their controller-revision-hash).
inline constexpr std::string_view kAnnotationAdoptedGeneration =
    "tightrope.slurm.net/adopted-generation";
inline constexpr std::string_view kAnnotationAdoptedRevision =
    "tightrope.slurm.net/adopted-revision";
// The container `kubectl logs` and `kubectl exec` pick when none is named.
inline constexpr std::string_view kAnnotationDefaultContainer =
    "kubectl.kubernetes.io/default-container";

inline constexpr std::string_view kFinalizerNodeSetReservation =
    "nodeset.slinky.slurm.net/reservation";
// Tightrope's own: with pruneSlurmNodeRecords NodeNotFound, a deleted NodeSet's Slurm node
// records go after its pods.
inline constexpr std::string_view kFinalizerNodeSetSlurmNodes =
    "nodeset.slinky.slurm.net/slurm-nodes";

// Tightrope's own: when a Token's JWT was issued and when it expires, on its Secret, for a human
// (Slinky's Secret has no such annotations; the times are in the JWT).
inline constexpr std::string_view kAnnotationTokenIssuedAt = "tightrope.slurm.net/token-issued-at";
inline constexpr std::string_view kAnnotationTokenExpiresAt =
    "tightrope.slurm.net/token-expires-at";

// Tightrope's own: an administrator's Slurm drain shown on the Kubernetes Node (opt-in).
inline constexpr std::string_view kNodeConditionSlurmDrained = "SlurmNodeDrained";
inline constexpr std::string_view kTaintSlurmDrained = "tightrope.slurm.net/slurm-drained";

// GPUs (Tightrope's own; Slinky has no GPU logic). GPU Feature Discovery labels a Node with its
// product ("NVIDIA-H100-80GB-HBM3"); the NodeSet annotations say what the labels cannot: the
// Slurm GRES type, gres.conf's AutoDetect for the NodeSet's nodes, and explicit gres.conf lines
// (File=...) without NodeName=, which the operator adds.
inline constexpr std::string_view kLabelGpuProduct = "nvidia.com/gpu.product";
inline constexpr std::string_view kLabelGpuClique = "nvidia.com/gpu.clique";
inline constexpr std::string_view kAnnotationGpuType = "tightrope.slurm.net/gpu-type";
inline constexpr std::string_view kAnnotationGresAutodetect = "tightrope.slurm.net/gres-autodetect";
inline constexpr std::string_view kAnnotationGresConf = "tightrope.slurm.net/gres-conf";
// A NodeSet's own IMEX domain (build/compute_domain.hpp): "true" asks for it.
inline constexpr std::string_view kAnnotationComputeDomain = "tightrope.slurm.net/compute-domain";

// Tightrope's own: health-check remediation (docs/health.md). The failures seen on a Kubernetes
// Node (JSON: [{"pod","uid","check","at"}], the newest last), and the taint that keeps new pods
// off a Node that keeps failing.
inline constexpr std::string_view kAnnotationHealthFailures = "tightrope.slurm.net/health-failures";
inline constexpr std::string_view kTaintUnhealthy = "tightrope.slurm.net/unhealthy";

// Tightrope's own: power saving (docs/power-saving.md). A NodeSet with the first is power-saved:
// Slurm knows its nodes up to spec.replicas powered down, and the operator runs a pod for each
// node Slurm powers up. Whole seconds each: idle before Slurm powers a node down, how long a node
// may take to come up (its pod's pull and start included), and how long to go down.
inline constexpr std::string_view kAnnotationSuspendTime =
    "tightrope.slurm.net/suspend-time-seconds";
inline constexpr std::string_view kAnnotationResumeTimeout =
    "tightrope.slurm.net/resume-timeout-seconds";
inline constexpr std::string_view kAnnotationSuspendTimeout =
    "tightrope.slurm.net/suspend-timeout-seconds";

// Every Slurm node reason the operator writes starts with this; a reason without it belongs to
// an administrator and is never touched.
inline constexpr std::string_view kReasonPrefix = "slurm-operator: ";

// The field manager of everything the operator applies.
inline constexpr std::string_view kFieldManager = "slurm-operator";

}  // namespace tightrope::api
