// kubectl slurm status and explain: what a ClusterView says, joined across both systems, as a
// JSON document (for -o json|yaml and for tests) and as text for a terminal. Pure.
#pragma once

#include <string>

#include "cli/view.hpp"
#include "doctor/checks.hpp"

namespace tightrope::cli {

using doctor::Finding;
using doctor::Severity;

// How text is drawn: colours only on a terminal.
struct Style {
  bool color = false;
  std::string good(const std::string& text) const;  // green
  std::string warn(const std::string& text) const;  // yellow
  std::string bad(const std::string& text) const;   // red
  std::string bold(const std::string& text) const;
  std::string severity(Severity s, const std::string& text) const;
};

// One screen: the Controller and its daemons, each NodeSet with its pods' Slurm states,
// partitions with their jobs, what drains and why.
json status_report(const ClusterView& view);
std::string render_status(const json& report, const Style& style);

// The join for one object: a worker pod, a Kubernetes Node or Slurm node, or a Slurm job.
// Unknown names give an error that says what was looked for.
enum class ExplainKind { kPod, kNode, kJob };
tightrope::Result<json, std::string> explain(const ClusterView& view, ExplainKind kind,
                                             const std::string& name);
std::string render_explain(const json& report, const Style& style);

json findings_report(const std::vector<Finding>& findings);
std::string render_findings(const std::vector<Finding>& findings, const Style& style);

// JSON as YAML (-o yaml).
std::string to_yaml(const json& doc);

}  // namespace tightrope::cli
