// slurm-bridge's configuration file (/etc/slurm-bridge/config.yaml), keyed as Slinky's
// slurm-bridge reads it, with Tightrope's additions. Read by the bridge and by its webhook.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace tightrope::bridge {

struct BridgeConfig {
  std::string scheduler_name = "slurm-bridge-scheduler";
  std::string slurm_rest_api = "http://slurm-restapi.slurm:6820";
  // The namespaces whose pods the webhook hands to the bridge (their schedulerName is set):
  // those listed, and those whose labels match the selector.
  std::vector<std::string> managed_namespaces = {"slurm-bridge"};
  std::map<std::string, std::string> managed_namespace_selector;  // matchLabels
  std::string mcs_label;
  std::string partition = "slurm-bridge";
  // Tightrope: the Slurm user of pods whose namespace names none ("": the bridge's token's).
  std::string default_user;
};

// The file's text; unknown keys are errors (a typo must not silently mean a default).
tightrope::Result<BridgeConfig, std::string> parse_bridge_config(const std::string& yaml);
tightrope::Result<BridgeConfig, std::string> load_bridge_config(const std::string& path);

}  // namespace tightrope::bridge
