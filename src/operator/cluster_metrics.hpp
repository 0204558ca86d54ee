// A Slurm cluster as Prometheus series, from what the operator already reads (the change feed's
// snapshot and its REST client's answers), for the dashboards and alerts an admin watches:
// jobs by partition, account, state and pending reason; GPUs configured and allocated and nodes
// not responding per NodeSet; whether slurmrestd answers; every Slurm REST request by outcome.
// slurmctld's own /metrics has node and partition totals but neither pending reasons nor NodeSets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/metrics.hpp"
#include "slurm/error.hpp"
#include "slurm/model.hpp"

namespace tightrope::op {

struct JobGroup {
  std::string partition;
  std::string account;
  std::string state;   // "pending", "running", "suspended"
  std::string reason;  // Slurm's state_reason for pending jobs ("Resources"), else ""
  bool operator<(const JobGroup& o) const {
    return std::tie(partition, account, state, reason) <
           std::tie(o.partition, o.account, o.state, o.reason);
  }
};

// Active jobs counted by group; ended ones (which the feed keeps for MinJobAge) count nothing.
std::map<JobGroup, int64_t> count_jobs(const std::map<int64_t, slurm::Job>& jobs);

class ClusterMetrics {
 public:
  explicit ClusterMetrics(metrics::Registry& registry);

  // What ClientOptions::on_attempt should call for the Controller `ns`/`controller`.
  std::function<void(const std::string&, const slurm::Error*)> attempts(
      const std::string& ns, const std::string& controller);
  // After each poll that changed something. `nodeset_of` names a node's NodeSet ("" for none).
  void report(const std::string& ns, const std::string& controller,
              const std::map<int64_t, slurm::Job>& jobs,
              const std::map<std::string, slurm::Node>& nodes,
              const std::function<std::string(const std::string&)>& nodeset_of);
  // The problems the operator's checks found (diagnosis.hpp), by check and severity; a check
  // that no longer finds anything loses its series.
  void findings(const std::string& ns, const std::string& controller,
                const std::map<std::pair<std::string, std::string>, int64_t>& counts);
  // Whether the feed reads slurmrestd now.
  void up(const std::string& ns, const std::string& controller, bool up);
  // Whether slurmctld's log is followed for hints (log_hints.hpp); the series goes with none.
  void hints_live(const std::string& ns, const std::string& controller, std::optional<bool> live);
  // The Controller is gone: its series go with it.
  void forget(const std::string& ns, const std::string& controller);

 private:
  metrics::CounterFamily& requests_;
  metrics::GaugeFamily& jobs_;
  metrics::GaugeFamily& gpus_;
  metrics::GaugeFamily& not_responding_;
  metrics::GaugeFamily& up_;
  metrics::GaugeFamily& hints_;
  metrics::GaugeFamily& findings_;
  std::mutex mu_;
  // The job groups and NodeSets last reported per "namespace/controller": a group that empties
  // loses its series rather than staying at its last count.
  std::map<std::string, std::set<JobGroup>> groups_;
  std::map<std::string, std::set<std::string>> nodesets_;
  std::map<std::string, std::set<std::pair<std::string, std::string>>> checks_;
};

}  // namespace tightrope::op
