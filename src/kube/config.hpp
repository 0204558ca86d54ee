// Where the Kubernetes client's endpoint and credentials come from: a kubeconfig file, read as
// kubectl reads it, or the pod's service account. Knows nothing of Slurm, nor of HTTP: the
// transport gets a Config. Credentials are secrets: errors name files and fields, never values.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace tightrope::kube {

struct ConfigError {
  std::string file;  // the file that was read ("" when none)
  // Dotted path of the offending field, e.g. "users[admin].user.client-key-data", or "".
  std::string field;
  std::string message;            // what is wrong; never contains secret values
  std::string to_string() const;  // "<file>: <field>: <message>" (parts omitted when empty)
};

struct Config {
  std::string server;  // https://host:port, no trailing slash
  // CA certificates as PEM text (from certificate-authority-data, or read from the
  // certificate-authority file).
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem;  // from client-certificate-data or read from client-certificate file
  std::string client_key_pem;   // from client-key-data or read from client-key file
  // When both token and token_file are set, the file wins, as client-go's BearerTokenFile does.
  std::string token;  // bearer token inline ("token")
  // Bearer token file ("tokenFile"); read at each request by the transport so that a rotated
  // token takes effect.
  std::string token_file;
  std::string namespace_name;  // the context's namespace, "default" when unset
  std::string context;         // the name of the context used ("" for in-cluster)
};

// The names below spell out tightrope::Result: kube/error.hpp declares a one-argument
// kube::Result that would otherwise hide it in a file that includes both headers.

// Reads a kubeconfig file. context empty: current-context. Relative file paths inside the
// kubeconfig (certificate-authority, client-certificate, client-key, tokenFile) are resolved
// against the kubeconfig file's directory, as kubectl does.
tightrope::Result<Config, ConfigError> load_kubeconfig(const std::string& path,
                                                       const std::string& context = "");

// Same, from text (for tests and the fuzzer); base_dir resolves relative paths; file_label names
// the source in errors.
tightrope::Result<Config, ConfigError> parse_kubeconfig(std::string_view text,
                                                        const std::string& file_label,
                                                        const std::string& base_dir,
                                                        const std::string& context = "");

// In-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (IPv6 hosts bracketed), token
// file <root>/var/run/secrets/kubernetes.io/serviceaccount/token (returned as token_file, not
// read into token, but it must be readable now), CA <root>/.../ca.crt, namespace from
// <root>/.../namespace ("default" when unreadable, as client-go does). root is "" in production, a
// temp dir in tests. Env is looked up through the function given (default getenv) so tests need
// not set real environment variables.
tightrope::Result<Config, ConfigError> in_cluster_config(
    const std::string& root = "",
    const std::function<const char*(const char*)>& getenv_fn = ::getenv);

// The usual order: explicit path if non-empty; else $KUBECONFIG (a ':'-separated list: the first
// file that exists is used; merging several files, as kubectl does, is not supported); else
// in-cluster if KUBERNETES_SERVICE_HOST is set and no context is asked for (a service account has
// no contexts); else ~/.kube/config. Errors say what was tried.
tightrope::Result<Config, ConfigError> load_default(const std::string& explicit_path = "",
                                                    const std::string& context = "");

// Reads a bearer token file, trimming whitespace; error names the file.
tightrope::Result<std::string, ConfigError> read_token_file(const std::string& path);

}  // namespace tightrope::kube
