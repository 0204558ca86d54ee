// A small blocking HTTP client for integration tests, on libcurl: enough to talk to the bed's
// kube-apiserver (TLS with client certificates, watch streams) and slurmrestd (JWT header).
// Product code has its own transports in src/kube and src/slurm; tests use this one to check
// the bed independently of them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tightrope::testing {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  std::string ca_file;               // TLS trust; empty: the system's
  std::string cert_file;             // client certificate (Kubernetes), optional
  std::string key_file;
  long timeout_ms = 15000;
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

// Throws std::runtime_error on a transport failure (connection refused, TLS, timeout).
HttpResponse http(const HttpRequest& request);

// Streams the response body line by line into `on_line` until it returns false, the server
// ends the stream, or the request's timeout passes. Returns the status and any unread rest.
HttpResponse http_stream_lines(const HttpRequest& request,
                               const std::function<bool(std::string_view line)>& on_line);

// The API server of a kubeconfig written by scripts/testbed (current context; file paths).
struct KubeAccess {
  std::string server;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;

  HttpRequest request(std::string method, std::string_view path, std::string body = {}) const;
};

KubeAccess kube_access_from(const std::string& kubeconfig_path);

}  // namespace tightrope::testing
