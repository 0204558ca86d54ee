// A live move of a running Slurm cluster from Slinky's slurm-operator to Tightrope's, and back,
// on a test bed (the environment of `scripts/testbed env`). bench/run migrate starts the bed,
// builds Slinky's operator and runs this program.
//
//   bench_migrate --slinky PATH --slinky-crds DIR --out FILE [--workers N] [--job-seconds S]
//
// Slinky's operator (cmd/manager, unchanged, over its release's CRDs) makes a NodeSet of N
// workers of an external Controller (the bed's slurmctld); the test-only pod runner plays the
// kubelet, running a real slurmd for each pod. A job runs on every worker. A second Controller
// keeps slurmctld in a pod: Slinky's StatefulSet and the pod the controller-manager makes for it
// (not run: no kubelet runs it here) are counted as they are. Then, as a site moves:
//   1. Slinky's operator stops; Tightrope's CRDs replace Slinky's in place; Tightrope's operator
//      starts and takes the cluster over;
//   2. back: Tightrope's operator stops, Slinky's CRDs come back, Slinky's operator starts.
// Counted at each step: pods replaced (uid), slurmd restarted (the pod runner's process), the
// job's state, the NodeSet's status fields, and the seconds until the new operator reported.
// Every wait is bounded; figures are printed and written to --out.
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "../test/integration/kube/kube_support.hpp"
#include "../test/integration/nodeset/nodeset_support.hpp"
#include "../test/integration/nodeset/pod_runner.hpp"
#include "../test/integration/operator/operator_support.hpp"
#include "harness.hpp"
#include "operator/resources.hpp"
#include "scale/counting_proxy.hpp"
#include "scale/operator_under_test.hpp"
#include "slurm/client.hpp"
#include "testbed.hpp"

namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;
namespace kube = tightrope::kube;
namespace slurm = tightrope::slurm;
namespace op = tightrope::op;
using tightrope::bench::CountingProxy;
using tightrope::bench::has_condition;
using tightrope::bench::kSlinkyRestPort;
using tightrope::bench::must;
using tightrope::bench::OperatorUnderTest;
using tightrope::bench::since;
using tightrope::testing::TestBed;

struct Options {
  std::string slinky;       // Slinky's slurm-operator binary
  std::string slinky_crds;  // the directory of its release's CRDs
  std::string out;
  int workers = 3;
  int job_seconds = 90;
};

const char* const kNodeSet = "move";
// A second Controller, slurmctld in a pod: Slinky's operator makes its StatefulSet (and the
// controller-manager its pod, which the pod runner does not run: no kubelet runs it here).
const char* const kInPod = "inpod";
// A worker settles when its slurmd has registered and the operator has written its state.
constexpr std::chrono::seconds kSettle{300};

template <typename Pred>
bool wait_for(std::chrono::seconds limit, Pred pred) {
  const auto deadline = Steady::now() + limit;
  while (!pred()) {
    if (Steady::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return true;
}

// What a move must not change, at one moment.
struct Snapshot {
  std::map<std::string, std::string> pods;  // name -> uid, pods not terminating
  std::map<std::string, int> slurmd;        // pod name -> slurmd pid, from the pod runner
  json status;                              // the NodeSet's, without conditions
  std::string job_state;
  // slurmctld's StatefulSet and pod, by name -> "uid generation" (the pod's generation counts
  // changes of its spec): what Slinky's operator made for a Controller in pods.
  std::map<std::string, std::string> controller;
};

class Move {
 public:
  explicit Move(Options o) : o_(std::move(o)) {}

  json run() {
    client_ = kube::testing::make_client();
    install_slinky_crds();
    ns_ = kube::testing::fresh_namespace(*client_);
    op::testing::create_external_cluster(
        *client_, ns_, {{"jwtHs256KeyRef", {{"name", "jwt-key"}, {"key", "jwt.key"}}}});
    // Slinky v1.0 looks a controllerRef up as written: without a namespace, in none. Its Slurm
    // client waits for the RestApi's Deployment, refused without an image (its chart writes one).
    must(client_->patch(op::resources::restapis(), ns_, "slurm", kube::PatchType::kMerge,
                        {{"spec",
                          {{"controllerRef", {{"name", "slurm"}, {"namespace", ns_}}},
                           {"slurmrestd", {{"image", "slurmrestd"}}}}}}),
         "the RestApi's controllerRef and image");
    slurm::ClientOptions slurm_options;
    slurm_options.url = TestBed::var("SLURMRESTD_URL");
    slurm_ = std::make_unique<slurm::Client>(
        slurm_options,
        std::make_shared<slurm::MintingTokenSource>(TestBed::var("SLURM_JWT_KEY"), "slurm"));
    forget_slurm_nodes();  // of an earlier run on this bed: a node keeps its first features
    const std::string rest = TestBed::var("SLURMRESTD_URL");
    CountingProxy relay("127.0.0.1", std::stoi(rest.substr(rest.rfind(':') + 1)), kSlinkyRestPort);
    const std::filesystem::path logs = TestBed::var("TESTBED_DIR") + "/logs";
    std::vector<std::string> kube_nodes;
    for (int i = 1; i <= o_.workers; ++i) {
      kube_nodes.push_back("move-node-" + std::to_string(i));
    }
    runner_ = std::make_unique<op::testing::PodRunner>(
        *client_, op::testing::PodRunnerOptions{ns_, kube_nodes, TestBed::var("SLURM_ROOT"), logs});
    runner_->start();

    json result = {{"workers", o_.workers}, {"job_seconds", o_.job_seconds}};
    must(client_->create(op::resources::controllers(), ns_,
                         {{"apiVersion", "slinky.slurm.net/v1beta1"},
                          {"kind", "Controller"},
                          {"metadata", {{"name", kInPod}}},
                          {"spec",
                           {{"slurmKeyRef", {{"name", "slurm-key"}, {"key", "slurm.key"}}},
                            {"jwtHs256KeyRef", {{"name", "jwt-key"}, {"key", "jwt.key"}}},
                            {"slurmctld", {{"image", "slurmctld"}}},
                            {"reconfigure", {{"image", "slurmctld"}}},
                            {"logfile", {{"image", "logfile"}}}}}}),
         "creating the Controller in pods");
    // Slinky's cluster, with a job on every worker.
    auto slinky = std::make_unique<OperatorUnderTest>("", o_.slinky, ns_, relay.url(),
                                                      logs / "migrate-slinky-1.log");
    const auto t0 = Steady::now();
    must(client_->create(op::resources::nodesets(), ns_,
                         {{"apiVersion", "slinky.slurm.net/v1beta1"},
                          {"kind", "NodeSet"},
                          {"metadata", {{"name", kNodeSet}}},
                          {"spec",
                           {{"controllerRef", {{"name", "slurm"}, {"namespace", ns_}}},
                            {"replicas", o_.workers},
                            {"extraConf", "Features=" + TestBed::var("SLURM_PARTITION")},
                            {"slurmd", {{"image", "slurmd"}}},
                            {"logfile", {{"image", "logfile"}}}}}}),
         "creating the NodeSet");
    if (!wait_for(kSettle, [&] { return settled("IDLE"); })) {
      throw std::runtime_error("Slinky's workers never became ready and idle: " + describe());
    }
    result["slinky_ready_s"] = since(t0);
    job_ = submit();
    if (!wait_for(std::chrono::seconds(60), [&] { return job_state() == "RUNNING"; })) {
      throw std::runtime_error("the job never ran: " + job_state());
    }
    if (!wait_for(std::chrono::seconds(60), [&] { return settled("ALLOCATED"); })) {
      throw std::runtime_error("the job's nodes never showed ALLOCATED: " + describe());
    }
    result["slinky_wrote_slurm_pod_conditions"] = slurm_conditions_shown();
    if (!wait_for(std::chrono::seconds(120), [&] { return snapshot().controller.size() == 2; })) {
      throw std::runtime_error("Slinky never made slurmctld's StatefulSet and pod");
    }
    const Snapshot under_slinky = snapshot();
    result["under_slinky"] = to_json(under_slinky);
    say("Slinky's cluster runs job " + std::to_string(job_) + " on " +
        std::to_string(under_slinky.pods.size()) + " workers");

    // 1. Slinky -> Tightrope, the job running.
    slinky->stop();
    op::testing::install_crds(*client_);
    const auto t1 = Steady::now();
    auto tightrope = std::make_unique<OperatorUnderTest>("", "", ns_, relay.url(),
                                                         logs / "migrate-tightrope.log");
    const bool adopted = wait_for(kSettle, [&] {
      auto n = client_->get(op::resources::nodesets(), ns_, kNodeSet);
      return n && has_condition(*n, "Ready") &&
             !n->value("/metadata/annotations/tightrope.slurm.net~1adopted-revision"_json_pointer,
                       std::string())
                  .empty();
    });
    result["to_tightrope"] = compare(under_slinky, adopted, since(t1));
    say("to Tightrope: " + result["to_tightrope"].dump());
    // It has looked again since (a Slurm check period): still nothing replaced.
    std::this_thread::sleep_for(std::chrono::seconds(35));
    const Snapshot under_tightrope = snapshot();
    result["under_tightrope"] = to_json(under_tightrope);
    result["to_tightrope"]["after_35_s"] = compare(under_slinky, adopted, since(t1));
    if (!wait_for(std::chrono::seconds(o_.job_seconds + 120),
                  [&] { return job_state() != "RUNNING" && job_state() != "PENDING"; })) {
      throw std::runtime_error("the job never ended: " + job_state());
    }
    result["job_outcome"] = job_state();
    say("the job ended " + job_state());

    // 2. Tightrope -> Slinky: a site's retreat.
    const Snapshot before_back = snapshot();
    tightrope->stop();
    for (const auto& file : std::filesystem::directory_iterator(o_.slinky_crds)) {
      op::testing::install_crd_file(*client_, file.path());
    }
    const auto t2 = Steady::now();
    const int64_t seen = status_version();
    slinky = std::make_unique<OperatorUnderTest>("", o_.slinky, ns_, relay.url(),
                                                 logs / "migrate-slinky-2.log");
    // Slinky writes its status at every sync: a write after its start means it has synced.
    const bool synced =
        wait_for(kSettle, [&] { return status_version() > seen && settled("IDLE"); });
    result["back_to_slinky"] = compare(before_back, synced, since(t2));
    std::this_thread::sleep_for(std::chrono::seconds(35));
    result["back_to_slinky"]["after_35_s"] = compare(before_back, synced, since(t2));
    // The cluster still takes work under Slinky.
    const int64_t after = submit(5);
    result["job_after_retreat"] = wait_for(std::chrono::seconds(120),
                                           [&] {
                                             const std::string s = state_of(after);
                                             return s == "COMPLETED" || s == "FAILED";
                                           })
                                      ? state_of(after)
                                      : state_of(after) + " (not ended in 120 s)";
    say("back to Slinky: " + result["back_to_slinky"].dump());
    slinky->stop();
    runner_->stop();
    forget_slurm_nodes();
    return result;
  }

 private:
  static void say(const std::string& what) { std::cerr << "[migrate] " << what << std::endl; }

  void install_slinky_crds() {
    for (const auto& file : std::filesystem::directory_iterator(o_.slinky_crds)) {
      op::testing::install_crd_file(*client_, file.path());
    }
  }

  void forget_slurm_nodes() {
    if (auto nodes = slurm_->list_nodes()) {
      for (const auto& n : nodes->list.nodes) {
        if (n.name.starts_with(std::string(kNodeSet) + "-")) {
          (void)slurm_->delete_node(n.name);
        }
      }
    }
  }

  std::vector<json> pods() {
    kube::ListOptions options;
    options.label_selector = std::string("app.kubernetes.io/instance=") + kNodeSet;
    auto list = client_->list(kube::resources::pods(), ns_, options);
    return list ? std::vector<json>(list->items.begin(), list->items.end()) : std::vector<json>{};
  }

  // Every worker's pod Ready and its Slurm node in `state` (IDLE, ALLOCATED), as Slurm says.
  bool settled(const std::string& state) {
    size_t ok = 0;
    for (const auto& p : pods()) {
      if (p["metadata"].contains("deletionTimestamp") || !has_condition(p, "Ready")) {
        continue;
      }
      auto node = slurm_->get_node(p["spec"].value("hostname", ""));
      ok += node && node->base_state() == state && !node->has("NOT_RESPONDING") ? 1 : 0;
    }
    return ok == static_cast<size_t>(o_.workers);
  }

  // Whether every pod shows its Slurm state as a pod condition (SlurmNodeState*).
  bool slurm_conditions_shown() {
    size_t shown = 0;
    const auto list = pods();
    for (const auto& p : list) {
      for (const auto& c : p.value("/status/conditions"_json_pointer, json::array())) {
        if (c.value("type", "").starts_with("SlurmNodeState") && c.value("status", "") == "True") {
          ++shown;
          break;
        }
      }
    }
    return !list.empty() && shown == list.size();
  }

  // The NodeSet's resourceVersion: it moves when an operator writes its status.
  int64_t status_version() {
    auto n = client_->get(op::resources::nodesets(), ns_, kNodeSet);
    return n ? std::stoll(n->value("/metadata/resourceVersion"_json_pointer, std::string("0"))) : 0;
  }

  int64_t submit(int seconds = -1) {
    slurm::JobSubmission job;
    job.name = "move";
    job.partition = TestBed::var("SLURM_PARTITION");
    job.script =
        "#!/bin/sh\nsrun sleep " + std::to_string(seconds < 0 ? o_.job_seconds : seconds) + "\n";
    job.working_directory = TestBed::var("SLURM_JOB_DIR");
    for (const auto& p : pods()) {
      job.required_nodes.push_back(p["spec"].value("hostname", ""));
    }
    job.tasks = static_cast<int>(job.required_nodes.size());  // one a worker
    job.time_limit = std::chrono::minutes(10);
    auto id = slurm_->submit_job(job);
    must(id, "submitting the job");
    return *id;
  }

  std::string state_of(int64_t id) {
    auto job = slurm_->get_job(id);
    return job && !job->state.empty() ? job->state.front() : "";
  }
  std::string job_state() { return state_of(job_); }

  Snapshot snapshot() {
    Snapshot s;
    for (const auto& p : pods()) {
      if (!p["metadata"].contains("deletionTimestamp")) {
        s.pods[p["metadata"].value("name", "")] = p["metadata"].value("uid", "");
      }
    }
    s.slurmd = runner_->slurmd_pids();
    if (auto n = client_->get(op::resources::nodesets(), ns_, kNodeSet)) {
      s.status = n->value("status", json::object());
      s.status.erase("conditions");
    }
    s.job_state = job_state();
    const std::string sts = std::string(kInPod) + "-controller";
    for (const auto& [type, name] : {std::pair{&kube::resources::stateful_sets(), sts},
                                     std::pair{&kube::resources::pods(), sts + "-0"}}) {
      if (auto got = client_->get(*type, ns_, name)) {
        s.controller[name] =
            got->value("/metadata/uid"_json_pointer, std::string()) + " " +
            std::to_string(got->value("/metadata/generation"_json_pointer, int64_t{0}));
      }
    }
    return s;
  }

  static json to_json(const Snapshot& s) {
    return {{"pods", s.pods},
            {"slurmd", s.slurmd},
            {"status", s.status},
            {"job", s.job_state},
            {"controller", s.controller}};
  }

  // What changed since `before`: pods replaced, slurmd restarted, status fields that differ.
  json compare(const Snapshot& before, bool reported, double seconds) {
    const Snapshot now = snapshot();
    int replaced = 0;
    for (const auto& [name, uid] : before.pods) {
      const auto it = now.pods.find(name);
      replaced += it == now.pods.end() || it->second != uid ? 1 : 0;
    }
    int restarted = 0;
    for (const auto& [name, pid] : before.slurmd) {
      const auto it = now.slurmd.find(name);
      restarted += it == now.slurmd.end() || it->second != pid ? 1 : 0;
    }
    int controller_replaced = 0;
    for (const auto& [name, identity] : before.controller) {
      const auto it = now.controller.find(name);
      controller_replaced += it == now.controller.end() || it->second != identity ? 1 : 0;
    }
    // A field the new operator does not write (or writes anew) is not a value lost: apart.
    json changed = json::object();
    json added = json::array();
    json dropped = json::array();
    for (const auto& [key, value] : before.status.items()) {
      if (!now.status.contains(key)) {
        dropped.push_back(key);
      } else if (now.status[key] != value) {
        changed[key] = {{"before", value}, {"after", now.status[key]}};
      }
    }
    for (const auto& [key, value] : now.status.items()) {
      if (!before.status.contains(key)) {
        added.push_back(key);
      }
    }
    return {{"reported", reported},
            {"seconds", std::round(seconds * 10) / 10},
            {"pods_replaced", replaced},
            {"slurmd_restarted", restarted},
            {"controller_objects_changed", controller_replaced},
            {"pods", now.pods.size()},
            {"job", now.job_state},
            {"slurm_pod_conditions", slurm_conditions_shown()},
            {"status_changed", changed},
            {"status_added", added},
            {"status_dropped", dropped}};
  }

  std::string describe() {
    std::string out;
    for (const auto& p : pods()) {
      out +=
          p["metadata"].value("name", "") + (has_condition(p, "Ready") ? " ready" : " not-ready");
      for (const auto& c : p.value("/status/conditions"_json_pointer, json::array())) {
        if (c.value("status", "") == "True") {
          out += " " + c.value("type", "");
        }
      }
      out += "; ";
    }
    return out;
  }

  Options o_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<slurm::Client> slurm_;
  std::unique_ptr<op::testing::PodRunner> runner_;
  std::string ns_;
  int64_t job_ = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] { return tightrope::bench::option_value(argc, argv, i); };
    if (a == "--slinky") {
      o.slinky = value();
    } else if (a == "--slinky-crds") {
      o.slinky_crds = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--workers") {
      o.workers = std::stoi(value());
    } else if (a == "--job-seconds") {
      o.job_seconds = std::stoi(value());
    } else {
      throw std::runtime_error("unknown argument " + a);
    }
  }
  if (o.slinky.empty() || o.slinky_crds.empty() || o.out.empty()) {
    throw std::runtime_error(
        "usage: bench_migrate --slinky PATH --slinky-crds DIR --out FILE [--workers N] "
        "[--job-seconds S]");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    TestBed bed;
    bed.SetUp();
    json result = Move(o).run();
    result["slinky"] = o.slinky;
    std::ofstream(o.out) << result.dump(2) << "\n";
    std::cout << result.dump(2) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_migrate: " << e.what() << std::endl;
    return 1;
  }
}
