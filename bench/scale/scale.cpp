// Scale, latency and footprint of an operator of slinky.slurm.net/v1beta1 NodeSets, on a test bed
// (the environment of `scripts/testbed env`). bench/run scale starts the bed and this program.
//
//   bench_scale --nodes N --out FILE [--operator CMD | --slinky PATH --slinky-crds DIR]
//               [--pods-per-node K] [--idle-seconds S]
//
// The operator under test is Tightrope's release slurm-operator unless --operator names another
// command: it runs through /bin/sh with KUBECONFIG (the bed's audited operator-under-test
// identity), BENCH_NAMESPACE/WATCH_NAMESPACES/POD_NAMESPACE, POD_NAME and SLURMRESTD_URL (a
// counting relay to the bed's slurmrestd) in its environment, against the same custom resources.
// --slinky runs Slinky's slurm-operator (cmd/manager) unchanged, over the CRDs of its release
// (--slinky-crds): it reads no URL from its environment and finds slurmrestd at localhost:6820
// only with DEBUG=1, so the relay listens on that port. Its chart, not its operator, writes the
// container images and the controllerRef's namespace, so the harness (as the bed's
// administrator) writes them in the NodeSet and RestApi for both operators alike, and the JWT
// key under the name v1.0 reads (jwtHs256KeyRef) beside the one Tightrope reads (jwtKeyRef).
//
// Phases, in order (each bounded):
//   1. ready: a NodeSet of N replicas (oversubscribeNode, so hollow Nodes hold many pods) is
//      created; time until every pod exists, is scheduled, Ready, and carries the Slurm state;
//   2. idle: after a settling pause, S seconds of nothing: the operator's Kubernetes requests
//      (from the API server's audit log; Lease requests apart), its Slurm REST requests (from
//      the relay), RSS and CPU;
//   3. propagation: Slurm drain/undrain by an administrator -> the pod's condition;
//   4. cordon: a hollow Node cordoned/uncordoned -> every Slurm node of its pods drained/not;
//   5. scale-in: replicas N -> 0, until no pod is left; jobs that ended badly are counted.
// Pods are hollow (scale/hollow_kubelet.hpp): no slurmd runs, so no job can run on them either.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "../test/integration/kube/kube_support.hpp"
#include "../test/integration/nodeset/nodeset_support.hpp"
#include "../test/integration/operator/operator_support.hpp"
#include "footprint.hpp"
#include "harness.hpp"
#include "http.hpp"
#include "kube/informer.hpp"
#include "operator/resources.hpp"
#include "percentile.hpp"
#include "scale/counting_proxy.hpp"
#include "scale/hollow_kubelet.hpp"
#include "scale/operator_under_test.hpp"
#include "slurm/client.hpp"
#include "testbed.hpp"

namespace {

using nlohmann::json;
using tightrope::bench::percentile;
using Steady = std::chrono::steady_clock;
namespace kube = tightrope::kube;
namespace slurm = tightrope::slurm;
namespace op = tightrope::op;
using tightrope::bench::all_processes;
using tightrope::bench::audit_between;
using tightrope::bench::AuditCount;
using tightrope::bench::CountingProxy;
using tightrope::bench::file_size;
using tightrope::bench::has_condition;
using tightrope::bench::HollowKubelet;
using tightrope::bench::kSlinkyRestPort;
using tightrope::bench::must;
using tightrope::bench::OperatorUnderTest;
using tightrope::bench::since;
using tightrope::bench::top;
using tightrope::bench::Usage;
using tightrope::bench::usage_of;
using tightrope::testing::TestBed;
using PodInformer = kube::Informer<kube::Document>;

struct Options {
  int nodes = 100;
  std::string out;
  std::string operator_command;  // "" = Tightrope's slurm-operator
  std::string slinky;            // Slinky's slurm-operator binary, instead
  std::string slinky_crds;       // and the directory of its release's CRDs
  int pods_per_node = 10;
  int idle_seconds = 120;
  int settle_seconds = 30;
  int changes = 40;
  int cordons = 5;
};

// Images of the containers the operators write; hollow pods run none of them.
struct BenchImages {
  const char* slurmd = "hollow-slurmd";
  const char* logfile = "hollow-logfile";
  const char* slurmrestd = "hollow-slurmrestd";
};
constexpr BenchImages kBenchImages;

// --- the operator process and its footprint ------------------------------------------------

// CPU seconds so far of the bed's processes, by program name, and of this harness (which plays
// kubelet for every hollow pod): where a phase's time went on a small machine.
std::map<std::string, double> bed_cpu_seconds() {
  static const std::set<std::string> kPrograms = {
      "etcd",      "kube-apiserver", "kube-controller", "kube-scheduler",
      "slurmctld", "slurmrestd",     "bench_scale"};
  std::map<std::string, double> out;
  for (const auto& p : all_processes()) {
    if (kPrograms.count(p.comm) != 0) {
      out[p.comm] += p.cpu_s;
    }
  }
  return out;
}

json cpu_between(const std::map<std::string, double>& before,
                 const std::map<std::string, double>& after, double operator_s) {
  json out = json::object();
  for (const auto& [name, seconds] : after) {
    const auto it = before.find(name);
    out[name == "bench_scale" ? "hollow kubelet + harness" : name] =
        std::round((seconds - (it == before.end() ? 0.0 : it->second)) * 10) / 10;
  }
  out["operator"] = std::round(operator_s * 10) / 10;
  return out;
}

// Samples the operator every second: peak of the samples, and the samples of a window.
class Sampler {
 public:
  explicit Sampler(pid_t pid) : pid_(pid), thread_([this] { loop(); }) {}
  ~Sampler() {
    stopping_ = true;
    thread_.join();
  }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  Usage now() const { return usage_of(pid_); }
  double peak_rss_mib() const {
    std::lock_guard lock(mu_);
    return peak_;
  }
  void begin_window() {
    std::lock_guard lock(mu_);
    window_.clear();
    in_window_ = true;
  }
  std::vector<double> end_window() {
    std::lock_guard lock(mu_);
    in_window_ = false;
    return window_;
  }

 private:
  void loop() {
    while (!stopping_) {
      const Usage u = usage_of(pid_);
      {
        std::lock_guard lock(mu_);
        peak_ = std::max({peak_, u.rss_mib, u.hwm_mib});
        if (in_window_) {
          window_.push_back(u.rss_mib);
        }
      }
      for (int i = 0; i < 10 && !stopping_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  pid_t pid_;
  mutable std::mutex mu_;
  double peak_ = 0;
  bool in_window_ = false;
  std::vector<double> window_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// --- what the API server's audit log says the operator did ---------------------------------

// --- pods as the harness sees them ----------------------------------------------------------

// Polls `pred` every `every` until it holds (seconds since `start`) or `limit` passes (-1).
template <typename Pred>
double time_until(Steady::time_point start, std::chrono::milliseconds every, double limit,
                  Pred pred) {
  while (!pred()) {
    if (since(start) > limit) {
      return -1;
    }
    std::this_thread::sleep_for(every);
  }
  return since(start);
}

// GET /node/{name}: one node, cheap at any cluster size (the full list is megabytes).
std::optional<bool> slurm_drained(const std::string& name) {
  tightrope::testing::HttpRequest r;
  r.url = TestBed::var("SLURMRESTD_URL") + "/slurm/v0.0.44/node/" + name;
  r.headers = {"X-SLURM-USER-TOKEN: " + TestBed::var("SLURM_JWT")};
  r.timeout_ms = 5000;
  const auto answer = tightrope::testing::http(r);
  if (answer.status != 200) {
    return std::nullopt;
  }
  const json body = json::parse(answer.body, nullptr, false);
  if (!body.is_object() || body.value("nodes", json::array()).empty()) {
    return std::nullopt;
  }
  for (const auto& s : body["nodes"][0].value("state", json::array())) {
    if (s == "DRAIN") {
      return true;
    }
  }
  return false;
}

json summary(const std::vector<double>& xs) {
  return {{"samples", xs.size()},
          {"p50_s", percentile(xs, 0.50)},
          {"p99_s", percentile(xs, 0.99)},
          {"max_s", xs.empty() ? -1 : *std::max_element(xs.begin(), xs.end())}};
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] { return tightrope::bench::option_value(argc, argv, i); };
    if (a == "--nodes") {
      o.nodes = std::stoi(value());
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--operator") {
      o.operator_command = value();
    } else if (a == "--slinky") {
      o.slinky = value();
    } else if (a == "--slinky-crds") {
      o.slinky_crds = value();
    } else if (a == "--pods-per-node") {
      o.pods_per_node = std::stoi(value());
    } else if (a == "--idle-seconds") {
      o.idle_seconds = std::stoi(value());
    } else if (a == "--settle-seconds") {
      o.settle_seconds = std::stoi(value());
    } else if (a == "--changes") {
      o.changes = std::stoi(value());
    } else if (a == "--cordons") {
      o.cordons = std::stoi(value());
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (o.out.empty() || o.nodes < 1 || o.pods_per_node < 1 ||
      o.slinky.empty() != o.slinky_crds.empty()) {
    throw std::invalid_argument("usage: bench_scale --nodes N --out FILE [--operator CMD] ...");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  const auto say = [start = Steady::now()](const std::string& what) {
    std::cerr << "[scale " << static_cast<int>(since(start)) << " s] " << what << std::endl;
  };
  TestBed bed;
  bed.SetUp();
  auto client = kube::testing::make_client({.qps = 500, .burst = 1000});
  if (o.slinky.empty()) {
    op::testing::install_crds(*client);
  } else {
    for (const auto& file : std::filesystem::directory_iterator(o.slinky_crds)) {
      op::testing::install_crd_file(*client, file.path());
    }
  }
  const std::string ns = kube::testing::fresh_namespace(*client);
  op::testing::create_external_cluster(
      *client, ns,
      o.slinky.empty() ? json::object()
                       : json{{"jwtHs256KeyRef", {{"name", "jwt-key"}, {"key", "jwt.key"}}}});

  slurm::ClientOptions slurm_options;
  slurm_options.url = TestBed::var("SLURMRESTD_URL");
  slurm::Client slurm_client(slurm_options, std::make_shared<slurm::MintingTokenSource>(
                                                TestBed::var("SLURM_JWT_KEY"), "slurm"));
  const std::string rest = TestBed::var("SLURMRESTD_URL");
  CountingProxy proxy("127.0.0.1", std::stoi(rest.substr(rest.rfind(':') + 1)),
                      o.slinky.empty() ? 0 : kSlinkyRestPort);
  // Slinky v1.0 looks a controllerRef up as written: without a namespace, in none.
  must(client->patch(op::resources::restapis(), ns, "slurm", kube::PatchType::kMerge,
                     {{"spec",
                       {{"controllerRef", {{"name", "slurm"}, {"namespace", ns}}},
                        {"slurmrestd", {{"image", kBenchImages.slurmrestd}}}}}}),
       "naming the RestApi's image");

  const std::filesystem::path logs = TestBed::var("TESTBED_DIR") + "/logs";
  const int hollow_nodes = (o.nodes + o.pods_per_node - 1) / o.pods_per_node;
  HollowKubelet kubelet(*client, slurm_client,
                        {ns, hollow_nodes, o.pods_per_node, 6, TestBed::var("SLURM_ROOT"), logs});
  kubelet.start();

  // The harness's own view of the pods.
  kube::ReflectorOptions reflector;
  reflector.label_selector = "app.kubernetes.io/name=slurmd";
  PodInformer pods(*client, kube::resources::pods(), ns, kube::decode_document, reflector);
  pods.start();
  (void)pods.wait_for_sync(std::chrono::seconds(30));

  const std::string audit_log = TestBed::var("OPERATOR_AUDIT_LOG");
  const std::streamoff audit_start = file_size(audit_log);
  OperatorUnderTest under_test(o.slinky.empty() ? o.operator_command : "", o.slinky, ns,
                               proxy.url(), logs / "operator-under-test.log");
  Sampler sampler(under_test.pid());
  say("operator " + under_test.label() + " started (pid " + std::to_string(under_test.pid()) +
      "); " + std::to_string(hollow_nodes) + " hollow Nodes");
  std::this_thread::sleep_for(std::chrono::seconds(5));  // caches listed, lease taken

  json result = {{"nodes", o.nodes},
                 {"operator", under_test.label()},
                 {"hollow_kube_nodes", hollow_nodes},
                 {"pods_per_kube_node", o.pods_per_node}};
  const std::string nodeset = "scale";

  // 1. N replicas, from creation to Ready.
  const auto t0 = Steady::now();
  const auto cpu_before_ready = bed_cpu_seconds();
  const double operator_cpu_before_ready = sampler.now().cpu_s;
  const std::streamoff audit_before_ready = file_size(audit_log);
  const int64_t slurm_before_ready = proxy.requests();
  const int64_t slurm_bytes_before_ready = proxy.bytes_answered();
  (void)client->create(op::resources::nodesets(), ns,
                       {{"apiVersion", "slinky.slurm.net/v1beta1"},
                        {"kind", "NodeSet"},
                        {"metadata", {{"name", nodeset}}},
                        {"spec",
                         {{"controllerRef", {{"name", "slurm"}, {"namespace", ns}}},
                          {"replicas", o.nodes},
                          {"oversubscribeNode", true},
                          {"slurmd", {{"image", kBenchImages.slurmd}}},
                          {"logfile", {{"image", kBenchImages.logfile}}}}}});
  double created_s = -1;
  double scheduled_s = -1;
  double ready_s = -1;
  double linked_s = -1;
  const double ready_limit = std::max(300.0, o.nodes * 0.6);
  while (since(t0) < ready_limit && linked_s < 0) {
    size_t created = 0;
    size_t scheduled = 0;
    size_t ready = 0;
    size_t linked = 0;
    for (const auto& p : pods.store().list()) {
      if (p->doc["metadata"].contains("deletionTimestamp")) {
        continue;
      }
      ++created;
      scheduled += p->doc["spec"].contains("nodeName") ? 1 : 0;
      const bool is_ready = has_condition(p->doc, "Ready");
      ready += is_ready ? 1 : 0;
      linked += is_ready && has_condition(p->doc, "SlurmNodeStateIdle") ? 1 : 0;
    }
    const auto n = static_cast<size_t>(o.nodes);
    if (created_s < 0 && created >= n) {
      created_s = since(t0);
    }
    if (scheduled_s < 0 && scheduled >= n) {
      scheduled_s = since(t0);
    }
    if (ready_s < 0 && ready >= n) {
      ready_s = since(t0);
    }
    if (linked_s < 0 && linked >= n) {
      linked_s = since(t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const AuditCount ready_audit = audit_between(audit_log, audit_before_ready, file_size(audit_log));
  result["ready_phase_cpu_s"] = cpu_between(cpu_before_ready, bed_cpu_seconds(),
                                            sampler.now().cpu_s - operator_cpu_before_ready);
  result["ready_phase_cpu_s"]["machine_cores"] = std::thread::hardware_concurrency();
  result["ready_all_s"] = ready_s;
  result["ready_phases_s"] = {{"all_pods_created", created_s},
                              {"all_pods_scheduled", scheduled_s},
                              {"all_pods_ready", ready_s},
                              {"all_pods_show_slurm_idle", linked_s}};
  result["ready_phase_requests"] = {
      {"kube", ready_audit.requests},
      {"kube_per_s", ready_s > 0 ? static_cast<double>(ready_audit.requests) / linked_s : -1},
      {"kube_by_kind", top(ready_audit.by_kind, 8)},
      {"kube_refused", ready_audit.refused},
      {"kube_refused_by_kind", top(ready_audit.refused_by_kind, 8)},
      {"slurm", proxy.requests() - slurm_before_ready},
      {"slurm_mib",
       static_cast<double>(proxy.bytes_answered() - slurm_bytes_before_ready) / (1024 * 1024)}};
  say("ready: created " + std::to_string(created_s) + " s, scheduled " +
      std::to_string(scheduled_s) + " s, ready " + std::to_string(ready_s) +
      " s, Slurm state on every pod " + std::to_string(linked_s) + " s");
  if (linked_s < 0) {
    std::cerr << "the NodeSet never became ready; see " << (logs / "operator-under-test.log")
              << "\n";
  }

  // 2. Idle.
  std::this_thread::sleep_for(std::chrono::seconds(o.settle_seconds));
  say("idle window of " + std::to_string(o.idle_seconds) + " s");
  const std::streamoff idle_from = file_size(audit_log);
  const int64_t slurm_from = proxy.requests();
  const int64_t slurm_bytes_from = proxy.bytes_answered();
  const auto slurm_routes_from = proxy.by_route();
  const Usage idle_usage_from = sampler.now();
  const auto cpu_before_idle = bed_cpu_seconds();
  sampler.begin_window();
  std::this_thread::sleep_for(std::chrono::seconds(o.idle_seconds));
  const std::vector<double> idle_rss = sampler.end_window();
  const Usage idle_usage_to = sampler.now();
  const auto cpu_after_idle = bed_cpu_seconds();
  const AuditCount idle = audit_between(audit_log, idle_from, file_size(audit_log));
  const int64_t slurm_idle = proxy.requests() - slurm_from;
  std::map<std::string, int64_t> slurm_idle_routes = proxy.by_route();
  for (const auto& [route, count] : slurm_routes_from) {
    slurm_idle_routes[route] -= count;
  }
  const double minutes = o.idle_seconds / 60.0;
  result["kube_requests_per_min_idle"] = static_cast<double>(idle.requests) / minutes;
  result["lease_requests_per_min"] = static_cast<double>(idle.lease_requests) / minutes;
  result["slurm_requests_per_min_idle"] = static_cast<double>(slurm_idle) / minutes;
  result["slurm_kib_per_min_idle"] =
      static_cast<double>(proxy.bytes_answered() - slurm_bytes_from) / 1024 / minutes;
  result["idle_kube_by_kind"] = top(idle.by_kind, 8);
  result["idle_slurm_by_route"] = top(slurm_idle_routes, 8);
  result["idle_cpu_s_per_min"] = (idle_usage_to.cpu_s - idle_usage_from.cpu_s) / minutes;
  // What answering the operator costs Slurm at rest; the bed's other processes for comparison.
  result["idle_phase_cpu_s"] =
      cpu_between(cpu_before_idle, cpu_after_idle, idle_usage_to.cpu_s - idle_usage_from.cpu_s);
  result["slurm_cpu_s_per_min_idle"] = {
      {"slurmctld", (cpu_after_idle.at("slurmctld") - cpu_before_idle.at("slurmctld")) / minutes},
      {"slurmrestd",
       (cpu_after_idle.at("slurmrestd") - cpu_before_idle.at("slurmrestd")) / minutes}};
  result["rss_steady_mib"] = idle_rss.empty()
                                 ? -1
                                 : std::accumulate(idle_rss.begin(), idle_rss.end(), 0.0) /
                                       static_cast<double>(idle_rss.size());
  result["idle_seconds"] = o.idle_seconds;

  // Slurm node name of each pod, and the Node it is on.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<std::string>> hosts_on;  // Node -> pod hostnames
  std::map<std::string, std::string> pod_of;                 // hostname -> pod key
  for (const auto& p : pods.store().list()) {
    const std::string host = p->doc["spec"].value("hostname", p->meta.name);
    hosts.push_back(host);
    hosts_on[p->doc["spec"].value("nodeName", "")].push_back(host);
    pod_of[host] = p->meta.key();
  }
  std::sort(hosts.begin(), hosts.end());

  // 3. Slurm -> pod condition.
  say("propagation: " + std::to_string(o.changes) + " Slurm drains/undrains");
  std::mt19937 random(42);
  std::uniform_int_distribution<int> pause_ms(0, 999);
  std::vector<double> propagation;
  int lost = 0;
  const auto cpu_before_changes = bed_cpu_seconds();
  const double operator_cpu_before_changes = sampler.now().cpu_s;
  const int64_t slurm_before_changes = proxy.requests();
  const int64_t slurm_bytes_before_changes = proxy.bytes_answered();
  const auto t_changes = Steady::now();
  for (int i = 0; i < o.changes && !hosts.empty(); ++i) {
    const std::string& host = hosts[(static_cast<size_t>(i / 2) * 7919) % hosts.size()];
    const bool on = i % 2 == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
    const auto start = Steady::now();
    if (on) {
      (void)slurm_client.drain(host, "bench: admin drain " + std::to_string(i));
    } else {
      (void)slurm_client.undrain(host);
    }
    const double took = time_until(start, std::chrono::milliseconds(5), 30, [&] {
      const auto pod = pods.store().get(pod_of[host]);
      return pod && has_condition(pod->doc, "SlurmNodeStateDrain") == on;
    });
    if (took < 0) {
      ++lost;
    } else {
      propagation.push_back(took);
    }
  }
  result["propagation_p50_s"] = percentile(propagation, 0.50);
  result["propagation_p99_s"] = percentile(propagation, 0.99);
  result["propagation"] = summary(propagation);
  result["propagation"]["not_seen_within_30s"] = lost;
  // Churn: the same figures while an administrator drains and undrains.
  const double changes_minutes = since(t_changes) / 60;
  result["propagation_phase_cpu_s"] = cpu_between(
      cpu_before_changes, bed_cpu_seconds(), sampler.now().cpu_s - operator_cpu_before_changes);
  result["propagation_phase_seconds"] = std::round(changes_minutes * 600) / 10;
  result["slurm_requests_per_min_churn"] =
      static_cast<double>(proxy.requests() - slurm_before_changes) / changes_minutes;
  result["slurm_kib_per_min_churn"] =
      static_cast<double>(proxy.bytes_answered() - slurm_bytes_before_changes) / 1024 /
      changes_minutes;

  // 4. Cordon -> Slurm DRAIN of every Slurm node of the Node's pods (and back).
  say("cordon: " + std::to_string(o.cordons) + " Nodes cordoned and uncordoned");
  std::vector<double> cordon;
  std::vector<double> uncordon;
  int cordon_lost = 0;
  const auto kube_nodes = kubelet.node_names();
  for (int round = 0; round < o.cordons && !kube_nodes.empty(); ++round) {
    const std::string& node = kube_nodes[static_cast<size_t>(round) % kube_nodes.size()];
    const auto& on_node = hosts_on[node];
    for (const bool on : {true, false}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
      const auto start = Steady::now();
      (void)client->patch(kube::resources::nodes(), "", node, kube::PatchType::kMerge,
                          {{"spec", {{"unschedulable", on ? json(true) : json(nullptr)}}}});
      std::set<std::string> waiting(on_node.begin(), on_node.end());
      while (!waiting.empty() && since(start) < 60) {
        for (auto it = waiting.begin(); it != waiting.end();) {
          if (slurm_drained(*it) == on) {
            (on ? cordon : uncordon).push_back(since(start));
            it = waiting.erase(it);
          } else {
            ++it;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      cordon_lost += static_cast<int>(waiting.size());
    }
  }
  std::vector<double> both = cordon;
  both.insert(both.end(), uncordon.begin(), uncordon.end());
  result["cordon_drain_p50_s"] = percentile(cordon, 0.50);
  result["cordon_drain_p99_s"] = percentile(cordon, 0.99);
  result["cordon"] = {{"drain", summary(cordon)},
                      {"undrain", summary(uncordon)},
                      {"slurm_nodes_per_kube_node", o.pods_per_node},
                      {"not_seen_within_60s", cordon_lost}};

  // 5. Scale-in N -> 0.
  say("scale-in " + std::to_string(o.nodes) + " -> 0");
  const auto jobs_before = slurm_client.list_jobs();
  const std::streamoff audit_before_in = file_size(audit_log);
  const auto t_in = Steady::now();
  const auto cpu_before_in = bed_cpu_seconds();
  const double operator_cpu_before_in = sampler.now().cpu_s;
  (void)client->set_replicas(op::resources::nodesets(), ns, nodeset, 0);
  const double scale_in =
      time_until(t_in, std::chrono::milliseconds(50), std::max(300.0, o.nodes * 0.6),
                 [&] { return pods.store().size() == 0; });
  result["scale_in_all_s"] = scale_in;
  result["scale_in_cpu_s"] =
      cpu_between(cpu_before_in, bed_cpu_seconds(), sampler.now().cpu_s - operator_cpu_before_in);
  const AuditCount in_audit = audit_between(audit_log, audit_before_in, file_size(audit_log));
  result["scale_in_requests"] = {{"kube", in_audit.requests},
                                 {"kube_by_kind", top(in_audit.by_kind, 8)},
                                 {"kube_refused", in_audit.refused},
                                 {"kube_refused_by_kind", top(in_audit.refused_by_kind, 8)}};
  int64_t killed = 0;
  int64_t jobs = 0;
  if (auto after = slurm_client.list_jobs(); after) {
    for (const auto& j : after->list.jobs) {
      ++jobs;
      for (const auto& s : j.state) {
        killed += s == "NODE_FAIL" || s == "FAILED" || s == "CANCELLED" || s == "BOOT_FAIL" ||
                          s == "PREEMPTED"
                      ? 1
                      : 0;
      }
    }
  }
  result["jobs_killed"] = killed;
  result["jobs_seen"] = jobs;

  const Usage end = sampler.now();
  result["cpu_s"] = end.cpu_s;
  result["rss_peak_mib"] = std::max(sampler.peak_rss_mib(), end.hwm_mib);
  const AuditCount all = audit_between(audit_log, audit_start, file_size(audit_log));
  result["kube_requests_total"] = all.requests + all.lease_requests;
  result["slurm_requests_total"] = proxy.requests();
  result["hollow_create_failures"] = kubelet.create_failures();
  result["operator_alive_at_end"] = under_test.alive();
  under_test.stop();
  kubelet.stop();
  pods.stop();
  (void)client->remove(kube::resources::namespaces(), "", ns);

  std::cout << result.dump(2) << "\n";
  std::ofstream(o.out) << result.dump(2) << "\n";
  return linked_s < 0 ? 1 : 0;
}
