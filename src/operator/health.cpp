#include "operator/health.hpp"

#include <algorithm>
#include <set>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "kube/time.hpp"
#include "operator/build/health.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/conditions.hpp"
#include "operator/nodeset_plan.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

// status.remediations and status.kubeNodes of a HealthCheck, from what its NodeSets' pods and
// the Nodes show (the NodeSet's planner writes both), and WorkersHealthy, from its NodeSets' own.
json remediation_status(const ResourceCache& cache, const api::HealthCheck& h,
                        const std::vector<api::NodeSet>& nodesets,
                        const std::vector<std::string>& followers,
                        std::vector<api::Condition>& conditions) {
  api::HealthCheckStatus status;
  std::vector<const api::NodeSet*> followed;
  for (const auto& n : nodesets) {
    if (std::find(followers.begin(), followers.end(), n.metadata.name) != followers.end()) {
      followed.push_back(&n);
    }
  }
  std::vector<std::string> exhausted;
  std::vector<std::string> remediating;
  std::vector<std::string> awaiting;
  bool seen = false;
  for (const api::NodeSet* n : followed) {
    for (const auto& p : cache.pods_by_index(cache_index::kOwner, n->metadata.uid)) {
      if (auto r = pod_remediation(n->metadata.name, worker_pod(*n, *p))) {
        status.remediations.push_back(std::move(*r));
      }
    }
    if (const api::Condition* c = find_condition(n->status.conditions, "WorkersHealthy")) {
      seen = true;
      if (c->reason == "BudgetExhausted") {
        exhausted.push_back("NodeSet " + n->metadata.name + ": " + c->message);
      } else if (c->reason == "AwaitingReports") {
        awaiting.push_back(n->metadata.name);
      } else if (c->status != "True") {
        remediating.push_back("NodeSet " + n->metadata.name + ": " + c->message);
      }
    }
  }
  const std::string& ns = h.metadata.namespace_name;
  const auto owns = [&](const std::string& pod) {
    return std::any_of(followed.begin(), followed.end(), [&](const api::NodeSet* n) {
      return pod.starts_with(ns + "/") &&
             build::nodeset_pod_ordinal(*n, pod.substr(ns.size() + 1)) >= 0;
    });
  };
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const auto& node : cache.list_all(kube::resources::nodes())) {
    if (auto k = kube_node_health(node->doc, owns, h.spec.remediation.window_seconds, now)) {
      status.kube_nodes.push_back(std::move(*k));
    }
  }
  if (!seen) {
    std::erase_if(conditions, [](const api::Condition& c) { return c.type == "WorkersHealthy"; });
  } else {
    api::Condition c{
        "WorkersHealthy",      "True",
        "ChecksPass",          "no report of a worker of " + joined(followers) + " fails",
        h.metadata.generation, ""};
    if (!exhausted.empty()) {
      c = {"WorkersHealthy",      "False", "BudgetExhausted", joined(exhausted),
           h.metadata.generation, ""};
    } else if (!remediating.empty()) {
      c = {"WorkersHealthy",      "False", "Remediating", joined(remediating),
           h.metadata.generation, ""};
    } else if (!awaiting.empty()) {
      c = {"WorkersHealthy",
           "Unknown",
           "AwaitingReports",
           "no worker of NodeSets " + joined(awaiting) + " has reported on these checks yet",
           h.metadata.generation,
           ""};
    }
    set_condition(conditions, std::move(c), kube::format_time(std::chrono::system_clock::now()));
  }
  // Both lists always: an empty one is how server-side apply clears what was there.
  json out = api::encode_health_status(status);
  return {{"remediations", out.value("remediations", json::array())},
          {"kubeNodes", out.value("kubeNodes", json::array())}};
}

}  // namespace

std::vector<api::HealthCheck> health_checks_in(const ResourceCache& cache, const std::string& ns) {
  std::vector<api::HealthCheck> out;
  if (!cache.caches(resources::health_checks())) {
    return out;
  }
  for (const auto& doc : cache.list(resources::health_checks(), ns)) {
    if (auto h = api::decode_health_check(doc->doc)) {
      api::apply_defaults(*h);
      out.push_back(std::move(*h));
    }
  }
  return out;
}

kube::ReconcileOutcome HealthCheckReconciler::reconcile(const kube::Request& request) {
  const kube::ResourceType& type = resources::health_checks();
  const auto doc = cache_.get(type, request.key());
  if (!doc || doc->meta.deleting) {
    return settled();  // its ConfigMaps go with it (garbage collection)
  }
  auto loaded = load(runtime_, type, *doc, &api::decode_health_check);
  if (!loaded) {
    return settled();
  }
  const api::HealthCheck& h = *loaded;
  const std::string& ns = h.metadata.namespace_name;
  const auto& before = h.status.conditions;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, h.metadata, before, before, ready, std::move(next));
  };

  std::map<std::string, std::string> scripts;
  if (h.spec.passive.scripts) {
    auto data = runtime_.config_map_data(ns, h.spec.passive.scripts->name);
    if (!data) {
      const bool missing = data.error().kind == kube::ErrorKind::kNotFound;
      return not_ready(
          {false, missing ? "ConfigMapNotFound" : "ConfigMapUnreadable",
           "ConfigMap " + ns + "/" + h.spec.passive.scripts->name + " (spec.passive.scripts) " +
               (missing ? "does not exist" : "cannot be read: " + data.error().message)},
          retry());
    }
    scripts = std::move(*data);
  }

  const std::vector<api::HealthCheck> checks = health_checks_in(cache_, ns);
  std::vector<api::NodeSet> nodesets;
  for (const auto& n : cache_.list(resources::nodesets(), ns)) {
    if (auto decoded = api::decode_nodeset(n->doc)) {
      nodesets.push_back(std::move(*decoded));
    }
  }
  std::vector<json> wanted;
  std::vector<std::string> followers;
  std::set<std::string> site_programs;  // "Controller slurm runs /usr/sbin/nhc"
  std::vector<std::string> elsewhere;   // selected, but following another HealthCheck
  for (const auto& n : nodesets) {
    if (n.metadata.deleting || !h.spec.node_set_selector.matches(n.metadata.labels)) {
      continue;
    }
    const api::HealthCheck* follows = build::selecting_health_check(checks, n);
    if (follows == nullptr || follows->metadata.name != h.metadata.name) {
      elsewhere.push_back(n.metadata.name + " (follows " +
                          (follows ? follows->metadata.name : std::string("none")) + ")");
      continue;
    }
    std::vector<api::NodeSet> cluster;
    for (const auto& other : nodesets) {
      if (other.spec.controller_ref.name == n.spec.controller_ref.name) {
        cluster.push_back(other);
      }
    }
    const int64_t interval =
        build::health_check_interval(checks, cluster).value_or(h.spec.passive.interval_seconds);
    wanted.push_back(build::build_health_config_map(n, h, scripts, interval));
    followers.push_back(n.metadata.name);
    if (const auto c = controller_of(cache_, ns, n.spec.controller_ref.name)) {
      if (const std::string program = build::site_health_check_program(*c); !program.empty()) {
        site_programs.insert("Controller " + c->metadata.name + " runs " + program);
      }
    }
  }
  if (auto applied = apply_all(runtime_, wanted, nullptr, &applied_, &cache_); !applied) {
    return not_ready({false, "ApplyFailed", applied.error()}, retry());
  }
  // A NodeSet that no longer follows this HealthCheck stops checking: its ConfigMap goes, if this
  // HealthCheck made it (remove_owned checks the owner; the cache answers for absent ones). One
  // of a deleted NodeSet stays until the HealthCheck goes, harmless: nothing mounts it.
  for (const auto& n : nodesets) {
    if (std::find(followers.begin(), followers.end(), n.metadata.name) != followers.end()) {
      continue;
    }
    if (auto removed = runtime_.remove_owned(kube::resources::config_maps(), ns,
                                             build::nodeset_health_config_name(n), h.metadata.uid);
        !removed) {
      return not_ready({false, "ApplyFailed", removed.error().message}, retry());
    }
  }
  std::vector<api::Condition> conditions = before;
  const json status = remediation_status(cache_, h, nodesets, followers, conditions);
  const bool status_changed = status != kept_status(doc->doc.value("status", json::object()), {});
  std::string message = followers.empty() ? "no NodeSet of " + ns + " follows this HealthCheck"
                                          : "checks for NodeSets " + joined(followers);
  if (!elsewhere.empty()) {
    message += "; selected but following another HealthCheck: " + joined(elsewhere);
  }
  if (!site_programs.empty()) {
    // The site's HealthCheckProgram runs instead: nothing of this HealthCheck is checked.
    return report(runtime_, type, h.metadata, before, std::move(conditions),
                  {false, "PassiveChecksOff",
                   joined({site_programs.begin(), site_programs.end()}) +
                       " (extraConf HealthCheckProgram) instead of tightrope-health; " + message},
                  settled(), status, status_changed);
  }
  return report(
      runtime_, type, h.metadata, before, std::move(conditions),
      {!followers.empty(), followers.empty() ? "NoNodeSetSelected" : "ChecksDistributed", message},
      settled(), status, status_changed);
}

}  // namespace tightrope::op
