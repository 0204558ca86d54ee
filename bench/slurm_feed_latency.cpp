// How fast the Slurm change feed reports a change an administrator makes, and what it costs
// while nothing changes. Runs against a test bed (the environment of `scripts/testbed env`):
//   1. 100 times: drain or resume node n1 with `scontrol` at a random moment of the poll period
//      and time until the feed's event arrives (from just before scontrol starts);
//   2. 30 poll periods with nothing changing: requests sent and full lists read.
// Prints the figures and writes them as JSON to the path given as the first argument.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "slurm/feed.hpp"

namespace {

using namespace std::chrono_literals;
using tightrope::slurm::ChangeFeed;
using tightrope::slurm::NodeEvent;
using Steady = std::chrono::steady_clock;

std::string env(const char* key) {
  const char* v = std::getenv(key);
  if (v == nullptr || *v == '\0') {
    std::cerr << "bench_slurm_feed: " << key << " is not set (eval \"$(scripts/testbed env)\")\n";
    std::exit(2);
  }
  return v;
}

double percentile(std::vector<double> xs, double p) {
  std::sort(xs.begin(), xs.end());
  const size_t i = std::min(xs.size() - 1, static_cast<size_t>(p * static_cast<double>(xs.size())));
  return xs[i];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "bench/results/slurm_feed.json";
  const int changes = argc > 2 ? std::atoi(argv[2]) : 100;
  tightrope::slurm::ClientOptions options;
  options.url = env("SLURMRESTD_URL");
  tightrope::slurm::Client client(options, std::make_shared<tightrope::slurm::MintingTokenSource>(
                                               env("SLURM_JWT_KEY"), "slurm"));
  const std::string scontrol = "chroot " + env("SLURM_ROOT") +
                               " /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin scontrol";

  ChangeFeed feed(client);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<bool> n1_drained;
  Steady::time_point seen_at;
  feed.subscribe([&](const std::vector<NodeEvent>& events) {
    for (const auto& e : events) {
      if (e.node.name == "n1") {
        std::lock_guard lock(mu);
        n1_drained = e.node.drain();
        seen_at = Steady::now();
        cv.notify_all();
      }
    }
  });
  if (!feed.poll_once().ok()) {
    std::cerr << "bench_slurm_feed: slurmrestd does not answer\n";
    return 1;
  }
  feed.start();

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> phase_ms(0, 1000);
  std::vector<double> latency_ms;
  int missed = 0;
  for (int i = 0; i < changes; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(phase_ms(rng)));
    const bool drain = i % 2 == 0;
    const std::string cmd =
        scontrol + " update nodename=n1 " +
        (drain ? "state=drain reason=bench-" + std::to_string(i) : std::string("state=resume"));
    const auto t0 = Steady::now();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "bench_slurm_feed: failed: " << cmd << "\n";
      return 1;
    }
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, 10s, [&] { return n1_drained == drain && seen_at > t0; })) {
      latency_ms.push_back(std::chrono::duration<double, std::milli>(seen_at - t0).count());
    } else {
      ++missed;
      lock.unlock();
      const auto now = client.get_node("n1");
      const auto snapshot = feed.snapshot();
      const auto& snap = *snapshot.nodes;
      std::cerr << "bench_slurm_feed: change " << i << " (" << (drain ? "drain" : "resume")
                << ") not reported in 10 s; slurm says drain="
                << (now.ok() ? (now->drain() ? "yes" : "no") : now.error().message)
                << ", the feed's snapshot says drain="
                << (snap.count("n1") == 0   ? "absent"
                    : snap.at("n1").drain() ? "yes"
                                            : "no")
                << ", synced=" << (feed.health().synced ? "yes" : "no") << "\n";
    }
  }
  feed.stop();
  // Leave the node as it was; the resume's "idle*" second passes before the idle phase below.
  (void)std::system((scontrol + " update nodename=n1 state=resume >/dev/null 2>&1").c_str());
  std::this_thread::sleep_for(3s);

  // Idle: the feed's own polls, one period apart, with nothing changing.
  ChangeFeed idle(client);
  (void)idle.poll_once();
  std::this_thread::sleep_for(3s);  // past the settling reads of the last change
  (void)idle.poll_once();
  const uint64_t before = idle.requests();
  int full_lists = 0;
  constexpr int kIdlePeriods = 30;
  for (int i = 0; i < kIdlePeriods; ++i) {
    std::this_thread::sleep_for(1s);
    auto r = idle.poll_once();
    full_lists += r.ok() && r->listed ? 1 : 0;
  }
  const uint64_t requests = idle.requests() - before;

  double sum = 0;
  for (double x : latency_ms) {
    sum += x;
  }
  nlohmann::json report = {
      {"period_ms", 1000},
      {"changes", changes},
      {"missed", missed},
      {"latency_ms", latency_ms.empty()
                         ? nlohmann::json()
                         : nlohmann::json{{"p50", percentile(latency_ms, 0.50)},
                                          {"p90", percentile(latency_ms, 0.90)},
                                          {"p99", percentile(latency_ms, 0.99)},
                                          {"max", percentile(latency_ms, 1.0)},
                                          {"mean", sum / static_cast<double>(latency_ms.size())}}},
      {"idle",
       {{"periods", kIdlePeriods},
        {"requests", requests},
        {"full_lists", full_lists},
        {"requests_per_period", static_cast<double>(requests) / kIdlePeriods}}}};
  std::cout << report.dump(1) << "\n";
  std::ofstream(out) << report.dump(1) << "\n";
  std::cout << "written to " << out << "\n";
  return missed == 0 ? 0 : 1;
}
