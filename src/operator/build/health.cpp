#include "operator/build/health.hpp"

#include <algorithm>

#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "operator/build/common.hpp"
#include "operator/build/nodeset.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op::build {

using nlohmann::json;

const api::HealthCheck* selecting_health_check(const std::vector<api::HealthCheck>& checks,
                                               const api::NodeSet& n) {
  const api::HealthCheck* found = nullptr;
  for (const auto& h : checks) {
    if (h.metadata.deleting || h.metadata.namespace_name != n.metadata.namespace_name ||
        !h.spec.node_set_selector.matches(n.metadata.labels)) {
      continue;
    }
    if (found == nullptr || h.metadata.name < found->metadata.name) {
      found = &h;
    }
  }
  return found;
}

std::string site_health_check_program(const api::Controller& c) {
  auto extra = slurm::parse_slurm_conf(c.spec.extra_conf, "extraConf");
  if (!extra) {
    return "";
  }
  std::string program;
  for (const auto& line : extra->lines()) {
    if (line.kind != slurm::ConfLine::Kind::kSetting) {
      continue;
    }
    for (const auto& [key, value] : line.pairs) {
      if (lower(key) == "healthcheckprogram") {
        program = value;
      }
    }
  }
  return program;
}

int64_t health_check_timeout(int64_t interval) {
  return std::clamp<int64_t>(interval * 3 / 4, 5, 60);
}

std::string health_checks_json(const api::HealthCheck& h, int64_t cluster_interval) {
  api::HealthCheck defaulted = h;
  api::apply_defaults(defaulted);
  const api::PassiveChecks& p = defaulted.spec.passive;
  // Time to report what ran before slurmd kills the program.
  const int64_t deadline = std::max<int64_t>(health_check_timeout(cluster_interval) - 3, 2);
  json doc = {{"intervalSeconds", p.interval_seconds},
              {"timeoutSeconds", p.timeout_seconds},
              {"deadlineSeconds", deadline},
              {"checks", p.checks},
              {"mounts", p.mounts},
              {"source", h.metadata.uid}};
  if (!p.dcgm_host.empty()) {
    doc["dcgmHost"] = p.dcgm_host;
  }
  if (const auto& a = defaulted.spec.active) {
    doc["active"] = active_checks_json(*a);
  }
  return doc.dump();
}

json active_checks_json(const api::ActiveChecks& a) {
  return {{"checks", a.checks},
          {"timeoutSeconds", a.timeout_seconds},
          {"minCpuGflops", a.min_cpu_gflops},
          {"minMemoryBandwidthMBps", a.min_memory_bandwidth_mbps},
          {"minNcclBusBandwidthGBps", a.min_nccl_bus_bandwidth_gbps},
          {"ncclTests", a.nccl_tests}};
}

json build_health_config_map(const api::NodeSet& n, const api::HealthCheck& h,
                             const std::map<std::string, std::string>& scripts,
                             int64_t cluster_interval) {
  json labels = component_labels("slurmd", n.metadata.name, "worker");
  labels[api::kLabelCluster] = n.spec.controller_ref.name;
  json data = json::object();
  data["checks.json"] = health_checks_json(h, cluster_interval);
  for (const auto& [key, text] : scripts) {
    data["script." + key] = text;
  }
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", object_meta(nodeset_health_config_name(n), n.metadata.namespace_name, labels,
                                   {"HealthCheck", h.metadata.name, h.metadata.uid})},
          {"data", data}};
}

std::optional<int64_t> health_check_interval(const std::vector<api::HealthCheck>& checks,
                                             const std::vector<api::NodeSet>& nodesets) {
  std::optional<int64_t> out;
  for (const auto& n : nodesets) {
    if (n.metadata.deleting) {
      continue;
    }
    if (const api::HealthCheck* h = selecting_health_check(checks, n)) {
      const int64_t interval = h->spec.passive.interval_seconds > 0
                                   ? h->spec.passive.interval_seconds
                                   : api::kDefaultHealthInterval;
      out = std::min(out.value_or(interval), interval);
    }
  }
  return out;
}

}  // namespace tightrope::op::build
