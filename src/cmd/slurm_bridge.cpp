// slurm-bridge: Slurm schedules the pods that name the bridge's scheduler, as external jobs;
// labelled Nodes are Slurm external nodes. Run by a kube::Manager (leader election, health and
// metrics endpoints, a clean stop on SIGTERM). Here: flags and wiring.
#include <malloc.h>

#include <CLI/CLI.hpp>

#include "base/log.hpp"
#include "bridge/bridge.hpp"
#include "bridge/config.hpp"
#include "cmd/process_flags.hpp"
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
  cmd::ProcessFlags flags;
  flags.leader_id = "slurm-bridge";
  // A burst of pods costs three requests each (label, binding, Scheduled Event): at 400 a second
  // a thousand pods are bound in under ten seconds of API time.
  flags.client.qps = 400;
  flags.client.burst = 800;
  std::string jwt_file;
  std::string jwt_key;
  std::string slurm_user = "slurm";
  std::string slurmrestd;
  bridge::BridgeOptions options;
  int slurm_period_ms = 1000;
  app.add_option("--config", config_path, "the bridge's configuration file")->capture_default_str();
  cmd::add_process_flags(app, flags);
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
  CLI11_PARSE(app, argc, argv);

  if (!cmd::configure_logs(flags)) {
    return 2;
  }
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
  auto kube_config = kube::load_default(flags.kubeconfig, flags.context);
  if (!kube_config) {
    log::error("bridge.kubeconfig_failed", {{"error", kube_config.error().to_string()}});
    return 2;
  }
  mallopt(M_ARENA_MAX, 2);
  metrics::Registry registry;
  flags.client.metrics = &registry;
  flags.client.user_agent = "slurm-bridge";
  flags.client.timeout = std::chrono::milliseconds(8000);  // below the lease's renew deadline
  kube::Client client(*kube_config, flags.client);

  std::shared_ptr<slurm::TokenSource> tokens;
  if (!jwt_file.empty()) {
    tokens = std::make_shared<slurm::FileTokenSource>(jwt_file);
  } else {
    tokens = std::make_shared<slurm::MintingTokenSource>(jwt_key, slurm_user);
  }
  slurm::ClientOptions slurm_options;
  slurm_options.url = slurmrestd.empty() ? config->slurm_rest_api : slurmrestd;
  slurm::Client slurm(slurm_options, tokens);

  kube::ManagerOptions manager = cmd::manager_options(flags, *kube_config, "bridge", &registry);
  manager.about.insert(manager.about.end(), {{"slurmrestd", slurm_options.url},
                                             {"scheduler", options.scheduler_name},
                                             {"partition", options.partition}});
  kube::EventRecorder events(client, {"slurm-bridge", manager.identity});
  bridge::Bridge bridge(client, events, slurm, options, &registry);
  return kube::Manager(client, events, manager).run(bridge);
}
