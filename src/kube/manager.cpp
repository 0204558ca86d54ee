#include "kube/manager.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <random>
#include <tuple>

#include "base/log.hpp"
#include "base/memory.hpp"
#include "kube/endpoints.hpp"

namespace tightrope::kube {

namespace {

sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

bool stop_pending() {
  sigset_t pending;
  return sigpending(&pending) == 0 &&
         (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1);
}

}  // namespace

void Manager::block_signals() {
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

Manager::Manager(Client& client, EventRecorder& events, ManagerOptions options)
    : client_(client), events_(events), options_(std::move(options)) {}

int Manager::run(Runnable& runnable) {
  const std::string& name = options_.name;
  metrics::Registry fallback;
  Endpoints endpoints(options_.registry != nullptr ? *options_.registry : fallback,
                      [&runnable] { return runnable.synced(); });
  const bool same = options_.metrics_addr == options_.health_addr;
  for (const auto& [address, with_metrics, with_health] :
       {std::tuple{options_.metrics_addr, true, same},
        std::tuple{options_.health_addr, same, true}}) {
    if (same && !with_metrics) {
      continue;
    }
    if (auto served = endpoints.serve(address, with_metrics, with_health); !served) {
      log::error(name + ".listen_failed", {{"address", address}, {"error", served.error()}});
      return 2;
    }
  }
  log::Fields about = {{"identity", options_.identity},
                       {"leader_elect", options_.leader_election ? "true" : "false"}};
  for (const auto& [key, value] : options_.about) {
    about.emplace_back(key, value);
  }
  log::info(name + ".starting", about);
  runnable.start_informers();
  // Reconciling from half-filled caches would report objects as missing that only were not
  // listed yet; an API server that does not answer keeps the process waiting here, unready.
  while (!runnable.wait_for_sync(std::chrono::seconds(30))) {
    log::warn(name + ".waiting_for_caches", {});
    if (stop_pending()) {
      runnable.stop();
      return 0;
    }
  }

  std::unique_ptr<LeaderElector> elector;
  std::atomic<bool> stopping{false};
  if (options_.leader_election) {
    LeaderElectionOptions lease = *options_.leader_election;
    lease.identity = options_.identity;
    lease.metrics = options_.registry;
    LeaderCallbacks callbacks;
    // Both run on the elector's thread, one after the other: a term's controllers have stopped
    // before the next term starts them, and before a stop releases the lease.
    callbacks.started_leading = [&] {
      log::info(name + ".leading", {{"identity", options_.identity}});
      runnable.start_controllers();
    };
    callbacks.stopped_leading = [&] {
      runnable.stop_controllers();
      if (!stopping) {
        // Another process may act now. This one keeps its caches warm and campaigns again
        // instead of exiting: a process that exits on every lost lease climbs the kubelet's
        // restart back-off (up to 5 minutes) and is away when its turn comes.
        log::warn(name + ".standing_by",
                  {{"identity", options_.identity}, {"reason", "the lease was lost"}});
      }
    };
    elector = std::make_unique<LeaderElector>(client_, lease, callbacks);
    elector->start();
  } else {
    runnable.start_controllers();
  }

  // Memory freed after a burst (a thousand pods created, a Slurm list decoded) goes back to the
  // system once a period instead of staying in the allocator for the next burst.
  const sigset_t signals = stop_signals();
  const timespec trim{static_cast<time_t>(options_.trim_period.count()), 0};
  int signal = 0;
  while ((signal = sigtimedwait(&signals, nullptr, &trim)) < 0) {
    return_free_memory();
  }
  log::info(name + ".stopping", {{"signal", std::to_string(signal)}});
  stopping = true;
  if (elector) {
    // Stops the controllers, then releases the lease: a successor need not wait for it to
    // expire.
    elector->stop();
  } else {
    runnable.stop_controllers();
  }
  runnable.stop();
  events_.flush(std::chrono::seconds(3));
  endpoints.stop();
  return 0;
}

std::string process_identity() {
  std::string name;
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') {
    name = pod;
  } else {
    std::array<char, 256> host{};
    gethostname(host.data(), host.size() - 1);
    name = host.data();
  }
  std::random_device random;
  return name + "_" + std::to_string(random());
}

}  // namespace tightrope::kube
