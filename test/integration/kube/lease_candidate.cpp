// A process that campaigns for a Lease and "acts" (writes a line) every 100 ms while it leads:
// the leader-election tests run two or three of these and read their lines.
//   lease_candidate KUBECONFIG NAMESPACE LEASE IDENTITY OUTPUT_FILE
// It ends on SIGTERM (releasing the lease) or after two minutes, so that a failed test cannot
// leave it running.
// Lines: "started <ms>", "act <ms>", "stopped <ms>", and "lost <ms>" or "stepped_down <ms>" for
// the elector's log of how leading ended, with wall-clock milliseconds since the epoch.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "kube/leader.hpp"

namespace {

std::atomic<bool> g_terminate{false};

void on_sigterm(int /*signal*/) {
  g_terminate = true;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tightrope::kube;  // NOLINT(google-build-using-namespace): a small test program
  if (argc != 6) {
    std::cerr << "usage: lease_candidate KUBECONFIG NAMESPACE LEASE IDENTITY OUTPUT_FILE\n";
    return 2;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto config = load_kubeconfig(args[0]);
  if (!config) {
    std::cerr << config.error().to_string() << "\n";
    return 2;
  }
  std::ofstream out(args[4], std::ios::app);
  std::mutex out_mu;
  const auto line = [&](const std::string& what) {
    std::lock_guard lock(out_mu);
    out << what << " " << now_ms() << std::endl;
  };
  (void)tightrope::log::set_sink([&](tightrope::log::Level, const std::string& text) {
    if (text.find("leader.lost") != std::string::npos) {
      line("lost");
    } else if (text.find("leader.stepped_down") != std::string::npos) {
      line("stepped_down");
    }
  });
  (void)std::signal(SIGTERM, on_sigterm);
  ClientOptions client_options;
  client_options.timeout = std::chrono::milliseconds(1500);  // below the renew deadline
  client_options.max_attempts = 1;
  Client client(*config, client_options);
  LeaderElectionOptions options;
  options.lease_namespace = args[1];
  options.lease_name = args[2];
  options.identity = args[3];
  options.lease_duration = std::chrono::seconds(3);
  options.renew_deadline = std::chrono::seconds(2);
  options.retry_period = std::chrono::milliseconds(500);
  LeaderElector elector(
      client, options,
      {[&] { line("started"); }, [&] { line("stopped"); }, [](const std::string&) {}});
  elector.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!g_terminate && std::chrono::steady_clock::now() < give_up) {
    // Each action checks leadership first, as a controller's writes would.
    if (elector.is_leader()) {
      line("act");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  elector.stop();
  return 0;
}
