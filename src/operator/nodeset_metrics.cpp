#include "operator/nodeset_metrics.hpp"

#include <array>
#include <utility>

namespace tightrope::op {
namespace {

using metrics::Labels;
using metrics::plus;

Labels of(const std::string& ns, const std::string& nodeset) {
  return {{"namespace", ns}, {"nodeset", nodeset}};
}

double number(const nlohmann::json& status, const char* field) {
  const auto it = status.find(field);
  return it != status.end() && it->is_number() ? it->get<double>() : 0;
}

// status field -> the state label of tightrope_nodeset_slurm_nodes.
constexpr std::array<std::pair<const char*, const char*>, 4> kSlurmStates = {
    {{"slurmIdle", "idle"},
     {"slurmAllocated", "allocated"},
     {"slurmDown", "down"},
     {"slurmDrain", "drain"}}};

constexpr std::array<const char*, 3> kStatuses = {"True", "False", "Unknown"};

}  // namespace

NodeSetMetrics::NodeSetMetrics(metrics::Registry& registry)
    : desired_(registry.gauge("tightrope_nodeset_desired_replicas",
                              "Pods the NodeSet wants (spec.replicas, or one per matching Node).",
                              {"namespace", "nodeset"})),
      ready_(registry.gauge("tightrope_nodeset_ready_replicas",
                            "The NodeSet's pods that are Ready.", {"namespace", "nodeset"})),
      updated_(registry.gauge("tightrope_nodeset_updated_replicas",
                              "The NodeSet's pods at its current revision.",
                              {"namespace", "nodeset"})),
      slurm_nodes_(registry.gauge(
          "tightrope_nodeset_slurm_nodes",
          "The NodeSet's Slurm nodes by state (idle, allocated: allocated or mixed, down, drain: "
          "drained or draining; drain overlaps the others).",
          {"namespace", "nodeset", "state"})),
      condition_(registry.gauge("tightrope_nodeset_condition",
                                "1 for the current status of each NodeSet condition, 0 for the "
                                "other statuses.",
                                {"namespace", "nodeset", "type", "status"})),
      health_(registry.gauge(
          "tightrope_nodeset_health_nodes",
          "The NodeSet's Slurm nodes in each step of health-check remediation "
          "(drained, replacing, verifying; waiting: failing over the budget; checking: under "
          "active checks).",
          {"namespace", "nodeset", "step"})),
      sync_(registry.histogram(
          "tightrope_nodeset_sync_seconds",
          "Seconds from the operator seeing a change that concerns a NodeSet (source slurm: its "
          "Slurm nodes or their jobs, by the change feed; node: a Kubernetes Node of its pods) to "
          "the end of the reconcile that acted on it.",
          {"namespace", "nodeset", "source"}, metrics::exponential_buckets(0.005, 2, 14))) {}

void NodeSetMetrics::seen(const std::string& ns, const std::string& nodeset,
                          const std::string& source, Clock::time_point at) {
  std::lock_guard lock(mu_);
  // The first: a burst of changes waits as long as its oldest.
  unseen_[ns + "/" + nodeset].emplace(source, at);
}

void NodeSetMetrics::report(const std::string& ns, const std::string& nodeset,
                            const nlohmann::json& status,
                            const std::vector<api::Condition>& conditions, Clock::time_point began,
                            const std::map<std::string, int64_t>* health_steps) {
  const Labels labels = of(ns, nodeset);
  if (health_steps != nullptr) {
    if (health_steps->empty()) {
      health_.remove(labels);
    }
    for (const auto& [step, count] : *health_steps) {
      health_.with(plus(labels, "step", step)).set(static_cast<double>(count));
    }
  }
  desired_.with(labels).set(number(status, "desired"));
  ready_.with(labels).set(number(status, "readyReplicas"));
  updated_.with(labels).set(number(status, "updatedReplicas"));
  for (const auto& [field, state] : kSlurmStates) {
    slurm_nodes_.with(plus(labels, "state", state)).set(number(status, field));
  }
  std::set<std::string> types;
  for (const auto& c : conditions) {
    types.insert(c.type);
    for (const char* s : kStatuses) {
      condition_.with(plus(plus(labels, "type", c.type), "status", s)).set(c.status == s ? 1 : 0);
    }
  }
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  auto waiting = unseen_.find(ns + "/" + nodeset);
  if (waiting != unseen_.end()) {
    // A change seen after this reconcile began may have come too late for it: the next one
    // observes it.
    for (auto it = waiting->second.begin(); it != waiting->second.end();) {
      if (it->second <= began) {
        sync_.with(plus(labels, "source", it->first))
            .observe(std::chrono::duration<double>(now - it->second).count());
        it = waiting->second.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::set<std::string>& before = types_[ns + "/" + nodeset];
  for (const auto& gone : before) {
    if (types.count(gone) == 0) {
      condition_.remove(plus(labels, "type", gone));
    }
  }
  before = std::move(types);
}

void NodeSetMetrics::forget(const std::string& ns, const std::string& nodeset) {
  const Labels labels = of(ns, nodeset);
  for (metrics::GaugeFamily* family :
       {&desired_, &ready_, &updated_, &slurm_nodes_, &condition_, &health_}) {
    family->remove(labels);
  }
  sync_.remove(labels);
  std::lock_guard lock(mu_);
  types_.erase(ns + "/" + nodeset);
  unseen_.erase(ns + "/" + nodeset);
}

void NodeSetMetrics::forget_all() {
  for (metrics::GaugeFamily* family :
       {&desired_, &ready_, &updated_, &slurm_nodes_, &condition_, &health_}) {
    family->remove({});
  }
  sync_.remove({});
  std::lock_guard lock(mu_);
  types_.clear();
  unseen_.clear();
}

}  // namespace tightrope::op
