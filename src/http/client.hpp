// A blocking HTTP client on libcurl with a pool of reusable connections, TLS options and
// per-request timeouts. It knows nothing of Kubernetes or Slurm; it reports transport failures
// as values and leaves retry policy to its callers, who know which requests are idempotent.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
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
  // send() refuses a body longer than this (kTooLarge) rather than hold it: a peer that answers
  // without end must not take the process's memory. 0: no limit. Streams are bounded by their
  // handler instead.
  size_t max_body_bytes = 0;
  // stream() only: a stream that receives nothing for this long fails with kTimeout (a hung
  // server or proxy, a connection half-open). 0: no limit beyond `timeout`.
  std::chrono::milliseconds silence_limit{0};
};

struct Response {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case

  // The first header of that (lower-case) name, or "".
  std::string header(std::string_view name) const;
};

struct TransportError {
  enum class Kind {
    kConnect,  // nothing reached the server: any request may be retried
    kTimeout,  // the server may have acted: only idempotent requests may be retried
    kTls,
    kCancelled,  // the caller stopped a stream
    kTooLarge,   // the body passed the request's max_body_bytes; what came was dropped
    kOther,
  };
  Kind kind = Kind::kOther;
  std::string message;  // curl's words, with method and URL
};

// Files and in-memory PEM are alternatives: a kubeconfig carries either.
struct TlsOptions {
  std::string ca_file;  // trust these CAs (PEM file); empty (and no ca_pem): the system's
  std::string ca_pem;
  std::string cert_file;  // client certificate (PEM), optional
  std::string cert_pem;
  std::string key_file;
  std::string key_pem;
  bool insecure_skip_verify = false;
};

// Receives a streamed body piece by piece with the response's status; false stops the transfer.
using ChunkHandler = std::function<bool(long status, std::string_view chunk)>;

class Client {
 public:
  explicit Client(TlsOptions tls = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Thread-safe; requests made at the same time use separate connections.
  Result<Response, TransportError> send(const Request& request);

  // Like send, but hands the body to on_chunk as it arrives (a watch). Ends when the server ends
  // the body (returns the status), on a transport failure or timeout, when on_chunk returns false
  // or when *cancel turns true (kCancelled; checked at least once a second even when idle).
  Result<long, TransportError> stream(const Request& request, const ChunkHandler& on_chunk,
                                      const std::atomic<bool>* cancel = nullptr);

 private:
  struct Handle;
  struct Prepared;
  std::unique_ptr<Handle> take();
  void prepare(Handle& handle, const Request& request, Prepared& prepared) const;
  void give_back(std::unique_ptr<Handle> handle);

  TlsOptions tls_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_;
};

}  // namespace tightrope::http
