#include "hollow_kubelet.hpp"

#include <algorithm>

#include "kube/time.hpp"

namespace tightrope::bridge::testing {

using nlohmann::json;
using std::chrono::milliseconds;

HollowKubelet::HollowKubelet(kube::Client& client, std::string namespace_name,
                             std::vector<HollowNode> nodes, bool run_pods)
    : client_(client),
      namespace_(std::move(namespace_name)),
      nodes_(std::move(nodes)),
      run_pods_(run_pods) {}

HollowKubelet::~HollowKubelet() {
  stop();
}

void HollowKubelet::start() {
  for (const auto& node : nodes_) {
    json labels = json::object();
    for (const auto& [k, v] : node.labels) {
      labels[k] = v;
    }
    labels["kubernetes.io/hostname"] = node.name;
    const json object = {{"apiVersion", "v1"},
                         {"kind", "Node"},
                         {"metadata", {{"name", node.name}, {"labels", labels}}}};
    (void)client_.create(kube::resources::nodes(), "", object);
  }
  renew();
  thread_ = std::thread([this] { loop(); });
}

void HollowKubelet::stop() {
  if (!thread_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(wake_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const auto& node : nodes_) {
    (void)client_.remove(kube::resources::nodes(), "", node.name);
    (void)client_.remove(kube::resources::leases(), "kube-node-lease", node.name);
  }
}

bool HollowKubelet::finish(const std::string& pod, const std::string& phase) {
  const json status = {{"status", {{"phase", phase}}}};
  return client_
      .patch(kube::resources::pods(), namespace_, pod, kube::PatchType::kStrategicMerge, status,
             "status")
      .ok();
}

void HollowKubelet::fail_node(const std::string& node) {
  std::lock_guard lock(mu_);
  failed_[node] = true;
}

void HollowKubelet::renew() {
  const std::string stamp = kube::format_time(std::chrono::system_clock::now());
  for (const auto& node : nodes_) {
    bool failed = false;
    {
      std::lock_guard lock(mu_);
      failed = failed_[node.name];
    }
    json allocatable = {{"cpu", node.cpu}, {"memory", node.memory}, {"pods", "110"}};
    if (node.gpus > 0) {
      allocatable["nvidia.com/gpu"] = std::to_string(node.gpus);
    }
    const json status = {
        {"status",
         {{"capacity", allocatable},
          {"allocatable", allocatable},
          {"conditions", json::array({{{"type", "Ready"},
                                       {"status", failed ? "Unknown" : "True"},
                                       {"reason", failed ? "NodeStatusUnknown" : "KubeletReady"},
                                       {"message", "tightrope test hollow kubelet"},
                                       {"lastHeartbeatTime", stamp},
                                       {"lastTransitionTime", stamp}}})},
          {"addresses", json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}}})}}}};
    (void)client_.patch(kube::resources::nodes(), "", node.name, kube::PatchType::kStrategicMerge,
                        status, "status");
    if (failed) {
      continue;
    }
    const json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", node.name}, {"namespace", "kube-node-lease"}}},
        {"spec",
         {{"holderIdentity", node.name},
          {"leaseDurationSeconds", 40},
          {"renewTime", kube::format_micro_time(std::chrono::system_clock::now())}}}};
    (void)client_.apply(kube::resources::leases(), "kube-node-lease", lease,
                        {"tightrope-hollow-kubelet", true});
  }
}

void HollowKubelet::loop() {
  auto renewed = std::chrono::steady_clock::now();
  while (!stopping_) {
    if (run_pods_) {
      sync();
    }
    if (std::chrono::steady_clock::now() - renewed > std::chrono::seconds(10)) {
      renew();
      renewed = std::chrono::steady_clock::now();
    }
    std::unique_lock lock(wake_mu_);
    wake_.wait_for(lock, milliseconds(100), [this] { return stopping_.load(); });
  }
}

void HollowKubelet::sync() {
  auto pods = client_.list(kube::resources::pods(), namespace_);
  if (!pods) {
    return;
  }
  for (const json& pod : pods->items) {
    const std::string node = pod["spec"].value("nodeName", "");
    const bool ours = std::any_of(nodes_.begin(), nodes_.end(),
                                  [&](const HollowNode& n) { return n.name == node; });
    {
      std::lock_guard lock(mu_);
      if (!ours || failed_[node]) {
        continue;
      }
    }
    const std::string name = pod["metadata"]["name"];
    const std::string phase = pod["status"].value("phase", "");
    const bool terminal = phase == "Succeeded" || phase == "Failed";
    if (pod["metadata"].contains("deletionTimestamp")) {
      if (!terminal) {
        (void)finish(name, "Failed");
      }
      kube::DeleteOptions now;
      now.grace_period_seconds = 0;
      (void)client_.remove(kube::resources::pods(), namespace_, name, now);
    } else if (phase == "Pending") {
      (void)finish(name, "Running");
    }
  }
}

}  // namespace tightrope::bridge::testing
