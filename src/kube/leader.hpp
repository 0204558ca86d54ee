// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics: a candidate
// takes a lease whose holder has not renewed it for lease_duration (measured on its own clock
// from when it last saw the record change, so clocks need not agree); the leader renews every
// retry_period and gives up when renew_deadline passes without a successful renew; a clean stop
// releases the lease so a successor need not wait. Knows nothing of Slurm.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.hpp"

namespace tightrope::kube {

struct LeaderElectionOptions {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per process, e.g. "<pod name>_<random>"
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_stop = true;
  metrics::Registry* metrics = nullptr;  // leader_election_master_status and lease request counts
};

struct LeaderCallbacks {
  std::function<void()> started_leading;  // start the controllers (must not block)
  std::function<void()> stopped_leading;  // stop them: another process may be leading now
  std::function<void(const std::string& identity)> new_leader;
};

class LeaderElector {
 public:
  // The client's timeout should be below renew_deadline, so that a hung renew cannot outlive it.
  LeaderElector(Client& client, LeaderElectionOptions options, LeaderCallbacks callbacks);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  // Stops campaigning; if leading, calls stopped_leading and releases the lease.
  void stop();

  // True while this process holds the lease and renewed it less than renew_deadline ago:
  // checked before each action, it keeps a process that was frozen (SIGSTOP, a long GC-like
  // stall) from acting on a lease a successor may hold by now.
  bool is_leader() const;

 private:
  void run();
  // One attempt to take or renew the lease; true when we hold it afterwards.
  bool try_acquire_or_renew();
  void release();
  bool sleep_for(std::chrono::milliseconds d);
  // stepping_down: the stop gives the lease up (not lost to a failed renewal).
  void set_leading(bool leading, bool stepping_down = false);

  Client& client_;
  LeaderElectionOptions options_;
  LeaderCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  bool leading_ = false;
  std::chrono::steady_clock::time_point last_renew_{};
  // The Lease as our last successful write left it, while we hold it (null otherwise). Only the
  // elector's thread touches it.
  nlohmann::json held_;
  // The lease record as last read, and when (our clock) it last changed.
  std::string observed_holder_;
  std::string observed_renew_time_;
  std::string observed_resource_version_;
  int64_t observed_transitions_ = 0;
  std::chrono::steady_clock::time_point observed_at_{};
  std::chrono::milliseconds observed_duration_{0};
  metrics::GaugeFamily* status_ = nullptr;
};

}  // namespace tightrope::kube
