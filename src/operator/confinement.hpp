// Whether Slurm confines a NodeSet's jobs with cgroups: what the Controller's files ask of slurmd
// and what each host lets it do. The operator cannot see a host's cgroups; the slurmd image's
// entrypoint probes them and passes its findings as the node's Extra (`slurmd --extra`), which
// slurmrestd reports. Pure functions: the NodeSet controller feeds them its Controller's
// ConfigMaps and its nodes, and publishes the result as the JobsConfined condition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op {

// The key of the entrypoint's findings in a node's Extra JSON object.
inline constexpr std::string_view kHostExtraKey = "tightrope.slurm.net/host";

// How slurm.conf and cgroup.conf tell slurmd to track and hold jobs.
struct ConfinementConfig {
  std::string proctrack;           // ProctrackType; Slurm's default (proctrack/cgroup) when unset
  std::string task_plugins;        // TaskPlugin as written; "" when unset (no task plugin)
  std::string cgroup_plugin;       // cgroup.conf's CgroupPlugin; "autodetect" when unset
  bool constrain_ram = false;      // cgroup.conf ConstrainRAMSpace=yes
  bool constrain_devices = false;  // cgroup.conf ConstrainDevices=yes

  bool cgroups_disabled() const;  // CgroupPlugin=disabled
  bool proctrack_cgroup() const;  // jobs tracked by cgroup
  bool task_cgroup() const;       // jobs held to their CPUs (and memory) by cgroup
  bool needs_cgroups() const { return proctrack_cgroup() || task_cgroup(); }
};

// From the files slurmd reads: `cgroup_conf` nullopt when there is none (Slurm's defaults).
ConfinementConfig confinement_config(std::string_view slurm_conf,
                                     std::optional<std::string_view> cgroup_conf);

// One host as its slurmd's entrypoint found it.
struct HostCgroups {
  std::string cgroup;     // "v1", "v2", "none"
  bool writable = false;  // slurmd can make cgroups there
  bool memory = false;    // the memory controller is there
  int64_t oom_score_adj = 0;
  bool oom_protect = false;  // slurmstepd can lower its oom_score_adj below the container's
  bool oom_even = false;     // else it goes where its tasks go (SLURMSTEPD_OOM_ADJ=0)
  // The container's cgroups were mounted read-only (it is not privileged) and the entrypoint
  // made them writable (CAP_SYS_ADMIN).
  bool remounted = false;
  // slurmd can hold a job to its devices: on v1 it may write devices.allow/deny
  // (CAP_SYS_ADMIN), on v2 load and attach a cgroup_device eBPF program (CAP_BPF, CAP_NET_ADMIN).
  // nullopt from an image that does not say.
  std::optional<bool> devices;

  bool operator==(const HostCgroups&) const = default;
};

// The findings in a node's Extra; nullopt when it has none (an image without the probe, or an
// Extra that a NodeSet's own --extra replaced).
std::optional<HostCgroups> host_cgroups(std::string_view extra);

struct NodeCgroups {
  std::string node;  // the Slurm node name
  std::optional<HostCgroups> host;
};

// The JobsConfined condition (type, status, reason, message; times are the caller's):
//   True  CgroupsEnforced    task/cgroup holds jobs on every node that reported
//   False HostCannotConfine  a node has no cgroups slurmd can write, or no memory controller
//                            while ConstrainRAMSpace=yes
//   False DevicesUnconfined  ConstrainDevices=yes, and a node's slurmd cannot set up a device
//                            filter (a container without the capabilities it needs)
//   False OomUnprotected     ConstrainRAMSpace=yes, and a node's slurmstepd keeps the score of a
//                            container without a memory request (999 or 1000; no
//                            CAP_SYS_RESOURCE to lower it)
//   False NotConfigured      the files do not ask for task/cgroup (what the hosts could do is
//                            said, so the way up is plain)
//   Unknown NotReported      cgroups are asked for, and no node has reported yet
api::Condition jobs_confined(const ConfinementConfig& config,
                             const std::vector<NodeCgroups>& nodes);

}  // namespace tightrope::op
