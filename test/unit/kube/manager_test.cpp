// kube::Manager around a fake Runnable: the order in which it starts and stops what it runs, and
// its exit statuses. Nothing here reaches an API server: no lease, no endpoint.
#include "kube/manager.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tightrope::kube {
namespace {

class Recorded : public Runnable {
 public:
  void start_informers() override { note("start_informers"); }
  bool wait_for_sync(std::chrono::milliseconds /*timeout*/) override {
    note("wait_for_sync");
    return true;
  }
  bool synced() const override { return true; }
  void start_controllers() override {
    note("start_controllers");
    leading = true;
  }
  void stop_controllers() override { note("stop_controllers"); }
  void stop() override { note("stop"); }

  std::vector<std::string> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::atomic<bool> leading{false};

 private:
  void note(const std::string& call) {
    std::lock_guard lock(mu_);
    calls_.push_back(call);
  }
  std::mutex mu_;
  std::vector<std::string> calls_;
};

Config nowhere() {
  Config config;
  config.server = "http://127.0.0.1:1";
  return config;
}

struct Process {
  Client client{nowhere()};
  EventRecorder events{client, {"manager-test", "test"}};
};

ManagerOptions no_endpoints() {
  ManagerOptions options;
  options.name = "manager_test";
  options.identity = "test";
  options.metrics_addr = "0";
  options.health_addr = "0";
  return options;
}

TEST(Manager, AnEndpointThatCannotListenEndsTheRunBeforeAnythingStarts) {
  Process p;
  ManagerOptions options = no_endpoints();
  options.health_addr = "no-port";
  Recorded runnable;
  EXPECT_EQ(Manager(p.client, p.events, options).run(runnable), 2);
  EXPECT_TRUE(runnable.calls().empty());
}

TEST(Manager, ASignalStopsTheControllersBeforeTheCachesAndExitsZero) {
  Process p;
  Recorded runnable;
  int status = -1;
  // The signal goes to the run's thread alone, which blocks it as a main would.
  std::thread run([&] {
    Manager::block_signals();
    status = Manager(p.client, p.events, no_endpoints()).run(runnable);
  });
  for (int i = 0; i < 500 && !runnable.leading; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(runnable.leading);
  pthread_kill(run.native_handle(), SIGTERM);
  run.join();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(runnable.calls(),
            (std::vector<std::string>{"start_informers", "wait_for_sync", "start_controllers",
                                      "stop_controllers", "stop"}));
}

}  // namespace
}  // namespace tightrope::kube
