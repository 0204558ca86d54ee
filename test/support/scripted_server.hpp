// A loopback HTTP server that answers each request byte for byte as a test scripts it: the
// misbehaving peers (a slurmrestd that answers garbage or hangs, an API server that cuts a watch
// stream mid-object) that a real server cannot be made to be. One connection at a time; each is
// closed after its script, so clients never reuse one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tightrope::testing {

// One request and the connection it came on.
class Exchange {
 public:
  Exchange(int fd, const std::atomic<bool>& stopping, std::mutex& mu, std::condition_variable& cv)
      : fd_(fd), stopping_(stopping), mu_(mu), cv_(cv) {}

  // Writes raw bytes; false when the client has gone.
  bool send(std::string_view bytes);
  // Keeps the connection open and silent for `duration`, until the client hangs up or the
  // server stops.
  void hold(std::chrono::milliseconds duration);

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
  std::mutex& mu_;
  std::condition_variable& cv_;
};

class ScriptedServer {
 public:
  // `request_line` is "GET /path?query HTTP/1.1".
  using Script = std::function<void(const std::string& request_line, Exchange& exchange)>;

  explicit ScriptedServer(Script script);
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT"
  // The request lines served so far, in order.
  std::vector<std::string> requests() const;

 private:
  void serve();

  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// A whole answer with a Content-Length and "Connection: close".
std::string http_answer(int status, std::string_view body,
                        std::string_view content_type = "application/json");

// The status line and headers of an answer whose body follows as it comes and ends when the
// connection closes (no Content-Length, no chunks), as a watch's may.
std::string http_head_without_length(int status,
                                     std::string_view content_type = "application/json");

}  // namespace tightrope::testing
