// BENCHMARK ONLY: an HTTP/1.1 relay on 127.0.0.1 that counts the requests passing through it,
// by method and path, so that the Slurm REST traffic of an operator under test can be measured
// without its help. Bytes are relayed unchanged in both directions; request bodies are skipped
// by Content-Length (chunked request bodies are not understood, and no operator sends them).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace tightrope::bench {

class CountingProxy {
 public:
  // Relays to host:port; listens on 127.0.0.1:listen_port (0: a free port).
  CountingProxy(std::string upstream_host, int upstream_port, int listen_port = 0);
  ~CountingProxy();
  CountingProxy(const CountingProxy&) = delete;
  CountingProxy& operator=(const CountingProxy&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int64_t requests() const { return requests_.load(); }
  // Bytes of the answers relayed back (heads and bodies): a 304 is a few hundred, a full list
  // of 1,000 nodes 2.5 MB.
  int64_t bytes_answered() const { return bytes_answered_.load(); }
  // Requests so far by "METHOD /path" (query string dropped).
  std::map<std::string, int64_t> by_route() const;

 private:
  void accept_loop();
  void relay(int client);
  void count(const std::string& request_line);

  std::string upstream_host_;
  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> bytes_answered_{0};
  std::atomic<int> open_relays_{0};
  mutable std::mutex mu_;
  std::map<std::string, int64_t> routes_;
  std::thread acceptor_;
};

}  // namespace tightrope::bench
