// The local test bed as integration tests see it: the variables `scripts/testbed env` prints
// (KUBECONFIG, KUBE_APISERVER_URL, SLURMRESTD_URL, SLURM_JWT, ...). How a bed is started is
// scripts/testbed's business; this only finds one, or asks the script for one.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>

namespace tightrope::testing {

// Parses the `export KEY=value` lines that `scripts/testbed env` prints, with values quoted the
// way POSIX sh reads them (single quotes, with '"'"' for an embedded quote). Blank lines and
// comments are skipped; anything else throws std::invalid_argument naming the line.
std::map<std::string, std::string> parse_env_exports(std::string_view text);

// The bed that integration tests of one binary share.
//   TESTBED_NAME set (the CTest fixture sets it): that bed, which must be up.
//   otherwise: a bed of its own ("gtest-<pid>"), brought up at start and destroyed at the end.
class TestBed : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;

  // Throws std::out_of_range naming the variable when the bed did not export it.
  static const std::string& var(const std::string& key);

  // The PID of one of the bed's processes ("slurmctld", "slurmd-n1", "kube-apiserver", ...).
  static pid_t pid_of(const std::string& process);
  // `scripts/testbed up` again: restarts whatever a test stopped. Returns its exit status.
  static int up();
  // A command inside the bed's Slurm root, as an administrator runs it ("scontrol ...").
  // Returns its exit status; output is discarded.
  static int slurm_cli(const std::string& args);

 private:
  static std::map<std::string, std::string>& vars();
  std::string owned_name_;
};

// True when the process has exited (a zombie counts: this machine's init reaps late).
bool process_gone(pid_t pid);

}  // namespace tightrope::testing
