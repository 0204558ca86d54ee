// The webhook's HTTPS server: AdmissionReviews on /validate and on Slinky's per-kind paths
// (/validate-slinky-slurm-net-v1beta1-<kind>), /healthz and /readyz beside them, a bounded
// body, and a serving certificate that follows its files on disk (certificate.hpp). What to
// answer is admission.hpp's business.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/metrics.hpp"
#include "base/result.hpp"
#include "kube/client.hpp"
#include "webhook/admission.hpp"

namespace httplib {
class Server;
}

namespace tightrope::webhook {

class ServingCertificate;

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 9443;  // 0: any free port (port() says which)
  std::filesystem::path cert_file;
  std::filesystem::path key_file;
  // An object is at most 1.5 MiB (etcd's default request limit) and an UPDATE carries two: 4 MiB
  // leaves room for the review around them. A bigger body is answered 413 unread.
  size_t max_body_bytes = size_t{4} << 20;
  // The API server gives a webhook 10 s by default; a request taking longer is abandoned.
  std::chrono::seconds io_timeout{10};
  // Where reviews and the certificate's expiry are counted; none when null.
  metrics::Registry* metrics = nullptr;
};

// Every path that takes an AdmissionReview to validate.
std::vector<std::string> review_paths();
// The path of pods/binding (Slinky's and controller-runtime's name for a core/v1 Binding).
inline constexpr std::string_view kBindingPath = "/mutate--v1-binding";

// What a pods/binding review does to the pod (copy the Node's topology annotation); failures
// are the effect's to log: the binding goes on either way.
using BindingEffect = std::function<void(const Binding&)>;

class Server {
 public:
  Server(ServerOptions options, ConfigMapLookup config_maps, NodeSetLookup nodesets = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Reads the certificate, binds and serves from a thread of its own; once. The error says what
  // failed: a certificate that does not load, an address that cannot be bound.
  tightrope::Result<Done, std::string> start();
  // Serves kBindingPath too, before start().
  void serve_bindings(BindingEffect effect) { binding_effect_ = std::move(effect); }
  // Serves reviews on another path with another decision (slurm-bridge's pods), before start().
  using ReviewHandler = std::function<Verdict(std::string_view body)>;
  void serve_reviews(std::string path, ReviewHandler handler) {
    extra_.emplace_back(std::move(path), std::move(handler));
  }
  // The bound port, once started.
  int port() const { return port_; }
  // Looks at the certificate's files again (as a handshake does) and sets the expiry metric:
  // the metric follows a renewal even when no review comes.
  void refresh_certificate();
  // Stops accepting, finishes the requests under way, joins the thread.
  void stop();

 private:
  void count(const Verdict& verdict, std::chrono::steady_clock::duration took);

  ServerOptions options_;
  ConfigMapLookup config_maps_;
  NodeSetLookup nodesets_;
  BindingEffect binding_effect_;
  std::vector<std::pair<std::string, ReviewHandler>> extra_;
  std::unique_ptr<ServingCertificate> certificate_;  // outlives server_'s TLS context
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  metrics::CounterFamily* reviews_ = nullptr;
  metrics::HistogramFamily* durations_ = nullptr;
  metrics::Gauge* expiry_ = nullptr;
  int port_ = 0;
};

// ConfigMaps read through the API server (one GET each). A ConfigMap that is not there, or that
// cannot be read, is nothing; a failure other than not-found is logged.
ConfigMapLookup config_maps_from(kube::Client& client);
// NodeSets read the same way, for their scale subresource's reviews.
NodeSetLookup nodesets_from(kube::Client& client);

// The topology copy through the API server: GET the pod and the Node, PATCH the pod's
// annotation when topology_for says so.
BindingEffect copy_topology_with(kube::Client& client);

}  // namespace tightrope::webhook
