// slurm-operator: the controllers of slinky.slurm.net/v1beta1 resources (Controller, RestApi,
// Accounting, LoginSet, Token, NodeSet), run by a kube::Manager (leader election, health and
// metrics endpoints, a clean stop on SIGTERM). Here: flags and wiring.
#include <malloc.h>

#include <CLI/CLI.hpp>

#include "base/log.hpp"
#include "base/text.hpp"
#include "cmd/process_flags.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/events.hpp"
#include "kube/manager.hpp"
#include "operator/operator.hpp"

using namespace tightrope;

int main(int argc, char** argv) {
  CLI::App app{"slurm-operator: Slurm clusters as Kubernetes resources (slinky.slurm.net/v1beta1)"};
  cmd::ProcessFlags flags;
  flags.leader_id = "slurm-operator";
  cmd::add_process_flags(app, flags);
  std::string namespaces;
  op::OperatorOptions options;
  int check_period = 30;
  std::map<std::string, int> workers = {{"controller", 1}, {"restapi", 1}, {"accounting", 1},
                                        {"loginset", 1},   {"token", 1},   {"nodeset", 2}};
  app.add_option("--namespaces", namespaces,
                 "comma-separated namespaces to watch (default: every namespace)")
      ->envname("WATCH_NAMESPACES");
  app.add_option("--slurmrestd-url", options.slurmrestd_url,
                 "URL of a RestApi's slurmrestd; {service} and {namespace} are replaced")
      ->capture_default_str();
  app.add_option("--slurm-check-period", check_period,
                 "seconds between a Controller's doctor's checks while Slurm answers")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  int hinted_period = 30;
  app.add_option("--slurm-hinted-period", hinted_period,
                 "seconds between polls of a cluster's Slurm at rest while the operator follows "
                 "slurmctld's log for hints of change; 0: follow no log, poll every second")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  std::string mirror = "none";
  app.add_option("--mirror-slurm-drains", mirror,
                 "show an administrator's Slurm drain on the Kubernetes Node: none, condition "
                 "(SlurmNodeDrained) or taint (the condition and a NoSchedule taint)")
      ->check(CLI::IsMember({"none", "condition", "taint"}))
      ->capture_default_str();
  std::string propagated;
  app.add_option("--propagated-node-conditions", propagated,
                 "Kubernetes Node condition types, comma-separated, whose reason and message "
                 "(while True) are the drain reason of a cordoned Node's Slurm nodes");
  app.add_flag("--drain-on-node-conditions", options.drain_on_node_conditions,
               "a True --propagated-node-conditions condition drains the Node's Slurm nodes "
               "without a cordon, and its end undoes the drain");
  for (auto& [name, count] : workers) {
    app.add_option("--" + name + "-workers", count,
                   "concurrent reconciles of the " + name + " controller")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
  }
  CLI11_PARSE(app, argc, argv);

  if (!cmd::configure_logs(flags)) {
    return 2;
  }
  options.namespaces = split_list(namespaces);
  options.workers = workers;
  options.propagated_node_conditions = split_list(propagated);
  options.slurm_check_period = std::chrono::seconds(check_period);
  options.slurm_hinted_period = std::chrono::seconds(hinted_period);
  options.mirror_slurm_drains = mirror == "taint" ? op::OperatorOptions::DrainMirror::kTaint
                                : mirror == "condition"
                                    ? op::OperatorOptions::DrainMirror::kCondition
                                    : op::OperatorOptions::DrainMirror::kNone;

  // Before any thread: only the Manager takes SIGTERM and SIGINT.
  kube::Manager::block_signals();
  auto config = kube::load_default(flags.kubeconfig, flags.context);
  if (!config) {
    log::error("operator.config_failed", {{"error", config.error().to_string()}});
    return 2;
  }
  // Two allocator arenas instead of glibc's eight a core: with some forty threads, freed
  // memory spread over many arenas stayed resident (255 MiB instead of 114 at 1,000 pods).
  mallopt(M_ARENA_MAX, 2);

  metrics::Registry registry;
  flags.client.metrics = &registry;
  flags.client.user_agent = "slurm-operator";
  flags.client.timeout = std::chrono::milliseconds(8000);  // below the lease's renew deadline
  kube::Client client(*config, flags.client);
  kube::ManagerOptions manager = cmd::manager_options(flags, *config, "operator", &registry);
  manager.about.emplace_back("namespaces", namespaces.empty() ? "*" : namespaces);
  kube::EventRecorder events(client, {"slurm-operator", manager.identity});
  op::Operator operator_(client, events, options, &registry);
  return kube::Manager(client, events, manager).run(operator_);
}
