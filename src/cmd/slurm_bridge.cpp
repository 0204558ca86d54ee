// slurm-bridge: Slurm schedules the pods that name the bridge's scheduler, as external jobs;
// labelled Nodes are Slurm external nodes. Run by a kube::Manager (leader election, health and
// metrics endpoints, a clean stop on SIGTERM). Here: flags and wiring.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "base/log.hpp"
#include "bridge/bridge.hpp"
#include "bridge/config.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/events.hpp"
#include "kube/manager.hpp"
#include "slurm/client.hpp"
#include "slurm/token.hpp"

int main(int argc, char** argv) {
  using namespace tightrope;
  CLI::App app{"slurm-bridge: Slurm schedules Kubernetes pods as external jobs"};
  std::string config_path = "/etc/slurm-bridge/config.yaml";
  std::string kubeconfig;
  std::string context;
  bool leader_elect = false;
  std::string leader_namespace;
  std::string leader_id = "slurm-bridge";
  std::string metrics_addr = ":8080";
  std::string health_addr = ":8081";
  std::string log_level = "info";
  std::string log_format = "logfmt";
  std::string jwt_file;
  std::string jwt_key;
  std::string slurm_user = "slurm";
  std::string slurmrestd;
  bridge::BridgeOptions options;
  int slurm_period_ms = 1000;
  app.add_option("--config", config_path, "the bridge's configuration file")->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file; default $KUBECONFIG, then in-cluster, then ~/.kube/config");
  app.add_option("--context", context, "kubeconfig context (default: the current one)");
  app.add_flag("--leader-elect", leader_elect, "elect one active bridge among replicas");
  app.add_option("--leader-elect-namespace", leader_namespace,
                 "namespace of the Lease (default: the kubeconfig's or the pod's namespace)")
      ->envname("POD_NAMESPACE");
  app.add_option("--leader-elect-id", leader_id, "name of the Lease")->capture_default_str();
  app.add_option("--metrics-addr", metrics_addr, "address of /metrics, or 0 for none");
  app.add_option("--health-addr", health_addr, "address of /healthz and /readyz, or 0 for none");
  app.add_option("--log-level", log_level, "debug, info, warn or error")->envname("LOG_LEVEL");
  app.add_option("--log-format", log_format, "logfmt or json")
      ->envname("LOG_FORMAT")
      ->check(CLI::IsMember({"logfmt", "json"}));
  app.add_option("--slurmrestd", slurmrestd, "slurmrestd's URL (default: the config's)");
  app.add_option("--slurm-jwt-file", jwt_file,
                 "a file holding a Slurm token of SlurmUser (read again when it changes)")
      ->envname("SLURM_JWT_FILE");
  app.add_option("--slurm-jwt-key", jwt_key,
                 "Slurm's jwt key: the bridge mints its own tokens (instead of --slurm-jwt-file)")
      ->envname("SLURM_JWT_KEY_FILE");
  app.add_option("--slurm-user", slurm_user, "the user minted tokens name: SlurmUser")
      ->capture_default_str();
  app.add_option("--group-workers", options.group_workers, "concurrent reconciles of pod groups")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--slurm-poll-ms", slurm_period_ms,
                 "milliseconds between two reads of Slurm's changes")
      ->check(CLI::Range(100, 60000))
      ->capture_default_str();
  kube::ClientOptions client_options;
  client_options.qps = 200;
  client_options.burst = 400;
  app.add_option("--kube-api-qps", client_options.qps,
                 "requests per second to the Kubernetes API, sustained")
      ->check(CLI::Range(1.0, 10000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", client_options.burst,
                 "requests to the Kubernetes API allowed at once above the rate")
      ->check(CLI::Range(1, 20000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  log::Level level = log::Level::kInfo;
  if (!log::parse_level(log_level, &level)) {
    std::cerr << "--log-level: unknown level \"" << log_level << "\"\n";
    return 2;
  }
  log::configure(level, log_format == "json" ? log::Format::kJson : log::Format::kLogfmt);
  auto config = bridge::load_bridge_config(config_path);
  if (!config) {
    log::error("bridge.config_failed", {{"error", config.error()}});
    return 2;
  }
  options.scheduler_name = config->scheduler_name;
  options.partition = config->partition;
  options.mcs_label = config->mcs_label;
  options.default_user = config->default_user;
  options.slurm_period = std::chrono::milliseconds(slurm_period_ms);
  if (jwt_file.empty() == jwt_key.empty()) {
    log::error("bridge.token_missing",
               {{"error", "give exactly one of --slurm-jwt-file and --slurm-jwt-key"}});
    return 2;
  }

  kube::Manager::block_signals();
  auto kube_config = kube::load_default(kubeconfig, context);
  if (!kube_config) {
    log::error("bridge.kubeconfig_failed", {{"error", kube_config.error().to_string()}});
    return 2;
  }
  mallopt(M_ARENA_MAX, 2);
  metrics::Registry registry;
  client_options.metrics = &registry;
  client_options.user_agent = "slurm-bridge";
  client_options.timeout = std::chrono::milliseconds(8000);
  kube::Client client(*kube_config, client_options);

  std::shared_ptr<slurm::TokenSource> tokens;
  if (!jwt_file.empty()) {
    tokens = std::make_shared<slurm::FileTokenSource>(jwt_file);
  } else {
    tokens = std::make_shared<slurm::MintingTokenSource>(jwt_key, slurm_user);
  }
  slurm::ClientOptions slurm_options;
  slurm_options.url = slurmrestd.empty() ? config->slurm_rest_api : slurmrestd;
  slurm::Client slurm(slurm_options, tokens);

  kube::ManagerOptions manager;
  manager.name = "bridge";
  manager.identity = kube::process_identity();
  manager.metrics_addr = metrics_addr;
  manager.health_addr = health_addr;
  manager.registry = &registry;
  manager.about = {{"server", kube_config->server},
                   {"slurmrestd", slurm_options.url},
                   {"scheduler", options.scheduler_name},
                   {"partition", options.partition}};
  if (leader_elect) {
    kube::LeaderElectionOptions lease;
    lease.lease_namespace =
        leader_namespace.empty() ? kube_config->namespace_name : leader_namespace;
    lease.lease_name = leader_id;
    manager.leader_election = lease;
  }
  kube::EventRecorder events(client, {"slurm-bridge", manager.identity});
  bridge::Bridge bridge(client, events, slurm, options, &registry);
  return kube::Manager(client, events, manager).run(bridge);
}
