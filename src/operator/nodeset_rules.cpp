// The rules the plan decides by: the scale-in order and which pods go, what a Slurm node's
// state says, the reasons the operator gives Slurm, the maintenance reservation.
#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>
#include <tuple>

#include "api/well_known.hpp"
#include "base/text.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/build/topology.hpp"
#include "operator/conditions.hpp"
#include "operator/nodeset_plan.hpp"
#include "operator/reconcile_support.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

int phase_rank(const std::string& phase) {
  if (phase == "Pending") {
    return 0;
  }
  if (phase == "Running") {
    return 2;
  }
  return 1;  // Unknown
}

// "NOT_RESPONDING" -> "NotResponding".
std::string camel(const std::string& word) {
  std::string out;
  bool upper = true;
  for (const char ch : word) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch)))
                        : static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    upper = false;
  }
  return out;
}

bool condemned_in_slurm(const slurm::Node& node) {
  return node.drain() && operator_reason(node.reason) &&
         node.reason.find("is pending termination") != std::string::npos;
}

}  // namespace

bool condemn_before(const WorkerPod& a, const WorkerPod& b) {
  const bool a_assigned = !a.kube_node.empty();
  const bool b_assigned = !b.kube_node.empty();
  if (a_assigned != b_assigned) {
    return !a_assigned;
  }
  if (phase_rank(a.phase) != phase_rank(b.phase)) {
    return phase_rank(a.phase) < phase_rank(b.phase);
  }
  if (a.ready != b.ready) {
    return !a.ready;
  }
  if (a.deletion_cost != b.deletion_cost) {
    return a.deletion_cost < b.deletion_cost;
  }
  const slurm::Time a_deadline = a.deadline.value_or(slurm::Time::min());
  const slurm::Time b_deadline = b.deadline.value_or(slurm::Time::min());
  if (a_deadline != b_deadline) {
    return a_deadline < b_deadline;
  }
  if (a.cordoned != b.cordoned) {
    return a.cordoned;
  }
  if (a.ordinal != b.ordinal) {
    return a.ordinal > b.ordinal;
  }
  if (a.ready_since != b.ready_since) {
    return a.ready_since > b.ready_since;
  }
  return std::tie(a.created, a.name) > std::tie(b.created, b.name);
}

int64_t max_unavailable(const json& value, int64_t replicas) {
  int64_t out = 1;
  if (value.is_number_integer()) {
    out = value.get<int64_t>();
  } else if (value.is_string()) {
    const std::string text = value.get<std::string>();
    int64_t percent = 0;
    if (!text.empty() && text.back() == '%') {
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, percent);
      if (ec == std::errc() && end == text.data() + text.size() - 1) {
        out = (percent * replicas + 99) / 100;
      }
    }
  }
  return std::max<int64_t>(out, 1);
}

std::vector<std::string> slurm_condition_types(const slurm::Node& node) {
  std::vector<std::string> out;
  out.push_back(std::string(kSlurmConditionPrefix) + camel(node.base_state()));
  for (const auto& flag : node.flags()) {
    // How the node was made says nothing about its health.
    if (flag == "DYNAMIC_NORM" || flag == "DYNAMIC_FUTURE" || flag == "CLOUD") {
      continue;
    }
    out.push_back(std::string(kSlurmConditionPrefix) + camel(flag));
  }
  return out;
}

bool slurm_drained(const slurm::Node& node) {
  return node.drain() && !node.has("UNDRAIN") && !node.busy();
}

bool powered_down(const slurm::Node& node) {
  return (node.has("POWERED_DOWN") || node.has("POWERING_DOWN")) && !node.busy();
}

bool slurm_worth_reading(const NodeSetWorld& world, const std::vector<Action>& actions) {
  for (const auto& a : actions) {
    if (std::holds_alternative<DrainSlurmNode>(a.change) ||
        std::holds_alternative<UndrainSlurmNode>(a.change) ||
        std::holds_alternative<ResumeSlurmNode>(a.change) ||
        std::holds_alternative<UpdateSlurmNode>(a.change) ||
        std::holds_alternative<DeleteSlurmNode>(a.change) ||
        std::holds_alternative<CreateSlurmNode>(a.change) ||
        std::holds_alternative<StartActiveCheck>(a.change) ||
        std::holds_alternative<SyncReservation>(a.change) ||
        std::holds_alternative<ReleaseReservation>(a.change)) {
      return true;
    }
  }
  const auto& nodes = world.slurm.snapshot.nodes;
  if (!nodes) {
    return false;
  }
  return std::any_of(world.pods.begin(), world.pods.end(),
                     [&](const WorkerPod& w) { return w.ready && nodes->count(w.hostname) == 0; });
}

bool stale_down_while_powered_down(const slurm::Node& node) {
  return node.has("DOWN") && node.has("POWERED_DOWN") && operator_reason(node.reason);
}

bool resume_timed_out(const slurm::Node& node) {
  return node.has("DOWN") && node.has("POWERED_DOWN") &&
         node.reason.find("ResumeTimeout reached") != std::string::npos;
}

bool drain_needed(const slurm::Node& node) {
  return !node.drain() || node.has("UNDRAIN");
}

std::string cordon_reason(const json& kube_node, const std::string& key) {
  const std::string given =
      without_controls(build::annotation(kube_node, api::kAnnotationNodeCordonReason), 256);
  if (!given.empty()) {
    return with_operator_prefix(given);
  }
  const std::string node = kube_node["metadata"].value("name", "");
  return with_operator_prefix("Node (" + node + ") was cordoned, Pod (" + key +
                              ") must be cordoned");
}

bool operator_reason(const std::string& reason) {
  return reason.starts_with(api::kReasonPrefix);
}

bool reason_changed_by_another(const slurm::Node& now, const std::string& seen) {
  return !now.reason.empty() && now.reason != seen && !operator_reason(now.reason);
}

std::string condemned_reason(const std::string& key, const std::string& why) {
  return with_operator_prefix("Pod (" + key + ") is pending termination for " + why);
}

bool stale_registration_drain(const slurm::Node& node) {
  // slurmctld's own words (node_mgr.c) for a slurmd that fetched a gres.conf older than the
  // node's Gres= (a NodeSet whose pod started before slurmctld loaded its lines).
  return node.drain() && !node.has("INVALID_REG") && node.reason.starts_with("gres/") &&
         node.reason.find(" count reported lower than configured") != std::string::npos;
}

std::optional<std::set<std::string>> nodesets_touched(const std::vector<NodeSetFeature>& nodesets,
                                                      const std::vector<slurm::Node>& changed) {
  std::set<std::string> out;
  for (const auto& node : changed) {
    const json link = json::parse(node.comment, nullptr, false);
    const std::string linked = link.is_object() ? link.value("nodeSetName", "") : "";
    bool found = false;
    for (const auto& n : nodesets) {
      if (n.name == linked ||
          std::find(node.features.begin(), node.features.end(), n.feature) != node.features.end()) {
        out.insert(n.name);
        found = true;
      }
    }
    if (!found) {
      return std::nullopt;
    }
  }
  return out;
}

Victims choose_victims(const api::NodeSet& n, std::vector<WorkerPod> active,
                       const std::map<std::string, slurm::Node>& nodes, int64_t want,
                       const std::string& revision,
                       const std::map<std::string, std::string>& eligible) {
  const auto node_of = [&](const WorkerPod& w) -> const slurm::Node* {
    const auto it = nodes.find(w.hostname);
    return it == nodes.end() ? nullptr : &it->second;
  };
  // A pod whose node the operator drained for deletion keeps its place in front: another
  // choice would drain a second node for the same scale-in.
  const auto started = [&](const WorkerPod& w) {
    const slurm::Node* node = node_of(w);
    return node != nullptr && condemned_in_slurm(*node);
  };
  std::sort(active.begin(), active.end(), [&](const WorkerPod& a, const WorkerPod& b) {
    const bool ca = started(a);
    const bool cb = started(b);
    if (ca != cb) {
      return ca;
    }
    return condemn_before(a, b);
  });
  Victims out;
  std::map<std::string, std::string>& condemned = out.condemned;
  if (n.spec.scaling_mode == "DaemonSet") {
    std::map<std::string, const WorkerPod*> oldest;  // Node -> its oldest pod
    for (const auto& w : active) {
      if (w.mode != n.spec.scaling_mode) {
        condemned[w.name] = "the scaling mode changed";
      } else if (eligible.count(w.target_node) == 0) {
        condemned[w.name] = "scale-in: Node " + w.target_node + " is no longer eligible";
      } else {
        auto [it, first] = oldest.emplace(w.target_node, &w);
        if (!first) {
          const WorkerPod* other = it->second;
          const bool older = std::tie(w.created, w.name) < std::tie(other->created, other->name);
          condemned[older ? other->name : w.name] = "scale-in: a second pod on " + w.target_node;
          if (older) {
            it->second = &w;
          }
        }
      }
    }
  } else {
    std::vector<const WorkerPod*> same_mode;
    for (const auto& w : active) {
      if (w.mode != n.spec.scaling_mode) {
        condemned[w.name] = "the scaling mode changed";
      } else {
        same_mode.push_back(&w);
      }
    }
    const int64_t excess = std::max<int64_t>(0, static_cast<int64_t>(same_mode.size()) - want);
    for (int64_t i = 0; i < excess; ++i) {
      condemned[same_mode[static_cast<size_t>(i)]->name] = "scale-in";
    }
  }
  if (n.spec.update_strategy.type == "RollingUpdate") {
    int64_t unavailable = std::max<int64_t>(0, want - static_cast<int64_t>(active.size()));
    int64_t in_progress = 0;
    for (const auto& w : active) {
      if (condemned.count(w.name) != 0) {
        continue;
      }
      if (w.revision != revision && started(w)) {
        ++in_progress;
      } else if (!w.ready) {
        ++unavailable;
      }
    }
    int64_t budget = max_unavailable(n.spec.update_strategy.max_unavailable, want) - unavailable;
    for (const auto& w : active) {
      if (condemned.count(w.name) != 0 || w.revision == revision) {
        continue;
      }
      // An old pod that is not ready is unavailable already: replacing it costs nothing.
      if (started(w) || !w.ready) {
        condemned[w.name] = "update";
      } else if (budget - in_progress > 0) {
        condemned[w.name] = "update";
        --budget;
      }
    }
  }
  // ScheduledUpdate: an outdated pod already drained for an update goes on, one that is not
  // ready holds no job and goes at once; the others wait for the maintenance window.
  if (n.spec.update_strategy.type == "ScheduledUpdate") {
    for (const auto& w : active) {
      if (condemned.count(w.name) != 0 || w.revision == revision) {
        continue;
      }
      if (started(w) || !w.ready) {
        condemned[w.name] = "update";
      } else {
        out.outdated.insert(w.name);
      }
    }
  }
  out.order = std::move(active);
  return out;
}

std::string progress_message(int64_t pods, int64_t want, int64_t ready, int64_t updated,
                             int64_t terminating, const std::string& revision) {
  const auto count = [](int64_t n) { return std::to_string(n); };
  std::string message;
  if (pods > want) {
    message = "scaling in to " + count(want) + " pods: " + count(pods) + " left, " + count(ready) +
              " ready";
  } else if (pods < want) {
    message = "scaling out to " + count(want) + " pods: " + count(pods) + " made, " + count(ready) +
              " ready";
  } else {
    message = count(ready) + " of " + count(want) + " pods ready";
  }
  message += updated == pods
                 ? (pods == 0 ? "" : ", all at revision " + revision)
                 : ", " + count(updated) + " of " + count(pods) + " at revision " + revision;
  if (terminating > 0) {
    message += ", " + count(terminating) + " terminating";
  }
  return message;
}

std::string maintenance_reservation_name(const api::NodeSet& n) {
  return "SlurmOperatorMaint-" + n.metadata.name;
}

Result<slurm::Reservation, std::string> maintenance_reservation(const api::NodeSet& n,
                                                                std::vector<std::string> nodes,
                                                                slurm::Time now) {
  const api::ScheduledUpdate& spec = n.spec.update_strategy.scheduled_update;
  const auto start = kube::parse_time(spec.start_time);
  if (!start) {
    return fail("spec.updateStrategy.scheduledUpdate.startTime: \"" + spec.start_time +
                R"(" is not an RFC 3339 time such as "2026-12-05T02:00:00Z")");
  }
  const auto duration = api::parse_duration(spec.duration);
  if (!duration || *duration < std::chrono::minutes(1)) {
    return fail("spec.updateStrategy.scheduledUpdate.duration: \"" + spec.duration +
                "\" is not a duration of at least 1m");
  }
  slurm::Reservation r;
  r.name = maintenance_reservation_name(n);
  std::sort(nodes.begin(), nodes.end());
  for (const auto& node : nodes) {
    r.nodes += (r.nodes.empty() ? "" : ",") + node;
  }
  r.users = {"slurm"};
  r.flags = {"MAINT", "IGNORE_JOBS"};
  for (const auto& flag : spec.flags) {
    if (std::find(r.flags.begin(), r.flags.end(), flag) == r.flags.end()) {
      r.flags.push_back(flag);
    }
  }
  // Slurm counts in whole seconds.
  const auto whole = [](slurm::Time t) {
    return std::chrono::time_point_cast<std::chrono::seconds>(t);
  };
  r.start_time = whole(*start);
  r.end_time = whole(*start + *duration);
  if (*start < now) {
    if (recurring_reservation(r.flags)) {
      if (std::find(r.flags.begin(), r.flags.end(), "FORCE_START") == r.flags.end()) {
        r.flags.emplace_back("FORCE_START");
      }
    } else if (*r.end_time <= now) {
      return fail("the maintenance window " + spec.start_time + " + " + spec.duration +
                  " has ended: set a later spec.updateStrategy.scheduledUpdate.startTime");
    } else {
      r.start_time = whole(now);
    }
  }
  return r;
}

bool recurring_reservation(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f == "HOURLY" || f == "DAILY" || f == "WEEKDAY" || f == "WEEKEND" || f == "WEEKLY";
  });
}

std::string with_operator_prefix(const std::string& text) {
  return std::string(api::kReasonPrefix) + text;
}

}  // namespace tightrope::op
