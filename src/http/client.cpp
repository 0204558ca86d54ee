#include "http/client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace tightrope::http {
namespace {

struct BodySink {
  CURL* curl;
  std::string* body;
  size_t max_bytes;  // 0: no limit
  bool too_large = false;
};

size_t append_body(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  std::string& body = *sink->body;
  const size_t needed = body.size() + size * count;
  if (sink->max_bytes != 0) {
    if (needed > sink->max_bytes) {
      sink->too_large = true;
      return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
    }
    if (needed > body.capacity()) {
      // Left to itself the string doubles: a buffer just under the limit is copied into one of
      // twice its size, and both are held for the copy, twice the limit in all. Past half the
      // limit it grows to the limit at once, so what it holds never exceeds the limit. An
      // answer that says its length gets a buffer of that length at once, with no copy at all.
      curl_off_t length = -1;
      curl_easy_getinfo(sink->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      size_t want = std::max(needed, body.capacity() * 2);
      if (length > 0 && static_cast<size_t>(length) >= needed) {
        want = static_cast<size_t>(length);
      } else if (want > sink->max_bytes / 2) {
        want = sink->max_bytes;
      }
      body.reserve(std::min(want, sink->max_bytes));
    }
  }
  body.append(data, size * count);
  return size * count;
}

// "Name: value\r\n" lines; the status line and the blank line have no colon and are skipped.
size_t collect_header(char* data, size_t size, size_t count, void* user) {
  const std::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& ch : name) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    static_cast<std::vector<std::pair<std::string, std::string>>*>(user)->emplace_back(
        std::move(name), value);
  }
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

std::string Response::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) {
      return value;
    }
  }
  return {};
}

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

// What must outlive curl_easy_perform: the header list and the blobs point into it.
struct Client::Prepared {
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers{nullptr, curl_slist_free_all};
};

void Client::prepare(Handle& handle, const Request& request, Prepared& prepared) const {
  CURL* c = handle.curl;
  // Reset clears the previous request's options but keeps the connection cache: a later
  // request to the same server reuses the open connection.
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(request.timeout.count(), 3000)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  // A peer that vanished without a FIN (a host that died) is noticed on an idle connection.
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 15L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
  for (const auto& [name, value] : request.headers) {
    std::string line = name;
    line.append(": ").append(value);
    prepared.headers.reset(curl_slist_append(prepared.headers.release(), line.c_str()));
  }
  // No "Expect: 100-continue" round trip for larger bodies.
  prepared.headers.reset(curl_slist_append(prepared.headers.release(), "Expect:"));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, prepared.headers.get());
  // Blobs are copied by curl (CURL_BLOB_COPY), so they need not outlive the call.
  const auto set_blob = [c](CURLoption option, const std::string& pem) {
    curl_blob blob{const_cast<char*>(pem.data()), pem.size(),
                   CURL_BLOB_COPY};  // NOLINT: curl's API
    curl_easy_setopt(c, option, &blob);
  };
  if (!tls_.ca_pem.empty()) {
    set_blob(CURLOPT_CAINFO_BLOB, tls_.ca_pem);
  } else if (!tls_.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, tls_.ca_file.c_str());
  }
  if (!tls_.cert_pem.empty()) {
    set_blob(CURLOPT_SSLCERT_BLOB, tls_.cert_pem);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!tls_.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, tls_.cert_file.c_str());
  }
  if (!tls_.key_pem.empty()) {
    set_blob(CURLOPT_SSLKEY_BLOB, tls_.key_pem);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!tls_.key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, tls_.key_file.c_str());
  }
  if (tls_.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
}

Result<Response, TransportError> Client::send(const Request& request) {
  auto handle = take();
  if (handle->curl == nullptr) {
    return fail(TransportError{TransportError::Kind::kOther, "curl_easy_init failed"});
  }
  Prepared prepared;
  prepare(*handle, request, prepared);
  CURL* c = handle->curl;
  Response response;
  BodySink sink{c, &response.body, request.max_body_bytes};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response.headers);
  if (request.max_body_bytes != 0) {
    // A Content-Length over the limit is refused before any of the body is read.
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_body_bytes));
  }
  const CURLcode rc = curl_easy_perform(c);
  if (sink.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    return fail(TransportError{TransportError::Kind::kTooLarge,
                               request.method + " " + request.url + ": a body over " +
                                   std::to_string(request.max_body_bytes) + " bytes, not read"});
  }
  if (rc != CURLE_OK) {
    // A handle that failed mid-transfer is dropped rather than reused.
    return fail(TransportError{kind_of(rc),
                               request.method + " " + request.url + ": " + curl_easy_strerror(rc)});
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  give_back(std::move(handle));
  return response;
}

namespace {

struct StreamState {
  CURL* curl;
  const ChunkHandler* on_chunk;
  const std::atomic<bool>* cancel;
  std::chrono::milliseconds silence_limit;
  std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
  bool stopped_by_handler = false;
  bool silent = false;
};

size_t deliver_chunk(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<StreamState*>(user);
  state->last_heard = std::chrono::steady_clock::now();
  long status = 0;
  curl_easy_getinfo(state->curl, CURLINFO_RESPONSE_CODE, &status);
  if (!(*state->on_chunk)(status, std::string_view(data, size * count))) {
    state->stopped_by_handler = true;
    return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
  }
  return size * count;
}

// curl calls it about once a second, data or not.
int check_progress(void* user, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/, curl_off_t /*ultotal*/,
                   curl_off_t /*ulnow*/) {
  auto* state = static_cast<StreamState*>(user);
  if (state->silence_limit.count() > 0 &&
      std::chrono::steady_clock::now() - state->last_heard > state->silence_limit) {
    state->silent = true;
    return 1;
  }
  return state->cancel != nullptr && state->cancel->load() ? 1 : 0;
}

}  // namespace

Result<long, TransportError> Client::stream(const Request& request, const ChunkHandler& on_chunk,
                                            const std::atomic<bool>* cancel) {
  auto handle = take();
  if (handle->curl == nullptr) {
    return fail(TransportError{TransportError::Kind::kOther, "curl_easy_init failed"});
  }
  Prepared prepared;
  prepare(*handle, request, prepared);
  CURL* c = handle->curl;
  StreamState state{c, &on_chunk, cancel, request.silence_limit};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, deliver_chunk);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, check_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &state);
  const CURLcode rc = curl_easy_perform(c);
  if (state.silent) {
    return fail(TransportError{
        TransportError::Kind::kTimeout,
        request.method + " " + request.url + ": nothing received for " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(request.silence_limit).count()) +
            " s"});
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && state.stopped_by_handler)) {
    return fail(TransportError{TransportError::Kind::kCancelled,
                               request.method + " " + request.url + ": stopped"});
  }
  if (rc != CURLE_OK) {
    return fail(TransportError{kind_of(rc),
                               request.method + " " + request.url + ": " + curl_easy_strerror(rc)});
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  give_back(std::move(handle));
  return status;
}

}  // namespace tightrope::http
