// BENCHMARK ONLY: a kubelet stand-in for thousands of slurmd pods on a 2-core machine, like
// kubemark's hollow nodes. It registers Node objects (keeping their leases fresh), and for every
// slurmd pod the scheduler binds to one of them it does what a slurmd container would make
// visible and nothing else:
//   - slurmctld learns the node: a dynamic node created through slurmrestd with the pod's own
//     --conf, in state EXTERNAL (idle, never pinged, so no slurmd process is needed);
//   - Kubernetes learns the pod runs: status Running and Ready.
// When a pod is deleted it runs the pod's preStop command inside the bed's Slurm root, as a
// kubelet would, then confirms the deletion. Jobs cannot run on these nodes: nothing executes
// them. Nothing here is part of Tightrope.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"
#include "kube/informer.hpp"
#include "kube/workqueue.hpp"
#include "slurm/client.hpp"

namespace tightrope::bench {

struct HollowKubeletOptions {
  std::string namespace_name;
  int nodes = 1;                     // Node objects: hollow-<namespace>-0000, ...
  int pods_per_node = 10;            // their pod capacity (plus a margin)
  int workers = 6;                   // pods handled at once
  std::filesystem::path slurm_root;  // where preStop commands run (chroot)
  std::filesystem::path log_dir;     // preStop output
};

class HollowKubelet {
 public:
  HollowKubelet(kube::Client& client, slurm::Client& slurm, HollowKubeletOptions options);
  ~HollowKubelet();
  HollowKubelet(const HollowKubelet&) = delete;
  HollowKubelet& operator=(const HollowKubelet&) = delete;

  void start();
  // Stops following pods and deletes the Node objects (pods left are the caller's).
  void stop();

  std::vector<std::string> node_names() const;
  // Slurm nodes created and pods reported Running, so far.
  int64_t started() const { return started_.load(); }
  int64_t create_failures() const { return create_failures_.load(); }

 private:
  void renew_leases();
  void work();
  void handle(const std::string& key);
  bool start_pod(const nlohmann::json& pod);
  bool report_running(const std::string& name, const nlohmann::json& container);
  void finish_pod(const nlohmann::json& pod);

  kube::Client& client_;
  slurm::Client& slurm_;
  HollowKubeletOptions options_;
  std::set<std::string> node_set_;
  std::unique_ptr<kube::Informer<kube::Document>> pods_;
  kube::WorkQueue queue_;
  std::vector<std::thread> workers_;
  std::thread lease_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::set<std::string> running_;  // pod UIDs reported Running
  std::atomic<int64_t> started_{0};
  std::atomic<int64_t> create_failures_{0};
};

}  // namespace tightrope::bench
