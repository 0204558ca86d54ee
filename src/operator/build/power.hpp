// Power saving (docs/power-saving.md): a NodeSet whose Slurm nodes Slurm powers down when idle
// and up for the jobs it gives them. slurmctld knows each of its nodes up to spec.replicas as a
// CLOUD record, powered down; the operator runs a pod for each node Slurm powers up and deletes
// the pod of each node it powers down. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/codec.hpp"
#include "api/types.hpp"
#include "base/result.hpp"

namespace tightrope::op::build {

// What Slurm is told of a power-saved NodeSet's partition, in seconds.
struct PowerSaving {
  int64_t suspend_time = 0;      // idle this long: powered down (SuspendTime)
  int64_t resume_timeout = 300;  // a pod's pull and start included (ResumeTimeout)
  int64_t suspend_timeout = 30;  // SuspendTimeout
  bool operator==(const PowerSaving&) const = default;
};

// The NodeSet's power saving, from its tightrope.slurm.net/*-seconds annotations; nullopt
// without suspend-time-seconds. An error names the field: a value that is not a whole number
// of seconds in range, DaemonSet mode (its pods follow Nodes, not Slurm), a slurmd container
// without cpu and memory limits (the size Slurm is told before any pod exists).
Result<std::optional<PowerSaving>, api::FieldError> nodeset_power_saving(const api::NodeSet& n);

// True when the NodeSet has a valid power saving.
bool power_saved(const api::NodeSet& n);

// The line that makes the powered-down Slurm node of `ordinal` (slurmrestd's /new/node):
// "NodeName=slinky-0 State=CLOUD CPUs=4 RealMemory=8192 Features=slinky Gres=...", its size
// from the slurmd container's limits unless spec.extraConf says. slurmctld keeps what the
// record says over what slurmd registers with, so it is what the pod gets.
Result<std::string, std::string> cloud_node_record(const api::NodeSet& n, int64_t ordinal);

}  // namespace tightrope::op::build
