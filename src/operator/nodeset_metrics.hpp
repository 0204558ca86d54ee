// A NodeSet's status as Prometheus gauges, for dashboards and alerts that need no access to the
// Kubernetes API: replicas wanted, ready and updated, its Slurm nodes by state, and each
// condition (kube-state-metrics' shape: one series per possible status, 1 for the current one).
// Set after each reconcile from what it published; dropped when the NodeSet is gone.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "base/metrics.hpp"

namespace tightrope::op {

class NodeSetMetrics {
 public:
  explicit NodeSetMetrics(metrics::Registry& registry);

  // `status` as published (desired, readyReplicas, updatedReplicas, slurmIdle, ...) and every
  // condition, Ready included.
  void report(const std::string& ns, const std::string& nodeset, const nlohmann::json& status,
              const std::vector<api::Condition>& conditions);
  void forget(const std::string& ns, const std::string& nodeset);

 private:
  metrics::GaugeFamily& desired_;
  metrics::GaugeFamily& ready_;
  metrics::GaugeFamily& updated_;
  metrics::GaugeFamily& slurm_nodes_;
  metrics::GaugeFamily& condition_;
  std::mutex mu_;
  // The condition types last reported, by "namespace/nodeset": a type that goes (a reservation
  // removed) takes its series with it.
  std::map<std::string, std::set<std::string>> types_;
};

}  // namespace tightrope::op
