// The operator a benchmark measures, as a process of its own: Tightrope's release
// slurm-operator, Slinky's slurm-operator (cmd/manager) unchanged, or any command.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace tightrope::bench {

// Slinky's operator reaches slurmrestd at localhost on this port (its builder.SlurmrestdPort),
// and only with DEBUG=1: a relay listens there for it.
inline constexpr int kSlinkyRestPort = 6820;

class OperatorUnderTest {
 public:
  // `command` runs through /bin/sh ("" for Tightrope's release slurm-operator), unless `slinky`
  // names Slinky's binary. In its environment: KUBECONFIG (the bed's audited operator-under-test
  // identity), BENCH_NAMESPACE/WATCH_NAMESPACES/POD_NAMESPACE, POD_NAME and SLURMRESTD_URL.
  OperatorUnderTest(const std::string& command, const std::string& slinky, const std::string& ns,
                    const std::string& slurm_url, const std::filesystem::path& log);
  ~OperatorUnderTest() { stop(); }
  OperatorUnderTest(const OperatorUnderTest&) = delete;
  OperatorUnderTest& operator=(const OperatorUnderTest&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& label() const { return label_; }
  bool alive() const;
  // SIGTERM to its process group, SIGKILL after 15 s.
  void stop();

 private:
  std::filesystem::path log_;
  std::string label_;
  pid_t pid_ = -1;
};

}  // namespace tightrope::bench
