// The doctor's checks that the operator can feed from what it already holds (its caches of
// NodeSets, worker pods and Nodes, the change feed's Slurm snapshot, the slurm.conf it writes),
// reported where a dashboard or an alert sees them without kubectl-slurm: the Controller's
// `Healthy` condition, a Warning Event when a finding appears, and the
// tightrope_doctor_findings gauge. Pure; the Controller reconcile does the reading and writing.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.hpp"
#include "doctor/checks.hpp"
#include "slurm/feed.hpp"

namespace tightrope::op {

struct DiagnosisInputs {
  doctor::Time now;
  std::string namespace_name;
  nlohmann::json controller;
  std::vector<nlohmann::json> nodesets;    // the Controller's
  std::vector<nlohmann::json> pods;        // its worker pods, as cached
  std::vector<nlohmann::json> kube_nodes;  // every Node
  slurm::SlurmSnapshot snapshot;           // the feed's, synced
  std::vector<slurm::Reservation> reservations;
  std::string slurm_conf;
  std::string slurm_key_hash;
};

doctor::ClusterView diagnosis_view(DiagnosisInputs in);

// The checks run by the operator: those whose every input it holds. The rest need objects it
// does not watch (other pods, PDBs, CRDs, the webhook), or are its own conditions already.
const std::vector<std::string>& operator_checks();

// Findings that need a person (warnings and worse).
std::vector<doctor::Finding> problems(const std::vector<doctor::Finding>& findings);

// Healthy=True (NoProblems) or False with the first problem's check as reason ("DrainStuck")
// and up to five problems in the message.
api::Condition healthy_condition(const std::vector<doctor::Finding>& problems, int64_t generation);

// "drain-stuck" -> "DrainStuck": an Event's or condition's reason.
std::string reason_of(std::string_view check);

// What makes a finding the same one at the next check: its check and subject.
std::string finding_key(const doctor::Finding& finding);

}  // namespace tightrope::op
