#include "operator_support.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "testbed.hpp"

namespace tightrope::op::testing {

using nlohmann::json;

namespace {

json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& item : node) {
        out[item.first.as<std::string>()] = to_json(item.second);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        out.push_back(to_json(item));
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") {
        return text;  // quoted in the file: a string whatever it looks like
      }
      if (text == "true" || text == "false") {
        return text == "true";
      }
      if (text == "null" || text == "~") {
        return nullptr;
      }
      if (!text.empty() && text.find_first_not_of("-0123456789") == std::string::npos &&
          text != "-") {
        try {
          size_t used = 0;
          const long long v = std::stoll(text, &used);
          if (used == text.size()) {
            return v;
          }
        } catch (...) {
        }
      }
      return text;
    }
    default:
      return nullptr;
  }
}

}  // namespace

std::filesystem::path source_dir() {
  return TIGHTROPE_SOURCE_DIR;
}

std::vector<json> read_yaml(const std::string& text) {
  std::vector<json> out;
  for (const auto& doc : YAML::LoadAll(text)) {
    if (doc.IsMap()) {
      out.push_back(to_json(doc));
    }
  }
  return out;
}

std::vector<json> read_yaml_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return read_yaml(s.str());
}

void install_crds(kube::Client& client) {
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "deploy/crds")) {
    install_crd_file(client, entry.path());
  }
}

void install_crd_file(kube::Client& client, const std::filesystem::path& file) {
  for (const auto& crd : read_yaml_file(file)) {
    auto applied = client.apply(kube::resources::custom_resource_definitions(), "", crd,
                                {"tightrope-test", true});
    if (!applied) {
      throw std::runtime_error("installing " + file.string() + ": " + applied.error().message);
    }
    const std::string name = crd["metadata"]["name"];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (bool established = false; !established;) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("CRD " + name + " not Established in 30 s");
      }
      auto got = client.get(kube::resources::custom_resource_definitions(), "", name);
      for (const auto& c :
           got ? got->value("/status/conditions"_json_pointer, json::array()) : json::array()) {
        established = established ||
                      (c.value("type", "") == "Established" && c.value("status", "") == "True");
      }
      if (!established) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {
size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}
}  // namespace

std::pair<long, std::string> http_get(const std::string& url,
                                      const std::vector<std::string>& headers) {
  CURL* curl = curl_easy_init();
  std::string body;
  curl_slist* list = nullptr;
  for (const auto& h : headers) {
    list = curl_slist_append(list, h.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return {status, body};
}

OperatorProcess::OperatorProcess(std::string namespace_name, std::vector<std::string> extra_args)
    : namespace_name_(std::move(namespace_name)), extra_args_(std::move(extra_args)) {
  static int instances = 0;
  log_file_ = std::filesystem::temp_directory_path() /
              ("slurm-operator-" + namespace_name_ + "-" + std::to_string(getpid()) + "-" +
               std::to_string(++instances) + ".log");
  std::filesystem::remove(log_file_);
}

OperatorProcess::~OperatorProcess() {
  if (running()) {
    stop();
  }
}

void OperatorProcess::start() {
  health_port_ = free_port();
  metrics_port_ = free_port();
  std::vector<std::string> args = {TIGHTROPE_OPERATOR,
                                   "--kubeconfig",
                                   ::tightrope::testing::TestBed::var("KUBECONFIG"),
                                   "--namespaces",
                                   namespace_name_,
                                   "--slurmrestd-url",
                                   ::tightrope::testing::TestBed::var("SLURMRESTD_URL"),
                                   "--health-addr",
                                   "127.0.0.1:" + std::to_string(health_port_),
                                   "--metrics-addr",
                                   "127.0.0.1:" + std::to_string(metrics_port_),
                                   "--slurm-check-period",
                                   "5"};
  for (const auto& a : extra_args_) {
    args.push_back(a);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  // Ready when its caches are synced.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (http_get("http://127.0.0.1:" + std::to_string(health_port_) + "/readyz").first == 200) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("slurm-operator did not become ready in 30 s:\n" + log());
}

int64_t OperatorProcess::reconciles(const std::string& controller) const {
  const auto [status, text] =
      http_get("http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics");
  if (status != 200) {
    return -1;
  }
  const std::string prefix = "controller_runtime_reconcile_total{";
  const std::string label = "controller=\"" + controller + "\"";
  int64_t total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(prefix) && line.find(label) != std::string::npos) {
      total += std::stoll(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

bool OperatorProcess::running() const {
  if (pid_ <= 0) {
    return false;
  }
  int status = 0;
  return ::waitpid(pid_, &status, WNOHANG) == 0;
}

int OperatorProcess::stop() {
  if (pid_ <= 0) {
    return -1;
  }
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

void OperatorProcess::kill_hard() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

std::string OperatorProcess::log() const {
  std::ifstream in(log_file_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string condition(kube::Client& client, const kube::ResourceType& type, const std::string& ns,
                      const std::string& name, const std::string& type_name) {
  auto doc = client.get(type, ns, name);
  if (!doc) {
    return "";
  }
  for (const auto& c : doc->value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (c.value("type", "") == type_name) {
      return c.value("status", "") + "/" + c.value("reason", "");
    }
  }
  return "";
}

}  // namespace tightrope::op::testing
