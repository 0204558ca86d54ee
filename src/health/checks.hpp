// What a worker checks of itself for a HealthCheck (docs/health.md, "Passive checks"): its
// readings judged against what Slurm registered for the node, and the result as it travels to
// the operator, under one key of the node's Extra. Pure: tightrope-health gathers the readings
// and runs the commands; these functions judge and format.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace tightrope::health {

// spec.active, in checks.json or on the check job's command line: what `tightrope-health
// --active` runs.
struct ActiveConfig {
  std::vector<std::string> checks;  // of cpu, memory-bandwidth, nccl
  int64_t timeout_seconds = 120;
  int64_t min_cpu_gflops = 0;
  int64_t min_memory_bandwidth_mbps = 0;
  int64_t min_nccl_bus_bandwidth_gbps = 0;
  std::string nccl_tests;
  bool operator==(const ActiveConfig&) const = default;
};

// checks.json, which the operator writes from a HealthCheck's spec.passive into the ConfigMap
// every slurmd pod of a selected NodeSet mounts.
struct Config {
  int64_t interval_seconds = 60;
  int64_t timeout_seconds = 30;
  // By when the program must have finished (slurmd kills it at HealthCheckTimeout): it starts
  // no check after that.
  int64_t deadline_seconds = 50;
  std::vector<std::string> checks;  // of mounts, memory, cpus, gpus, dcgm
  std::vector<std::string> mounts;
  std::string dcgm_host;  // dcgmi --host; "" for dcgmi's default (this machine)
  // The HealthCheck these checks come from (its uid): a report carries it, so that the operator
  // acts only on what this HealthCheck's checks found, never on the report of one deleted since.
  std::string source;
  // spec.active: what the check job (`tightrope-health --active`) runs; none unless asked for.
  std::optional<ActiveConfig> active;
  bool operator==(const Config&) const = default;
};
Result<Config, std::string> parse_config(std::string_view text);

// What slurmctld holds of the node: `scontrol show node <name> --json`.
struct Registered {
  bool known = false;  // the answer named the node
  int64_t cpus = 0;
  int64_t real_memory_mib = 0;
  int64_t gpus = 0;  // the counts of every gpu entry of Gres=
  std::string extra;
  bool operator==(const Registered&) const = default;
};
Registered parse_node_json(std::string_view text);

struct MountReading {
  std::string path;
  bool mounted = false;   // a mount point of /proc/self/mountinfo
  bool answered = false;  // statfs returned within the timeout
  std::string error;      // statfs's error, when it returned one
};

struct ScriptResult {
  std::string name;
  int exit_code = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr
};

// What DCGM's health watches say (`dcgmi health --check --json`): the overall verdict
// ("Healthy", "Warning", "Failure") and each incident, e.g. GPU 3's Memory: Failure with
// DCGM's own words.
struct DcgmIncident {
  std::string entity;  // "GPU 3", "NvSwitch 0"
  std::string system;  // "Memory", "PCIe", "NVLink", ...
  std::string health;  // "Warning", "Failure"
  std::string message;
  bool operator==(const DcgmIncident&) const = default;
};
struct DcgmHealth {
  std::string overall;
  std::vector<DcgmIncident> incidents;
  bool operator==(const DcgmHealth&) const = default;
};
// nullopt when the text is not such a report (dcgmi said an error instead).
std::optional<DcgmHealth> parse_dcgm_health(std::string_view text);

struct DcgmReading {
  std::optional<DcgmHealth> health;  // nullopt: DCGM did not answer with a report
  std::string said;                  // dcgmi's words when it did not
};

struct Readings {
  int64_t cpus = 0;        // CPUs this container may run on
  int64_t memory_mib = 0;  // MemTotal
  // GPUs present: the driver's list (each with its device file), else /dev/nvidia<N>; nothing
  // when the machine shows neither.
  std::optional<int64_t> gpus;
  std::vector<MountReading> mounts;
  std::vector<ScriptResult> scripts;
  // DCGM's health: nullopt where the machine has no dcgmi (no DCGM, nothing to ask).
  std::optional<DcgmReading> dcgm;
};

struct Finding {
  std::string check;  // "gpus", "script:ib-ports"
  std::string message;
  bool operator==(const Finding&) const = default;
};
std::vector<Finding> judge(const Config& config, const Registered& registered,
                           const Readings& readings);

// The result in the node's Extra: {"tightrope.slurm.net/health": {"ok":..,"at":..,"failed":[..]}}.
inline constexpr std::string_view kExtraKey = "tightrope.slurm.net/health";
// The active checks' result, under a key of its own: the passive runs keep it as it is.
inline constexpr std::string_view kActiveExtraKey = "tightrope.slurm.net/health-active";
struct Report {
  bool ok = true;
  int64_t at = 0;  // unix seconds: when this container first found this result
  std::vector<Finding> failed;
  std::string source;  // Config::source of the checks that found it
  // Active checks: what they measured ("cpuGflops", "memoryBandwidthMBps", ...) and the checks
  // that did not run, with why (no GPU, no all_reduce_perf).
  std::map<std::string, double> measured;
  std::vector<Finding> skipped;
  bool operator==(const Report&) const = default;
};
Report report_of(const std::vector<Finding>& findings, int64_t now, const std::string& source);
std::optional<Report> read_report(std::string_view extra, std::string_view key = kExtraKey);
// `extra` with `report` under `key` and every other key kept. An Extra that is not a JSON
// object (a site's own text) is kept under "text", so nothing is lost.
std::string with_report(std::string_view extra, const Report& report,
                        std::string_view key = kExtraKey);
// Same verdict and findings of the same checks, whenever found.
bool same_result(const Report& a, const Report& b);

}  // namespace tightrope::health
