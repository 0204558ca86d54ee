// What the bridge caches of the Kubernetes objects it reads: projections of pods, Nodes, batch
// Jobs and Namespaces with the few fields its decisions use (kube/informer.hpp), so that ten
// thousand pending pods cost kilobytes each. Pure decoders; no I/O.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kube/object.hpp"

namespace tightrope::bridge {

// Whole-pod (or whole-node) amounts: CPU in thousandths, memory in bytes, GPUs by count
// (nvidia.com/gpu and amd.com/gpu).
struct Resources {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int64_t gpus = 0;
  bool operator==(const Resources&) const = default;
};

struct Toleration {
  std::string key;
  std::string op;  // "Equal" (default) or "Exists"
  std::string value;
  std::string effect;  // "" tolerates every effect
  bool operator==(const Toleration&) const = default;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  bool operator==(const Taint&) const = default;
};

using Annotations = std::map<std::string, std::string, std::less<>>;

struct Pod {
  kube::ObjectMeta meta;
  // Only the annotations the bridge reads: its own, the job options and the workload APIs'.
  Annotations annotations;
  std::string scheduler_name;
  std::string node_name;                // bound to
  std::string phase;                    // Pending, Running, Succeeded, Failed, Unknown
  bool finalizer = false;               // carries the bridge's finalizer
  std::vector<std::string> finalizers;  // all of them, the bridge's among them
  Resources requests;  // what one pod needs: containers, init containers and overhead
  std::vector<Toleration> tolerations;
  std::vector<std::pair<std::string, std::string>> node_selector;
  bool resource_claims = false;   // spec.resourceClaims: not supported
  std::string scheduled_message;  // the PodScheduled condition's message
  int64_t termination_grace_seconds = 30;

  const std::string* annotation(std::string_view key) const;
  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  bool bound() const { return !node_name.empty(); }
};
kube::DecodeResult decode_pod(simdjson::dom::element object, Pod* out);

struct Node {
  kube::ObjectMeta meta;
  Annotations annotations;  // the bridge's and Slinky's node annotations only
  bool unschedulable = false;
  std::vector<Taint> taints;
  Resources allocatable;
  bool ready = false;
  std::string address;  // its InternalIP: slurmctld never has to resolve a Node's name

  const std::string* annotation(std::string_view key) const;
  // Its name in Slurm: the slinky.slurm.net/slurm-nodename label, else the Node's name.
  std::string slurm_name() const;
  bool external() const;  // labelled to be registered as a Slurm external node
};
kube::DecodeResult decode_node(simdjson::dom::element object, Node* out);

// A batch/v1 Job: its job options and whether it is a gang (Indexed, all pods at once).
struct BatchJob {
  kube::ObjectMeta meta;
  Annotations annotations;  // slurmjob.slinky.slurm.net/* only
  int64_t parallelism = 1;
  int64_t completions = 1;
  bool indexed = false;
  int64_t active_deadline_seconds = 0;

  // One Slurm job for all its pods: Indexed, with every completion run at once.
  bool gang() const { return indexed && completions > 1 && parallelism == completions; }
};
kube::DecodeResult decode_batch_job(simdjson::dom::element object, BatchJob* out);

struct Namespace {
  kube::ObjectMeta meta;
  Annotations annotations;  // tightrope.slurm.net/slurm-user(s) only
};
kube::DecodeResult decode_namespace(simdjson::dom::element object, Namespace* out);

// The annotations of a JSON object's metadata whose keys start with one of `prefixes`
// (for a workload fetched whole).
Annotations annotations_of(const nlohmann::json& object, const std::vector<std::string>& prefixes);

}  // namespace tightrope::bridge
