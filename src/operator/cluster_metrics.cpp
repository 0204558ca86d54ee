#include "operator/cluster_metrics.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "operator/build/common.hpp"
#include "slurm/gres.hpp"

namespace tightrope::op {
namespace {

using metrics::Labels;
using metrics::plus;

Labels of(const std::string& ns, const std::string& controller) {
  return {{"namespace", ns}, {"controller", controller}};
}

Labels group_labels(const std::string& ns, const std::string& controller, const JobGroup& g) {
  return plus(plus(plus(plus(of(ns, controller), "partition", g.partition), "account", g.account),
                   "state", g.state),
              "reason", g.reason);
}

// The label of an attempt's outcome: "ok", or the kind of error ("unavailable", ...).
std::string outcome(const slurm::Error* error) {
  if (error == nullptr) {
    return "ok";
  }
  std::string kind = slurm::to_string(error->kind);
  std::replace(kind.begin(), kind.end(), ' ', '_');
  return kind;
}

}  // namespace

std::map<JobGroup, int64_t> count_jobs(const std::map<int64_t, slurm::Job>& jobs) {
  std::map<JobGroup, int64_t> out;
  for (const auto& [id, job] : jobs) {
    for (const char* state : {"PENDING", "RUNNING", "SUSPENDED"}) {
      if (job.has(state)) {
        const bool pending = std::string_view(state) == "PENDING";
        ++out[{job.partition, job.account, build::lower(state), pending ? job.state_reason : ""}];
        break;
      }
    }
  }
  return out;
}

ClusterMetrics::ClusterMetrics(metrics::Registry& registry)
    : requests_(registry.counter(
          "tightrope_slurm_requests_total",
          "Requests to slurmrestd (each attempt) by HTTP method and outcome: ok, or the kind of "
          "failure (unavailable, unauthorized, invalid, not_found, protocol).",
          {"namespace", "controller", "method", "outcome"})),
      jobs_(registry.gauge("tightrope_slurm_jobs",
                           "Active jobs by partition, account, state (pending, running, suspended) "
                           "and, for pending jobs, Slurm's reason.",
                           {"namespace", "controller", "partition", "account", "state", "reason"})),
      gpus_(registry.gauge("tightrope_slurm_gpus",
                           "GPUs of each NodeSet's Slurm nodes: configured (gres) and allocated "
                           "(gres_used); nodeset \"\" for nodes of no NodeSet.",
                           {"namespace", "controller", "nodeset", "state"})),
      not_responding_(registry.gauge(
          "tightrope_slurm_nodes_not_responding",
          "Slurm nodes of each NodeSet whose slurmd does not answer slurmctld (NOT_RESPONDING).",
          {"namespace", "controller", "nodeset"})),
      up_(registry.gauge("tightrope_slurm_up",
                         "1 while the operator's change feed reads slurmrestd, 0 while it fails.",
                         {"namespace", "controller"})),
      hints_(registry.gauge("tightrope_slurm_log_followed",
                            "1 while the operator follows the log of every slurmctld pod for "
                            "hints of change and polls Slurm at rest only each hinted period; 0 "
                            "while it polls every second.",
                            {"namespace", "controller"})),
      findings_(registry.gauge(
          "tightrope_doctor_findings",
          "Problems the operator's doctor checks find, by check (docs/troubleshooting.md) and "
          "severity (warning, critical).",
          {"namespace", "controller", "check", "severity"})) {}

void ClusterMetrics::findings(
    const std::string& ns, const std::string& controller,
    const std::map<std::pair<std::string, std::string>, int64_t>& counts) {
  const Labels labels = of(ns, controller);
  std::lock_guard lock(mu_);
  auto& seen = checks_[ns + "/" + controller];
  for (const auto& gone : seen) {
    if (counts.count(gone) == 0) {
      findings_.remove(plus(plus(labels, "check", gone.first), "severity", gone.second));
    }
  }
  seen.clear();
  for (const auto& [key, n] : counts) {
    findings_.with(plus(plus(labels, "check", key.first), "severity", key.second))
        .set(static_cast<double>(n));
    seen.insert(key);
  }
}

std::function<void(const std::string&, const slurm::Error*)> ClusterMetrics::attempts(
    const std::string& ns, const std::string& controller) {
  return [this, labels = of(ns, controller)](const std::string& method, const slurm::Error* error) {
    requests_.with(plus(plus(labels, "method", method), "outcome", outcome(error))).inc();
  };
}

void ClusterMetrics::report(const std::string& ns, const std::string& controller,
                            const std::map<int64_t, slurm::Job>& jobs,
                            const std::map<std::string, slurm::Node>& nodes,
                            const std::function<std::string(const std::string&)>& nodeset_of) {
  const std::map<JobGroup, int64_t> counts = count_jobs(jobs);
  struct Tally {
    int64_t gpus = 0;
    int64_t gpus_allocated = 0;
    int64_t not_responding = 0;
  };
  // By NodeSet; nodes of none count only when they have GPUs.
  std::map<std::string, Tally> tallies;
  for (const auto& [name, node] : nodes) {
    const std::string nodeset = nodeset_of(name);
    const int64_t gpus = slurm::gpu_count(node.gres);
    if (nodeset.empty() && gpus == 0) {
      continue;
    }
    Tally& t = tallies[nodeset];
    t.gpus += gpus;
    t.gpus_allocated += gpus > 0 ? slurm::gpu_count(node.gres_used) : 0;
    t.not_responding += node.has("NOT_RESPONDING") ? 1 : 0;
  }
  for (const auto& [group, n] : counts) {
    jobs_.with(group_labels(ns, controller, group)).set(static_cast<double>(n));
  }
  for (const auto& [nodeset, t] : tallies) {
    const Labels labels = plus(of(ns, controller), "nodeset", nodeset);
    gpus_.with(plus(labels, "state", "configured")).set(static_cast<double>(t.gpus));
    gpus_.with(plus(labels, "state", "allocated")).set(static_cast<double>(t.gpus_allocated));
    not_responding_.with(labels).set(static_cast<double>(t.not_responding));
  }
  std::lock_guard lock(mu_);
  const std::string key = ns + "/" + controller;
  std::set<JobGroup>& groups = groups_[key];
  for (const auto& gone : groups) {
    if (counts.count(gone) == 0) {
      jobs_.remove(group_labels(ns, controller, gone));
    }
  }
  groups.clear();
  for (const auto& [group, n] : counts) {
    groups.insert(group);
  }
  std::set<std::string>& sets = nodesets_[key];
  for (const auto& gone : sets) {
    if (tallies.count(gone) == 0) {
      gpus_.remove(plus(of(ns, controller), "nodeset", gone));
      not_responding_.remove(plus(of(ns, controller), "nodeset", gone));
    }
  }
  sets.clear();
  for (const auto& [nodeset, t] : tallies) {
    sets.insert(nodeset);
  }
}

void ClusterMetrics::up(const std::string& ns, const std::string& controller, bool up) {
  up_.with(of(ns, controller)).set(up ? 1 : 0);
}

void ClusterMetrics::hints_live(const std::string& ns, const std::string& controller,
                                std::optional<bool> live) {
  if (live) {
    hints_.with(of(ns, controller)).set(*live ? 1 : 0);
  } else {
    hints_.remove(of(ns, controller));
  }
}

void ClusterMetrics::forget(const std::string& ns, const std::string& controller) {
  const Labels labels = of(ns, controller);
  for (metrics::GaugeFamily* family :
       {&jobs_, &gpus_, &not_responding_, &up_, &hints_, &findings_}) {
    family->remove(labels);
  }
  requests_.remove(labels);
  std::lock_guard lock(mu_);
  groups_.erase(ns + "/" + controller);
  nodesets_.erase(ns + "/" + controller);
  checks_.erase(ns + "/" + controller);
}

}  // namespace tightrope::op
