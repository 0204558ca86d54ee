#include "http.hpp"

#include <curl/curl.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tightrope::testing {
namespace {

struct StreamState {
  const std::function<bool(std::string_view)>* on_line = nullptr;
  std::string buffer;
  bool stopped = false;
};

size_t collect(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t split_lines(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<StreamState*>(user);
  state->buffer.append(data, size * count);
  size_t nl = 0;
  while ((nl = state->buffer.find('\n')) != std::string::npos) {
    const std::string line = state->buffer.substr(0, nl);
    state->buffer.erase(0, nl + 1);
    if (!(*state->on_line)(line)) {
      state->stopped = true;
      return 0;  // aborts the transfer: the caller has what it waited for
    }
  }
  return size * count;
}

using CurlHandle = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using HeaderList = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

CurlHandle prepare(const HttpRequest& r, HeaderList& headers) {
  CurlHandle curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) {
    throw std::runtime_error("curl_easy_init failed");
  }
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r.timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (!r.body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(r.body.size()));
  }
  for (const auto& h : r.headers) {
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (!r.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, r.ca_file.c_str());
  }
  if (!r.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, r.cert_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, r.key_file.c_str());
  }
  return curl;
}

long status_of(CURL* c) {
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

}  // namespace

HttpResponse http(const HttpRequest& request) {
  HeaderList headers(nullptr, curl_slist_free_all);
  CurlHandle curl = prepare(request, headers);
  HttpResponse response;
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &response.body);
  if (const CURLcode rc = curl_easy_perform(curl.get()); rc != CURLE_OK) {
    throw std::runtime_error(request.method + " " + request.url + ": " + curl_easy_strerror(rc));
  }
  response.status = status_of(curl.get());
  return response;
}

HttpResponse http_stream_lines(const HttpRequest& request,
                               const std::function<bool(std::string_view line)>& on_line) {
  HeaderList headers(nullptr, curl_slist_free_all);
  CurlHandle curl = prepare(request, headers);
  StreamState state;
  state.on_line = &on_line;
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, split_lines);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &state);
  const CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK && !state.stopped && rc != CURLE_OPERATION_TIMEDOUT) {
    throw std::runtime_error(request.method + " " + request.url + ": " + curl_easy_strerror(rc));
  }
  return HttpResponse{status_of(curl.get()), state.buffer};
}

HttpRequest KubeAccess::request(std::string method, std::string_view path, std::string body) const {
  HttpRequest r;
  r.method = std::move(method);
  r.url = server + std::string(path);
  r.body = std::move(body);
  r.ca_file = ca_file;
  r.cert_file = cert_file;
  r.key_file = key_file;
  r.headers = {"Accept: application/json"};
  if (!r.body.empty()) {
    r.headers.emplace_back(r.method == "PATCH" ? "Content-Type: application/merge-patch+json"
                                               : "Content-Type: application/json");
  }
  return r;
}

KubeAccess kube_access_from(const std::string& kubeconfig_path) {
  std::ifstream in(kubeconfig_path);
  if (!in) {
    throw std::runtime_error("cannot read kubeconfig " + kubeconfig_path);
  }
  // scripts/testbed writes its kubeconfigs as JSON, which is valid YAML.
  const auto cfg = nlohmann::json::parse(in);
  const std::string context_name = cfg.at("current-context");
  auto find = [&](const char* list, const std::string& name) -> const nlohmann::json& {
    for (const auto& item : cfg.at(list)) {
      if (item.at("name") == name) {
        return item;
      }
    }
    throw std::runtime_error(kubeconfig_path + ": no " + list + " entry named " + name);
  };
  const auto& context = find("contexts", context_name).at("context");
  const auto& cluster = find("clusters", context.at("cluster")).at("cluster");
  const auto& user = find("users", context.at("user")).at("user");
  return KubeAccess{cluster.at("server"), cluster.at("certificate-authority"),
                    user.at("client-certificate"), user.at("client-key")};
}

}  // namespace tightrope::testing
