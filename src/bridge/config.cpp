#include "bridge/config.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace tightrope::bridge {

tightrope::Result<BridgeConfig, std::string> parse_bridge_config(const std::string& yaml) {
  BridgeConfig config;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return fail(std::string("not YAML: ") + e.what());
  }
  if (root.IsNull()) {
    return config;
  }
  if (!root.IsMap()) {
    return fail(std::string("the configuration must be a mapping"));
  }
  try {
    for (const auto& entry : root) {
      const auto key = entry.first.as<std::string>();
      const YAML::Node& value = entry.second;
      if (key == "schedulerName") {
        config.scheduler_name = value.as<std::string>();
      } else if (key == "slurmRestApi") {
        config.slurm_rest_api = value.as<std::string>();
      } else if (key == "managedNamespaces") {
        config.managed_namespaces =
            value.IsNull() ? std::vector<std::string>{} : value.as<std::vector<std::string>>();
      } else if (key == "managedNamespaceSelector") {
        config.managed_namespace_selector.clear();
        if (value.IsMap() && value["matchLabels"]) {
          config.managed_namespace_selector =
              value["matchLabels"].as<std::map<std::string, std::string>>();
        } else if (!value.IsNull() && !(value.IsMap() && value.size() == 0)) {
          return fail(std::string("managedNamespaceSelector: only matchLabels is supported"));
        }
      } else if (key == "mcsLabel") {
        config.mcs_label = value.IsNull() ? "" : value.as<std::string>();
      } else if (key == "partition") {
        config.partition = value.as<std::string>();
      } else if (key == "defaultUser") {
        config.default_user = value.IsNull() ? "" : value.as<std::string>();
      } else {
        return fail("unknown key \"" + key +
                    "\" (known: schedulerName, slurmRestApi, managedNamespaces, "
                    "managedNamespaceSelector, mcsLabel, partition, defaultUser)");
      }
    }
  } catch (const YAML::Exception& e) {
    return fail(std::string("bad value: ") + e.what());
  }
  if (config.scheduler_name.empty()) {
    return fail(std::string("schedulerName must not be empty"));
  }
  if (config.partition.empty()) {
    return fail(std::string("partition must not be empty"));
  }
  return config;
}

tightrope::Result<BridgeConfig, std::string> load_bridge_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return fail("cannot read " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto config = parse_bridge_config(text.str());
  if (!config) {
    return fail(path + ": " + config.error());
  }
  return config;
}

}  // namespace tightrope::bridge
