// Typed views of what slurmrestd reports: only the fields Tightrope reads, with Slurm's
// "no value" and "infinite" made explicit. Independent of the data parser version (codec.hpp
// maps each version's JSON onto these).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tightrope::slurm {

using Time = std::chrono::system_clock::time_point;

// Slurm's base node states; every other word of a node's `state` array is a flag.
inline constexpr std::array<std::string_view, 7> kBaseNodeStates = {
    "IDLE", "DOWN", "ALLOCATED", "MIXED", "ERROR", "FUTURE", "UNKNOWN"};

struct Node {
  std::string name;
  std::vector<std::string> state;  // as reported: ["IDLE", "DRAIN", "DYNAMIC_NORM"]
  std::string reason;
  std::string reason_set_by;
  std::optional<Time> reason_changed_at;
  std::vector<std::string> features;
  std::vector<std::string> active_features;
  std::string comment;
  std::string extra;     // slurmd --extra, set again at each registration
  std::string topology;  // "topo-switch:s1,topo-block:b1"
  std::string gres;
  std::string gres_used;
  int64_t cpus = 0;
  int64_t alloc_cpus = 0;
  int64_t real_memory_mib = 0;
  int64_t alloc_memory_mib = 0;
  std::string address;
  std::string hostname;
  std::string reservation;  // the reservation the node is in now, "" when none
  std::vector<std::string> partitions;
  std::optional<Time> boot_time;
  std::optional<Time> last_busy;

  // The base state ("IDLE", "MIXED", ...), or "UNKNOWN" if the report has none.
  std::string base_state() const;
  // The flags ("DRAIN", "NOT_RESPONDING", "DYNAMIC_NORM", ...), in reported order.
  std::vector<std::string> flags() const;
  bool has(const std::string& word) const;  // a base state or a flag
  // Drained or draining: DRAIN set, whatever the base state.
  bool drain() const { return has("DRAIN"); }
  // Runs or holds work: a job may be lost if this node goes away.
  bool busy() const {
    return has("ALLOCATED") || has("MIXED") || has("COMPLETING") || alloc_cpus > 0;
  }

  bool operator==(const Node&) const = default;
};

struct NodeList {
  std::vector<Node> nodes;
  std::optional<Time> last_update;  // slurmctld's time of the last node change
};

// Changes to a node; unset fields stay as they are.
struct NodeUpdate {
  std::vector<std::string> state;  // "DRAIN", "RESUME", "UNDRAIN", "DOWN", ...
  std::optional<std::string> reason;
  std::optional<std::vector<std::string>> features;
  std::optional<std::vector<std::string>> active_features;
  std::optional<std::string> comment;
  std::optional<std::string> topology;  // "" clears it
  std::optional<std::string> address;   // NodeAddr: where slurmctld reaches its slurmd
};

struct Job {
  int64_t id = 0;
  std::string name;
  std::vector<std::string> state;  // ["RUNNING"], ["PENDING"], ["CANCELLED"], ...
  std::string nodes;               // Slurm hostlist expression: "n[1-3]"
  std::string user;
  std::string account;
  std::string partition;
  std::string state_reason;  // why it waits: "Resources", "Priority", ...; "None" once running
  std::optional<Time> start_time;
  std::optional<std::chrono::minutes> time_limit;  // nullopt: unlimited
  std::optional<Time> end_time;
  std::vector<std::string> flags;  // "EXTERNAL_JOB", ...
  std::string admin_comment;       // set by administrators (and the bridge), never by users
  int64_t priority = 0;

  bool has(const std::string& word) const;
  bool external() const;
  // Still holds or waits for resources: PENDING, RUNNING, SUSPENDED or COMPLETING.
  bool active() const;
  bool operator==(const Job&) const = default;
};

struct JobList {
  std::vector<Job> jobs;
  std::optional<Time> last_update;
};

// A batch job to submit: the few fields the operator and its tests need, plus raw extras.
struct JobSubmission {
  std::string name;
  std::string partition;
  std::string script;  // "#!/bin/sh\n..."
  std::string working_directory;
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin"};
  int tasks = 1;
  std::vector<std::string> required_nodes;
  std::optional<std::chrono::minutes> time_limit;
  std::string reservation;
  bool exclusive = false;  // the node whole, whatever the job asks
};

// A job that runs outside slurmd (an EXTERNAL_JOB): Slurm allocates nodes and keeps the
// accounts, something else (the kubelet) runs the work. No script, no steps. One task per pod.
struct ExternalJob {
  std::string name;
  std::string partition;
  std::string account;
  std::string qos;
  std::string reservation;
  std::string constraints;
  std::string licenses;
  std::string wckey;
  std::string user;   // a user name or a numeric uid; the token's user must be SlurmUser
  std::string group;  // a group name or gid; empty: the user's
  std::string admin_comment;
  std::string mcs_label;
  int64_t tasks = 1;
  int64_t cpus_per_task = 0;       // 0: the partition's default
  int64_t memory_per_cpu_mib = 0;  // 0: the partition's default
  int64_t min_nodes = 1;
  int64_t max_nodes = 1;
  std::optional<int64_t> tasks_per_node;
  bool exclusive = true;                    // whole nodes
  std::vector<std::string> excluded_nodes;  // nodes the work could not run on
  std::string tres_per_task;                // "gres/gpu:2"
  std::optional<int64_t> priority;
  std::optional<std::chrono::minutes> time_limit;
};

// What a job holds on one node.
struct JobNodeAllocation {
  std::string node;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  bool operator==(const JobNodeAllocation&) const = default;
};

struct Partition {
  std::string name;
  std::string nodes;      // configured hostlist
  std::string node_sets;  // "ns1,ns2"
  std::vector<std::string> state;
  int64_t total_nodes = 0;
  int64_t total_cpus = 0;
};

struct Reservation {
  std::string name;
  std::string nodes;  // hostlist
  std::optional<Time> start_time;
  std::optional<Time> end_time;
  std::vector<std::string> flags;  // "MAINT", "IGNORE_JOBS", ...
  std::vector<std::string> users;
  std::string partition;
};

// Changes to a reservation; unset fields stay as they are.
struct ReservationUpdate {
  std::optional<std::string> nodes;
  std::optional<Time> start_time;
  std::optional<Time> end_time;
  std::optional<std::vector<std::string>> flags;  // "NO_<FLAG>" removes one
  std::optional<std::vector<std::string>> users;
};

struct Ping {
  std::string hostname;
  bool responding = false;
  std::string mode;  // "primary", "backup"
  bool primary = false;
  int64_t latency_us = 0;
};

struct Diag {
  int64_t server_thread_count = 0;
  int64_t agent_queue_size = 0;
  int64_t jobs_running = 0;
  int64_t jobs_pending = 0;
  int64_t schedule_cycle_last_us = 0;
  int64_t schedule_queue_length = 0;
  std::optional<Time> req_time;        // slurmctld's clock when it answered
  std::optional<Time> req_time_start;  // when slurmctld's statistics were reset (its start)
};

}  // namespace tightrope::slurm
