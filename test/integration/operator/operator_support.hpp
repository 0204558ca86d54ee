// What the operator's integration tests share: the real slurm-operator binary run as a child
// process against the bed (started, stopped, killed, its log kept for failures), the CRDs
// installed from deploy/crds, and YAML manifests read as JSON.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.hpp"

namespace tightrope::op::testing {

// Every document of a YAML file (or text) as JSON.
std::vector<nlohmann::json> read_yaml_file(const std::filesystem::path& path);
std::vector<nlohmann::json> read_yaml(const std::string& text);
std::filesystem::path source_dir();

// Applies deploy/crds/*.yaml and waits (bounded) until each is Established.
void install_crds(kube::Client& client);
// Applies the CRDs of one YAML file and waits until each is Established.
void install_crd_file(kube::Client& client, const std::filesystem::path& file);

// slurm-operator watching one namespace, health and metrics on free loopback ports, reaching
// slurmrestd at the bed's URL.
class OperatorProcess {
 public:
  explicit OperatorProcess(std::string namespace_name, std::vector<std::string> extra_args = {});
  ~OperatorProcess();
  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  void start();
  // SIGTERM and wait (bounded); returns the exit status.
  int stop();
  // SIGKILL: no chance to clean up.
  void kill_hard();
  bool running() const;
  std::string log() const;
  // How many reconciles of `controller` ("nodeset", "controller", ...) it has finished, from its
  // metrics (controller_runtime_reconcile_total): what a test waits on to know that the operator
  // has looked at a change, instead of sleeping. -1 when the metrics do not answer.
  int64_t reconciles(const std::string& controller) const;
  int health_port() const { return health_port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::string namespace_name_;
  std::vector<std::string> extra_args_;
  std::filesystem::path log_file_;
  pid_t pid_ = -1;
  int health_port_ = 0;
  int metrics_port_ = 0;
};

// "<status>/<reason>" of a condition of a resource ("" while it has none).
std::string condition(kube::Client& client, const kube::ResourceType& type, const std::string& ns,
                      const std::string& name, const std::string& type_name = "Ready");

int free_port();
// HTTP GET on 127.0.0.1; the status (0 when nothing answered) and body.
std::pair<long, std::string> http_get(const std::string& url,
                                      const std::vector<std::string>& headers = {});

}  // namespace tightrope::op::testing
