// slurm-operator-webhook: the validating admission webhook of the slinky.slurm.net/v1beta1
// resources (and, with --pods-binding, the topology copy of pods/binding), served over HTTPS with a
// certificate it reads again when its files change, and a clean stop on SIGTERM.
// deploy/webhook/validating-webhook.yaml registers it.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "base/log.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "kube/endpoints.hpp"
#include "webhook/bridge_pods.hpp"
#include "webhook/server.hpp"

int main(int argc, char** argv) {
  using namespace tightrope;
  CLI::App app{"slurm-operator-webhook: validates slinky.slurm.net/v1beta1 resources on admission"};
  std::string server_addr = ":9443";
  std::string cert_file;
  std::string key_file;
  // controller-runtime's default, where cert-manager's Secret is usually mounted.
  std::string cert_dir = "/tmp/k8s-webhook-server/serving-certs";
  std::string kubeconfig;
  std::string context;
  std::string metrics_addr = "0";
  std::string log_level = "info";
  std::string log_format = "logfmt";
  app.add_option("--server-addr", server_addr, "HTTPS address, host:port or :port")
      ->capture_default_str();
  app.add_option("--tls-cert-file", cert_file,
                 "PEM certificate chain, leaf first (default: <cert-dir>/tls.crt)");
  app.add_option("--tls-key-file", key_file, "PEM private key (default: <cert-dir>/tls.key)");
  app.add_option("--cert-dir", cert_dir, "directory holding tls.crt and tls.key")
      ->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file; default $KUBECONFIG, then in-cluster, then ~/.kube/config");
  app.add_option("--context", context, "kubeconfig context (default: the current one)");
  app.add_option(
         "--metrics-addr", metrics_addr,
         "plain-HTTP address of /metrics (reviews, the certificate's expiry), or 0 for none")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warn or error");
  app.add_option("--log-format", log_format, "logfmt or json")
      ->check(CLI::IsMember({"logfmt", "json"}));
  bool pods_binding = false;
  app.add_flag("--pods-binding", pods_binding,
               "serve " + std::string(webhook::kBindingPath) +
                   ": a slurmd pod bound to a Node gets the Node's topology annotation");
  std::string bridge_config;
  app.add_option("--bridge-config", bridge_config,
                 "slurm-bridge's configuration file: serve " +
                     std::string(webhook::kBridgePodsPath) +
                     " for the pods (and batch Jobs) of the namespaces the bridge manages");
  CLI11_PARSE(app, argc, argv);

  log::Level level = log::Level::kInfo;
  if (!log::parse_level(log_level, &level)) {
    std::cerr << "--log-level: unknown level \"" << log_level << "\"\n";
    return 2;
  }
  log::configure(level, log_format == "json" ? log::Format::kJson : log::Format::kLogfmt);
  if (cert_file.empty() != key_file.empty()) {
    std::cerr << "--tls-cert-file and --tls-key-file go together\n";
    return 2;
  }
  if (cert_file.empty()) {
    cert_file = cert_dir + "/tls.crt";
    key_file = cert_dir + "/tls.key";
  }
  auto where = kube::parse_address(server_addr);
  if (!where) {
    std::cerr << "--server-addr: " << where.error() << "\n";
    return 2;
  }
  // The webhook reads the ConfigMaps a Controller references; without the API server it could
  // only half-check a Controller, so a kubeconfig that does not load is fatal.
  auto config = kube::load_default(kubeconfig, context);
  if (!config) {
    log::error("webhook.config_failed", {{"error", config.error().to_string()}});
    return 2;
  }
  // Signals are taken by sigwait below, never by a server thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kube::ClientOptions client_options;
  client_options.user_agent = "slurm-operator-webhook";
  // The API server waits 10 s for an answer by default: a slow ConfigMap read must not use it up.
  client_options.timeout = std::chrono::milliseconds(3000);
  client_options.max_attempts = 2;
  kube::Client client(*config, client_options);

  metrics::Registry registry;
  webhook::ServerOptions options;
  options.metrics = &registry;
  options.host = where->host;
  options.port = where->port;
  options.cert_file = cert_file;
  options.key_file = key_file;
  webhook::Server server(options, webhook::config_maps_from(client),
                         webhook::nodesets_from(client));
  if (pods_binding) {
    server.serve_bindings(webhook::copy_topology_with(client));
  }
  if (!bridge_config.empty()) {
    auto loaded = bridge::load_bridge_config(bridge_config);
    if (!loaded) {
      log::error("webhook.bridge_config_failed", {{"error", loaded.error()}});
      return 2;
    }
    const webhook::NamespaceLabels labels =
        [&client](const std::string& name) -> std::optional<std::map<std::string, std::string>> {
      auto ns = client.get(kube::resources::namespaces(), "", name);
      if (!ns) {
        return std::nullopt;
      }
      return (*ns).value("/metadata/labels"_json_pointer, std::map<std::string, std::string>());
    };
    server.serve_reviews(std::string(webhook::kBridgePodsPath),
                         [config = *loaded, labels](std::string_view body) {
                           return webhook::admit_bridge(body, config, labels);
                         });
  }
  if (auto started = server.start(); !started) {
    log::error("webhook.start_failed", {{"address", server_addr}, {"error", started.error()}});
    return 2;
  }
  kube::Endpoints endpoints(registry, [] { return true; });
  if (metrics_addr != "0") {
    if (auto served = endpoints.serve(metrics_addr, true, false); !served) {
      log::error("webhook.metrics_failed", {{"address", metrics_addr}, {"error", served.error()}});
      server.stop();
      return 2;
    }
  }
  // A renewed certificate reaches the expiry metric within a minute, reviews or not.
  const timespec minute{60, 0};
  int signal = -1;
  while (signal < 0) {
    signal = sigtimedwait(&signals, nullptr, &minute);
    if (signal < 0) {
      server.refresh_certificate();
    }
  }
  log::info("webhook.stopping", {{"signal", std::to_string(signal)}});
  endpoints.stop();
  server.stop();
  return 0;
}
