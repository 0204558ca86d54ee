// Pods to Slurm external jobs: which pods make one job (a group), the job options workloads
// carry in slurmjob.slinky.slurm.net/* annotations (parsed and checked field by field, for the
// webhook and the bridge alike), and the job a group becomes. Pure; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.hpp"
#include "bridge/objects.hpp"
#include "slurm/model.hpp"

namespace tightrope::bridge {

// The pods that become one Slurm job: a bare pod (kind "Pod"), every pod of a gang batch Job
// ("Job"), of one LeaderWorkerSet group ("LeaderWorkerSet", named <lws>-<group index>) or of a
// coscheduling PodGroup ("PodGroup").
struct GroupKey {
  std::string namespace_name;
  std::string kind;
  std::string name;

  std::string key() const { return namespace_name + "/" + kind + "/" + name; }
  static std::optional<GroupKey> parse(std::string_view key);
  bool operator==(const GroupKey&) const = default;
};

// `job` is the pod's controlling batch Job when it has one and it is cached.
GroupKey group_of(const Pod& pod, const BatchJob* job);

// How many pods a group needs before it is submitted (all or nothing): 1 for a pod, the Job's
// completions, the LeaderWorkerSet's size, the PodGroup's minMember (given, as it lives on
// another object).
int64_t group_size(const GroupKey& group, const Pod& any_pod, const BatchJob* job,
                   std::optional<int64_t> pod_group_min_member);

// The job options of slurmjob.slinky.slurm.net/<name> annotations.
struct JobOptions {
  std::string account;
  std::string constraints;
  std::optional<int64_t> cpu_per_task;
  std::optional<bool> exclusive;
  std::string gres;  // "gpu:2", "gpu:a100:2"
  std::string group_id;
  std::string job_name;
  std::string licenses;
  std::optional<int64_t> max_nodes;
  std::optional<int64_t> mem_per_node_mib;
  std::optional<int64_t> min_nodes;
  std::string partition;
  std::optional<int64_t> priority;
  std::string qos;
  std::string reservation;
  std::optional<int64_t> time_limit_minutes;
  std::string user_id;
  std::string wckey;
};

// Parses the options among `annotations` (others are ignored); each bad one is an error on
// "metadata.annotations[<key>]" saying what is wrong, an unknown slurmjob.* name among them.
api::FieldErrors parse_job_options(const Annotations& annotations, JobOptions* out);

// What the bridge is told about every job it submits.
struct JobDefaults {
  std::string partition;  // when the workload names none
  std::string mcs_label;
  std::string user;  // the namespace's Slurm user, else the bridge's default ("": its token's)
  // Users a workload of the namespace may name in user-id; "*" any, empty none.
  std::vector<std::string> allowed_users;
};

// What the bridge writes in a job's admin comment: the group and its pods ("ns/name"), so that
// a restarted bridge finds every job it made from Slurm alone. Slinky's {"pods": [...]} with a
// "group" beside it.
struct JobClaim {
  std::string group;
  std::vector<std::string> pods;
  std::string encode() const;
  static std::optional<JobClaim> decode(std::string_view admin_comment);
};

// The external job of a group's pods (in the order given: task i is pods[i]), with the options
// from `annotations` (the workload's over the pods'). Errors as parse_job_options, and a
// user-id the namespace may not use.
tightrope::Result<slurm::ExternalJob, api::FieldErrors> to_external_job(
    const GroupKey& group, const std::vector<const Pod*>& pods, const Annotations& annotations,
    const JobDefaults& defaults, const BatchJob* batch_job);

// The annotations that carry job options for a group: the first pod's, overridden by its
// workload's (the Job's, the JobSet's, the LeaderWorkerSet's or the PodGroup's).
Annotations job_annotations(const Pod& pod, const Annotations& workload);

}  // namespace tightrope::bridge
