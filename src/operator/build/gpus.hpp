// A NodeSet's GPUs: what its slurmd pods ask Kubernetes for (an `nvidia.com/gpu` limit, as GPU
// Operator users write it) and what Slurm is told of them (a `gpu` item in slurmd's Gres=, and
// the NodeSet's lines in the generated gres.conf). Pure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.hpp"
#include "api/types.hpp"
#include "base/result.hpp"

namespace tightrope::op::build {

inline constexpr std::string_view kResourceGpu = "nvidia.com/gpu";

// How slurmd finds the devices behind its GPUs, in gres.conf's words.
inline constexpr std::string_view kDefaultGresAutodetect = "full";

struct GpuRequest {
  int64_t limit = 0;      // nvidia.com/gpu limit of the slurmd container; 0: none asked for
  std::string type;       // Slurm GRES type, "" when untyped
  std::string type_from;  // where the type came from, for messages
  std::string item;       // the gpu item of slurmd's Gres= ("gpu:nvidia_h100_80gb_hbm3:4"), or ""
  bool from_extra_conf = false;              // the administrator wrote the item in spec.extraConf
  std::string autodetect;                    // gres.conf AutoDetect for its nodes
  std::vector<std::string> gres_conf_lines;  // explicit gres.conf lines, without NodeName=
  // No count: slurmd registers what autodetection finds (the annotation asked for it).
  bool autodetect_only = false;
  bool wants_gpus() const { return !item.empty(); }
  // The NodeSet's nodes get lines in gres.conf.
  bool in_gres_conf() const { return wants_gpus() || autodetect_only; }
};

// A resources.limits entry of the slurmd container: where it was found, and its value.
struct SlurmdLimit {
  std::string field;
  std::string resource;
  nlohmann::json value;
};

// The slurmd container's limit of the resource `matches` picks, as the pod gets it: the
// template's slurmd container is merged over spec.slurmd, so its limit wins.
std::optional<SlurmdLimit> slurmd_limit(const api::NodeSet& n,
                                        const std::function<bool(std::string_view)>& matches);

// The Slurm GRES type of a GPU Feature Discovery `nvidia.com/gpu.product` label: lower case, '-'
// made '_' ("NVIDIA-H100-80GB-HBM3" -> "nvidia_h100_80gb_hbm3", what Slurm's autodetection calls
// it). nullopt for a shared (time-sliced, "-SHARED") or MIG ("-MIG-<profile>") product, whose
// count is not the count of whole GPUs.
std::optional<std::string> slurm_gpu_type(std::string_view product);

// What the NodeSet asks for, read from its slurmd container's limits, spec.extraConf's Gres=, its
// template's nodeSelector/affinity on nvidia.com/gpu.product and its tightrope.slurm.net/gpu-*
// annotations. A request that would register GPUs a pod is not given is an error naming the
// field: more GPUs in Gres= than the limit, a limit that is not a whole number, a shared or MIG
// product.
Result<GpuRequest, api::FieldError> nodeset_gpus(const api::NodeSet& n);

// The Slurm hostlist of every node name the NodeSet's pods can take in StatefulSet mode
// ("gpu-[0-1023]", zero-padded as spec.ordinalPadding says), for gres.conf's NodeName=.
std::string nodeset_hostlist(const api::NodeSet& n, int64_t max_node_count);

}  // namespace tightrope::op::build
