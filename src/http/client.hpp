// A blocking HTTP client on libcurl with a pool of reusable connections, TLS options and
// per-request timeouts. It knows nothing of Kubernetes or Slurm; it reports transport failures
// as values and leaves retry policy to its callers, who know which requests are idempotent.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace tightrope::http {

struct Request {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{10000};
};

struct Response {
  long status = 0;
  std::string body;
};

struct TransportError {
  enum class Kind {
    kConnect,  // nothing reached the server: any request may be retried
    kTimeout,  // the server may have acted: only idempotent requests may be retried
    kTls,
    kOther,
  };
  Kind kind = Kind::kOther;
  std::string message;  // curl's words, with method and URL
};

struct TlsOptions {
  std::string ca_file;    // trust these CAs (PEM file); empty: the system's
  std::string cert_file;  // client certificate (PEM), optional
  std::string key_file;
  bool insecure_skip_verify = false;
};

class Client {
 public:
  explicit Client(TlsOptions tls = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Thread-safe; requests made at the same time use separate connections.
  Result<Response, TransportError> send(const Request& request);

 private:
  struct Handle;
  std::unique_ptr<Handle> take();
  void give_back(std::unique_ptr<Handle> handle);

  TlsOptions tls_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_;
};

}  // namespace tightrope::http
