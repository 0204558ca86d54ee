#include "kube/endpoints.hpp"

#include <httplib.h>

namespace tightrope::kube {

tightrope::Result<HostPort, std::string> parse_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return fail("\"" + address + "\" is not host:port or :port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(address.substr(colon + 1), &used);
    if (used != address.size() - colon - 1) {
      port = -1;
    }
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return fail("\"" + address + "\" has no valid port");
  }
  return HostPort{host.empty() ? "0.0.0.0" : host, port};
}

Endpoints::Endpoints(metrics::Registry& registry, std::function<bool()> ready)
    : registry_(registry), ready_(std::move(ready)) {}

Endpoints::~Endpoints() {
  stop();
}

tightrope::Result<Done, std::string> Endpoints::serve(const std::string& address, bool with_metrics,
                                                      bool with_health) {
  if (address == "0" || address.empty()) {
    return Done{};
  }
  auto where = parse_address(address);
  if (!where) {
    return fail(where.error());
  }
  auto server = std::make_unique<httplib::Server>();
  if (with_health) {
    server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      const bool ready = ready_();
      res.status = ready ? 200 : 503;
      res.set_content(ready ? "ok\n" : "caches not synced\n", "text/plain");
    });
  }
  if (with_metrics) {
    server->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(registry_.render(), "text/plain; version=0.0.4");
    });
  }
  if (!server->bind_to_port(where->host, where->port)) {
    return fail("cannot listen on " + address);
  }
  httplib::Server* raw = server.get();
  servers_.push_back(std::move(server));
  threads_.emplace_back([raw] { raw->listen_after_bind(); });
  return Done{};
}

void Endpoints::stop() {
  for (auto& s : servers_) {
    s->stop();
  }
  for (auto& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
  servers_.clear();
}

}  // namespace tightrope::kube
