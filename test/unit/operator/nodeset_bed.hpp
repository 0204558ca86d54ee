// A NodeSet's world for plan tests: pods running, ready and linked to idle Slurm nodes, each on
// its own Kubernetes Node, where nothing is to be done until a test changes it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/nodeset_plan.hpp"
#include "samples.hpp"

namespace tightrope::op::testing {

using nlohmann::json;

inline api::NodeSet nodeset(int replicas) {
  api::NodeSet n = api::testing::decoded(api::decode_nodeset(api::testing::yaml_to_json(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata: {name: cpu, namespace: hpc, uid: n-uid, generation: 3}
spec:
  controllerRef: {name: slurm}
  replicas: )" + std::to_string(replicas) + "\n")
                                                                 .front()));
  api::apply_defaults(n);
  return n;
}

inline const slurm::Time kNow = *kube::parse_time("2026-12-03T12:00:00Z");

// A world where every pod runs, is ready and linked to its idle Slurm node: nothing to do.
struct Bed {
  NodeSetWorld world;
  std::map<std::string, slurm::Node> nodes;
  std::map<int64_t, slurm::Job> jobs;

  explicit Bed(int replicas, int pods) {
    world.nodeset = nodeset(replicas);
    world.controller = testing::controller();
    world.now = kNow;
    const build::NodeSetInputs in{*world.controller};
    const std::string revision = build::nodeset_revision_name(world.nodeset, in);
    world.revisions = {{1, revision}};
    world.slurm.health = SlurmHealth::kSynced;
    world.finalizers = {std::string(api::kFinalizerNodeSetSlurmNodes)};
    for (int i = 0; i < pods; ++i) {
      const std::string name = "cpu-" + std::to_string(i);
      const std::string kube_node = "k8s-" + std::to_string(i);
      WorkerPod w;
      w.name = name;
      w.uid = "uid-" + name;
      w.ordinal = i;
      w.phase = "Running";
      w.kube_node = kube_node;
      w.target_node = kube_node;
      w.hostname = name;
      w.revision = revision;
      w.mode = "StatefulSet";
      w.ready = true;
      w.ready_since = "2026-12-03T11:00:00Z";
      w.created = "2026-12-03T10:00:0" + std::to_string(i) + "Z";
      w.slurm_conditions["SlurmNodeStateIdle"] = {"", "2026-12-03T11:00:00Z"};
      world.pods.push_back(w);
      slurm::Node node;
      node.name = name;
      node.state = {"IDLE", "DYNAMIC_NORM"};
      node.features = {"cpu"};
      node.active_features = {"cpu"};
      node.comment = build::pod_info(world.nodeset, name, kube_node).dump();
      nodes[name] = node;
      auto doc = std::make_shared<kube::Document>();
      doc->meta.name = kube_node;
      doc->doc = {{"metadata", {{"name", kube_node}}}, {"spec", json::object()}};
      world.kube_nodes[kube_node] = doc;
    }
  }

  NodeSetPlan plan() {
    world.slurm.snapshot = {std::make_shared<const std::map<std::string, slurm::Node>>(nodes),
                            std::make_shared<const std::map<int64_t, slurm::Job>>(jobs)};
    return plan_nodeset(world);
  }
};

template <typename T>
std::vector<T> all_of(const NodeSetPlan& plan) {
  std::vector<T> out;
  for (const auto& a : plan.actions) {
    if (const auto* c = std::get_if<T>(&a.change)) {
      out.push_back(*c);
    }
  }
  return out;
}

inline const Action* action_for(const NodeSetPlan& plan, const std::string& chain) {
  for (const auto& a : plan.actions) {
    if (a.chain == chain) {
      return &a;
    }
  }
  return nullptr;
}

}  // namespace tightrope::op::testing
