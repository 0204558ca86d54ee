// A controller process's plain-HTTP endpoints: /healthz (the process serves), /readyz (its caches
// are filled) and /metrics (Prometheus text). One listener per address; an address is "host:port",
// ":port" for every interface, or "0" for none.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/metrics.hpp"
#include "base/result.hpp"

namespace httplib {
class Server;
}

namespace tightrope::kube {

struct HostPort {
  std::string host;
  int port = 0;
};
// "127.0.0.1:8080", ":8080" (every interface), "[::1]:8080"; an error names what is wrong.
tightrope::Result<HostPort, std::string> parse_address(const std::string& address);

class Endpoints {
 public:
  Endpoints(metrics::Registry& registry, std::function<bool()> ready);
  ~Endpoints();
  Endpoints(const Endpoints&) = delete;
  Endpoints& operator=(const Endpoints&) = delete;

  // Serves health and readiness (and metrics when `with_metrics`) on `address` from a thread
  // of its own. The error says why the address cannot be bound.
  tightrope::Result<Done, std::string> serve(const std::string& address, bool with_metrics,
                                             bool with_health);
  void stop();

 private:
  metrics::Registry& registry_;
  std::function<bool()> ready_;
  std::vector<std::unique_ptr<httplib::Server>> servers_;
  std::vector<std::thread> threads_;
};

}  // namespace tightrope::kube
