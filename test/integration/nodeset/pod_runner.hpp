// TEST ONLY: a stand-in for the kubelet on the bed, which has none. It registers a few Node
// objects (renewing their leases so Kubernetes keeps them Ready), and for every slurmd pod the
// scheduler binds to one of them it starts a real `slurmd -D -Z` inside the bed's Slurm root
// with the pod's own --conf-server and --conf (plus a free Port=, since several slurmd share
// one host), then reports the pod Running and Ready. When a pod is deleted it runs the pod's
// preStop command in the root, stops slurmd and confirms the deletion, as a kubelet would.
// Nothing here is part of Tightrope.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"

namespace tightrope::op::testing {

// What a kubelet stand-in needs of a slurmd pod, shared with the benchmarks' hollow kubelet.
// The pod's slurmd container, nullptr when it has none.
const nlohmann::json* slurmd_container(const nlohmann::json& pod);
// Its preStop exec command, empty when it has none.
std::vector<std::string> pre_stop_command(const nlohmann::json& pod);
// Runs `command` inside the Slurm root with a clean environment, output appended to `log`;
// after `limit` it is killed. The exit status, -1 when killed or signalled.
int run_in_root(const std::filesystem::path& root, const std::vector<std::string>& command,
                const std::filesystem::path& log, std::chrono::milliseconds limit);

struct PodRunnerOptions {
  std::string namespace_name;
  std::vector<std::string> nodes = {"bed-node-1", "bed-node-2", "bed-node-3",
                                    "bed-node-4", "bed-node-5", "bed-node-6"};
  std::filesystem::path slurm_root;  // the bed's mounted root (SLURM_ROOT)
  std::filesystem::path log_dir;     // slurmd output, one file per pod
};

class PodRunner {
 public:
  PodRunner(kube::Client& client, PodRunnerOptions options);
  ~PodRunner();
  PodRunner(const PodRunner&) = delete;
  PodRunner& operator=(const PodRunner&) = delete;

  // Registers the nodes and starts following pods.
  void start();
  // Stops every slurmd it started (no preStop), force-deletes their pods and the nodes.
  void stop();

  // The slurmd of a pod dies (as a crashed container would); the runner starts it again.
  bool kill_slurmd(const std::string& pod);
  // Pods it runs now, by name.
  std::vector<std::string> running() const;
  // The slurmd process of each pod it runs: a new one is a restart.
  std::map<std::string, int> slurmd_pids() const;

 private:
  struct Slurmd {
    pid_t pid = -1;
    std::string uid;
    std::string hostname;
    int port = 0;
  };
  void loop();
  void sync();
  void renew_nodes();
  bool launch(const nlohmann::json& pod);
  void terminate(const std::string& pod, const Slurmd& slurmd, const nlohmann::json* doc);
  void report_running(const nlohmann::json& pod, bool ready);
  int free_port();

  kube::Client& client_;
  PodRunnerOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Slurmd> slurmd_;  // by pod name
  std::map<std::string, int> ports_;      // by hostname, kept for its Slurm node's life
  std::atomic<bool> stopping_{false};
  std::condition_variable wake_;
  std::mutex wake_mu_;
  std::thread thread_;
  int next_port_ = 32000;
};

}  // namespace tightrope::op::testing
