#include "kube/config.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "kube/base64.hpp"

namespace tightrope::kube {
namespace {

template <typename T>
using Parsed = tightrope::Result<T, ConfigError>;

// A message for the caller to attach to a file or a field.
template <typename T>
using Checked = tightrope::Result<T, std::string>;

constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// A certificate bundle or a token is a few KiB; the cap keeps a kubeconfig that names a huge or
// endless file (/dev/zero through a symlink, a log) from exhausting memory.
constexpr off_t kMaxReferencedFileBytes = off_t{16} << 20;

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_blank(s.back())) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

std::string errno_text(int err) {
  return std::system_category().message(err);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The whole of a regular file. O_NONBLOCK and the regular-file check keep a path that names a
// FIFO or a device (a typo, or a hostile kubeconfig) from blocking the operator at start-up.
Checked<std::string> read_regular_file(const std::string& path) {
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    return fail("cannot be read: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail("cannot be read: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(std::string("is not a regular file"));
  }
  if (st.st_size > kMaxReferencedFileBytes) {
    return fail(std::string("is larger than 16 MiB"));
  }
  std::string text;
  std::array<char, 8192> buf{};
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail("cannot be read: " + errno_text(errno));
    }
    if (n == 0) {
      return text;
    }
    text.append(buf.data(), static_cast<size_t>(n));
    // Files under /proc report a size of 0, so the cap is checked on what was read as well.
    if (text.size() > static_cast<size_t>(kMaxReferencedFileBytes)) {
      return fail(std::string("is larger than 16 MiB"));
    }
  }
}

// TLS wants PEM text. Anything else is most often base64 applied twice or a DER file; saying so
// here names the field, where the TLS handshake would only fail.
bool looks_like_pem(std::string_view text) {
  return text.find("-----BEGIN ") != std::string_view::npos;
}

// client-go's rest.Config would take a bare host:port; plain http is used only when spelled out.
Checked<std::string> normalized_server(std::string_view server) {
  std::string url = trimmed(server);
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    url = "https://" + url;
  } else {
    const std::string scheme = url.substr(0, scheme_end);
    if (scheme != "https" && scheme != "http") {
      return fail("has the scheme \"" + scheme + "\"; only https and http are supported");
    }
  }
  if (url.size() == url.find("://") + 3) {
    return fail(std::string("has no host"));
  }
  return url;
}

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a string";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// `key` of `map`, or nothing when the key is absent or null: kubectl reads `key:` with no value as
// unset. A lookup on a const Node never adds the key, as one on a mutable Node would.
std::optional<YAML::Node> child(const YAML::Node& map, const char* key) {
  const YAML::Node node = map[key];
  if (!node.IsDefined() || node.IsNull()) {
    return std::nullopt;
  }
  return node;
}

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string entry_path(std::string_view list, const std::string& name) {
  return std::string(list) + "[" + name + "]";
}

struct UnsupportedField {
  const char* key;
  const char* what;
};

// Ignoring any of these would send requests as someone other than the kubeconfig means: with no
// credentials at all, or without the impersonation asked for.
constexpr std::array<UnsupportedField, 8> kUnsupportedUserFields{{
    {"exec", "exec credential plugins are"},
    {"auth-provider", "auth-provider plugins are"},
    {"username", "basic authentication is"},
    {"password", "basic authentication is"},
    {"as", "impersonation is"},
    {"as-uid", "impersonation is"},
    {"as-groups", "impersonation is"},
    {"as-user-extra", "impersonation is"},
}};

class KubeconfigReader {
 public:
  KubeconfigReader(std::string file, std::string base_dir)
      : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  Parsed<Config> read(std::string_view text, const std::string& wanted_context) const {
    const YAML::Node loaded = YAML::Load(std::string(text));
    // kubectl reads an empty file as an empty config; the missing context is then the error.
    const YAML::Node root = loaded.IsNull() ? YAML::Node(YAML::NodeType::Map) : loaded;
    if (!root.IsMap()) {
      return fail(error("", "expected a map at the top level, found " + kind_of(root)));
    }
    Config config;
    std::string name = wanted_context;
    if (name.empty()) {
      auto current = string_at(root, "current-context", "");
      if (!current) {
        return fail(current.error());
      }
      if (current->empty()) {
        return fail(error("current-context", "is not set, and no context was asked for"));
      }
      name = *current;
    }
    auto context = named_entry(root, "contexts", "context", name);
    if (!context) {
      return fail(context.error());
    }
    if (!*context) {
      if (wanted_context.empty()) {
        return fail(error("current-context",
                          "names the context \"" + name + "\", which is not in contexts"));
      }
      return fail(error("contexts", "has no context named \"" + name + "\""));
    }
    config.context = name;
    const std::string context_path = entry_path("contexts", name) + ".context";
    auto done = read_context(root, **context, context_path, config);
    if (!done) {
      return fail(done.error());
    }
    return config;
  }

 private:
  ConfigError error(std::string field, std::string message) const {
    return ConfigError{file_, std::move(field), std::move(message)};
  }

  std::string resolved(const std::string& path) const {
    if (base_dir_.empty() || std::filesystem::path(path).is_absolute()) {
      return path;
    }
    return (std::filesystem::path(base_dir_) / path).string();
  }

  Parsed<std::string> string_at(const YAML::Node& map, const char* key,
                                const std::string& path) const {
    const auto node = child(map, key);
    if (!node) {
      return std::string();
    }
    if (!node->IsScalar()) {
      return fail(error(join(path, key), "expected a string, found " + kind_of(*node)));
    }
    return node->Scalar();
  }

  Parsed<bool> bool_at(const YAML::Node& map, const char* key, const std::string& path) const {
    const auto node = child(map, key);
    bool value = false;
    if (node && !YAML::convert<bool>::decode(*node, value)) {
      return fail(error(join(path, key), "expected true or false, found " + kind_of(*node)));
    }
    return value;
  }

  // The inner map (`cluster:`, `context:`, `user:`) of the entry of `list_key` named `name`, or
  // nothing when no entry has that name. Every entry's shape and name is checked, and a name used
  // twice is refused, as client-go refuses it, rather than one of the two being picked.
  Parsed<std::optional<YAML::Node>> named_entry(const YAML::Node& root, const char* list_key,
                                                const char* inner_key,
                                                const std::string& name) const {
    const auto list = child(root, list_key);
    if (!list) {
      return std::optional<YAML::Node>();
    }
    if (!list->IsSequence()) {
      return fail(error(list_key, "expected a list, found " + kind_of(*list)));
    }
    std::optional<YAML::Node> found;
    std::set<std::string> seen;
    size_t index = 0;
    for (const auto& entry : *list) {
      const std::string at = std::string(list_key) + "[" + std::to_string(index++) + "]";
      if (!entry.IsMap()) {
        return fail(error(at, "expected a map, found " + kind_of(entry)));
      }
      auto entry_name = string_at(entry, "name", at);
      if (!entry_name) {
        return fail(entry_name.error());
      }
      if (entry_name->empty()) {
        return fail(error(join(at, "name"), "is not set"));
      }
      if (!seen.insert(*entry_name).second) {
        return fail(error(entry_path(list_key, *entry_name), "is listed more than once"));
      }
      if (*entry_name == name) {
        // emplace, not assignment: assigning to a YAML::Node rewrites the node it refers to.
        found.emplace(entry);
      }
    }
    if (!found) {
      return std::optional<YAML::Node>();
    }
    const auto inner = child(*found, inner_key);
    if (!inner) {
      return std::optional<YAML::Node>(YAML::Node(YAML::NodeType::Map));
    }
    if (!inner->IsMap()) {
      return fail(error(join(entry_path(list_key, name), inner_key),
                        "expected a map, found " + kind_of(*inner)));
    }
    return std::optional<YAML::Node>(*inner);
  }

  // A PEM blob given inline (`<key>-data`, base64) or by file (`<key>`). Both at once is refused,
  // as client-go refuses it, so that nobody wonders which one was used.
  Parsed<std::string> pem_at(const YAML::Node& map, const std::string& key,
                             const std::string& path) const {
    const std::string data_key = key + "-data";
    auto file = string_at(map, key.c_str(), path);
    if (!file) {
      return fail(file.error());
    }
    auto data = string_at(map, data_key.c_str(), path);
    if (!data) {
      return fail(data.error());
    }
    if (!file->empty() && !data->empty()) {
      return fail(error(join(path, data_key), "is given together with " + key + "; give one"));
    }
    if (!data->empty()) {
      auto pem = decode_base64(*data);
      if (!pem) {
        return fail(error(join(path, data_key), pem.error()));
      }
      if (!looks_like_pem(*pem)) {
        return fail(error(join(path, data_key),
                          "does not decode to PEM text (no -----BEGIN line); was it base64-encoded "
                          "twice?"));
      }
      return std::move(*pem);
    }
    if (!file->empty()) {
      const std::string source = resolved(*file);
      auto pem = read_regular_file(source);
      if (!pem) {
        return fail(error(join(path, key), source + " " + pem.error()));
      }
      if (!looks_like_pem(*pem)) {
        return fail(
            error(join(path, key), source + " does not hold PEM text (no -----BEGIN line)"));
      }
      return std::move(*pem);
    }
    return std::string();
  }

  Parsed<Done> read_context(const YAML::Node& root, const YAML::Node& context,
                            const std::string& path, Config& config) const {
    auto cluster_name = string_at(context, "cluster", path);
    if (!cluster_name) {
      return fail(cluster_name.error());
    }
    if (cluster_name->empty()) {
      return fail(error(join(path, "cluster"), "is not set"));
    }
    auto user_name = string_at(context, "user", path);
    if (!user_name) {
      return fail(user_name.error());
    }
    auto namespace_name = string_at(context, "namespace", path);
    if (!namespace_name) {
      return fail(namespace_name.error());
    }
    config.namespace_name = namespace_name->empty() ? "default" : *namespace_name;

    auto cluster = named_entry(root, "clusters", "cluster", *cluster_name);
    if (!cluster) {
      return fail(cluster.error());
    }
    if (!*cluster) {
      return fail(error(join(path, "cluster"),
                        "names the cluster \"" + *cluster_name + "\", which is not in clusters"));
    }
    auto done = read_cluster(**cluster, entry_path("clusters", *cluster_name) + ".cluster", config);
    if (!done) {
      return fail(done.error());
    }
    // A context without a user is anonymous access, which kubectl allows.
    if (user_name->empty()) {
      return Done{};
    }
    auto user = named_entry(root, "users", "user", *user_name);
    if (!user) {
      return fail(user.error());
    }
    if (!*user) {
      return fail(error(join(path, "user"),
                        "names the user \"" + *user_name + "\", which is not in users"));
    }
    return read_user(**user, entry_path("users", *user_name) + ".user", config);
  }

  Parsed<Done> read_cluster(const YAML::Node& cluster, const std::string& path,
                            Config& config) const {
    auto server = string_at(cluster, "server", path);
    if (!server) {
      return fail(server.error());
    }
    if (trimmed(*server).empty()) {
      return fail(error(join(path, "server"), "is not set"));
    }
    auto url = normalized_server(*server);
    if (!url) {
      return fail(error(join(path, "server"), url.error()));
    }
    config.server = std::move(*url);
    auto insecure = bool_at(cluster, "insecure-skip-tls-verify", path);
    if (!insecure) {
      return fail(insecure.error());
    }
    config.insecure_skip_tls_verify = *insecure;
    auto ca = pem_at(cluster, "certificate-authority", path);
    if (!ca) {
      return fail(ca.error());
    }
    if (*insecure && !ca->empty()) {
      return fail(error(join(path, "insecure-skip-tls-verify"),
                        "is true while a certificate authority is given; client-go refuses the "
                        "pair, and so does this"));
    }
    config.ca_pem = std::move(*ca);
    return Done{};
  }

  Parsed<Done> read_user(const YAML::Node& user, const std::string& path, Config& config) const {
    for (const auto& field : kUnsupportedUserFields) {
      if (child(user, field.key)) {
        return fail(error(join(path, field.key),
                          std::string(field.what) +
                              " not supported; use token, tokenFile, or client-certificate "
                              "and client-key"));
      }
    }
    auto cert = pem_at(user, "client-certificate", path);
    if (!cert) {
      return fail(cert.error());
    }
    auto key = pem_at(user, "client-key", path);
    if (!key) {
      return fail(key.error());
    }
    if (cert->empty() != key->empty()) {
      const bool key_missing = key->empty();
      return fail(error(join(path, key_missing ? "client-key" : "client-certificate"),
                        std::string("is missing while ") +
                            (key_missing ? "client-certificate" : "client-key") +
                            " is given; a TLS client certificate needs both"));
    }
    config.client_cert_pem = std::move(*cert);
    config.client_key_pem = std::move(*key);

    auto token = string_at(user, "token", path);
    if (!token) {
      return fail(token.error());
    }
    config.token = trimmed(*token);
    auto token_file = string_at(user, "tokenFile", path);
    if (!token_file) {
      return fail(token_file.error());
    }
    if (!token_file->empty()) {
      config.token_file = resolved(*token_file);
      // Read once now only so that a wrong path fails at start-up; the transport reads it again.
      auto probe = read_token_file(config.token_file);
      if (!probe) {
        return fail(
            error(join(path, "tokenFile"), probe.error().file + " " + probe.error().message));
      }
    }
    return Done{};
  }

  std::string file_;
  std::string base_dir_;
};

// Two of yaml-cpp's messages end with a piece of the scalar being scanned, which may be a token.
std::string without_scalar_text(const std::string& message) {
  for (const std::string_view prefix : {std::string_view(YAML::ErrorMsg::INVALID_ESCAPE),
                                        std::string_view(YAML::ErrorMsg::INVALID_UNICODE)}) {
    if (message.rfind(prefix, 0) == 0) {
      return std::string(trimmed(prefix.substr(0, prefix.find(':'))));
    }
  }
  return message;
}

std::string where_in_yaml(const YAML::Mark& mark) {
  std::string where = "malformed YAML";
  if (mark.line >= 0) {
    where +=
        " at line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
  }
  return where;
}

bool is_port(std::string_view port) {
  if (port.empty() || port.size() > 5) {
    return false;
  }
  int value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + (c - '0');
  }
  return value >= 1 && value <= 65535;
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

std::string ConfigError::to_string() const {
  std::string out;
  for (const std::string* part : {&file, &field, &message}) {
    if (part->empty()) {
      continue;
    }
    if (!out.empty()) {
      out += ": ";
    }
    out += *part;
  }
  return out;
}

tightrope::Result<Config, ConfigError> parse_kubeconfig(std::string_view text,
                                                        const std::string& file_label,
                                                        const std::string& base_dir,
                                                        const std::string& context) {
  // yaml-cpp reports malformed input by throwing; nothing of that crosses this function.
  try {
    return KubeconfigReader(file_label, base_dir).read(text, context);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp 0.7's own depth limit keeps its recursive parser off the end of the stack (100000
    // nested brackets end here, under ASan too), so no guard of ours runs before it; its message
    // for that ("bad file") says little.
    return fail(ConfigError{file_label, "", where_in_yaml(e.mark) + ": nested too deeply"});
  } catch (const YAML::ParserException& e) {
    return fail(
        ConfigError{file_label, "", where_in_yaml(e.mark) + ": " + without_scalar_text(e.msg)});
  } catch (const YAML::Exception& e) {
    return fail(ConfigError{file_label, "", "cannot be read as YAML: " + e.msg});
  } catch (const std::exception& e) {
    return fail(ConfigError{file_label, "", std::string("cannot be read: ") + e.what()});
  }
}

tightrope::Result<Config, ConfigError> load_kubeconfig(const std::string& path,
                                                       const std::string& context) {
  auto text = read_regular_file(path);
  if (!text) {
    return fail(ConfigError{path, "", text.error()});
  }
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) {
    absolute = path;
  }
  return parse_kubeconfig(*text, path, absolute.parent_path().string(), context);
}

tightrope::Result<std::string, ConfigError> read_token_file(const std::string& path) {
  auto text = read_regular_file(path);
  if (!text) {
    return fail(ConfigError{path, "", text.error()});
  }
  std::string token = trimmed(*text);
  if (token.empty()) {
    return fail(ConfigError{path, "", "is empty"});
  }
  return token;
}

// As client-go's rest.InClusterConfig, except that an unreadable CA is an error here: client-go
// only logs it, and the first request then fails with a less helpful TLS error.
tightrope::Result<Config, ConfigError> in_cluster_config(
    const std::string& root, const std::function<const char*(const char*)>& getenv_fn) {
  const char* host = getenv_fn("KUBERNETES_SERVICE_HOST");
  if (host == nullptr || *host == '\0') {
    return fail(ConfigError{"", "KUBERNETES_SERVICE_HOST", "is not set; is this a pod?"});
  }
  const char* port = getenv_fn("KUBERNETES_SERVICE_PORT");
  if (port == nullptr || *port == '\0') {
    return fail(ConfigError{"", "KUBERNETES_SERVICE_PORT", "is not set; is this a pod?"});
  }
  if (!is_port(port)) {
    return fail(ConfigError{"", "KUBERNETES_SERVICE_PORT", "is not a port number"});
  }
  std::string host_part = host;
  if (host_part.find(':') != std::string::npos && host_part.front() != '[') {
    host_part = "[" + host_part + "]";
  }
  Config config;
  config.server = "https://" + host_part + ":" + port;

  const std::string dir = root + std::string(kServiceAccountDir);
  config.token_file = dir + "/token";
  auto token = read_token_file(config.token_file);
  if (!token) {
    return fail(token.error());
  }
  const std::string ca_file = dir + "/ca.crt";
  auto ca = read_regular_file(ca_file);
  if (!ca) {
    return fail(ConfigError{ca_file, "", ca.error()});
  }
  if (!looks_like_pem(*ca)) {
    return fail(ConfigError{ca_file, "", "does not hold PEM text (no -----BEGIN line)"});
  }
  config.ca_pem = std::move(*ca);
  // client-go falls back to "default" when the file cannot be read; so does this.
  auto namespace_text = read_regular_file(dir + "/namespace");
  const std::string namespace_name = namespace_text ? trimmed(*namespace_text) : std::string();
  config.namespace_name = namespace_name.empty() ? "default" : namespace_name;
  return config;
}

tightrope::Result<Config, ConfigError> load_default(const std::string& explicit_path,
                                                    const std::string& context) {
  if (!explicit_path.empty()) {
    return load_kubeconfig(explicit_path, context);
  }
  std::vector<std::string> tried{"no explicit path"};
  const char* list = ::getenv("KUBECONFIG");
  if (list != nullptr && *list != '\0') {
    // kubectl merges every file of $KUBECONFIG, field by field. That merge is not supported: the
    // first file that exists is used on its own, and the others are not read.
    const std::string_view files(list);
    size_t start = 0;
    while (start <= files.size()) {
      const size_t end = std::min(files.find(':', start), files.size());
      const std::string file(files.substr(start, end - start));
      if (!file.empty() && file_exists(file)) {
        return load_kubeconfig(file, context);
      }
      start = end + 1;
    }
    return fail(
        ConfigError{"", "KUBECONFIG", "names no file that exists (" + std::string(list) + ")"});
  }
  tried.emplace_back("$KUBECONFIG unset");
  const char* service_host = ::getenv("KUBERNETES_SERVICE_HOST");
  if (service_host != nullptr && *service_host != '\0') {
    // A service account has no contexts: a context asked for can only be in a kubeconfig.
    if (context.empty()) {
      auto config = in_cluster_config();
      if (!config) {
        ConfigError e = config.error();
        e.message = "in-cluster configuration (KUBERNETES_SERVICE_HOST is set): " + e.message;
        return fail(std::move(e));
      }
      return config;
    }
    tried.emplace_back("in-cluster skipped because the context \"" + context + "\" was asked for");
  } else {
    tried.emplace_back("KUBERNETES_SERVICE_HOST unset");
  }
  const char* home = ::getenv("HOME");
  std::string what_was_tried;
  for (const auto& step : tried) {
    what_was_tried += (what_was_tried.empty() ? "" : ", ") + step;
  }
  if (home == nullptr || *home == '\0') {
    return fail(ConfigError{"", "",
                            "no Kubernetes configuration found (" + what_was_tried +
                                ", HOME unset so no ~/.kube/config)"});
  }
  const std::string path = std::string(home) + "/.kube/config";
  if (!file_exists(path)) {
    return fail(ConfigError{path, "",
                            "does not exist, and no other Kubernetes configuration was found (" +
                                what_was_tried + ")"});
  }
  return load_kubeconfig(path, context);
}

}  // namespace tightrope::kube
