// Hints of Slurm's changes from slurmctld's own log. Slurm 26.05 pushes nothing to its clients:
// the change feed asks slurmrestd once a second, and each "nothing changed" costs slurmctld an
// RPC that rebuilds every node's allocation under its select lock. Nearly every change worth
// seeing at once is also a line in slurmctld's log (an administrator's drain, a node not
// responding or back, a batch job submitted or done, the scheduler's allocation in its scheduler
// log), and the kubelet streams a container's log as it is written. So the operator follows the
// `logfile` container of each slurmctld pod of a Controller, whatever the line says: each one is
// a hint (ChangeFeed::hint), a poll within milliseconds. While every pod's log is followed the
// feed at rest polls only each hinted period (docs/slurm.md); a follow that fails or ends makes
// the feed poll at once and every second again until it is back. Knows nothing of NodeSets.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"
#include "operator/slurm_clients.hpp"

namespace tightrope::op {

// The container whose log is followed: the slurmctld pod's log sidecar, which prints
// slurmctld's log file and its scheduler log.
inline constexpr const char* kHintContainer = "logfile";

// How long a follower waits before following a pod again after a failure: doubling from 1 s
// to 30 s with each failure in a row; none after a follow that lasted a minute or more.
std::chrono::milliseconds follow_backoff(int failures_in_a_row);

class LogHints {
 public:
  LogHints(kube::Client& kube, SlurmClients& slurm) : kube_(kube), slurm_(slurm) {}
  void use_metrics(ClusterMetrics* metrics) { metrics_ = metrics; }
  ~LogHints();
  LogHints(const LogHints&) = delete;
  LogHints& operator=(const LogHints&) = delete;

  // Follows these pods of Controller `key` ("namespace/name") and no others; none: stops.
  void follow(const std::string& key, const std::vector<std::string>& pods);
  void stop(const std::string& key) { follow(key, {}); }
  void stop_all();

  // Whether every pod of the Controller is followed now (none followed: false).
  bool live(const std::string& key) const;

 private:
  struct Follower {
    std::string pod;
    std::atomic<bool> stopping{false};
    std::atomic<bool> live{false};
    std::thread thread;
  };
  struct Followed {
    std::vector<std::unique_ptr<Follower>> followers;
  };
  void run(const std::string& key, Follower& f);
  // Tells the Controller's feed whether every follower is live.
  void tell_feed(const std::string& key);
  bool live_locked(const std::string& key) const;  // under mu_
  static void halt(Followed& followed);

  kube::Client& kube_;
  SlurmClients& slurm_;
  ClusterMetrics* metrics_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, Followed> followed_;
};

}  // namespace tightrope::op
