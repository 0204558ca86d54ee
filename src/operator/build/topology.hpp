// NVLink topology: GPU Feature Discovery labels each Node of a multi-node NVLink domain with
// nvidia.com/gpu.clique ("<ClusterUUID>.<CliqueID>"); each clique becomes a block of Slurm's
// topology/block, in a topology named "nvlink" beside a flat cluster default, so that a job's
// segments (`--segment`) land inside one NVLink domain. Nodes join their block dynamically
// (scontrol's Topology=nvlink:<block>): the file changes only when the set of cliques does.
// Pure.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "api/types.hpp"

namespace tightrope::op::build {

struct ControllerInputs;

inline constexpr std::string_view kNvlinkTopology = "nvlink";
inline constexpr std::string_view kTopologyFile = "topology.yaml";

// The block of a Node (a Kubernetes Node document) from its clique label; nullopt without one.
// An odd value (not "<ClusterUUID>.<CliqueID>") is no block either, and `problem` says why.
std::optional<std::string> clique_block(const nlohmann::json& node, std::string* problem = nullptr);

// What the generated topology.yaml holds, from the Nodes' clique labels: Nodes per block, and
// the Nodes left out for an odd label (with why).
struct GpuCliques {
  std::map<std::string, int64_t> nodes_per_block;
  std::map<std::string, std::string> odd;  // Node -> why it was left out
  bool operator==(const GpuCliques&) const = default;
};
GpuCliques gpu_cliques(const std::vector<const nlohmann::json*>& nodes);

// topology.yaml: a flat cluster default and the "nvlink" block topology, one block per clique,
// its base block size the largest clique's Node count. nullopt without cliques, or when a
// referenced ConfigMap brings topology.yaml or topology.conf (the administrator's topology).
std::optional<std::string> build_topology_yaml(const api::Controller& c,
                                               const ControllerInputs& in);

// The blocks a generated topology.yaml declares ("- block: <name>" lines).
std::set<std::string> topology_blocks(const std::string& topology_yaml);

// A Slurm node's topology from its Kubernetes Node: the topology.slinky.slurm.net/spec
// annotation (NVIDIA Topograph writes it) wins; else "nvlink:<block>" when the Node's clique is
// one of `blocks`; else "" (leave Slurm's as it is).
std::string node_topology(const nlohmann::json& node, const std::set<std::string>& blocks);

// A NodeSet whose pods go only to Nodes with a clique label (nodeSelector, or a required node
// affinity on nvidia.com/gpu.clique): its partition schedules on the nvlink topology.
bool nodeset_on_cliques(const api::NodeSet& n);

}  // namespace tightrope::op::build
