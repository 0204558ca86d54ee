#include "scale/hollow_kubelet.hpp"

#include <chrono>
#include <cstdio>

#include "kube/resource.hpp"
#include "kube/time.hpp"
#include "nodeset/pod_runner.hpp"

namespace tightrope::bench {

namespace op = tightrope::op;

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr auto kLeaseRenewal = std::chrono::seconds(10);  // the lease lasts 40 s
// Leases renewed at once: one after another, 100 of them took longer than a lease lasts when
// the API server was busy creating 10,000 pods, and Nodes went NotReady (their pods evicted).
constexpr size_t kLeaseRenewers = 8;

// Named after the namespace too, so that runs never share a Node.
std::string node_name(const std::string& ns, int i) {
  char number[16];
  std::snprintf(number, sizeof number, "%04d", i);
  return "hollow-" + ns + "-" + number;
}

}  // namespace

HollowKubelet::HollowKubelet(kube::Client& client, slurm::Client& slurm,
                             HollowKubeletOptions options)
    : client_(client), slurm_(slurm), options_(std::move(options)) {
  for (int i = 0; i < options_.nodes; ++i) {
    node_set_.insert(node_name(options_.namespace_name, i));
  }
}

HollowKubelet::~HollowKubelet() {
  stop();
}

std::vector<std::string> HollowKubelet::node_names() const {
  return {node_set_.begin(), node_set_.end()};
}

void HollowKubelet::start() {
  std::filesystem::create_directories(options_.log_dir);
  const std::string pods = std::to_string(options_.pods_per_node + 10);
  const std::string stamp = kube::format_time(std::chrono::system_clock::now());
  for (const auto& name : node_set_) {
    json node = {{"apiVersion", "v1"}, {"kind", "Node"}};
    node["metadata"]["name"] = name;
    node["metadata"]["labels"] = {{"kubernetes.io/hostname", name},
                                  {"tightrope.bench/hollow", "true"}};
    (void)client_.create(kube::resources::nodes(), "", node);
    json status = json::object();
    const json capacity = {{"cpu", "1000"}, {"memory", "4000Gi"}, {"pods", pods}};
    status["status"]["capacity"] = capacity;
    status["status"]["allocatable"] = capacity;
    status["status"]["conditions"] = json::array({{{"type", "Ready"},
                                                   {"status", "True"},
                                                   {"reason", "KubeletReady"},
                                                   {"message", "tightrope hollow kubelet"},
                                                   {"lastHeartbeatTime", stamp},
                                                   {"lastTransitionTime", stamp}}});
    status["status"]["addresses"] =
        json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}}});
    (void)client_.patch(kube::resources::nodes(), "", name, kube::PatchType::kStrategicMerge,
                        status, "status");
  }
  renew_leases();
  stopping_ = false;
  lease_thread_ = std::thread([this] {
    auto next = steady_clock::now() + kLeaseRenewal;
    while (!stopping_) {
      std::this_thread::sleep_for(milliseconds(200));
      if (steady_clock::now() >= next) {
        renew_leases();
        next = steady_clock::now() + kLeaseRenewal;
      }
    }
  });

  // Every pod of the namespace: an operator may wait for its other pods (Slinky's for the
  // slurmrestd Deployment's) before it talks to Slurm.
  pods_ = std::make_unique<kube::Informer<kube::Document>>(
      client_, kube::resources::pods(), options_.namespace_name, kube::decode_document);
  const auto enqueue = [this](const kube::Informer<kube::Document>::Ptr& pod) {
    queue_.add(pod->meta.key());
  };
  pods_->on_add(enqueue);
  pods_->on_update([enqueue](const auto&, const auto& after) { enqueue(after); });
  pods_->on_delete(
      [this](const kube::Deleted<kube::Document>& gone) { queue_.add(gone.object->meta.key()); });
  pods_->start();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this] { work(); });
  }
}

void HollowKubelet::renew_leases() {
  const std::string now = kube::format_micro_time(std::chrono::system_clock::now());
  const std::vector<std::string> names(node_set_.begin(), node_set_.end());
  std::vector<std::thread> renewers;
  renewers.reserve(kLeaseRenewers);
  for (size_t r = 0; r < kLeaseRenewers; ++r) {
    renewers.emplace_back([this, &names, &now, r] {
      for (size_t i = r; i < names.size(); i += kLeaseRenewers) {
        json lease = {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}};
        lease["metadata"] = {{"name", names[i]}, {"namespace", "kube-node-lease"}};
        lease["spec"] = {
            {"holderIdentity", names[i]}, {"leaseDurationSeconds", 40}, {"renewTime", now}};
        (void)client_.apply(kube::resources::leases(), "kube-node-lease", lease,
                            {"tightrope-hollow-kubelet", true});
      }
    });
  }
  for (auto& t : renewers) {
    t.join();
  }
}

void HollowKubelet::work() {
  while (auto key = queue_.get()) {
    handle(*key);
    queue_.done(*key);
  }
}

void HollowKubelet::handle(const std::string& key) {
  const auto pod = pods_->store().get(key);
  if (!pod) {
    return;
  }
  const json& doc = pod->doc;
  if (node_set_.count(doc["spec"].value("nodeName", "")) == 0) {
    return;  // not scheduled yet, or somewhere else
  }
  const std::string uid = pod->meta.uid;
  if (doc["metadata"].contains("deletionTimestamp")) {
    finish_pod(doc);
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (running_.count(uid) != 0) {
      return;
    }
  }
  if (start_pod(doc)) {
    std::lock_guard lock(mu_);
    running_.insert(uid);
  } else {
    queue_.add_rate_limited(key);
  }
}

bool HollowKubelet::start_pod(const json& pod) {
  const std::string name = pod["metadata"].value("name", "");
  const json* container = op::testing::slurmd_container(pod);
  if (container == nullptr) {
    // Any other pod only runs, reported Ready under its first container's name.
    const json containers = pod["spec"].value("containers", json::array());
    return containers.empty() || report_running(name, containers[0]);
  }
  const std::string hostname = pod["spec"].value("hostname", name);
  // What slurmd -Z would register: the pod's own --conf, on a node of the bed's size.
  std::string conf;
  const json args = container->value("args", json::array());
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--conf") {
      conf = args[i + 1].get<std::string>();
    }
  }
  // Slinky's image hands --conf through a shell, which removes the quotes it writes around it.
  if (conf.size() >= 2 && conf.front() == '\'' && conf.back() == '\'') {
    conf = conf.substr(1, conf.size() - 2);
  }
  std::string node_conf = "NodeName=" + hostname + " State=EXTERNAL " + conf;
  if (conf.find("CPUs=") == std::string::npos) {
    node_conf += " CPUs=2";
  }
  if (conf.find("RealMemory=") == std::string::npos) {
    node_conf += " RealMemory=1000";
  }
  if (auto created = slurm_.create_node(node_conf); !created) {
    // A pod back under a known hostname finds its node record, as slurmd would.
    if (!slurm_.get_node(hostname)) {
      ++create_failures_;
      return false;
    }
  }
  return report_running(name, *container);
}

bool HollowKubelet::report_running(const std::string& name, const json& container) {
  const std::string stamp = kube::format_time(std::chrono::system_clock::now());
  json status = json::object();
  status["status"]["phase"] = "Running";
  status["status"]["hostIP"] = "127.0.0.1";
  status["status"]["podIP"] = "127.0.0.1";
  status["status"]["startTime"] = stamp;
  status["status"]["conditions"] =
      json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                   {{"type", "Initialized"}, {"status", "True"}},
                   {{"type", "ContainersReady"}, {"status", "True"}, {"lastTransitionTime", stamp}},
                   {{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", stamp}}});
  json container_status = {{"name", container.value("name", "")},
                           {"ready", true},
                           {"started", true},
                           {"restartCount", 0},
                           {"image", container.value("image", "")},
                           {"imageID", ""}};
  container_status["state"]["running"]["startedAt"] = stamp;
  status["status"]["containerStatuses"] = json::array({container_status});
  auto patched = client_.patch(kube::resources::pods(), options_.namespace_name, name,
                               kube::PatchType::kStrategicMerge, status, "status");
  if (patched) {
    ++started_;
  }
  return static_cast<bool>(patched);
}

void HollowKubelet::finish_pod(const json& pod) {
  const std::string name = pod["metadata"].value("name", "");
  const std::string uid = pod["metadata"].value("uid", "");
  bool ran = false;
  {
    std::lock_guard lock(mu_);
    ran = running_.erase(uid) != 0;
  }
  if (const auto argv = op::testing::pre_stop_command(pod); ran && !argv.empty()) {
    (void)op::testing::run_in_root(options_.slurm_root, argv,
                                   options_.log_dir / "hollow-prestop.out",
                                   std::chrono::seconds(30));
  }
  kube::DeleteOptions del;
  del.grace_period_seconds = 0;
  del.precondition_uid = uid;
  (void)client_.remove(kube::resources::pods(), options_.namespace_name, name, del);
}

void HollowKubelet::stop() {
  if (stopping_.exchange(true)) {
    return;
  }
  queue_.shut_down();
  for (auto& w : workers_) {
    w.join();
  }
  workers_.clear();
  if (pods_) {
    pods_->stop();
  }
  if (lease_thread_.joinable()) {
    lease_thread_.join();
  }
  for (const auto& name : node_set_) {
    (void)client_.remove(kube::resources::nodes(), "", name);
  }
}

}  // namespace tightrope::bench
