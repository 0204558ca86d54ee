#include "http/client.hpp"

#include <curl/curl.h>

#include <mutex>

namespace tightrope::http {
namespace {

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

TransportError::Kind kind_of(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportError::Kind::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::Kind::kTimeout;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return TransportError::Kind::kTls;
    default:
      return TransportError::Kind::kOther;
  }
}

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

struct Client::Handle {
  CURL* curl = curl_easy_init();
  ~Handle() { curl_easy_cleanup(curl); }
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

Client::Client(TlsOptions tls) : tls_(std::move(tls)) {
  init_curl_once();
}

Client::~Client() = default;

std::unique_ptr<Client::Handle> Client::take() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void Client::give_back(std::unique_ptr<Handle> handle) {
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(handle));
}

Result<Response, TransportError> Client::send(const Request& request) {
  auto handle = take();
  CURL* c = handle->curl;
  if (c == nullptr) {
    return fail(TransportError{TransportError::Kind::kOther, "curl_easy_init failed"});
  }
  // Reset clears the previous request's options but keeps the connection cache: a later
  // request to the same server reuses the open connection.
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(request.timeout.count(), 3000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
  for (const auto& [name, value] : request.headers) {
    std::string line = name;
    line.append(": ").append(value);
    headers.reset(curl_slist_append(headers.release(), line.c_str()));
  }
  // No "Expect: 100-continue" round trip for larger bodies.
  headers.reset(curl_slist_append(headers.release(), "Expect:"));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!tls_.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, tls_.ca_file.c_str());
  }
  if (!tls_.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, tls_.cert_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, tls_.key_file.c_str());
  }
  if (tls_.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  Response response;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    // A handle that failed mid-transfer is dropped rather than reused.
    return fail(TransportError{kind_of(rc),
                               request.method + " " + request.url + ": " + curl_easy_strerror(rc)});
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  give_back(std::move(handle));
  return response;
}

}  // namespace tightrope::http
