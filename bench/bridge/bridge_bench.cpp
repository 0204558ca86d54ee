// slurm-bridge's throughput, latency and footprint on a test bed (the environment of
// `scripts/testbed env`). bench/run bridge starts the bed and this program.
//
//   bench_bridge --out FILE [--pods P] [--gangs G] [--gang-size S] [--nodes N] [--idle-seconds I]
//                [--group-workers W]
//
// The release slurm-bridge runs as a child process with the bed's audited operator-under-test
// identity (its Kubernetes requests are counted from the audit log) and a counting relay in
// front of slurmrestd (its Slurm requests). N hollow Nodes of 64 CPUs are labelled as external
// nodes; the hollow kubelet keeps them Ready and runs no pod (what is measured is Slurm's
// decision reaching Kubernetes: a binding). Phases:
//   1. register: the N Nodes become Slurm external nodes;
//   2. burst: P single-pod pods and G Indexed Jobs of S pods (gangs), created as fast as the
//      harness can; each pod's time from first seen to bound (nodeName set) by an informer of
//      the harness; pods/s from the first creation to the last binding;
//   3. rest: I seconds with nothing to do: the bridge's Kubernetes and Slurm requests a minute,
//      its RSS and CPU.
// Pods ask 1 CPU and share nodes (slurmjob.slinky.slurm.net/exclusive: "false"), so that every
// pod of the burst fits at once and the measure is the bridge's, not the queue's.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "../test/integration/bridge/hollow_kubelet.hpp"
#include "../test/integration/kube/kube_support.hpp"
#include "bridge/objects.hpp"
#include "footprint.hpp"
#include "kube/informer.hpp"
#include "percentile.hpp"
#include "scale/counting_proxy.hpp"
#include "slurm/client.hpp"
#include "slurm/token.hpp"
#include "testbed.hpp"

namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;
namespace kube = tightrope::kube;
namespace slurm = tightrope::slurm;
namespace bench = tightrope::bench;
using tightrope::testing::TestBed;

struct Options {
  std::string out;
  int pods = 1000;
  int gangs = 100;
  int gang_size = 8;
  int nodes = 32;
  int idle_seconds = 60;
  int group_workers = 4;  // the bridge's --group-workers
};

double seconds_since(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

// The release bridge, a child process that dies with this one.
class BridgeProcess {
 public:
  BridgeProcess(const std::filesystem::path& dir, const std::string& slurm_url,
                const std::string& scheduler, int group_workers) {
    const std::filesystem::path config = dir / "config.yaml";
    std::ofstream(config) << "schedulerName: " << scheduler << "\nslurmRestApi: " << slurm_url
                          << "\npartition: slurm-bridge\nmcsLabel: \"\"\n";
    const std::string log = (dir / "bridge.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      setenv("KUBECONFIG", TestBed::var("OPERATOR_KUBECONFIG").c_str(), 1);
      const std::string key = TestBed::var("SLURM_JWT_KEY");
      execl(BENCH_SLURM_BRIDGE, "slurm-bridge", ("--config=" + config.string()).c_str(),
            ("--slurm-jwt-key=" + key).c_str(), "--metrics-addr=0", "--health-addr=0",
            ("--group-workers=" + std::to_string(group_workers)).c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BridgeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  BridgeProcess(const BridgeProcess&) = delete;
  BridgeProcess& operator=(const BridgeProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// When the harness first saw each pod, and when it first saw it bound.
class PodClock {
 public:
  void seen(const std::string& key, bool bound) {
    std::lock_guard lock(mu_);
    const auto now = Steady::now();
    auto& entry = pods_[key];
    if (!entry.first) {
      entry.first = now;
    }
    if (bound && !entry.second) {
      entry.second = now;
    }
  }
  size_t bound() const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(
        std::count_if(pods_.begin(), pods_.end(), [](const auto& p) { return p.second.second; }));
  }
  // Of the pods whose name (after "namespace/") starts with `prefix`.
  std::vector<double> latencies(const std::string& prefix = "") const {
    std::lock_guard lock(mu_);
    std::vector<double> out;
    for (const auto& [key, times] : pods_) {
      const std::string name = key.substr(key.find('/') + 1);
      if (times.first && times.second && name.starts_with(prefix)) {
        out.push_back(std::chrono::duration<double>(*times.second - *times.first).count());
      }
    }
    return out;
  }
  std::optional<Steady::time_point> last_bound() const {
    std::lock_guard lock(mu_);
    std::optional<Steady::time_point> last;
    for (const auto& [key, times] : pods_) {
      if (times.second && (!last || *times.second > *last)) {
        last = times.second;
      }
    }
    return last;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string,
           std::pair<std::optional<Steady::time_point>, std::optional<Steady::time_point>>>
      pods_;
};

json pod_doc(const std::string& ns, const std::string& name, const std::string& scheduler) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"annotations", {{"slurmjob.slinky.slurm.net/exclusive", "false"}}}}},
          {"spec",
           {{"schedulerName", scheduler},
            {"containers",
             {{{"name", "main"},
               {"image", "busybox"},
               {"resources", {{"requests", {{"cpu", "1"}, {"memory", "64Mi"}}}}}}}}}}};
}

json gang_doc(const std::string& ns, const std::string& name, const std::string& scheduler,
              int size) {
  json pod = pod_doc(ns, "x", scheduler);
  pod["spec"]["restartPolicy"] = "Never";
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"annotations", {{"slurmjob.slinky.slurm.net/exclusive", "false"}}}}},
          {"spec",
           {{"completions", size},
            {"parallelism", size},
            {"completionMode", "Indexed"},
            {"backoffLimit", 0},
            {"template", {{"spec", pod["spec"]}}}}}};
}

int run(const Options& o) {
  auto client = kube::testing::make_client([] {
    kube::ClientOptions c;
    c.qps = 500;
    c.burst = 1000;
    return c;
  }());
  const std::string ns = kube::testing::fresh_namespace(*client);
  // Pods of a namespace are refused until its default ServiceAccount exists.
  kube::testing::eventually(
      [&] { return client->get(kube::resources::service_accounts(), ns, "default").ok(); },
      std::chrono::seconds(30));
  const std::string scheduler = "bench-bridge-" + std::to_string(getpid());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bench-bridge-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);

  std::vector<tightrope::bridge::testing::HollowNode> nodes;
  for (int i = 0; i < o.nodes; ++i) {
    nodes.push_back({"bench-" + std::to_string(getpid()) + "-n" + std::to_string(i),
                     "64",
                     "256Gi",
                     0,
                     {{"scheduler.slinky.slurm.net/external-node", "true"}}});
  }
  tightrope::bridge::testing::HollowKubelet kubelet(*client, ns, nodes, /*run_pods=*/false);
  kubelet.start();

  const std::string slurmrestd = TestBed::var("SLURMRESTD_URL");
  const size_t colon = slurmrestd.rfind(':');
  bench::CountingProxy proxy("127.0.0.1", std::stoi(slurmrestd.substr(colon + 1)));
  const std::string audit_log = TestBed::var("OPERATOR_AUDIT_LOG");
  BridgeProcess bridge(dir, proxy.url(), scheduler, o.group_workers);
  std::cout << "bridge pid " << bridge.pid() << ", log " << (dir / "bridge.log") << std::endl;

  slurm::ClientOptions so;
  so.url = slurmrestd;
  slurm::Client slurm_client(
      so, std::make_shared<slurm::MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm"));
  const auto registered = [&] {
    auto list = slurm_client.list_nodes();
    if (!list) {
      return 0;
    }
    return static_cast<int>(
        std::count_if(list->list.nodes.begin(), list->list.nodes.end(), [&](const slurm::Node& n) {
          return n.name.starts_with("bench-" + std::to_string(getpid()) + "-") && n.has("EXTERNAL");
        }));
  };
  const auto register_start = Steady::now();
  if (!kube::testing::eventually([&] { return registered() == o.nodes; },
                                 std::chrono::seconds(120))) {
    std::cerr << "the bridge registered " << registered() << " of " << o.nodes << " nodes\n";
    return 1;
  }
  const double register_s = seconds_since(register_start);

  // The harness's own view of the pods: first seen, first bound.
  PodClock clock;
  kube::ReflectorOptions reflector;
  kube::Informer<tightrope::bridge::Pod> pods(*client, kube::resources::pods(), ns,
                                              tightrope::bridge::decode_pod, reflector);
  pods.on_add([&](const auto& p) { clock.seen(p->meta.key(), p->bound()); });
  pods.on_update([&](const auto&, const auto& p) { clock.seen(p->meta.key(), p->bound()); });
  pods.start();
  pods.wait_for_sync(std::chrono::seconds(30));

  const auto burst_start = Steady::now();
  std::vector<std::thread> creators;
  std::atomic<int> pods_refused{0};
  std::atomic<int> gangs_refused{0};
  std::mutex error_mu;
  std::string first_error;
  const auto refused = [&](std::atomic<int>& count, const kube::Error& e) {
    ++count;
    std::lock_guard lock(error_mu);
    if (first_error.empty()) {
      first_error = e.message;
    }
  };
  for (int t = 0; t < 4; ++t) {
    creators.emplace_back([&, t] {
      for (int i = t; i < o.pods; i += 4) {
        if (auto made = client->create(kube::resources::pods(), ns,
                                       pod_doc(ns, "p" + std::to_string(i), scheduler));
            !made) {
          refused(pods_refused, made.error());
        }
      }
      for (int g = t; g < o.gangs; g += 4) {
        if (auto made =
                client->create({"batch", "v1", "jobs", "Job", true}, ns,
                               gang_doc(ns, "g" + std::to_string(g), scheduler, o.gang_size));
            !made) {
          refused(gangs_refused, made.error());
        }
      }
    });
  }
  for (auto& t : creators) {
    t.join();
  }
  const double create_s = seconds_since(burst_start);
  // What was made is what must be bound: a create the API server refused is not the bridge's.
  const size_t total =
      static_cast<size_t>(o.pods - pods_refused + (o.gangs - gangs_refused) * o.gang_size);
  std::cout << "created " << o.pods - pods_refused << " pods and " << o.gangs - gangs_refused
            << " Jobs in " << create_s << " s" << std::endl;
  if (!first_error.empty()) {
    std::cout << pods_refused + gangs_refused << " creates refused, the first: " << first_error
              << std::endl;
  }
  const bool all_bound =
      kube::testing::eventually([&] { return clock.bound() >= total; }, std::chrono::seconds(900));
  const auto last = clock.last_bound();
  const double burst_s = last ? std::chrono::duration<double>(*last - burst_start).count()
                              : seconds_since(burst_start);
  std::vector<double> latency = clock.latencies();
  std::cout << "bound " << clock.bound() << " of " << total << " pods in " << burst_s << " s"
            << std::endl;

  // Rest: nothing to do.
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const auto usage_before = bench::usage_of(bridge.pid());
  const std::streamoff audit_from = bench::file_size(audit_log);
  const int64_t slurm_from = proxy.requests();
  const auto rest_start = Steady::now();
  std::this_thread::sleep_for(std::chrono::seconds(o.idle_seconds));
  const double rest_s = seconds_since(rest_start);
  const bench::AuditCount rest =
      bench::audit_between(audit_log, audit_from, bench::file_size(audit_log));
  const auto usage_after = bench::usage_of(bridge.pid());
  const double per_minute = 60.0 / rest_s;

  json result = {{"pods", o.pods},
                 {"gangs", o.gangs},
                 {"gang_size", o.gang_size},
                 {"nodes", o.nodes},
                 {"group_workers", o.group_workers},
                 {"total_pods", total},
                 {"creates_refused", pods_refused.load() + gangs_refused.load()},
                 {"bound", clock.bound()},
                 {"all_bound", all_bound},
                 {"register_nodes_s", register_s},
                 {"create_s", create_s},
                 {"burst_s", burst_s},
                 {"pods_per_s", burst_s > 0 ? static_cast<double>(clock.bound()) / burst_s : 0},
                 {"bound_p50_s", bench::percentile(latency, 0.50)},
                 {"bound_p99_s", bench::percentile(latency, 0.99)},
                 {"bound_max_s", bench::percentile(latency, 1.0)},
                 // Single pods ("p<i>") and gang pods ("g<j>-..."): a gang pod waits for its whole
                 // gang, which the job controller creates a few pods at a time.
                 {"single_bound_p50_s", bench::percentile(clock.latencies("p"), 0.50)},
                 {"single_bound_p99_s", bench::percentile(clock.latencies("p"), 0.99)},
                 {"gang_bound_p50_s", bench::percentile(clock.latencies("g"), 0.50)},
                 {"gang_bound_p99_s", bench::percentile(clock.latencies("g"), 0.99)},
                 {"rss_mib", usage_after.rss_mib},
                 {"rss_peak_mib", usage_after.hwm_mib},
                 {"cpu_s_total", usage_after.cpu_s},
                 {"rest_cpu_percent", (usage_after.cpu_s - usage_before.cpu_s) / rest_s * 100.0},
                 {"rest_kube_requests_per_min", static_cast<double>(rest.requests) * per_minute},
                 {"rest_kube_by_kind", bench::top(rest.by_kind, 8)},
                 {"rest_slurm_requests_per_min",
                  static_cast<double>(proxy.requests() - slurm_from) * per_minute},
                 {"slurm_requests_by_route", [&] {
                    json out = json::object();
                    for (const auto& [route, n] : proxy.by_route()) {
                      out[route] = n;
                    }
                    return out;
                  }()}};
  std::cout << result.dump(2) << "\n";
  std::ofstream(o.out) << result.dump(2) << "\n";
  // The bridge cleans up after itself: the pods go, their jobs are cancelled, the Nodes leave
  // Slurm. The bed (which bench/run destroys) is left as it was found.
  pods.stop();
  (void)client->remove(kube::resources::namespaces(), "", ns);
  kubelet.stop();
  const bool clean = kube::testing::eventually(
      [&] {
        auto jobs = slurm_client.list_jobs();
        const bool jobs_done =
            jobs &&
            std::none_of(jobs->list.jobs.begin(), jobs->list.jobs.end(), [&](const slurm::Job& j) {
              return j.active() && j.admin_comment.find(ns) != std::string::npos;
            });
        return jobs_done && registered() == 0;
      },
      std::chrono::seconds(300));
  std::cout << (clean ? "cleaned up" : "left jobs or nodes in Slurm") << "\n";
  return all_bound ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--out") {
      o.out = value;
    } else if (flag == "--pods") {
      o.pods = std::stoi(value);
    } else if (flag == "--gangs") {
      o.gangs = std::stoi(value);
    } else if (flag == "--gang-size") {
      o.gang_size = std::stoi(value);
    } else if (flag == "--nodes") {
      o.nodes = std::stoi(value);
    } else if (flag == "--idle-seconds") {
      o.idle_seconds = std::stoi(value);
    } else if (flag == "--group-workers") {
      o.group_workers = std::stoi(value);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (o.out.empty()) {
    std::cerr << "usage: bench_bridge --out FILE [--pods P] [--gangs G] [--gang-size S] "
                 "[--nodes N] [--idle-seconds I]\n";
    return 2;
  }
  TestBed bed;
  bed.SetUp();
  return run(o);
}
