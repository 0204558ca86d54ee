// What the NodeSet tests and the NodeSet latency benchmark share: the bed's slurmctld as an
// external Controller (with the bed's keys in Secrets and a RestApi, so slurm-operator has a
// Slurm client), and NodeSets whose nodes join the bed's partition.
#pragma once

#include <cstdint>
#include <string>

#include "kube/client.hpp"

namespace tightrope::op::testing {

// Secrets slurm-key and jwt-key, Controller "slurm" (external: the bed's slurmctld) and
// RestApi "slurm" in `ns`; `controller_spec` is merged into the Controller's spec. Throws
// std::runtime_error with the API server's answer on failure.
void create_external_cluster(kube::Client& client, const std::string& ns,
                             const nlohmann::json& controller_spec = nlohmann::json::object());

// NodeSet `name` of Controller "slurm" with `replicas`; its nodes also carry the feature of the
// bed's partition, so jobs can run on them.
void create_nodeset(kube::Client& client, const std::string& ns, const std::string& name,
                    int64_t replicas, const nlohmann::json& annotations = nlohmann::json::object());

}  // namespace tightrope::op::testing
