// slurm-operator: the controllers of slinky.slurm.net/v1beta1 resources (Controller, RestApi,
// Accounting, LoginSet, Token, NodeSet), run by a kube::Manager (leader election, health and
// metrics endpoints, a clean stop on SIGTERM). Here: flags and wiring.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "base/log.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/events.hpp"
#include "kube/manager.hpp"
#include "operator/operator.hpp"

namespace {

using namespace tightrope;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',') {
      if (!item.empty()) {
        out.push_back(item);
      }
      item.clear();
    } else if (c != ' ') {
      item.push_back(c);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"slurm-operator: Slurm clusters as Kubernetes resources (slinky.slurm.net/v1beta1)"};
  std::string kubeconfig;
  std::string context;
  std::string namespaces;
  bool leader_elect = false;
  std::string leader_namespace;
  std::string leader_id = "slurm-operator";
  std::string metrics_addr = ":8080";
  std::string health_addr = ":8081";
  std::string log_level = "info";
  std::string log_format = "logfmt";
  op::OperatorOptions options;
  int check_period = 30;
  std::map<std::string, int> workers = {{"controller", 1}, {"restapi", 1}, {"accounting", 1},
                                        {"loginset", 1},   {"token", 1},   {"nodeset", 2}};
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file; default $KUBECONFIG, then in-cluster, then ~/.kube/config");
  app.add_option("--context", context, "kubeconfig context (default: the current one)");
  app.add_option("--namespaces", namespaces,
                 "comma-separated namespaces to watch (default: every namespace)")
      ->envname("WATCH_NAMESPACES");
  app.add_flag("--leader-elect", leader_elect,
               "elect one active operator among replicas through a Lease");
  app.add_option("--leader-elect-namespace", leader_namespace,
                 "namespace of the Lease (default: the kubeconfig's or the pod's namespace)")
      ->envname("POD_NAMESPACE");
  app.add_option("--leader-elect-id", leader_id, "name of the Lease");
  app.add_option("--metrics-addr", metrics_addr, "address of /metrics, or 0 for none");
  app.add_option("--health-addr", health_addr, "address of /healthz and /readyz, or 0 for none");
  app.add_option("--log-level", log_level, "debug, info, warn or error")->envname("LOG_LEVEL");
  app.add_option("--log-format", log_format, "logfmt or json")
      ->envname("LOG_FORMAT")
      ->check(CLI::IsMember({"logfmt", "json"}));
  app.add_option("--slurmrestd-url", options.slurmrestd_url,
                 "URL of a RestApi's slurmrestd; {service} and {namespace} are replaced")
      ->capture_default_str();
  app.add_option("--slurm-check-period", check_period,
                 "seconds between a Controller's checks that Slurm answers")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  kube::ClientOptions client_options;
  app.add_option("--kube-api-qps", client_options.qps,
                 "the operator's requests per second to the Kubernetes API, sustained")
      ->check(CLI::Range(1.0, 10000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", client_options.burst,
                 "the operator's requests to the Kubernetes API allowed at once above the rate")
      ->check(CLI::Range(1, 20000))
      ->capture_default_str();
  std::string mirror = "none";
  app.add_option("--mirror-slurm-drains", mirror,
                 "show an administrator's Slurm drain on the Kubernetes Node: none, condition "
                 "(SlurmNodeDrained) or taint (the condition and a NoSchedule taint)")
      ->check(CLI::IsMember({"none", "condition", "taint"}))
      ->capture_default_str();
  std::string propagated;
  app.add_option("--propagated-node-conditions", propagated,
                 "Kubernetes Node condition types, comma-separated, that drain the Slurm nodes "
                 "of the Node's pods while True, their reason and message the drain reason");
  for (auto& [name, count] : workers) {
    app.add_option("--" + name + "-workers", count,
                   "concurrent reconciles of the " + name + " controller")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
  }
  CLI11_PARSE(app, argc, argv);

  log::Level level = log::Level::kInfo;
  if (!log::parse_level(log_level, &level)) {
    std::cerr << "--log-level: unknown level \"" << log_level << "\"\n";
    return 2;
  }
  log::configure(level, log_format == "json" ? log::Format::kJson : log::Format::kLogfmt);
  options.namespaces = split_list(namespaces);
  options.workers = workers;
  options.propagated_node_conditions = split_list(propagated);
  options.slurm_check_period = std::chrono::seconds(check_period);
  options.mirror_slurm_drains = mirror == "taint" ? op::OperatorOptions::DrainMirror::kTaint
                                : mirror == "condition"
                                    ? op::OperatorOptions::DrainMirror::kCondition
                                    : op::OperatorOptions::DrainMirror::kNone;

  // Before any thread: only the Manager takes SIGTERM and SIGINT.
  kube::Manager::block_signals();
  auto config = kube::load_default(kubeconfig, context);
  if (!config) {
    log::error("operator.config_failed", {{"error", config.error().to_string()}});
    return 2;
  }
  // Two allocator arenas instead of glibc's eight a core: with some forty threads, freed
  // memory spread over many arenas stayed resident (255 MiB instead of 114 at 1,000 pods).
  mallopt(M_ARENA_MAX, 2);

  metrics::Registry registry;
  client_options.metrics = &registry;
  client_options.user_agent = "slurm-operator";
  client_options.timeout = std::chrono::milliseconds(8000);  // below the lease's renew deadline
  kube::Client client(*config, client_options);
  kube::ManagerOptions manager;
  manager.name = "operator";
  manager.identity = kube::process_identity();
  manager.metrics_addr = metrics_addr;
  manager.health_addr = health_addr;
  manager.registry = &registry;
  manager.about = {{"server", config->server},
                   {"namespaces", namespaces.empty() ? "*" : namespaces}};
  if (leader_elect) {
    kube::LeaderElectionOptions lease;
    lease.lease_namespace = leader_namespace.empty() ? config->namespace_name : leader_namespace;
    lease.lease_name = leader_id;
    manager.leader_election = lease;
  }
  kube::EventRecorder events(client, {"slurm-operator", manager.identity});
  op::Operator operator_(client, events, options, &registry);
  return kube::Manager(client, events, manager).run(operator_);
}
