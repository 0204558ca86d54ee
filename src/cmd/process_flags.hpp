// What the long-running binaries (slurm-operator, slurm-bridge) take on their command line and
// do first: where the API server is, leader election, their endpoints and their logs.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "base/log.hpp"
#include "base/metrics.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/manager.hpp"

namespace tightrope::cmd {

struct ProcessFlags {
  std::string kubeconfig;
  std::string context;
  bool leader_elect = false;
  std::string leader_namespace;
  std::string leader_id;
  std::string metrics_addr = ":8080";
  std::string health_addr = ":8081";
  std::string log_level = "info";
  std::string log_format = "logfmt";
  kube::ClientOptions client;  // its qps and burst are flags; set the defaults before adding
};

inline void add_process_flags(CLI::App& app, ProcessFlags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file; default $KUBECONFIG, then in-cluster, then ~/.kube/config");
  app.add_option("--context", f.context, "kubeconfig context (default: the current one)");
  app.add_flag("--leader-elect", f.leader_elect,
               "elect one active process among replicas through a Lease");
  app.add_option("--leader-elect-namespace", f.leader_namespace,
                 "namespace of the Lease (default: the kubeconfig's or the pod's namespace)")
      ->envname("POD_NAMESPACE");
  app.add_option("--leader-elect-id", f.leader_id, "name of the Lease")->capture_default_str();
  app.add_option("--metrics-addr", f.metrics_addr, "address of /metrics, or 0 for none");
  app.add_option("--health-addr", f.health_addr, "address of /healthz and /readyz, or 0 for none");
  app.add_option("--log-level", f.log_level, "debug, info, warn or error")->envname("LOG_LEVEL");
  app.add_option("--log-format", f.log_format, "logfmt or json")
      ->envname("LOG_FORMAT")
      ->check(CLI::IsMember({"logfmt", "json"}));
  app.add_option("--kube-api-qps", f.client.qps,
                 "requests per second to the Kubernetes API, sustained")
      ->check(CLI::Range(1.0, 10000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", f.client.burst,
                 "requests to the Kubernetes API allowed at once above the rate")
      ->check(CLI::Range(1, 20000))
      ->capture_default_str();
}

// False, having said why on stderr, when the level is unknown.
inline bool configure_logs(const ProcessFlags& f) {
  log::Level level = log::Level::kInfo;
  if (!log::parse_level(f.log_level, &level)) {
    std::cerr << "--log-level: unknown level \"" << f.log_level << "\"\n";
    return false;
  }
  log::configure(level, f.log_format == "json" ? log::Format::kJson : log::Format::kLogfmt);
  return true;
}

// The Manager's options from the flags; `about` is added to by the caller.
inline kube::ManagerOptions manager_options(const ProcessFlags& f, const kube::Config& config,
                                            std::string name, metrics::Registry* registry) {
  kube::ManagerOptions m;
  m.name = std::move(name);
  m.identity = kube::process_identity();
  m.metrics_addr = f.metrics_addr;
  m.health_addr = f.health_addr;
  m.registry = registry;
  m.about = {{"server", config.server}};
  if (f.leader_elect) {
    kube::LeaderElectionOptions lease;
    lease.lease_namespace = f.leader_namespace.empty() ? config.namespace_name : f.leader_namespace;
    lease.lease_name = f.leader_id;
    m.leader_election = lease;
  }
  return m;
}

}  // namespace tightrope::cmd
