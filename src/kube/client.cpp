#include "kube/client.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include "base/log.hpp"
#include "base/metrics.hpp"
#include "kube/workqueue.hpp"

namespace tightrope::kube {
namespace {

using std::chrono::milliseconds;

const char* propagation_name(PropagationPolicy p) {
  switch (p) {
    case PropagationPolicy::kForeground:
      return "Foreground";
    case PropagationPolicy::kBackground:
      return "Background";
    case PropagationPolicy::kOrphan:
      return "Orphan";
    case PropagationPolicy::kDefault:
      break;
  }
  return "";
}

const char* patch_content_type(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

Error transport_error(const http::TransportError& e) {
  Error error;
  switch (e.kind) {
    case http::TransportError::Kind::kTimeout:
      error.kind = ErrorKind::kTimeout;
      break;
    case http::TransportError::Kind::kCancelled:
      error.kind = ErrorKind::kCancelled;
      break;
    default:
      error.kind = ErrorKind::kUnavailable;
  }
  error.message = e.message;
  return error;
}

Result<nlohmann::json> parse_object(const std::string& what, const std::string& body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded()) {
    Error e;
    e.kind = ErrorKind::kProtocol;
    e.message = what + ": the answer is not JSON";
    return fail(std::move(e));
  }
  return doc;
}

// Retry-After in seconds (the API server never sends the HTTP-date form).
std::optional<milliseconds> retry_after(const http::Response& response) {
  const std::string value = response.header("retry-after");
  if (value.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  const long seconds = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || seconds < 0) {
    return std::nullopt;
  }
  return milliseconds(std::min<long>(seconds, 60) * 1000);
}

std::string object_name(const nlohmann::json& object) {
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) {
    return {};
  }
  return meta->value("name", "");
}

}  // namespace

std::string list_query(const ListOptions& options) {
  std::string q;
  const auto add = [&q](std::string_view key, std::string_view value) {
    q += q.empty() ? '?' : '&';
    q.append(key).append("=").append(url_escape(value));
  };
  if (!options.label_selector.empty()) {
    add("labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    add("fieldSelector", options.field_selector);
  }
  if (options.limit > 0) {
    add("limit", std::to_string(options.limit));
  }
  if (!options.continue_token.empty()) {
    add("continue", options.continue_token);
  }
  if (!options.resource_version.empty()) {
    add("resourceVersion", options.resource_version);
  }
  if (options.timeout_seconds) {
    add("timeoutSeconds", std::to_string(*options.timeout_seconds));
  }
  return q;
}

Client::Client(Config config, ClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      http_(http::TlsOptions{.ca_file = {},
                             .ca_pem = config_.ca_pem,
                             .cert_file = {},
                             .cert_pem = config_.client_cert_pem,
                             .key_file = {},
                             .key_pem = config_.client_key_pem,
                             .insecure_skip_verify = config_.insecure_skip_tls_verify}),
      limiter_(std::make_unique<TokenBucket>(options_.qps, options_.burst)) {
  if (options_.metrics != nullptr) {
    requests_ = &options_.metrics->counter(
        "rest_client_requests_total", "Kubernetes API requests by verb, resource and HTTP code",
        {"verb", "resource", "code"});
    latency_ = &options_.metrics->histogram("rest_client_request_duration_seconds",
                                            "Kubernetes API request latency by verb and resource",
                                            {"verb", "resource"},
                                            metrics::exponential_buckets(0.001, 2, 15));
  }
}

Client::~Client() = default;

Result<std::string> Client::bearer_token() {
  if (!config_.token.empty()) {
    return config_.token;
  }
  if (config_.token_file.empty()) {
    return std::string();
  }
  // A projected service-account token is rotated by the kubelet: read it again when it changes.
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(config_.token_file, ec);
  std::lock_guard lock(token_mu_);
  if (!file_token_.empty() && !ec && mtime == token_mtime_) {
    return file_token_;
  }
  auto token = read_token_file(config_.token_file);
  if (!token) {
    if (!file_token_.empty()) {
      return file_token_;  // a rotation in progress: the last token is still the best guess
    }
    Error e;
    e.kind = ErrorKind::kUnauthorized;
    e.message = token.error().to_string();
    return fail(std::move(e));
  }
  file_token_ = std::move(*token);
  token_mtime_ = mtime;
  return file_token_;
}

std::vector<std::pair<std::string, std::string>> Client::headers(const std::string& content_type) {
  std::vector<std::pair<std::string, std::string>> h{{"Accept", "application/json"},
                                                     {"User-Agent", options_.user_agent}};
  if (!content_type.empty()) {
    h.emplace_back("Content-Type", content_type);
  }
  return h;
}

void Client::wait_for_token() {
  milliseconds delay{0};
  {
    std::lock_guard lock(limiter_mu_);
    delay = std::chrono::duration_cast<milliseconds>(
        limiter_->reserve(std::chrono::steady_clock::now()));
  }
  if (delay.count() > 0) {
    std::this_thread::sleep_for(delay);
  }
}

void Client::observe(const Call& call, long code, std::chrono::steady_clock::duration took) {
  if (requests_ == nullptr) {
    return;
  }
  requests_
      ->with({{"verb", call.verb},
              {"resource", call.resource},
              {"code", code == 0 ? "<error>" : std::to_string(code)}})
      .inc();
  latency_->with({{"verb", call.verb}, {"resource", call.resource}})
      .observe(std::chrono::duration<double>(took).count());
}

Result<std::string> Client::call(const Call& call) {
  const std::string what = call.method + " " + call.path;
  auto token = bearer_token();
  if (!token) {
    return fail(token.error());
  }
  http::Request request{call.method, config_.server + call.path, call.body,
                        headers(call.content_type), options_.timeout};
  request.max_body_bytes = options_.max_answer_bytes;
  if (!token->empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + *token);
  }
  std::mt19937 jitter(std::random_device{}());
  milliseconds backoff = options_.backoff_initial;
  Error last;
  for (int attempt = 1; attempt <= std::max(1, options_.max_attempts); ++attempt) {
    wait_for_token();
    const auto started = std::chrono::steady_clock::now();
    auto response = http_.send(request);
    const auto took = std::chrono::steady_clock::now() - started;
    std::optional<milliseconds> server_wait;
    if (!response) {
      observe(call, 0, took);
      last = transport_error(response.error());
      // A request that never reached the server can always be repeated; one that timed out
      // may have been carried out, so only if repeating it is harmless.
      const bool retry = response.error().kind == http::TransportError::Kind::kConnect ||
                         (call.idempotent && last.kind == ErrorKind::kTimeout);
      if (!retry) {
        return fail(std::move(last));
      }
    } else {
      observe(call, response->status, took);
      if (response->status >= 200 && response->status < 300) {
        return std::move(response->body);
      }
      last = error_from_response(what, response->status, response->body);
      server_wait = retry_after(*response);
      // 429: the server did not act. 5xx: it may have, so only idempotent calls unless the
      // server itself asks to be asked again (Retry-After).
      const bool retry =
          response->status == 429 ||
          (response->status >= 500 && response->status != 501 && (call.idempotent || server_wait));
      if (!retry) {
        return fail(std::move(last));
      }
    }
    if (attempt == options_.max_attempts) {
      break;
    }
    // Full jitter keeps many clients from retrying in step after an API server restart.
    std::uniform_int_distribution<int64_t> spread(backoff.count() / 2, backoff.count());
    milliseconds wait(spread(jitter));
    if (server_wait && *server_wait > wait) {
      wait = *server_wait;
    }
    std::this_thread::sleep_for(wait);
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  return fail(std::move(last));
}

Result<nlohmann::json> Client::get(const ResourceType& type, const std::string& ns,
                                   const std::string& name, const std::string& subresource) {
  const std::string path = resource_path(type, ns, name, subresource);
  auto body = call({"GET", path, "", "", true, "get", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("GET " + path, *body);
}

Result<std::string> Client::list_raw(const ResourceType& type, const std::string& ns,
                                     const ListOptions& options) {
  return call(
      {"GET", resource_path(type, ns) + list_query(options), "", "", true, "list", type.resource});
}

Result<ObjectList> Client::list(const ResourceType& type, const std::string& ns,
                                const ListOptions& options) {
  auto body = list_raw(type, ns, options);
  if (!body) {
    return fail(body.error());
  }
  auto doc = parse_object("GET " + resource_path(type, ns), *body);
  if (!doc) {
    return fail(doc.error());
  }
  ObjectList list;
  if (auto items = doc->find("items"); items != doc->end() && items->is_array()) {
    list.items = std::move(*items);
  }
  if (auto meta = doc->find("metadata"); meta != doc->end() && meta->is_object()) {
    list.resource_version = meta->value("resourceVersion", "");
    list.continue_token = meta->value("continue", "");
  }
  return list;
}

Result<ObjectList> Client::list_all(const ResourceType& type, const std::string& ns,
                                    ListOptions options, int64_t page_size) {
  options.limit = page_size;
  ObjectList all;
  for (;;) {
    auto page = list(type, ns, options);
    if (!page) {
      return fail(page.error());
    }
    for (auto& item : page->items) {
      all.items.push_back(std::move(item));
    }
    // The first page's version is the snapshot every later page is read from.
    if (all.resource_version.empty()) {
      all.resource_version = page->resource_version;
    }
    if (page->continue_token.empty()) {
      return all;
    }
    options.continue_token = page->continue_token;
  }
}

Result<nlohmann::json> Client::create(const ResourceType& type, const std::string& ns,
                                      const nlohmann::json& object, const std::string& name,
                                      const std::string& subresource) {
  const std::string path = resource_path(type, ns, name, subresource);
  auto body =
      call({"POST", path, object.dump(), "application/json", false, "create", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("POST " + path, *body);
}

Result<nlohmann::json> Client::update(const ResourceType& type, const std::string& ns,
                                      const nlohmann::json& object,
                                      const std::string& subresource) {
  const std::string path = resource_path(type, ns, object_name(object), subresource);
  auto body = call({"PUT", path, object.dump(), "application/json", true, "update", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("PUT " + path, *body);
}

Result<nlohmann::json> Client::remove(const ResourceType& type, const std::string& ns,
                                      const std::string& name, const DeleteOptions& options) {
  nlohmann::json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (options.propagation != PropagationPolicy::kDefault) {
    opts["propagationPolicy"] = propagation_name(options.propagation);
  }
  if (options.grace_period_seconds) {
    opts["gracePeriodSeconds"] = *options.grace_period_seconds;
  }
  if (!options.precondition_uid.empty()) {
    opts["preconditions"]["uid"] = options.precondition_uid;
  }
  if (!options.precondition_resource_version.empty()) {
    opts["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  const std::string path = resource_path(type, ns, name);
  auto body =
      call({"DELETE", path, opts.dump(), "application/json", true, "delete", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("DELETE " + path, *body);
}

Result<nlohmann::json> Client::patch(const ResourceType& type, const std::string& ns,
                                     const std::string& name, PatchType patch_type,
                                     const nlohmann::json& patch, const std::string& subresource) {
  const std::string path = resource_path(type, ns, name, subresource);
  // A JSON patch with "test" ops or array appends is not idempotent; merge patches are.
  const bool idempotent = patch_type != PatchType::kJson;
  auto body = call({"PATCH", path, patch.dump(), patch_content_type(patch_type), idempotent,
                    "patch", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("PATCH " + path, *body);
}

Result<nlohmann::json> Client::apply(const ResourceType& type, const std::string& ns,
                                     const nlohmann::json& object, const ApplyOptions& options,
                                     const std::string& subresource) {
  std::string path = resource_path(type, ns, object_name(object), subresource);
  path += "?fieldManager=" + url_escape(options.field_manager);
  if (options.force) {
    path += "&force=true";
  }
  // JSON is YAML, so the apply body needs no YAML encoder.
  auto body = call(
      {"PATCH", path, object.dump(), "application/apply-patch+yaml", true, "apply", type.resource});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("PATCH " + path, *body);
}

Result<nlohmann::json> Client::set_replicas(const ResourceType& type, const std::string& ns,
                                            const std::string& name, int64_t replicas) {
  return patch(type, ns, name, PatchType::kMerge, {{"spec", {{"replicas", replicas}}}}, "scale");
}

Result<nlohmann::json> Client::get_path(const std::string& path) {
  auto body = call({"GET", path, "", "", true, "get", "<path>"});
  if (!body) {
    return fail(body.error());
  }
  return parse_object("GET " + path, *body);
}

Result<Done> Client::watch(const ResourceType& type, const std::string& ns,
                           const WatchOptions& options, const WatchChunkHandler& on_chunk,
                           const std::atomic<bool>* cancel) {
  auto token = bearer_token();
  if (!token) {
    return fail(token.error());
  }
  ListOptions query;
  query.label_selector = options.label_selector;
  query.field_selector = options.field_selector;
  query.resource_version = options.resource_version;
  query.timeout_seconds = options.timeout_seconds;
  std::string path = resource_path(type, ns) + list_query(query);
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += "watch=true";
  if (options.allow_bookmarks) {
    path += "&allowWatchBookmarks=true";
  }
  http::Request request{"GET", config_.server + path, "", headers(""),
                        // The server ends the watch at timeout_seconds; allow it a little longer.
                        std::chrono::seconds(options.timeout_seconds + 30)};
  if (options.allow_bookmarks) {
    request.silence_limit = options.silence_limit;
  }
  if (!token->empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + *token);
  }
  wait_for_token();
  return stream({"GET", path, "", "", true, "watch", type.resource}, request, on_chunk, cancel);
}

Result<Done> Client::stream(const Call& label, const http::Request& request,
                            const WatchChunkHandler& on_chunk, const std::atomic<bool>* cancel) {
  std::string error_body;
  long error_status = 0;
  const auto started = std::chrono::steady_clock::now();
  auto status = http_.stream(
      request,
      [&](long code, std::string_view chunk) {
        if (code >= 300) {
          error_status = code;
          if (error_body.size() < size_t{64} * 1024) {
            error_body.append(chunk);
          }
          return true;
        }
        return on_chunk(chunk);
      },
      cancel);
  if (!status) {
    observe(label, 0, std::chrono::steady_clock::now() - started);
    return fail(transport_error(status.error()));
  }
  observe(label, *status, std::chrono::steady_clock::now() - started);
  if (*status >= 300 || error_status != 0) {
    return fail(error_from_response("GET " + label.path, *status, error_body));
  }
  return Done{};
}

Result<Done> Client::follow_log(const std::string& ns, const std::string& pod,
                                const std::string& container, int tail_lines,
                                const WatchChunkHandler& on_chunk, const std::atomic<bool>* cancel,
                                std::chrono::seconds limit) {
  auto token = bearer_token();
  if (!token) {
    return fail(token.error());
  }
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + pod +
                           "/log?container=" + container +
                           "&follow=true&tailLines=" + std::to_string(tail_lines);
  http::Request request{"GET", config_.server + path, "", headers(""), limit};
  if (!token->empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + *token);
  }
  wait_for_token();
  auto streamed = stream({"GET", path, "", "", true, "get", "pods/log"}, request, on_chunk, cancel);
  if (!streamed && streamed.error().kind == ErrorKind::kTimeout) {
    return Done{};  // the limit: followed long enough, the caller follows again
  }
  return streamed;
}

}  // namespace tightrope::kube
