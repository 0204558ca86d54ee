// kubectl slurm drain|undrain|cordon|uncordon: each goes through the operator's own mechanisms,
// so the operator stays the one writer of its state. A worker's drain is a request annotated on
// its pod (the operator drains with the reason and keeps it drained); a cordon is the Node's
// cordon with the reason annotation the operator reads. Only a drain the operator does not own
// (an administrator's, or a Slurm node without a pod) is written to Slurm directly.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "cli/view.hpp"

namespace tightrope::cli {

struct ActionOptions {
  std::string reason;
  // How long to wait for Slurm to show the result; zero: do not wait.
  std::chrono::seconds wait{0};
  SlurmAccess slurm;
};

// Each returns what was done, in a sentence, or why it was refused.
using ActionResult = tightrope::Result<std::string, std::string>;

ActionResult cordon(kube::Client& kube, const ClusterView& view, const std::string& node,
                    const ActionOptions& options);
ActionResult uncordon(kube::Client& kube, const ClusterView& view, const std::string& node,
                      const ActionOptions& options);
// `target`: a worker pod's name or its Slurm node's name.
ActionResult drain(kube::Client& kube, const ClusterView& view, const std::string& target,
                   const ActionOptions& options);
ActionResult undrain(kube::Client& kube, const ClusterView& view, const std::string& target,
                     const ActionOptions& options);

}  // namespace tightrope::cli
