// How fast slurm-operator carries a change from one system to the other, on a test bed (the
// environment of `scripts/testbed env`), with the test-only pod runner playing kubelet for a
// NodeSet of 3 real slurmd:
//   1. Slurm → Kubernetes: 100 changes (50 drains by an administrator, 50 undrains), each timed
//      from just before the REST call until the pod's SlurmNodeStateDrain condition appears (or
//      goes);
//   2. Kubernetes → Slurm: 100 changes (50 cordons, 50 uncordons), each timed from just before
//      the Node patch until slurmctld reports the node drained (or not).
// Each change starts at a random moment (0-1 s after the previous one was seen), so it falls
// anywhere in the Slurm change feed's one-second poll period. Observers poll every 10 ms, so
// figures carry up to 10 ms of observation delay.
// Prints the figures and writes them as JSON to the path given as the first argument.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "../test/integration/kube/kube_support.hpp"
#include "../test/integration/nodeset/nodeset_support.hpp"
#include "../test/integration/nodeset/pod_runner.hpp"
#include "../test/integration/operator/operator_support.hpp"
#include "operator/resources.hpp"
#include "percentile.hpp"
#include "slurm/client.hpp"
#include "testbed.hpp"

namespace {

using nlohmann::json;
using tightrope::bench::percentile;
using Steady = std::chrono::steady_clock;
namespace op = tightrope::op;
namespace kube = tightrope::kube;
namespace slurm = tightrope::slurm;
using tightrope::testing::TestBed;

constexpr int kChanges = 100;
constexpr auto kLimit = std::chrono::seconds(30);

json summary(const std::vector<double>& xs) {
  if (xs.empty()) {
    return json::object();
  }
  double sum = 0;
  for (const double x : xs) {
    sum += x;
  }
  return {{"samples", xs.size()},
          {"p50_s", percentile(xs, 0.50)},
          {"p99_s", percentile(xs, 0.99)},
          {"max_s", *std::max_element(xs.begin(), xs.end())},
          {"mean_s", sum / static_cast<double>(xs.size())}};
}

// Seconds until `pred` holds (polled every 10 ms), or -1 after kLimit.
template <typename Pred>
double time_until(Steady::time_point start, Pred pred) {
  while (!pred()) {
    if (Steady::now() - start > kLimit) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::chrono::duration<double>(Steady::now() - start).count();
}

bool pod_has(kube::Client& client, const std::string& ns, const std::string& pod,
             const std::string& type) {
  auto got = client.get(kube::resources::pods(), ns, pod);
  if (!got) {
    return false;
  }
  for (const auto& c : got->value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") == type && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: bench_nodeset_latency OUT.json (with the bed's environment)\n";
    return 2;
  }
  TestBed bed;  // reads the environment of the bed named by $TESTBED_NAME
  bed.SetUp();
  auto client = kube::testing::make_client();
  op::testing::install_crds(*client);
  const std::string ns = kube::testing::fresh_namespace(*client);
  const std::string nodeset = "lat";
  op::testing::PodRunner runner(*client, {ns,
                                          {"bed-node-1", "bed-node-2", "bed-node-3"},
                                          TestBed::var("SLURM_ROOT"),
                                          TestBed::var("TESTBED_DIR") + "/logs"});
  runner.start();
  op::testing::create_external_cluster(*client, ns);
  op::testing::OperatorProcess operator_process(ns);
  operator_process.start();
  op::testing::create_nodeset(*client, ns, nodeset, 3);

  slurm::ClientOptions options;
  options.url = TestBed::var("SLURMRESTD_URL");
  slurm::Client slurm_client(
      options, std::make_shared<slurm::MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm"));
  const std::vector<std::string> pods = {nodeset + "-0", nodeset + "-1", nodeset + "-2"};
  const auto ready = time_until(Steady::now(), [&] {
    for (const auto& p : pods) {
      if (!pod_has(*client, ns, p, "SlurmNodeStateIdle") || !pod_has(*client, ns, p, "Ready")) {
        return false;
      }
    }
    return true;
  });
  if (ready < 0) {
    std::cerr << "the NodeSet never became ready\n" << operator_process.log();
    return 1;
  }
  std::map<std::string, std::string> kube_node;
  for (const auto& p : pods) {
    kube_node[p] = client->get(kube::resources::pods(), ns, p)
                       ->value("/spec/nodeName"_json_pointer, std::string());
  }

  std::mt19937 random(42);
  std::uniform_int_distribution<int> pause_ms(0, 999);
  std::vector<double> drain;
  std::vector<double> undrain;
  int lost = 0;
  for (int i = 0; i < kChanges; ++i) {
    // Each pod drained, then undrained, in turn.
    const std::string& pod = pods[static_cast<size_t>(i / 2) % pods.size()];
    const bool on = i % 2 == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
    const auto start = Steady::now();
    if (on) {
      (void)slurm_client.drain(pod, "bench: admin drain " + std::to_string(i));
    } else {
      (void)slurm_client.undrain(pod);
    }
    const double took =
        time_until(start, [&] { return pod_has(*client, ns, pod, "SlurmNodeStateDrain") == on; });
    if (took < 0) {
      ++lost;
    } else {
      (on ? drain : undrain).push_back(took);
    }
  }
  // Undrain whichever was left drained.
  for (const auto& p : pods) {
    (void)slurm_client.undrain(p);
  }

  std::vector<double> cordon;
  std::vector<double> uncordon;
  for (int i = 0; i < kChanges; ++i) {
    const std::string& pod = pods[static_cast<size_t>(i / 2) % pods.size()];
    const bool on = i % 2 == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
    const auto start = Steady::now();
    (void)client->patch(kube::resources::nodes(), "", kube_node[pod], kube::PatchType::kMerge,
                        {{"spec", {{"unschedulable", on ? json(true) : json(nullptr)}}}});
    const double took = time_until(start, [&] {
      auto node = slurm_client.get_node(pod);
      return node && node->drain() == on;
    });
    if (took < 0) {
      ++lost;
    } else {
      (on ? cordon : uncordon).push_back(took);
    }
  }

  std::vector<double> slurm_to_kube = drain;
  slurm_to_kube.insert(slurm_to_kube.end(), undrain.begin(), undrain.end());
  std::vector<double> kube_to_slurm = cordon;
  kube_to_slurm.insert(kube_to_slurm.end(), uncordon.begin(), uncordon.end());
  const json result = {{"benchmark", "nodeset_latency"},
                       {"pods", pods.size()},
                       {"changes_per_direction", kChanges},
                       {"observer_poll_ms", 10},
                       {"not_seen_within_30s", lost},
                       {"slurm_drain_to_pod_condition", summary(slurm_to_kube)},
                       {"slurm_drain_only", summary(drain)},
                       {"slurm_undrain_only", summary(undrain)},
                       {"cordon_to_slurm_drain", summary(kube_to_slurm)},
                       {"cordon_only", summary(cordon)},
                       {"uncordon_only", summary(uncordon)}};
  std::cout << result.dump(2) << "\n";
  std::ofstream(argv[1]) << result.dump(2) << "\n";

  operator_process.stop();
  runner.stop();
  for (const auto& p : pods) {
    (void)slurm_client.delete_node(p);
  }
  (void)client->remove(kube::resources::namespaces(), "", ns);
  return 0;
}
