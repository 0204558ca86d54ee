// TEST ONLY: a stand-in for the kubelets of a few Nodes on a bed that has none. It registers the
// Nodes (Ready, with the allocatable given, renewing their leases so that Kubernetes keeps them
// Ready), reports every pod bound to them Running, lets a test end a pod (Succeeded or Failed),
// and, as a kubelet does, ends a pod that is deleted and confirms the deletion. Nothing here is
// part of Tightrope.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.hpp"

namespace tightrope::bridge::testing {

struct HollowNode {
  std::string name;
  std::string cpu = "4";
  std::string memory = "8Gi";
  int gpus = 0;
  std::map<std::string, std::string> labels;
};

class HollowKubelet {
 public:
  // run_pods false: the Nodes only (a benchmark that counts bindings, not running pods).
  HollowKubelet(kube::Client& client, std::string namespace_name, std::vector<HollowNode> nodes,
                bool run_pods = true);
  ~HollowKubelet();
  HollowKubelet(const HollowKubelet&) = delete;
  HollowKubelet& operator=(const HollowKubelet&) = delete;

  void start();
  // Deletes the Nodes and their leases.
  void stop();
  // The pod's containers end: its phase becomes `phase` (Succeeded or Failed).
  bool finish(const std::string& pod, const std::string& phase);
  // The Node stops reporting (its kubelet died): it turns NotReady.
  void fail_node(const std::string& node);

 private:
  void loop();
  void sync();
  void renew();

  kube::Client& client_;
  std::string namespace_;
  std::vector<HollowNode> nodes_;
  bool run_pods_ = true;
  std::mutex mu_;
  std::map<std::string, bool> failed_;  // by node
  std::atomic<bool> stopping_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace tightrope::bridge::testing
