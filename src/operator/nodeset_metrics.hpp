// A NodeSet's status as Prometheus gauges, for dashboards and alerts that need no access to the
// Kubernetes API: replicas wanted, ready and updated, its Slurm nodes by state, and each
// condition (kube-state-metrics' shape: one series per possible status, 1 for the current one).
// Set after each reconcile from what it published; dropped when the NodeSet is gone. And how long
// a change waited for the reconcile that acted on it (a Slurm node drained -> its pod's
// condition; a Node cordoned -> its Slurm nodes drained).
#pragma once

#include <chrono>
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

  using Clock = std::chrono::steady_clock;

  // `status` as published (desired, readyReplicas, updatedReplicas, slurmIdle, ...) and every
  // condition, Ready included, by a reconcile that began at `began`: every change seen before
  // then is now acted on, and its wait is observed.
  // `health_steps`: the NodeSet's nodes in each step of health-check remediation (drained,
  // replacing, verifying, waiting); empty when it follows no HealthCheck, which drops them;
  // nullptr while they are not known (Slurm cannot be asked), which keeps the last ones.
  void report(const std::string& ns, const std::string& nodeset, const nlohmann::json& status,
              const std::vector<api::Condition>& conditions, Clock::time_point began,
              const std::map<std::string, int64_t>* health_steps = nullptr);
  void forget(const std::string& ns, const std::string& nodeset);
  // Every NodeSet's series: the operator stands by and another reports them.
  void forget_all();
  // The operator saw a change that concerns the NodeSet: "slurm" (its nodes or their jobs, from
  // the change feed) or "node" (a Kubernetes Node of its pods: cordon, taints, conditions).
  void seen(const std::string& ns, const std::string& nodeset, const std::string& source,
            Clock::time_point at);

 private:
  metrics::GaugeFamily& desired_;
  metrics::GaugeFamily& ready_;
  metrics::GaugeFamily& updated_;
  metrics::GaugeFamily& slurm_nodes_;
  metrics::GaugeFamily& condition_;
  metrics::GaugeFamily& health_;
  metrics::HistogramFamily& sync_;
  std::mutex mu_;
  // The first change not yet acted on, by "namespace/nodeset" and source.
  std::map<std::string, std::map<std::string, Clock::time_point>> unseen_;
  // The condition types last reported, by "namespace/nodeset": a type that goes (a reservation
  // removed) takes its series with it.
  std::map<std::string, std::set<std::string>> types_;
};

}  // namespace tightrope::op
