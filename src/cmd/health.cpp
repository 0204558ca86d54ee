// tightrope-health: Slurm's HealthCheckProgram in every slurmd image (docs/health.md). slurmd
// runs it when it starts and each HealthCheckInterval, with no environment but SLURMD_NODENAME.
// Without /etc/tightrope/health/checks.json (no HealthCheck selects this node's NodeSet) it
// does nothing. Otherwise it runs the checks the file names and the site's scripts
// (/etc/tightrope/health/script.*), judges them against what Slurm registered for the node, and
// writes the result into the node's Extra when it changed or this container has not written it
// yet. It never drains: the operator does, within the HealthCheck's budget. Exit status 1 when a
// check failed, so slurmd's log carries the findings too. With --active it is the operator's
// check job instead (run_active).
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/driver.hpp"
#include "health/active.hpp"
#include "health/checks.hpp"
#include "health/kernels.hpp"

namespace {

namespace fs = std::filesystem;
using tightrope::health::ActiveConfig;
using tightrope::health::Config;
using tightrope::health::Readings;

constexpr const char* kConfigDir = "/etc/tightrope/health";
constexpr const char* kStateDir = "/run/tightrope-health";
constexpr const char* kScontrol = "/usr/bin/scontrol";
constexpr const char* kDcgmi = "/usr/bin/dcgmi";  // DCGM's own packages put it here

struct Outcome {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;
};

// Runs argv (no shell, no PATH) in a process group of its own, with stdout and stderr captured,
// for at most `timeout`; a program that outlives it is killed with its children.
Outcome run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  Outcome out;
  std::array<int, 2> pipe_fds{};
  if (pipe(pipe_fds.data()) != 0) {
    out.output = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    out.output = std::string("fork: ") + std::strerror(errno);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return out;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) {
      args.push_back(const_cast<char*>(
          a.c_str()));  // NOLINT(cppcoreguidelines-pro-type-const-cast): execv's signature
    }
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::array<char, 4096> buffer{};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    const ssize_t n = read(pipe_fds[0], buffer.data(), buffer.size());
    if (n <= 0) {
      break;  // every writer has gone
    }
    constexpr size_t kMaxOutput = size_t{64} * 1024;
    if (out.output.size() < kMaxOutput) {
      out.output.append(buffer.data(), static_cast<size_t>(n));
    }
  }
  close(pipe_fds[0]);
  if (out.timed_out) {
    kill(-pid, SIGKILL);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) == pid) {
    out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return out;
}

// statfs in a child, so that a hung network file system cannot hang this program: a child stuck
// in the kernel is left behind, not waited for.
tightrope::health::MountReading statfs_within(const std::string& path,
                                              std::chrono::milliseconds timeout) {
  tightrope::health::MountReading m{path, true, false, ""};
  const pid_t pid = fork();
  if (pid == 0) {
    struct statfs st {};
    _exit(statfs(path.c_str(), &st) == 0 ? 0 : (errno & 0x7f));
  }
  if (pid < 0) {
    m.answered = true;
    m.error = std::string("fork: ") + std::strerror(errno);
    return m;
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      m.answered = true;
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        m.error = std::string("statfs: ") + std::strerror(WEXITSTATUS(status));
      }
      return m;
    }
    usleep(20000);
  }
  kill(pid, SIGKILL);
  return m;
}

// Mount points of /proc/self/mountinfo (field 5, with the kernel's octal escapes undone).
std::vector<std::string> mount_points() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string skip;
    std::string point;
    fields >> skip >> skip >> skip >> skip >> point;
    std::string plain;
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        plain += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        plain += point[i];
      }
    }
    out.push_back(plain);
  }
  return out;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

int64_t mem_total_mib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") {
      return kib / 1024;
    }
    in.ignore(256, '\n');
  }
  return 0;
}

std::optional<int64_t> gpus_present() {
  const auto driver = tightrope::gpu::read_driver("/");
  if (driver.present) {
    int64_t n = 0;
    for (const auto& g : driver.gpus) {
      n += g.device_ok ? 1 : 0;
    }
    return n;
  }
  int64_t n = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        name.find_first_not_of("0123456789", 6) == std::string::npos &&
        entry.is_character_file(ec)) {
      ++n;
    }
  }
  return n > 0 ? std::optional<int64_t>(n) : std::nullopt;
}

// DCGM's health watches, where the image has dcgmi (docs/health.md, "Passive checks"). Watches
// that are not set yet are set (all systems), and read from the next run on: DCGM judges what
// it has watched, not a moment's sample.
tightrope::health::DcgmReading read_dcgm(const Config& config, std::chrono::milliseconds timeout) {
  std::vector<std::string> host;
  if (!config.dcgm_host.empty()) {
    host = {"--host", config.dcgm_host};
  }
  const auto dcgmi = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), kDcgmi);
    argv.insert(argv.end(), host.begin(), host.end());
    return run(argv, timeout);
  };
  const Outcome check = dcgmi({"health", "--check", "--json"});
  tightrope::health::DcgmReading out;
  out.health = tightrope::health::parse_dcgm_health(check.output);
  if (!out.health) {
    out.said = check.timed_out ? "dcgmi did not answer" : check.output;
    if (check.output.find("watches not enabled") != std::string::npos) {
      const Outcome set = dcgmi({"health", "--set", "a"});
      out.said +=
          set.exit_code == 0 ? " (watches set now)" : " (setting watches: " + set.output + ")";
    }
  }
  return out;
}

Readings read_machine(const Config& config, std::chrono::steady_clock::time_point deadline) {
  Readings r;
  r.cpus = usable_cpus();
  r.memory_mib = mem_total_mib();
  r.gpus = gpus_present();
  const auto points = mount_points();
  const std::chrono::milliseconds timeout = std::chrono::seconds(config.timeout_seconds);
  for (std::string path : config.mounts) {
    while (path.size() > 1 && path.back() == '/') {
      path.pop_back();
    }
    if (std::find(points.begin(), points.end(), path) == points.end()) {
      r.mounts.push_back({path, false, false, ""});
    } else if (std::chrono::steady_clock::now() < deadline) {
      r.mounts.push_back(statfs_within(path, timeout));
    }
  }
  if (std::find(config.checks.begin(), config.checks.end(), "dcgm") != config.checks.end() &&
      access(kDcgmi, X_OK) == 0 && std::chrono::steady_clock::now() < deadline) {
    r.dcgm = read_dcgm(config, timeout);
    if (!r.dcgm->health) {
      std::cout << "tightrope-health: dcgm: " << r.dcgm->said << "\n";
    }
  }
  std::vector<fs::path> scripts;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kConfigDir, ec)) {
    if (entry.path().filename().string().starts_with("script.")) {
      scripts.push_back(entry.path());
    }
  }
  std::sort(scripts.begin(), scripts.end());
  for (const auto& script : scripts) {
    if (std::chrono::steady_clock::now() >= deadline) {
      break;  // the rest next time; a check not run is not a failure
    }
    // A ConfigMap's files are executable only with the volume's defaultMode: run through sh when
    // not.
    const bool executable = access(script.c_str(), X_OK) == 0;
    std::vector<std::string> argv = {script.string()};
    if (!executable) {
      argv.insert(argv.begin(), "/bin/sh");
    }
    const Outcome o = run(argv, timeout);
    r.scripts.push_back({script.filename().string().substr(7), o.exit_code, o.timed_out, o.output});
  }
  return r;
}

std::string node_name() {
  if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr && *name != '\0') {
    return name;
  }
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  return host.data();
}

// nccl-tests' all_reduce_perf over every GPU of the node, within what is left of the time.
tightrope::health::Measurement measure_nccl(const ActiveConfig& active, int64_t gpus,
                                            std::chrono::milliseconds left) {
  tightrope::health::Measurement m;
  const Outcome o = run(
      {active.nccl_tests, "-b", "8M", "-e", "128M", "-f", "2", "-g", std::to_string(gpus)}, left);
  const auto result = tightrope::health::parse_all_reduce_perf(o.output);
  if (o.timed_out) {
    m.error = "all_reduce_perf did not finish in time";
  } else if (!result.bus_bandwidth_gbps) {
    m.error = "all_reduce_perf printed no average bus bandwidth (exit code " +
              std::to_string(o.exit_code) + ")";
  } else {
    m.rate = result.bus_bandwidth_gbps;
    m.correct = result.wrong_values == 0;
    if (!m.correct) {
      m.error = std::to_string(result.wrong_values) + " wrong values in all_reduce_perf";
    }
  }
  return m;
}

// The check job's part (docs/health.md, "Active checks"): the operator runs it as a Slurm job in
// a reservation of this node alone. It measures and writes its report under its own key of the
// node's Extra; the operator ends the reservation once it sees the report (Slurm refuses to
// delete a reservation while a job of it runs).
int run_active(const Config& config) {
  const auto started = std::chrono::steady_clock::now();
  if (!config.active) {
    std::cout << "tightrope-health: checks.json asks for no active checks\n";
    return 1;
  }
  const ActiveConfig& active = *config.active;
  const auto wanted = [&](const char* check) {
    return std::find(active.checks.begin(), active.checks.end(), check) != active.checks.end();
  };
  tightrope::health::ActiveReadings readings;
  const auto cpus = static_cast<unsigned>(usable_cpus());
  if (wanted("cpu")) {
    readings.cpu = tightrope::health::measure_cpu(cpus, std::chrono::seconds(3));
  }
  if (wanted("memory-bandwidth")) {
    constexpr size_t kArray = size_t{64} << 20;  // three of them: well past any cache
    readings.memory_bandwidth = tightrope::health::measure_memory_bandwidth(cpus, kArray, 5);
  }
  readings.gpus = gpus_present().value_or(0);
  readings.nccl_tests_present = access(active.nccl_tests.c_str(), X_OK) == 0;
  if (wanted("nccl") && readings.gpus > 0 && readings.nccl_tests_present) {
    // Leave time to report before Slurm's time limit.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        started + std::chrono::seconds(std::max<int64_t>(active.timeout_seconds - 15, 5)) -
        std::chrono::steady_clock::now());
    readings.nccl =
        measure_nccl(active, readings.gpus, std::max(left, std::chrono::milliseconds(1000)));
  }
  const auto verdict = tightrope::health::judge_active(active, readings);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto report = tightrope::health::report_of(verdict.failed, now, config.source);
  report.measured = verdict.measured;
  report.skipped = verdict.skipped;
  for (const auto& [name, value] : report.measured) {
    std::cout << name << ": " << value << "\n";
  }
  for (const auto& f : verdict.failed) {
    std::cout << f.check << ": " << f.message << "\n";
  }
  for (const auto& f : verdict.skipped) {
    std::cout << f.check << " skipped: " << f.message << "\n";
  }
  const std::string node = node_name();
  const Outcome show = run({kScontrol, "show", "node", node, "--json"}, std::chrono::seconds(10));
  const auto registered = tightrope::health::parse_node_json(show.output);
  int status = verdict.failed.empty() ? 0 : 1;
  const Outcome update =
      run({kScontrol, "update", "nodename=" + node,
           "extra=" + tightrope::health::with_report(registered.extra, report,
                                                     tightrope::health::kActiveExtraKey)},
          std::chrono::seconds(10));
  if (!registered.known || update.exit_code != 0) {
    std::cout << "tightrope-health: the report was not written: " << update.output << "\n";
    status = 2;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // `--active [checks]`: the operator's check job; slurmd passes nothing.
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool active = !args.empty() && args[0] == "--active";
  if (active && args.size() > 1) {
    // The operator's check job names its checks itself: checks.json may be a minute behind.
    const auto config = tightrope::health::parse_config(args[1]);
    if (!config) {
      std::cout << "tightrope-health: --active: " << config.error() << "\n";
      return 1;
    }
    return run_active(*config);
  }
  const auto started = std::chrono::steady_clock::now();
  std::ifstream file(fs::path(kConfigDir) / "checks.json");
  if (!file) {
    return 0;  // no HealthCheck selects this node
  }
  std::stringstream text;
  text << file.rdbuf();
  const auto config = tightrope::health::parse_config(text.str());
  if (!config) {
    std::cout << "tightrope-health: " << kConfigDir << "/checks.json: " << config.error() << "\n";
    return 1;
  }
  if (active) {
    return run_active(*config);
  }
  // slurmd runs the program each HealthCheckInterval (60 s); a HealthCheck may ask for less often.
  const fs::path last_run = fs::path(kStateDir) / "last-run";
  const fs::path written = fs::path(kStateDir) / "written";
  std::error_code ec;
  fs::create_directories(kStateDir, ec);
  const auto now = std::chrono::system_clock::now();
  if (const auto t = fs::last_write_time(last_run, ec); !ec) {
    const auto since = std::chrono::file_clock::now() - t;
    if (since < std::chrono::seconds(config->interval_seconds - 5)) {
      // The last verdict and findings stand until the next run.
      std::ifstream last(last_run);
      int verdict = 0;
      last >> verdict;
      last.ignore(1);
      std::cout << last.rdbuf();
      return verdict;
    }
  }

  const std::string node = node_name();
  const Outcome show = run({kScontrol, "show", "node", node, "--json"}, std::chrono::seconds(10));
  const auto registered = tightrope::health::parse_node_json(show.output);
  const Readings readings =
      read_machine(*config, started + std::chrono::seconds(config->deadline_seconds));
  const auto findings = tightrope::health::judge(*config, registered, readings);
  std::string said;
  for (const auto& f : findings) {
    said += f.check + ": " + f.message + "\n";
  }
  std::cout << said;
  const int verdict = findings.empty() ? 0 : 1;
  if (!registered.known) {
    // Before slurmd's first registration the node may not exist yet; the next run (slurmd runs
    // one as it registers) reports.
    std::cout << "tightrope-health: slurmctld has no node " << node
              << " yet or does not answer: the result is not reported\n";
    return verdict;
  }
  std::ofstream(last_run) << verdict << "\n" << said;
  const int64_t unix_now =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const auto report = tightrope::health::report_of(findings, unix_now, config->source);
  const auto previous = tightrope::health::read_report(registered.extra);
  // A new container reports even an unchanged result: the operator waits for a report newer
  // than the pod before it undrains the node. Another HealthCheck's checks (source) report too.
  if (!previous || !tightrope::health::same_result(*previous, report) || !fs::exists(written)) {
    const std::string extra = tightrope::health::with_report(registered.extra, report);
    const Outcome update =
        run({kScontrol, "update", "nodename=" + node, "extra=" + extra}, std::chrono::seconds(10));
    if (update.exit_code == 0) {
      std::ofstream(written).put('\n');
    } else {
      std::cout << "tightrope-health: scontrol update: " << update.output << "\n";
    }
  }
  return verdict;
}
