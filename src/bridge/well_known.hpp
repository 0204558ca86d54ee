// The names slurm-bridge writes and reads on Kubernetes objects: Slinky's slurm-bridge names
// (scheduler.slinky.slurm.net/, slinky.slurm.net/, slurmjob.slinky.slurm.net/), so that
// workloads written for it run here unchanged, and the workload APIs' own labels.
#pragma once

#include <string_view>

#include "api/well_known.hpp"

namespace tightrope::bridge {

inline constexpr std::string_view kDefaultSchedulerName = "slurm-bridge-scheduler";

// On pods: the Slurm job that holds them (the same on every pod of a group), the Kubernetes Node
// chosen from its allocation, and the finalizer that keeps a pod until its job is settled.
inline constexpr std::string_view kLabelJobId = "scheduler.slinky.slurm.net/slurm-jobid";
inline constexpr std::string_view kAnnotationSlurmNode = "slinky.slurm.net/slurm-node";
inline constexpr std::string_view kFinalizer = "scheduler.slinky.slurm.net/finalizer";

// On Nodes: the taint that keeps everything but the bridge's pods off a node Slurm schedules
// (its value is the scheduler's name), the label that registers a Node as a Slurm external node,
// the Slurm name of a Node when it is not the Node's name, the partitions an external node joins
// (as features), and its place in the network topology.
inline constexpr std::string_view kTaintManagedNode = "slinky.slurm.net/managed-node";
inline constexpr std::string_view kLabelExternalNode = "scheduler.slinky.slurm.net/external-node";
inline constexpr std::string_view kLabelSlurmNodeName = api::kLabelNodeSlurmNodeName;
inline constexpr std::string_view kAnnotationExternalNodePartitions =
    "scheduler.slinky.slurm.net/external-node-partitions";
inline constexpr std::string_view kAnnotationTopology = "topology.slinky.slurm.net/spec";
// The taint Kubernetes puts on a cordoned Node.
inline constexpr std::string_view kTaintUnschedulable = "node.kubernetes.io/unschedulable";
// Why the bridge cordoned a Node (Slurm drained it): the reason, so that it lifts only its own.
inline constexpr std::string_view kAnnotationCordonedBy = "tightrope.slurm.net/bridge-cordon";

// Job options, on the workload (Job, JobSet, LeaderWorkerSet, PodGroup) or on a bare pod.
inline constexpr std::string_view kJobAnnotationPrefix = "slurmjob.slinky.slurm.net/";

// On Namespaces: the Slurm user a namespace's pods run as, and the users its workloads may
// name in slurmjob.slinky.slurm.net/user-id ("*": any).
inline constexpr std::string_view kAnnotationNamespaceUser = "tightrope.slurm.net/slurm-user";
inline constexpr std::string_view kAnnotationNamespaceUsers = "tightrope.slurm.net/slurm-users";

// Workload APIs.
inline constexpr std::string_view kLabelPodGroup = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kLabelLwsName = "leaderworkerset.sigs.k8s.io/name";
inline constexpr std::string_view kLabelLwsGroupIndex = "leaderworkerset.sigs.k8s.io/group-index";
inline constexpr std::string_view kLabelLwsGroupKey = "leaderworkerset.sigs.k8s.io/group-key";
inline constexpr std::string_view kAnnotationLwsSize = "leaderworkerset.sigs.k8s.io/size";
inline constexpr std::string_view kLabelJobName = "batch.kubernetes.io/job-name";
inline constexpr std::string_view kLabelJobSetName = "jobset.sigs.k8s.io/jobset-name";
inline constexpr std::string_view kAnnotationCompletionIndex =
    "batch.kubernetes.io/job-completion-index";

}  // namespace tightrope::bridge
