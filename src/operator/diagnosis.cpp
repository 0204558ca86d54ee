#include "operator/diagnosis.hpp"

#include <cctype>

namespace tightrope::op {

doctor::ClusterView diagnosis_view(DiagnosisInputs in) {
  doctor::ClusterView view;
  view.now = in.now;
  view.namespace_name = std::move(in.namespace_name);
  view.controller = std::move(in.controller);
  view.nodesets = std::move(in.nodesets);
  view.pods = std::move(in.pods);
  view.kube_nodes = std::move(in.kube_nodes);
  view.slurm_conf = std::move(in.slurm_conf);
  view.slurm_key_hash = std::move(in.slurm_key_hash);
  view.slurm.via = "the operator's change feed";
  view.slurm.have_nodes = in.snapshot.nodes != nullptr;
  if (in.snapshot.nodes) {
    for (const auto& [name, node] : *in.snapshot.nodes) {
      view.slurm.nodes.push_back(node);
    }
  }
  if (in.snapshot.jobs) {
    for (const auto& [id, job] : *in.snapshot.jobs) {
      view.slurm.jobs.push_back(job);
    }
  }
  view.slurm.reservations = std::move(in.reservations);
  return view;
}

const std::vector<std::string>& operator_checks() {
  static const std::vector<std::string> checks = {"slurm-key-mismatch",
                                                  "worker-not-registered",
                                                  "orphan-slurm-node",
                                                  "slurm-node-not-responding",
                                                  "drain-stuck",
                                                  "job-pending",
                                                  "maintenance-reservation",
                                                  "max-node-count",
                                                  "config-drift",
                                                  "gres-missing",
                                                  "health-check-failed",
                                                  "node-quarantined"};
  return checks;
}

std::vector<doctor::Finding> problems(const std::vector<doctor::Finding>& findings) {
  std::vector<doctor::Finding> out;
  for (const auto& f : findings) {
    if (f.severity != doctor::Severity::kInfo) {
      out.push_back(f);
    }
  }
  return out;
}

std::string reason_of(std::string_view check) {
  std::string out;
  bool upper = true;
  for (char c : check) {
    if (c == '-') {
      upper = true;
    } else {
      out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
      upper = false;
    }
  }
  return out;
}

api::Condition healthy_condition(const std::vector<doctor::Finding>& problems, int64_t generation) {
  if (problems.empty()) {
    return {"Healthy",
            "True",
            "NoProblems",
            "the checks the operator runs find nothing wrong (kubectl slurm doctor runs all)",
            generation,
            ""};
  }
  constexpr size_t kShown = 5;
  std::string message;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) {
    message.append(message.empty() ? "" : "; ")
        .append(problems[i].check)
        .append(": ")
        .append(problems[i].subject)
        .append(": ")
        .append(problems[i].message);
  }
  if (problems.size() > kShown) {
    message += "; and " + std::to_string(problems.size() - kShown) + " more";
  }
  return {"Healthy", "False", reason_of(problems.front().check), message, generation, ""};
}

std::string finding_key(const doctor::Finding& finding) {
  return finding.check + "\n" + finding.subject;
}

}  // namespace tightrope::op
