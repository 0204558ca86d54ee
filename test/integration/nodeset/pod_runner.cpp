#include "nodeset/pod_runner.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include "http.hpp"
#include "kube/resource.hpp"
#include "kube/time.hpp"

namespace tightrope::op::testing {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

std::string now_rfc3339() {
  return kube::format_time(std::chrono::system_clock::now());
}

bool http_ready(int port) {
  try {
    ::tightrope::testing::HttpRequest r;
    r.url = "http://127.0.0.1:" + std::to_string(port) + "/readyz";
    r.timeout_ms = 1000;
    return ::tightrope::testing::http(r).status / 100 == 2;
  } catch (const std::exception&) {
    return false;
  }
}

// In a forked child: setsid, output to `log`, exec `argv`. Never returns.
[[noreturn]] void exec_logged(std::vector<std::string> argv, const std::filesystem::path& log) {
  setsid();
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  std::vector<char*> raw;
  raw.reserve(argv.size() + 1);
  for (auto& a : argv) {
    raw.push_back(a.data());
  }
  raw.push_back(nullptr);
  ::execv(raw[0], raw.data());
  _exit(127);
}

}  // namespace

const json* slurmd_container(const json& pod) {
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->contains("containers")) {
    return nullptr;
  }
  for (const auto& c : (*spec)["containers"]) {
    if (c.value("name", "") == "slurmd") {
      return &c;
    }
  }
  return nullptr;
}

std::vector<std::string> pre_stop_command(const json& pod) {
  std::vector<std::string> argv;
  const json* container = slurmd_container(pod);
  if (container == nullptr) {
    return argv;
  }
  for (const auto& a :
       container->value("/lifecycle/preStop/exec/command"_json_pointer, json::array())) {
    argv.push_back(a.get<std::string>());
  }
  return argv;
}

int run_in_root(const std::filesystem::path& root, const std::vector<std::string>& command,
                const std::filesystem::path& log, milliseconds limit) {
  std::vector<std::string> argv = {
      "/usr/sbin/chroot", root.string(), "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=/root",       "LANG=C.UTF-8"};
  argv.insert(argv.end(), command.begin(), command.end());
  const pid_t pid = fork();
  if (pid == 0) {
    exec_logged(argv, log);
  }
  const auto deadline = steady_clock::now() + limit;
  int status = 0;
  while (steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

PodRunner::PodRunner(kube::Client& client, PodRunnerOptions options)
    : client_(client), options_(std::move(options)) {}

PodRunner::~PodRunner() {
  stop();
}

void PodRunner::start() {
  std::filesystem::create_directories(options_.log_dir);
  for (const auto& name : options_.nodes) {
    const json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", name},
          {"labels", {{"kubernetes.io/hostname", name}, {"tightrope.test/pod-runner", "true"}}}}}};
    (void)client_.create(kube::resources::nodes(), "", node);
  }
  renew_nodes();
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void PodRunner::renew_nodes() {
  const std::string stamp = now_rfc3339();
  for (const auto& name : options_.nodes) {
    const json status = {
        {"status",
         {{"capacity", {{"cpu", "2"}, {"memory", "4Gi"}, {"pods", "110"}}},
          {"allocatable", {{"cpu", "2"}, {"memory", "4Gi"}, {"pods", "110"}}},
          {"conditions", json::array({{{"type", "Ready"},
                                       {"status", "True"},
                                       {"reason", "KubeletReady"},
                                       {"message", "tightrope test pod runner"},
                                       {"lastHeartbeatTime", stamp},
                                       {"lastTransitionTime", stamp}}})},
          {"addresses", json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}}})}}}};
    (void)client_.patch(kube::resources::nodes(), "", name, kube::PatchType::kStrategicMerge,
                        status, "status");
    const json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", name}, {"namespace", "kube-node-lease"}}},
        {"spec",
         {{"holderIdentity", name},
          {"leaseDurationSeconds", 40},
          {"renewTime", kube::format_micro_time(std::chrono::system_clock::now())}}}};
    (void)client_.apply(kube::resources::leases(), "kube-node-lease", lease,
                        {"tightrope-pod-runner", true});
  }
}

void PodRunner::loop() {
  auto renewed = steady_clock::now();
  while (!stopping_) {
    sync();
    if (steady_clock::now() - renewed > std::chrono::seconds(10)) {
      renew_nodes();
      renewed = steady_clock::now();
    }
    std::unique_lock lock(wake_mu_);
    wake_.wait_for(lock, milliseconds(250), [this] { return stopping_.load(); });
  }
}

void PodRunner::sync() {
  kube::ListOptions options;
  options.label_selector = "app.kubernetes.io/name=slurmd";
  auto pods = client_.list(kube::resources::pods(), options_.namespace_name, options);
  if (!pods) {
    return;
  }
  std::map<std::string, const json*> by_name;
  for (const auto& pod : pods->items) {
    by_name[pod["metadata"].value("name", "")] = &pod;
  }
  // Gone or going: preStop, stop slurmd, confirm the deletion.
  std::map<std::string, Slurmd> ending;
  {
    std::lock_guard lock(mu_);
    for (auto it = slurmd_.begin(); it != slurmd_.end();) {
      const auto pod = by_name.find(it->first);
      const bool gone = pod == by_name.end() ||
                        pod->second->at("metadata").value("uid", "") != it->second.uid ||
                        pod->second->at("metadata").contains("deletionTimestamp");
      if (gone) {
        ending.insert(*it);
        it = slurmd_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [name, slurmd] : ending) {
    const auto pod = by_name.find(name);
    terminate(name, slurmd, pod == by_name.end() ? nullptr : pod->second);
  }
  for (const auto& pod : pods->items) {
    const json& meta = pod["metadata"];
    const std::string name = meta.value("name", "");
    const std::string node = pod["spec"].value("nodeName", "");
    const bool ours =
        std::find(options_.nodes.begin(), options_.nodes.end(), node) != options_.nodes.end();
    if (!ours) {
      continue;
    }
    if (meta.contains("deletionTimestamp")) {
      // Never ran here (or already stopped): confirm the deletion.
      kube::DeleteOptions del;
      del.grace_period_seconds = 0;
      del.precondition_uid = meta.value("uid", "");
      (void)client_.remove(kube::resources::pods(), options_.namespace_name, name, del);
      continue;
    }
    bool known = false;
    pid_t pid = -1;
    {
      std::lock_guard lock(mu_);
      const auto it = slurmd_.find(name);
      known = it != slurmd_.end();
      pid = known ? it->second.pid : -1;
    }
    if (known) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        // Died: like a container restart, report not ready and start it again.
        std::lock_guard lock(mu_);
        slurmd_.erase(name);
        report_running(pod, false);
      }
      continue;
    }
    if (stopping_) {
      return;
    }
    // One at a time: concurrent slurmd starts in one root race for its sack socket.
    launch(pod);
  }
}

int PodRunner::free_port() {
  for (int tries = 0; tries < 700; ++tries) {
    const int port = next_port_;
    next_port_ = next_port_ >= 32700 ? 32000 : next_port_ + 1;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) {
      return port;
    }
  }
  return 0;
}

bool PodRunner::launch(const json& pod) {
  const json* container = slurmd_container(pod);
  if (container == nullptr) {
    return false;
  }
  const std::string name = pod["metadata"].value("name", "");
  const std::string hostname = pod["spec"].value("hostname", name);
  std::string conf_server;
  std::string conf;
  const json args = container->value("args", json::array());
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--conf-server") {
      conf_server = args[i + 1].get<std::string>();
    } else if (args[i] == "--conf") {
      conf = args[i + 1].get<std::string>();
    }
  }
  // Slinky's operator (v1.0) wraps --conf in single quotes, for its image's shell to take off.
  if (conf.size() >= 2 && conf.front() == '\'' && conf.back() == '\'') {
    conf = conf.substr(1, conf.size() - 2);
  }
  // A Slurm node keeps the port it first registered with: a pod that comes back under the same
  // hostname gets the same port, as a real pod gets slurmd's 6818 again.
  int port = 0;
  {
    std::lock_guard lock(mu_);
    const auto known = ports_.find(hostname);
    port = known != ports_.end() ? known->second : 0;
  }
  if (port == 0) {
    port = free_port();
    std::lock_guard lock(mu_);
    ports_[hostname] = port;
  }
  // The bed's own nodes are this small: jobs' memory requests stay predictable.
  std::string full_conf = conf + " Port=" + std::to_string(port);
  if (conf.find("CPUs=") == std::string::npos) {
    full_conf += " CPUs=2";
  }
  if (conf.find("RealMemory=") == std::string::npos) {
    full_conf += " RealMemory=1000";
  }
  std::vector<std::string> argv = {"/usr/sbin/chroot",
                                   options_.slurm_root.string(),
                                   "/usr/bin/env",
                                   "-i",
                                   "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                   "HOME=/root",
                                   "LANG=C.UTF-8",
                                   "slurmd",
                                   "-D",
                                   "-Z",
                                   "-N",
                                   hostname,
                                   "--conf-server",
                                   conf_server,
                                   "--conf",
                                   full_conf};
  const std::filesystem::path log =
      options_.log_dir / ("pod-" + options_.namespace_name + "-" + name + ".out");
  const pid_t pid = fork();
  if (pid == 0) {
    exec_logged(argv, log);
  }
  {
    std::lock_guard lock(mu_);
    slurmd_[name] = {pid, pod["metadata"].value("uid", ""), hostname, port};
  }
  const auto deadline = steady_clock::now() + std::chrono::seconds(30);
  while (steady_clock::now() < deadline && !stopping_) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::lock_guard lock(mu_);
      slurmd_.erase(name);
      return false;
    }
    if (http_ready(port)) {
      report_running(pod, true);
      return true;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

void PodRunner::report_running(const json& pod, bool ready) {
  const std::string stamp = now_rfc3339();
  const std::string flag = ready ? "True" : "False";
  const json* container = slurmd_container(pod);
  const json status = {
      {"status",
       {{"phase", "Running"},
        {"hostIP", "127.0.0.1"},
        {"podIP", "127.0.0.1"},
        {"startTime", stamp},
        {"conditions",
         json::array(
             {{{"type", "PodScheduled"}, {"status", "True"}},
              {{"type", "Initialized"}, {"status", "True"}},
              {{"type", "ContainersReady"}, {"status", flag}, {"lastTransitionTime", stamp}},
              {{"type", "Ready"}, {"status", flag}, {"lastTransitionTime", stamp}}})},
        {"containerStatuses",
         json::array({{{"name", "slurmd"},
                       {"ready", ready},
                       {"started", ready},
                       {"restartCount", 0},
                       {"image", container != nullptr ? container->value("image", "") : ""},
                       {"imageID", ""},
                       {"state", {{"running", {{"startedAt", stamp}}}}}}})}}}};
  (void)client_.patch(kube::resources::pods(), options_.namespace_name,
                      pod["metadata"].value("name", ""), kube::PatchType::kStrategicMerge, status,
                      "status");
}

void PodRunner::terminate(const std::string& pod, const Slurmd& slurmd, const json* doc) {
  if (doc != nullptr) {
    if (const auto argv = pre_stop_command(*doc); !argv.empty()) {
      (void)run_in_root(options_.slurm_root, argv,
                        options_.log_dir / ("pod-" + options_.namespace_name + "-" + pod + ".out"),
                        std::chrono::seconds(30));
    }
  }
  ::kill(slurmd.pid, SIGTERM);
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  bool reaped = false;
  while (steady_clock::now() < deadline) {
    if (::waitpid(slurmd.pid, &status, WNOHANG) == slurmd.pid) {
      reaped = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (!reaped) {
    ::kill(slurmd.pid, SIGKILL);
    ::waitpid(slurmd.pid, &status, 0);
  }
  if (doc != nullptr) {
    kube::DeleteOptions del;
    del.grace_period_seconds = 0;
    del.precondition_uid = slurmd.uid;
    (void)client_.remove(kube::resources::pods(), options_.namespace_name, pod, del);
  }
}

bool PodRunner::kill_slurmd(const std::string& pod) {
  std::lock_guard lock(mu_);
  const auto it = slurmd_.find(pod);
  if (it == slurmd_.end()) {
    return false;
  }
  return ::kill(it->second.pid, SIGKILL) == 0;
}

std::vector<std::string> PodRunner::running() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, s] : slurmd_) {
    out.push_back(name);
  }
  return out;
}

std::map<std::string, int> PodRunner::slurmd_pids() const {
  std::lock_guard lock(mu_);
  std::map<std::string, int> out;
  for (const auto& [name, s] : slurmd_) {
    out[name] = s.pid;
  }
  return out;
}

void PodRunner::stop() {
  if (thread_.joinable()) {
    stopping_ = true;
    wake_.notify_all();
    thread_.join();
  }
  std::map<std::string, Slurmd> all;
  {
    std::lock_guard lock(mu_);
    all.swap(slurmd_);
  }
  for (const auto& [name, slurmd] : all) {
    terminate(name, slurmd, nullptr);
    kube::DeleteOptions del;
    del.grace_period_seconds = 0;
    (void)client_.remove(kube::resources::pods(), options_.namespace_name, name, del);
  }
  for (const auto& name : options_.nodes) {
    (void)client_.remove(kube::resources::nodes(), "", name);
  }
}

}  // namespace tightrope::op::testing
