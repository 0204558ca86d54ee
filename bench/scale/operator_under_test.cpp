#include "scale/operator_under_test.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

#include "testbed.hpp"

namespace tightrope::bench {

using Steady = std::chrono::steady_clock;
using tightrope::testing::TestBed;

OperatorUnderTest::OperatorUnderTest(const std::string& command, const std::string& slinky,
                                     const std::string& ns, const std::string& slurm_url,
                                     const std::filesystem::path& log)
    : log_(log) {
  std::string command_line = command;
  if (!slinky.empty()) {
    // As its Helm chart (v1.0) starts it: 4 workers a controller, 2 Slurm client workers, no
    // leader election (the chart passes no --leader-elect).
    command_line = slinky + " --accounting-workers 4 --controller-workers 4 --loginset-workers 4" +
                   " --nodeset-workers 4 --restapi-workers 4 --token-workers 4" +
                   " --slurmclient-workers 2 --zap-log-level info" +
                   " --health-addr 127.0.0.1:0 --metrics-addr 0";
    label_ = "slinky";
  } else if (command_line.empty()) {
    command_line = std::string(BENCH_TIGHTROPE_OPERATOR) +
                   " --kubeconfig \"$KUBECONFIG\" --namespaces \"$BENCH_NAMESPACE\"" +
                   " --slurmrestd-url \"$SLURMRESTD_URL\" --leader-elect" +
                   " --leader-elect-namespace \"$BENCH_NAMESPACE\" --health-addr 127.0.0.1:0" +
                   " --metrics-addr 127.0.0.1:0";
    label_ = "tightrope";
  } else {
    label_ = command;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the harness
    ::setenv("KUBECONFIG", TestBed::var("OPERATOR_KUBECONFIG").c_str(), 1);
    ::setenv("BENCH_NAMESPACE", ns.c_str(), 1);
    ::setenv("WATCH_NAMESPACES", ns.c_str(), 1);
    ::setenv("POD_NAMESPACE", ns.c_str(), 1);
    ::setenv("POD_NAME", "bench-operator", 1);
    ::setenv("SLURMRESTD_URL", slurm_url.c_str(), 1);
    if (!slinky.empty()) {
      ::setenv("DEBUG", "1", 1);
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string exec = "exec " + command_line;
    ::execl("/bin/sh", "sh", "-c", exec.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_ = pid;
}

bool OperatorUnderTest::alive() const {
  int status = 0;
  return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
}

void OperatorUnderTest::stop() {
  if (pid_ <= 0) {
    return;
  }
  // It leads a process group of its own (setsid): what a wrapper started (`--operator
  // "heaptrack ..."`) is signalled with it, and none of it outlives the harness's bed.
  ::kill(-pid_, SIGTERM);
  int status = 0;
  bool reaped = false;
  const auto deadline = Steady::now() + std::chrono::seconds(15);
  while (Steady::now() < deadline) {
    const pid_t waited = ::waitpid(pid_, &status, WNOHANG);
    reaped = reaped || waited == pid_ || (waited < 0 && errno == ECHILD);
    if (reaped && ::kill(-pid_, 0) != 0) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid_, SIGKILL);
  if (!reaped) {
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

}  // namespace tightrope::bench
