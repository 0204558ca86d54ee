// BENCHMARK ONLY: what a hostile or oversized answer costs the operator's memory. A loopback
// server (the tests' scripted server) sends slurmrestd node lists up to and over the client's
// 256 MiB cap, answers that never end, an API server list that never ends and a watch line
// that never ends; each case, in a process of its own, reports the peak RSS reading the answer
// added (VmHWM, reset before it) and how the client ended it. Writes the figures to the file named
// by argv[1].
//   bench/run answer_memory
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/client.hpp"
#include "kube/watch.hpp"
#include "scripted_server.hpp"
#include "slurm/client.hpp"
#include "slurm/token.hpp"
#include "slurm_documents.hpp"

namespace {

using tightrope::testing::Exchange;
using tightrope::testing::ScriptedServer;

class FixedToken : public tightrope::slurm::TokenSource {
 public:
  tightrope::slurm::Result<std::string> token() override { return std::string("token"); }
  void invalidate() override {}
};

// A line of /proc/self/status ("VmRSS", "VmHWM") in MiB.
double status_mib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::stod(line.substr(key.size() + 1)) / 1024.0;
    }
  }
  return 0;
}

struct Case {
  std::string name;
  double answer_mib = 0;  // what the server had to send (an endless answer: what it sent)
  std::string outcome;
  double peak_mib = 0;  // peak RSS above the RSS before the case
  double seconds = 0;
};

// Runs `read` with the peak RSS reset first: the peak above the RSS before it is what reading
// cost, with what it returned still held.
template <typename Read>
Case measure(const std::string& name, Read read) {
  // Freed memory the allocator still holds would be reused without showing in RSS.
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  const double before = status_mib("VmRSS");
  const auto started = std::chrono::steady_clock::now();
  Case c;
  c.name = name;
  c.outcome = read();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  c.peak_mib = status_mib("VmHWM") - before;
  return c;
}

constexpr size_t kChunk = size_t{1} << 20U;
constexpr size_t kMaxEndless = size_t{3} << 30U;  // the bench stops sending there in any case

// Sends `head`, then 1 MiB chunks of spaces until the client hangs up; counts what was sent.
void send_endless(Exchange& x, const std::string& head, const std::string& chunk_prefix,
                  size_t& sent) {
  const std::string filler(kChunk, ' ');
  x.send(head);
  sent = 0;
  while (sent < kMaxEndless &&
         x.send(chunk_prefix + filler + (chunk_prefix.empty() ? "" : "\r\n"))) {
    sent += kChunk;
  }
}

std::string chunk_size_line() {
  char line[32];
  (void)std::snprintf(line, sizeof line, "%zx\r\n", kChunk);
  return line;
}

Case slurm_list(int nodes, bool with_length) {
  std::string answer;
  double answer_mib = 0;
  {
    const std::string doc = tightrope::bench::nodes_document(nodes);
    answer_mib = static_cast<double>(doc.size()) / (1 << 20);
    answer = with_length ? tightrope::testing::http_answer(200, doc)
                         : tightrope::testing::http_head_without_length(200) + doc;
  }
  ScriptedServer server([&](const std::string&, Exchange& x) { x.send(answer); });
  tightrope::slurm::ClientOptions options;
  options.url = server.url();
  options.timeout = std::chrono::seconds(120);
  options.max_attempts = 1;
  tightrope::slurm::Client client(options, std::make_shared<FixedToken>());
  std::optional<decltype(client.list_nodes())> held;
  Case c = measure(std::to_string(nodes) + " Slurm nodes" + (with_length ? "" : ", no length"),
                   [&]() -> std::string {
                     held.emplace(client.list_nodes());
                     return *held ? std::to_string((**held).list.nodes.size()) + " nodes read"
                                  : (*held).error().message;
                   });
  c.answer_mib = answer_mib;
  return c;
}

Case slurm_endless() {
  size_t sent = 0;
  ScriptedServer server([&](const std::string&, Exchange& x) {
    send_endless(x, tightrope::testing::http_head_without_length(200), "", sent);
  });
  tightrope::slurm::ClientOptions options;
  options.url = server.url();
  options.timeout = std::chrono::seconds(120);
  options.max_attempts = 1;
  tightrope::slurm::Client client(options, std::make_shared<FixedToken>());
  Case c = measure("slurmrestd answer without end", [&]() -> std::string {
    auto list = client.list_nodes();
    return list ? "read?" : list.error().message;
  });
  c.answer_mib = static_cast<double>(sent) / (1 << 20);
  return c;
}

tightrope::kube::Client kube_client(const ScriptedServer& server) {
  tightrope::kube::Config config;
  config.server = server.url();
  tightrope::kube::ClientOptions options;
  options.timeout = std::chrono::seconds(120);
  options.max_attempts = 1;
  return {config, options};
}

Case kube_list_endless() {
  size_t sent = 0;
  ScriptedServer server([&](const std::string&, Exchange& x) {
    send_endless(x, tightrope::testing::http_head_without_length(200), "", sent);
  });
  auto client = kube_client(server);
  Case c = measure("API server list without end", [&]() -> std::string {
    auto list = client.list_raw(tightrope::kube::resources::pods(), "default", {});
    return list ? "read?" : list.error().message;
  });
  c.answer_mib = static_cast<double>(sent) / (1 << 20);
  return c;
}

Case kube_watch_line_endless() {
  size_t sent = 0;
  ScriptedServer server([&](const std::string&, Exchange& x) {
    send_endless(x,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                 "chunked\r\nConnection: close\r\n\r\n",
                 chunk_size_line(), sent);
  });
  auto client = kube_client(server);
  Case c = measure("API server watch line without end", [&]() -> std::string {
    tightrope::kube::LineSplitter splitter;
    tightrope::kube::WatchOptions options;
    options.timeout_seconds = 60;
    (void)client.watch(
        tightrope::kube::resources::pods(), "default", options,
        [&](std::string_view chunk) {
          return splitter.feed(chunk, [](std::string_view) { return true; });
        },
        nullptr);
    return splitter.overflowed() ? "the line refused at the line limit" : "not refused?";
  });
  c.answer_mib = static_cast<double>(sent) / (1 << 20);
  return c;
}

// Runs `one` in a child process of its own, so that what an earlier case left in the allocator
// does not count towards (or hide) the next one's peak.
Case in_own_process(Case (*one)()) {
  int fds[2];
  if (pipe(fds) != 0) {
    return {"pipe failed", 0, std::strerror(errno), 0, 0};
  }
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const Case c = one();
    const std::string line = nlohmann::json{
        {"case", c.name},
        {"answer_mib", c.answer_mib},
        {"outcome", c.outcome},
        {"peak_mib", c.peak_mib},
        {"seconds", c.seconds}}.dump();
    if (write(fds[1], line.data(), line.size()) < 0) {
      _exit(1);  // the parent reports a case that did not report
    }
    _exit(0);
  }
  close(fds[1]);
  std::string line;
  char buffer[4096];
  for (ssize_t n = 0; (n = read(fds[0], buffer, sizeof buffer)) > 0;) {
    line.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  waitpid(child, nullptr, 0);
  const auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) {
    return {"a case that did not report", 0, line, 0, 0};
  }
  return {j["case"], j["answer_mib"], j["outcome"], j["peak_mib"], j["seconds"]};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Case> cases;
  for (Case (*one)() :
       {+[] { return slurm_list(10000, true); }, +[] { return slurm_list(90000, true); },
        +[] { return slurm_list(110000, true); }, +[] { return slurm_list(90000, false); },
        +[] { return slurm_list(110000, false); }, &slurm_endless, &kube_list_endless,
        &kube_watch_line_endless}) {
    cases.push_back(in_own_process(one));
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    std::printf("%-36s answer %8.1f MiB  peak +%7.1f MiB  %6.2f s  %s\n", c.name.c_str(),
                c.answer_mib, c.peak_mib, c.seconds, c.outcome.c_str());
    out.push_back({{"case", c.name},
                   {"answer_mib", c.answer_mib},
                   {"peak_rss_added_mib", c.peak_mib},
                   {"seconds", c.seconds},
                   {"outcome", c.outcome}});
  }
  if (argc > 1) {
    std::ofstream(argv[1]) << out.dump(1) << "\n";
  }
  return 0;
}
