// What a Controller resource becomes: the cluster's slurm.conf (with a NodeSet and partition
// line for each NodeSet that names the Controller), a default cgroup.conf, the slurmctld
// StatefulSet, its headless and client Services, the ConfigMap of configuration files, and a
// ServiceMonitor when asked. Pure: the reconciler gathers the inputs and applies the objects.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.hpp"
#include "api/types.hpp"
#include "operator/build/topology.hpp"

namespace tightrope::op::build {

// What the Controller's objects are built from besides the Controller itself.
struct ControllerInputs {
  std::vector<api::NodeSet> nodesets;         // those whose controllerRef names this Controller
  std::optional<api::Accounting> accounting;  // the one spec.accountingRef names, when found
  // Data of the ConfigMaps in configFileRefs and the script refs, by ConfigMap name.
  std::map<std::string, std::map<std::string, std::string>> config_maps;
  std::string slurm_key_hash;  // sha256 of the auth/slurm key
  std::string jwt_key_hash;    // sha256 of the auth/jwt key
  GpuCliques gpu_cliques;      // from the Kubernetes Nodes' nvidia.com/gpu.clique labels
  // The shortest spec.passive.intervalSeconds of the HealthChecks that select one of the
  // nodesets; none: no HealthCheck does, and slurm.conf runs no health check program.
  std::optional<int64_t> health_check_interval;
};

// Slurm's HealthCheckProgram in the slurmd image (docs/health.md).
inline constexpr std::string_view kHealthCheckProgram = "/usr/local/sbin/tightrope-health";

// Names of what a Controller owns.
std::string controller_config_map_name(const api::Controller& c);        // <cr>-config
std::string controller_statefulset_name(const api::Controller& c);       // <cr>-controller
std::string controller_service_name(const api::Controller& c);           // <cr>-controller
std::string controller_headless_service_name(const api::Controller& c);  // ...-internal
// Its slurmctld pods, primary first: <statefulset>-0, and a backup each for HA; none for an
// external slurmctld.
std::vector<std::string> controller_pod_names(const api::Controller& c);
// Where slurmd, sackd and slurmrestd find slurmctld: "<service>.<ns>:6817", or the external
// host and port.
std::string controller_conf_server(const api::Controller& c);

// The parts of slurm.conf the operator owns: a user's extraConf may not set them.
std::vector<std::string> owned_slurm_conf_keys();

// Problems with the user's configuration that the schema cannot see: extraConf lines that do
// not parse or that set what the operator owns (with the line number), and configFileRefs
// ConfigMaps that hold slurm.conf. Empty when the Controller can be built.
api::FieldErrors check_controller_config(const api::Controller& c, const ControllerInputs& in);

// slurm.conf's MaxNodeCount, which bounds the dynamic nodes slurmctld accepts: twice the
// NodeSets' replicas rounded up to a power of two, at least kMinMaxNodeCount. The headroom and
// the rounding keep it steady (each change restarts slurmctld) while no fixed ceiling holds
// a cluster back; an admin's own MaxNodeCount in extraConf wins.
inline constexpr int64_t kMinMaxNodeCount = 1024;
int64_t max_node_count(const ControllerInputs& in);

std::string build_slurm_conf(const api::Controller& c, const ControllerInputs& in);
// CgroupPlugin=autodetect + IgnoreSystemd=yes (+ ConstrainCores, ConstrainRAMSpace,
// ConstrainSwapSpace and ConstrainDevices where a NodeSet asks for GPUs, with slurm.conf's
// TaskPlugin=task/cgroup), unless a referenced ConfigMap provides one.
std::optional<std::string> build_cgroup_conf(const ControllerInputs& in);

// Unless a referenced ConfigMap provides one: a global AutoDetect=off, and for each NodeSet
// that asks for GPUs (build/gpus.hpp) its nodes' AutoDetect and explicit lines.
std::optional<std::string> build_gres_conf(const api::Controller& c, const ControllerInputs& in);

// The ConfigMap "<cr>-config": slurm.conf and, by default, cgroup.conf, gres.conf and
// topology.yaml (build/topology.hpp).
nlohmann::json build_controller_config_map(const api::Controller& c, const ControllerInputs& in);
// The hash that rolls slurmctld when its configuration changes: the generated files and every
// referenced ConfigMap's data.
std::string controller_config_hash(const api::Controller& c, const ControllerInputs& in);

// Why the NodeSet's new pods must wait for slurmctld, or nullopt: a slurmd that registers before
// slurmctld runs a configuration with the NodeSet in it fetches the old files and is drained for
// good ("gres/gpu count reported lower than configured (0 < 4)"). The configuration has it when
// the Controller's ConfigMap has the NodeSet's NodeSet= line (and, for GPUs, its gres.conf
// heading with the current request), the StatefulSet's pod template carries the ConfigMap's
// hash, and the StatefulSet's pods are all at that template with one of them Ready. With
// inplaceReconfigure the template carries no hash: its sidecar reconfigures slurmctld within
// seconds of the kubelet updating the files, which this cannot see.
std::optional<std::string> slurmctld_lacks_nodeset(const api::NodeSet& n,
                                                   const nlohmann::json& config_map,
                                                   const nlohmann::json& statefulset);

nlohmann::json build_controller_statefulset(const api::Controller& c, const ControllerInputs& in);
nlohmann::json build_controller_headless_service(const api::Controller& c);
nlohmann::json build_controller_service(const api::Controller& c);
// A monitoring.coreos.com/v1 ServiceMonitor scraping slurmctld's /metrics/{jobs,nodes,
// partitions,scheduler} (or the endpoints the spec lists).
nlohmann::json build_controller_service_monitor(const api::Controller& c);

// Everything, in the order to apply it. External mode: the ConfigMap only (slurmrestd reads
// slurm.conf from it); no slurmctld here.
std::vector<nlohmann::json> build_controller_objects(const api::Controller& c,
                                                     const ControllerInputs& in,
                                                     bool service_monitor_crd_installed);

}  // namespace tightrope::op::build
