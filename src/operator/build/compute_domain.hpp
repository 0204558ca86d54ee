// IMEX for multi-node NVLink. A NodeSet that asks for it (annotation
// tightrope.slurm.net/compute-domain: "true") gets a ComputeDomain of its own from NVIDIA's DRA
// driver (resource.nvidia.com/v1beta1), with every IMEX channel of the domain
// (allocationMode All). Every worker pod claims the channels through the ResourceClaimTemplate
// the driver makes for the domain. Slurm's switch/nvidia_imex then hands each job one channel.
// Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/types.hpp"

namespace tightrope::op::build {

inline constexpr std::string_view kComputeDomainApiVersion = "resource.nvidia.com/v1beta1";
// The pod's claim and the slurmd container's use of it: Slinky's documented names.
inline constexpr std::string_view kComputeDomainClaim = "compute-domain-channel";

bool wants_compute_domain(const api::NodeSet& n);
std::string compute_domain_name(const api::NodeSet& n);    // <nodeset>-imex
std::string channel_template_name(const api::NodeSet& n);  // <nodeset>-imex-channel

// The ComputeDomain, owned by the NodeSet (it goes with it). Its spec is immutable: it is made
// once, never patched.
nlohmann::json build_compute_domain(const api::NodeSet& n);

// Adds the channel claim to a worker pod (spec.resourceClaims and the slurmd container's
// resources.claims), unless the template already claims one of that name (wired by hand, as
// Slinky's documentation does it).
void add_channel_claim(const api::NodeSet& n, nlohmann::json& pod);

}  // namespace tightrope::op::build
