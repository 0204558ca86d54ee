// NVLink cliques as Slurm blocks: the clique label read and checked, topology.yaml built from
// the Nodes' cliques (and left to an administrator who brings one), a Slurm node's topology from
// its Node, and the partition of a NodeSet on cliques scheduling on the blocks.
#include "operator/build/topology.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "operator/build/controller.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

// The cliques the bed's slurmctld declares (scripts/testbed TOPOLOGY_YAML), which
// integration_nodeset labels its Nodes with.
const std::string kUuid = "5e1f0c2a-7d3b-4c8e-9a61-0b2d4f6e8a10";

json node(const std::string& name, const std::string& clique = "",
          const std::string& topology_annotation = "") {
  json n = {{"metadata", {{"name", name}, {"labels", json::object()}}}};
  if (!clique.empty()) {
    n["metadata"]["labels"]["nvidia.com/gpu.clique"] = clique;
  }
  if (!topology_annotation.empty()) {
    n["metadata"]["annotations"]["topology.slinky.slurm.net/spec"] = topology_annotation;
  }
  return n;
}

build::ControllerInputs six_nodes_in_two_cliques() {
  std::vector<json> nodes;
  for (int i = 1; i <= 6; ++i) {
    nodes.push_back(node("bed-node-" + std::to_string(i), kUuid + (i <= 3 ? ".1" : ".2")));
  }
  nodes.push_back(node("cpu-node"));
  std::vector<const json*> docs;
  for (const auto& n : nodes) {
    docs.push_back(&n);
  }
  build::ControllerInputs in;
  in.gpu_cliques = build::gpu_cliques(docs);
  return in;
}

TEST(GpuClique, TheLabelIsTheBlockAndAnOddOneIsLeftOutWithWhy) {
  EXPECT_EQ(build::clique_block(node("a", kUuid + ".1")), kUuid + ".1");
  EXPECT_EQ(build::clique_block(node("a")), std::nullopt);
  for (const std::string odd : {"1", "abc.", ".3", "abc.x", "a_b.1"}) {
    std::string why;
    EXPECT_EQ(build::clique_block(node("a", odd), &why), std::nullopt) << odd;
    EXPECT_NE(why.find("not <ClusterUUID>.<CliqueID>"), std::string::npos) << odd;
  }
  const json odd = node("n9", "stray");
  const build::GpuCliques cliques = build::gpu_cliques({&odd});
  EXPECT_TRUE(cliques.nodes_per_block.empty());
  ASSERT_EQ(cliques.odd.count("n9"), 1U);
}

TEST(GpuClique, TopologyYamlHasAFlatDefaultAndOneBlockPerClique) {
  const auto in = six_nodes_in_two_cliques();
  EXPECT_EQ(in.gpu_cliques.nodes_per_block.size(), 2U);
  const auto yaml = build::build_topology_yaml(testing::controller(), in);
  ASSERT_TRUE(yaml);
  EXPECT_NE(yaml->find("- topology: flat\n  cluster_default: true\n  flat: true\n"),
            std::string::npos)
      << *yaml;
  const std::string nvlink =
      "- topology: nvlink\n  cluster_default: false\n  block:\n"
      "    block_sizes: [3]\n    blocks:\n"
      "      - block: \"" +
      kUuid + ".1\"\n      - block: \"" + kUuid + ".2\"\n";
  EXPECT_NE(yaml->find(nvlink), std::string::npos) << *yaml;
  EXPECT_EQ(build::topology_blocks(*yaml), (std::set<std::string>{kUuid + ".1", kUuid + ".2"}));

  // The bed's slurmctld declares the same topology, so the integration tests put nodes into
  // what the operator would generate.
  std::ifstream bed(api::testing::source_dir() / "scripts/testbed");
  std::stringstream text;
  text << bed.rdbuf();
  EXPECT_NE(text.str().find(nvlink), std::string::npos) << "scripts/testbed TOPOLOGY_YAML lacks:\n"
                                                        << nvlink;
}

TEST(GpuClique, NoCliquesOrTheAdministratorsTopologyMeansNoFile) {
  EXPECT_EQ(build::build_topology_yaml(testing::controller(), {}), std::nullopt);
  auto in = six_nodes_in_two_cliques();
  in.config_maps["site-topology"] = {{"topology.conf", "SwitchName=s0 Nodes=n[1-4]\n"}};
  EXPECT_EQ(build::build_topology_yaml(testing::controller(), in), std::nullopt);
}

TEST(GpuClique, ANodesTopologyIsItsAnnotationElseItsCliquesBlock) {
  const std::set<std::string> blocks = {kUuid + ".1"};
  EXPECT_EQ(build::node_topology(node("a", kUuid + ".1"), blocks), "nvlink:" + kUuid + ".1");
  // Not (yet) in the file: Slurm would refuse it.
  EXPECT_EQ(build::node_topology(node("a", kUuid + ".7"), blocks), "");
  EXPECT_EQ(build::node_topology(node("a", kUuid + ".1", "topo-block:b1"), blocks),
            "topo-block:b1");
  EXPECT_EQ(build::node_topology(node("a"), blocks), "");
}

api::NodeSet nodeset(const std::string& template_spec, const std::string& partition_config = "") {
  return api::testing::decoded(api::decode_nodeset(
      api::testing::yaml_to_json("apiVersion: slinky.slurm.net/v1beta1\n"
                                 "kind: NodeSet\n"
                                 "metadata: {name: gb200, namespace: hpc, uid: u}\n"
                                 "spec:\n"
                                 "  controllerRef: {name: slurm}\n"
                                 "  partition: {enabled: true, config: \"" +
                                 partition_config +
                                 "\"}\n"
                                 "  template:\n    spec:\n" +
                                 template_spec)
          .front()));
}

TEST(GpuClique, APartitionOfANodeSetOnCliquesSchedulesOnTheBlocks) {
  const std::string exists =
      "      affinity:\n        nodeAffinity:\n"
      "          requiredDuringSchedulingIgnoredDuringExecution:\n"
      "            nodeSelectorTerms:\n"
      "              - matchExpressions:\n"
      "                  - {key: nvidia.com/gpu.clique, operator: Exists}\n";
  EXPECT_TRUE(build::nodeset_on_cliques(nodeset(exists)));
  EXPECT_TRUE(build::nodeset_on_cliques(
      nodeset("      nodeSelector: {nvidia.com/gpu.clique: " + kUuid + ".1}\n")));
  EXPECT_FALSE(build::nodeset_on_cliques(
      nodeset("      nodeSelector: {nvidia.com/gpu.product: NVIDIA-GB200}\n")));

  auto in = six_nodes_in_two_cliques();
  in.nodesets = {nodeset(exists)};
  EXPECT_NE(build::build_slurm_conf(testing::controller(), in)
                .find("PartitionName=gb200 Nodes=gb200 Topology=nvlink\n"),
            std::string::npos);
  // Its own topology wins; without cliques there are no blocks to schedule on.
  in.nodesets = {nodeset(exists, "Topology=flat")};
  EXPECT_NE(build::build_slurm_conf(testing::controller(), in)
                .find("PartitionName=gb200 Nodes=gb200 Topology=flat\n"),
            std::string::npos);
  in.nodesets = {nodeset(exists)};
  in.gpu_cliques = {};
  EXPECT_NE(
      build::build_slurm_conf(testing::controller(), in).find("PartitionName=gb200 Nodes=gb200\n"),
      std::string::npos);
}

}  // namespace
}  // namespace tightrope::op
