// What runs around a process's controllers, in one place: the health and metrics endpoints,
// the wait for filled caches, leader election, signals, and a clean stop (controllers drained,
// the lease released, events flushed). A main parses its flags, builds its Runnable and calls
// run(). Knows nothing of Slurm.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/metrics.hpp"
#include "kube/client.hpp"
#include "kube/events.hpp"
#include "kube/leader.hpp"

namespace tightrope::kube {

// The controllers and caches a Manager runs.
class Runnable {
 public:
  virtual ~Runnable() = default;
  // Starts the informers at once: a standby keeps warm caches.
  virtual void start_informers() = 0;
  virtual bool wait_for_sync(std::chrono::milliseconds timeout) = 0;
  virtual bool synced() const = 0;
  // As leader; must not block. Called again after stop_controllers when the process leads
  // again after losing the lease: nothing the last term assumed may be trusted then.
  virtual void start_controllers() = 0;
  virtual void stop_controllers() = 0;  // drains the controllers' work
  virtual void stop() = 0;
};

struct ManagerOptions {
  std::string name;      // the log events' prefix: "<name>.starting", ...
  std::string identity;  // this process, for the lease and the logs
  // What the starting log line says besides: {"server", ...}, {"namespaces", ...}.
  std::vector<std::pair<std::string, std::string>> about;
  std::string metrics_addr = ":8080";  // "0": none
  std::string health_addr = ":8081";   // "0": none; the same address serves both
  metrics::Registry* registry = nullptr;
  std::optional<LeaderElectionOptions> leader_election;  // none: lead at once
  // How often memory freed after a burst is handed back to the system.
  std::chrono::seconds trim_period{60};
};

// A lease holder identity for this process: the pod's name (downward API POD_NAME, else the
// host name) and a random part, so that a restarted process never reuses one.
std::string process_identity();

class Manager {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread and every thread it starts from then on, so
  // that only run() takes them: call it first in main, before any thread exists.
  static void block_signals();

  Manager(Client& client, EventRecorder& events, ManagerOptions options);

  // Serves the endpoints, starts the informers, waits for the caches, leads (or waits to),
  // then waits for a signal and stops everything in order. A lost lease stops the controllers
  // and the process campaigns again with its caches warm. The exit status: 0 after a signal, 2
  // when an endpoint cannot listen.
  int run(Runnable& runnable);

 private:
  Client& client_;
  EventRecorder& events_;
  ManagerOptions options_;
};

}  // namespace tightrope::kube
