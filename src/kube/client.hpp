// The Kubernetes REST client: verbs on any resource over one libcurl connection pool, with the
// cluster's credentials, a client-side QPS/burst limit, retries with capped backoff where they
// are safe, and request metrics. Objects travel as JSON documents; the informer decodes lists
// and watch streams itself (informer.hpp). Knows nothing of Slurm.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/metrics.hpp"
#include "http/client.hpp"
#include "kube/config.hpp"
#include "kube/error.hpp"
#include "kube/resource.hpp"

namespace tightrope::kube {

class TokenBucket;

// The most of one answer (a watch's aside) the client holds. A page of 500 objects (the
// informers' page size), each at etcd's default limit of 1.5 MiB a request, is 750 MiB: this
// refuses only what no API server sends, and a peer that answers without end cannot take the
// process's memory. A watch is bounded by its line limit instead (watch.hpp).
inline constexpr size_t kMaxAnswerBytes = size_t{1} << 30U;

struct ClientOptions {
  double qps = 50;  // client-side limit, as client-go's QPS/Burst
  int burst = 100;
  std::chrono::milliseconds timeout{30000};  // per attempt, except watches
  size_t max_answer_bytes = kMaxAnswerBytes;
  int max_attempts = 5;
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{5000};
  std::string user_agent = "tightrope";
  metrics::Registry* metrics = nullptr;  // rest_client_* metrics when set
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // page size; 0: everything in one answer
  std::string continue_token;
  std::string resource_version;  // "" most recent (quorum read); "0" any cached version
  std::optional<int> timeout_seconds;
};

// One page of a list: raw items (JSON array text kept as parsed JSON) and the paging cursor.
struct ObjectList {
  nlohmann::json items = nlohmann::json::array();
  std::string resource_version;
  std::string continue_token;
};

enum class PropagationPolicy { kDefault, kForeground, kBackground, kOrphan };

struct DeleteOptions {
  PropagationPolicy propagation = PropagationPolicy::kDefault;
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid;               // delete only this incarnation
  std::string precondition_resource_version;  // delete only if unchanged
};

enum class PatchType { kMerge, kJson, kStrategicMerge };

struct ApplyOptions {
  std::string field_manager;  // required by the server
  bool force = false;         // take fields another manager owns
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // the server ends the watch after this; the caller reconnects
  // The API server sends a watch that allows bookmarks one each minute, changes or not: one
  // that hears nothing for this long is taken for dead (a hung server or proxy, a connection
  // half-open) and fails with kTimeout, rather than leaving the cache stale until
  // timeout_seconds. Without bookmarks a quiet watch is silent by right: no limit then.
  std::chrono::milliseconds silence_limit = std::chrono::minutes(3);
};

// Receives a watch stream's body as it arrives; false stops the watch.
using WatchChunkHandler = std::function<bool(std::string_view chunk)>;

class Client {
 public:
  Client(Config config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Config& config() const { return config_; }

  Result<nlohmann::json> get(const ResourceType& type, const std::string& ns,
                             const std::string& name, const std::string& subresource = "");
  Result<ObjectList> list(const ResourceType& type, const std::string& ns,
                          const ListOptions& options = {});
  // A list answer's body unparsed, for decoders that read it themselves (the informer).
  Result<std::string> list_raw(const ResourceType& type, const std::string& ns,
                               const ListOptions& options);
  // Every page, `page_size` objects a request.
  Result<ObjectList> list_all(const ResourceType& type, const std::string& ns,
                              ListOptions options = {}, int64_t page_size = 500);
  // With a name and subresource, POSTs to that subresource: pods/eviction,
  // serviceaccounts/token.
  Result<nlohmann::json> create(const ResourceType& type, const std::string& ns,
                                const nlohmann::json& object, const std::string& name = "",
                                const std::string& subresource = "");
  // PUT: the object's metadata.resourceVersion makes it conditional (kConflict when stale).
  Result<nlohmann::json> update(const ResourceType& type, const std::string& ns,
                                const nlohmann::json& object, const std::string& subresource = "");
  Result<nlohmann::json> update_status(const ResourceType& type, const std::string& ns,
                                       const nlohmann::json& object) {
    return update(type, ns, object, "status");
  }
  // The server's answer: the deleted object, or a Status while finalizers hold it.
  Result<nlohmann::json> remove(const ResourceType& type, const std::string& ns,
                                const std::string& name, const DeleteOptions& options = {});
  Result<nlohmann::json> patch(const ResourceType& type, const std::string& ns,
                               const std::string& name, PatchType patch_type,
                               const nlohmann::json& patch, const std::string& subresource = "");
  // Server-side apply of `object` (it carries apiVersion, kind and metadata.name).
  Result<nlohmann::json> apply(const ResourceType& type, const std::string& ns,
                               const nlohmann::json& object, const ApplyOptions& options,
                               const std::string& subresource = "");
  Result<nlohmann::json> get_scale(const ResourceType& type, const std::string& ns,
                                   const std::string& name) {
    return get(type, ns, name, "scale");
  }
  Result<nlohmann::json> set_replicas(const ResourceType& type, const std::string& ns,
                                      const std::string& name, int64_t replicas);

  // Streams a watch until the server ends it (Done), it fails, `on_chunk` returns false or
  // *cancel turns true (kCancelled). Not retried here: the watcher decides where to resume.
  Result<Done> watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
                     const WatchChunkHandler& on_chunk, const std::atomic<bool>* cancel);

  // Follows a container's log (pods/log, follow=true) from its last `tail_lines` lines: each
  // chunk as it arrives, until the container ends, `on_chunk` returns false, *cancel turns true
  // or `limit` passes (Done then: the caller follows again). A quiet log is silent by right.
  Result<Done> follow_log(const std::string& ns, const std::string& pod,
                          const std::string& container, int tail_lines,
                          const WatchChunkHandler& on_chunk, const std::atomic<bool>* cancel,
                          std::chrono::seconds limit);

  // Any path (discovery documents, /readyz).
  Result<nlohmann::json> get_path(const std::string& path);

 private:
  struct Call {
    std::string method;
    std::string path;  // with the query
    std::string body;
    std::string content_type;
    bool idempotent = true;
    std::string verb;      // for metrics: get, list, create, update, patch, apply, delete, watch
    std::string resource;  // for metrics
  };
  Result<std::string> call(const Call& call);
  // A streamed GET (a watch, a followed log): each chunk of a 2xx body to `on_chunk`, until the
  // server ends it, it fails (kTimeout: the request's timeout or silence limit) or is cancelled.
  Result<Done> stream(const Call& label, const http::Request& request,
                      const WatchChunkHandler& on_chunk, const std::atomic<bool>* cancel);
  Result<std::string> bearer_token();
  std::vector<std::pair<std::string, std::string>> headers(const std::string& content_type);
  void observe(const Call& call, long code, std::chrono::steady_clock::duration took);
  void wait_for_token();

  Config config_;
  ClientOptions options_;
  http::Client http_;
  std::unique_ptr<TokenBucket> limiter_;
  std::mutex limiter_mu_;

  std::mutex token_mu_;
  std::string file_token_;
  std::filesystem::file_time_type token_mtime_{};

  metrics::CounterFamily* requests_ = nullptr;
  metrics::HistogramFamily* latency_ = nullptr;
};

// Query string for list/watch options, with the leading '?' (or empty).
std::string list_query(const ListOptions& options);

}  // namespace tightrope::kube
