// What the bridge does about one group of pods, or one Node, given what both sides show: pure
// decisions, so that every rule of the pod ↔ job and Node ↔ Slurm node lifecycles is a unit
// test. The runtime (bridge.hpp) gathers the state, carries the actions out and looks again
// when either side changes.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bridge/objects.hpp"
#include "bridge/placement.hpp"
#include "slurm/model.hpp"

namespace tightrope::bridge {

// A Slurm job as the bridge sees it: from the change feed, or asked for directly (`known` false
// when Slurm does not have it at all: it ended and was purged, or was never there).
struct JobView {
  slurm::Job job;
  bool known = true;
};

struct GroupState {
  std::vector<const Pod*> pods;  // every cached pod of the group, being deleted or not
  int64_t size = 1;              // pods needed before the group is submitted
  // The jobs the pods' labels name, and jobs whose claim names the group but no pod (submitted
  // just before a restart, say), by id.
  std::map<int64_t, JobView> jobs;
  // Nodes, by name, that bound pods are on: a pod being deleted on a Node that is gone or not
  // Ready will never report an end.
  std::map<std::string, const Node*> nodes;
};

struct GroupPlan {
  // Jobs to cancel, with why (pods ended, pods deleted).
  std::vector<std::pair<int64_t, std::string>> cancel;
  // Pods to submit as one new job (none: nothing to submit).
  std::vector<const Pod*> submit;
  // Pods to label with an existing job they are claimed by (recovery after a restart).
  std::vector<std::pair<const Pod*, int64_t>> adopt;
  // Running jobs whose pods wait for a Node: their ids (the runtime reads where Slurm put them).
  std::vector<int64_t> place;
  // Pods to delete, with why (their job ended).
  std::vector<std::pair<const Pod*, std::string>> remove;
  // Pods whose finalizer can go: their job is settled.
  std::vector<const Pod*> release;
  // Pods to tell why they wait (their PodScheduled condition's message), when it changed.
  std::vector<std::pair<const Pod*, std::string>> waiting;
};

GroupPlan plan_group(const GroupState& state);

// Slurm's words for why a job waits, as a sentence end for pods: "Resources" →
// "waits for resources".
std::string pending_reason(const slurm::Job& job);

// A Node and its Slurm node, as the bridge sees them.
struct NodeState {
  const Node* node = nullptr;          // null: no such Node (deleted)
  const slurm::Node* slurm = nullptr;  // null: not in Slurm
  std::string scheduler_name;
  std::string default_partition;  // the feature a node gets when its annotation names none
};

struct NodePlan {
  std::optional<std::string> create;  // a node_conf line
  bool remove = false;                // delete the Slurm node
  std::optional<std::string> drain;   // with this reason
  bool undrain = false;
  bool taint = false;                 // add the bridge's taint to the Node
  bool untaint = false;               // remove it
  std::optional<std::string> cordon;  // cordon the Node for this Slurm drain reason
  bool uncordon = false;
  std::string note;  // what stays as it is and why (logged once, an Event)
};

inline constexpr std::string_view kDrainReasonPrefix = "slurm-bridge: ";

NodePlan plan_node(const NodeState& state);

// The slurm.conf line that registers `node` as an external node.
std::string node_conf(const Node& node, const std::string& default_partition);

}  // namespace tightrope::bridge
