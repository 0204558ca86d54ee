// What a reconcile of a NodeSet concludes: its conditions, Ready and when to look again, from
// its plan and the actions that failed.
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

using build::join;
using nlohmann::json;

Readiness unreadable_deletion(const std::string& nodeset_key, const std::string& errors,
                              const std::vector<std::string>& finalizers) {
  std::string message = errors + ": NodeSet " + nodeset_key +
                        " is being deleted, but it keeps its pods and finalizers until its spec " +
                        "can be read (without it the operator cannot drain them first). Correct " +
                        "the spec (kubectl edit nodeset), or drain and delete its pods by hand, " +
                        "then remove its finalizers (" + join(finalizers, ", ") + ")";
  return {false, "InvalidSpec", std::move(message)};
}

namespace {

// What the plan and the failed actions say, by what each failure means.
struct Outcome {
  std::vector<std::string> blocked;
  std::string blocked_reason;
  std::optional<api::Condition> reservation;
  std::string create_problem;
  std::string apply_problem;
  std::string apply_reason;
  std::vector<std::string> sync_problems;
};

Outcome outcome_of(const NodeSetWorld& world, const NodeSetPlan& plan,
                   const std::vector<ActionFailure>& failures) {
  const api::NodeSet& n = world.nodeset;
  Outcome o{plan.blocked, plan.blocked_reason, plan.reservation, plan.unbuildable, "", "", {}};
  for (const auto& f : failures) {
    switch (f.action->on_failure) {
      case FailureEffect::kDeletionBlocked:
        if (o.blocked_reason.empty()) {
          o.blocked_reason = f.action->failure_reason;
        }
        o.blocked.push_back(f.message);
        break;
      case FailureEffect::kCreate:
        if (o.create_problem.empty()) {
          o.create_problem = f.message;
        }
        break;
      case FailureEffect::kReservation: {
        // A reservation that could not be deleted is still there.
        const bool exists = std::holds_alternative<ReleaseReservation>(f.action->change);
        o.reservation = api::Condition{"ReservationCreated",     exists ? "True" : "False",
                                       f.action->failure_reason, f.message,
                                       n.metadata.generation,    ""};
        break;
      }
      case FailureEffect::kApply:
        if (o.apply_problem.empty()) {
          o.apply_problem = f.message;
          o.apply_reason = f.action->failure_reason;
        }
        break;
      case FailureEffect::kSync:
        o.sync_problems.push_back(f.message);
        break;
    }
  }
  return o;
}

// DeletionBlocked, ReservationCreated, SlurmReachable and JobsConfined.
void set_conditions(const NodeSetWorld& world, const Outcome& o, const std::string& stamp,
                    std::vector<api::Condition>& conditions) {
  const api::NodeSet& n = world.nodeset;
  if (o.blocked.empty()) {
    set_condition(conditions,
                  {"DeletionBlocked", "False", "NotBlocked", "", n.metadata.generation, ""}, stamp);
  } else {
    set_condition(conditions,
                  {"DeletionBlocked", "True", o.blocked_reason, join(o.blocked, "; "),
                   n.metadata.generation, ""},
                  stamp);
  }
  if (o.reservation) {
    set_condition(conditions, *o.reservation, stamp);
  } else {
    std::erase_if(conditions,
                  [](const api::Condition& c) { return c.type == "ReservationCreated"; });
  }
  const SlurmHealth health = world.slurm.health;
  const bool slurm_ok = health == SlurmHealth::kSynced;
  const bool slurm_waiting = health == SlurmHealth::kNoClient || health == SlurmHealth::kWaiting;
  const std::string& slurm_problem = world.slurm.problem;
  std::string reachable_reason = world.slurm.reason;
  if (reachable_reason.empty()) {
    reachable_reason =
        slurm_ok ? "Responding"
                 : (health == SlurmHealth::kWaiting
                        ? "NotYetRead"
                        : (health == SlurmHealth::kNoClient ? "NotConnected" : "Unreachable"));
  }
  // The Controller's SlurmReachable says the same, from the same reach.
  set_condition(conditions,
                {"SlurmReachable", slurm_ok ? "True" : (slurm_waiting ? "Unknown" : "False"),
                 reachable_reason, slurm_ok ? "" : slurm_problem, n.metadata.generation, ""},
                stamp);
  // From the nodes of this NodeSet's live pods; an outage keeps what was last known.
  if (world.confinement && slurm_ok && world.slurm.snapshot.nodes) {
    std::vector<NodeCgroups> hosts;
    for (const WorkerPod& w : world.pods) {
      const auto node = world.slurm.snapshot.nodes->find(w.hostname);
      if (!w.terminating && node != world.slurm.snapshot.nodes->end()) {
        hosts.push_back({node->first, host_cgroups(node->second.extra)});
      }
    }
    api::Condition confined = jobs_confined(*world.confinement, hosts);
    confined.observed_generation = n.metadata.generation;
    set_condition(conditions, std::move(confined), stamp);
  }
}

// WorkersHealthy: what the HealthCheck the NodeSet follows found and what remediation does about
// it. Gone when it follows none; as it was while Slurm cannot be asked.
void set_workers_healthy(const NodeSetWorld& world, const NodeSetPlan& plan,
                         const std::string& stamp, std::vector<api::Condition>& conditions) {
  if (!world.health) {
    std::erase_if(conditions, [](const api::Condition& c) { return c.type == "WorkersHealthy"; });
    return;
  }
  if (!plan.health) {
    return;
  }
  const auto& h = *plan.health;
  const std::string budget = std::to_string(h.budget);
  api::Condition c{"WorkersHealthy",
                   "True",
                   "ChecksPass",
                   "no worker's report fails (HealthCheck " + world.health->name + ")",
                   world.nodeset.metadata.generation,
                   ""};
  if (!h.waiting.empty()) {
    c.status = "False";
    c.reason = "BudgetExhausted";
    c.message = join(h.waiting, ", ") +
                " fail their checks and wait: " + std::to_string(h.remediating.size()) +
                " of at most " + budget +
                " nodes are in remediation (maxUnhealthy of HealthCheck " + world.health->name +
                "): " + join(h.remediating, ", ");
  } else if (!h.remediating.empty()) {
    c.status = "False";
    c.reason = "Remediating";
    c.message = join(h.remediating, ", ") + " (HealthCheck " + world.health->name + ", at most " +
                budget + " at once)";
  } else if (h.running > 0 && h.unreported == h.running) {
    // Checks just handed out (the kubelet brings them within about a minute), or not running.
    c.status = "Unknown";
    c.reason = "AwaitingReports";
    c.message =
        "no worker has reported on the checks of HealthCheck " + world.health->name + " yet";
  } else if (h.unreported > 0) {
    c.message += "; " + std::to_string(h.unreported) + " of " + std::to_string(h.running) +
                 " workers have not reported yet";
  }
  if (c.status == "True" && h.steps.at("checking") > 0) {
    c.message += "; active checks under way on " + std::to_string(h.steps.at("checking")) +
                 (h.steps.at("checking") == 1 ? " worker" : " workers");
  }
  set_condition(conditions, std::move(c), stamp);
}

// Ready and when to look again: the first cause that holds, in order of what a person must act on.
void set_readiness(const NodeSetWorld& world, const NodeSetPlan& plan, const Outcome& o,
                   const std::vector<api::Condition>& conditions, NodeSetVerdict& out) {
  const api::NodeSet& n = world.nodeset;
  const SlurmHealth health = world.slurm.health;
  const bool slurm_ok = health == SlurmHealth::kSynced;
  const bool slurm_waiting = health == SlurmHealth::kNoClient || health == SlurmHealth::kWaiting;
  const std::string slurm_why = slurm_reason(health);
  const std::string& slurm_problem = world.slurm.problem;
  Readiness& readiness = out.readiness;
  kube::ReconcileOutcome& next = out.next;
  const int64_t want = plan.want;
  if (!o.blocked.empty()) {
    readiness = {false, slurm_waiting ? slurm_why : "DeletionBlocked",
                 find_condition(conditions, "DeletionBlocked")->message};
    next = after(std::chrono::seconds(5));
  } else if (!o.apply_problem.empty()) {
    readiness = {false, o.apply_reason, o.apply_problem};
    next = retry();
  } else if (plan.deleting) {
    // Pods ending, jobs ending and Slurm's records all wake the NodeSet; this is the net.
    readiness = {false, "Deleting",
                 plan.deletion_left.empty() ? "releasing its finalizers" : plan.deletion_left};
    next = after(std::chrono::seconds(5));
  } else if (plan.awaits_prerequisite && world.pods_wait_for) {
    readiness = *world.pods_wait_for;
    next = after(std::chrono::seconds(10));
  } else if (!o.create_problem.empty()) {
    readiness = {false, "CreateFailed", o.create_problem};
    next = retry();
  } else if (!plan.failing.empty()) {
    readiness = {false, "PodsFailing", plan.failing};
    next = after(std::chrono::seconds(30));
  } else if (!plan.unschedulable.empty()) {
    readiness = {false, "PodsUnschedulable", plan.unschedulable};
    next = after(std::chrono::seconds(30));
  } else if (!slurm_ok) {
    readiness = {false, slurm_why, slurm_problem};
    next = after(std::chrono::seconds(5));
  } else if (o.reservation &&
             (o.reservation->reason == "RemovalFailed" || o.reservation->reason == "ApplyFailed" ||
              o.reservation->reason == "SlurmUpdateFailed")) {
    readiness = {false, o.reservation->reason, o.reservation->message};
    next = after(std::chrono::seconds(5));
  } else if (!o.sync_problems.empty()) {
    readiness = {false, "SyncFailed",
                 o.sync_problems.front() +
                     (o.sync_problems.size() > 1
                          ? " (and " + std::to_string(o.sync_problems.size() - 1) + " more)"
                          : "")};
    next = retry();
  } else if (!plan.draining.empty()) {
    readiness = {false, "Draining",
                 "waiting for the jobs on " + join(plan.draining, ", ") + " to end"};
    next = after(std::chrono::seconds(30));
  } else if (plan.window_opens && plan.replicas == want && plan.ready == want &&
             plan.terminating == 0) {
    readiness = {false, "UpdateScheduled",
                 std::to_string(want - plan.updated) +
                     " pods wait for the maintenance window: " + plan.reservation->message};
    next = after(std::clamp<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(*plan.window_opens - world.now) +
            std::chrono::seconds(1),
        std::chrono::seconds(1), std::chrono::seconds(60)));
  } else if (plan.replicas != want || plan.ready != want || plan.updated != want ||
             plan.terminating > 0) {
    readiness = {false, "Progressing",
                 progress_message(plan.replicas, want, plan.ready, plan.updated, plan.terminating,
                                  plan.revision)};
    if (plan.ready != plan.available) {
      next = after(std::chrono::seconds(n.spec.min_ready_seconds + 1));
    }
  } else {
    readiness = {true, "AllReady", std::to_string(want) + " pods ready and registered in Slurm"};
  }
  // A pod waits for its job's end to be saved: no event will say when that has passed.
  if (plan.look_again_at && next && !next->requeue) {
    const auto wait = std::max<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(*plan.look_again_at - world.now) +
            std::chrono::milliseconds(200),
        std::chrono::milliseconds(200));
    if (next->requeue_after.count() == 0 || next->requeue_after > wait) {
      next = after(wait);
    }
  }
  // A reservation just made or moved: its window is read back from Slurm at once.
  if (plan.reservation_changed && readiness.reason != "SlurmUpdateFailed") {
    const auto soon = std::chrono::seconds(1);
    if (next && !next->requeue &&
        (next->requeue_after.count() == 0 || next->requeue_after > soon)) {
      next = after(soon);
    }
  }
}

}  // namespace

NodeSetVerdict conclude(const NodeSetWorld& world, const NodeSetPlan& plan,
                        const std::vector<ActionFailure>& failures, const std::string& stamp) {
  NodeSetVerdict out{world.conditions, {}, after(std::chrono::seconds(60))};
  if (plan.stop) {
    out.readiness = *plan.stop;
    out.next = settled();
    return out;
  }
  const Outcome o = outcome_of(world, plan, failures);
  set_conditions(world, o, stamp, out.conditions);
  if (plan.gpu_counts) {
    set_condition(out.conditions, *plan.gpu_counts, stamp);
  }
  set_workers_healthy(world, plan, stamp, out.conditions);
  set_readiness(world, plan, o, out.conditions, out);
  return out;
}

}  // namespace tightrope::op
