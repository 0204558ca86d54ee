// Where Kubernetes can run a group's pods, and which pod goes where once Slurm has allocated.
// Slurm decides; Kubernetes' own constraints (taints, node selectors, what a Node can hold at
// all, whether it is Ready) become the job's excluded nodes, so that Slurm never picks a node
// the kubelet would refuse. Pure; no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bridge/objects.hpp"

namespace tightrope::bridge {

// Why `pod` cannot run on `node`, or "" when it can. The bridge's own taint is not a reason:
// every pod the bridge places tolerates it.
std::string unfit_reason(const Pod& pod, const Node& node);

// The Slurm names of the `nodes` some pod of the group cannot run on, sorted.
std::vector<std::string> excluded_nodes(const std::vector<const Pod*>& pods,
                                        const std::vector<const Node*>& nodes);

// A node of a job's allocation: its Kubernetes Node and how many of the job's pods it takes.
struct Slot {
  std::string node;
  int64_t pods = 1;
};

// The Kubernetes Node of each pod not yet bound, by pod name: pods already bound keep theirs
// (and use up a place there), the others fill the slots in order, pods in completion-index
// order, then by name. A pod left without a place is left out.
std::map<std::string, std::string> assign_pods(const std::vector<const Pod*>& pods,
                                               const std::vector<Slot>& slots);

// Whether `pod` tolerates the bridge's taint on nodes of scheduler `scheduler_name`.
bool tolerates_bridge(const Pod& pod, std::string_view scheduler_name);

}  // namespace tightrope::bridge
