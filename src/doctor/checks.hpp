// doctor: a catalog of checks, each a pure function of a ClusterView that names one way a
// Slurm-on-Kubernetes cluster goes wrong, with the evidence it saw and the fix. The catalog is
// what `kubectl slurm doctor --list` prints and what docs/troubleshooting.md is checked against;
// the operator runs the checks its caches can feed and reports them on the Controller.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/view.hpp"

namespace tightrope::doctor {

enum class Severity { kInfo, kWarning, kCritical };
std::string_view to_string(Severity s);

struct Finding {
  std::string check;  // the catalog id
  Severity severity = Severity::kWarning;
  std::string subject;  // what it is about: "pod slurm/slurm-worker-0", "Slurm node worker-0"
  std::string message;  // what is wrong, in one sentence
  std::vector<std::string> evidence;  // what was seen, one fact a line
  std::string fix;                    // what to do about it
};

struct Check {
  std::string_view id;       // kebab-case, stable: scripts and alerts match on it
  std::string_view symptom;  // what an administrator sees before running doctor
  std::string_view fix;      // the usual remedy (a finding may say more)
  void (*run)(const ClusterView& view, std::vector<Finding>& out);
};

// Every check, in the order doctor runs and prints them.
std::span<const Check> catalog();

// Every finding of every check (or of the ids given), in catalog order.
std::vector<Finding> diagnose(const ClusterView& view, const std::vector<std::string>& only = {});

// A finding worse than information: doctor's exit code is non-zero.
bool failing(const std::vector<Finding>& findings);

// What slurmctld's pending reason means and whether it clears by itself ("Resources": the
// nodes are busy, it starts when they free up).
struct PendingReason {
  std::string meaning;
  bool clears_by_itself = true;
};
PendingReason explain_pending_reason(std::string_view reason);

}  // namespace tightrope::doctor
