// How a NodeSet plan's actions are carried out, apart from what each one writes: chains in
// order, chains side by side, a failed guard skipping the rest of its chain, the NodeSet's own
// writes before pod creations (in slow-start batches) before the writes that only mirror state.
// The writes go through an ActionWriter, so the order is tested with a fake.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "operator/nodeset_plan.hpp"

namespace tightrope::op {

// Writes one action (a Kubernetes or Slurm request) and records what its success means. Called
// from several threads at once, for different chains.
class ActionWriter {
 public:
  virtual ~ActionWriter() = default;
  // An error message when the write failed.
  virtual std::optional<std::string> write(const Action& action) = 0;
  // The action succeeded: its events.
  virtual void succeeded(const Action& action) = 0;
};

// Writes in flight at once for one NodeSet: enough that a thousand pods do not wait on one
// another's round trips, few enough that the API server and slurmrestd are not flooded.
inline constexpr size_t kMaxConcurrentWrites = 16;
inline constexpr size_t kMaxConcurrentCreates = 32;

// Runs the actions, each chain in order and chains side by side (at most kMaxConcurrentWrites at
// once): first the chains that decide (deletions, drains, the NodeSet's own objects), then pod
// creations in slow-start batches of 1, 2, 4, ... kMaxConcurrentCreates, each only after the
// previous one fully succeeded (a refusal costs one request), none after a failed write of the
// NodeSet's own objects (kApply: a pod would wait for it), then the chains that only mirror state
// (kSync), so that a new pod never waits behind a thousand condition patches. Returns the
// actions that failed, with "<to_string>: <error>".
std::vector<ActionFailure> execute_actions(const std::vector<Action>& actions,
                                           ActionWriter& writer);

}  // namespace tightrope::op
