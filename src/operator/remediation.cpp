#include "operator/remediation.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "base/text.hpp"
#include "health/active.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/health.hpp"
#include "operator/nodeset_plan.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

// A report speaks for the pod when the policy's checks found it in this pod: its source, and at or
// after the pod was made.
std::optional<health::Report> of_pod(std::optional<health::Report> report,
                                     const std::string& pod_created, const std::string& source) {
  const auto created = kube::parse_time(pod_created);
  if (!report || !created || report->source != source ||
      report->at <
          std::chrono::duration_cast<std::chrono::seconds>(created->time_since_epoch()).count()) {
    return std::nullopt;
  }
  return report;
}

}  // namespace

std::optional<health::Report> pod_report(const slurm::Node& node, const std::string& pod_created,
                                         const HealthPolicy& policy) {
  if (auto active = active_report(node, pod_created, policy); active && !active->ok) {
    return active;
  }
  return of_pod(health::read_report(node.extra), pod_created, policy.uid);
}

std::optional<health::Report> passive_report(const slurm::Node& node,
                                             const std::string& pod_created,
                                             const HealthPolicy& policy) {
  return of_pod(health::read_report(node.extra), pod_created, policy.uid);
}

bool undrained_after_failure(const slurm::Node& node, const health::Report& active,
                             const WorkerPod& w, const json* kube_node, const HealthPolicy& policy,
                             int64_t now) {
  // The plan drains within seconds of a failing job's report: one older than the job's time and
  // this margin, on a node not drained, was drained and undrained since.
  constexpr int64_t kFreshVerdict = 300;
  const int64_t job_time = policy.active ? policy.active->timeout_seconds : 0;
  if (active.ok || active.source == policy.uid || node.drain() || kube_node == nullptr ||
      now - active.at <= job_time + kFreshVerdict) {
    return false;
  }
  // Drained by the plan, not left waiting at the budget: the plan kept the failure on the Node
  // as it drained.
  const auto failures = api::decode_node_failures(*kube_node);
  return std::any_of(failures.begin(), failures.end(), [&](const api::NodeFailure& f) {
    return f.uid == w.uid && f.at == active.at;
  });
}

std::string active_source(const HealthPolicy& policy) {
  if (!policy.active) {
    return policy.uid;
  }
  return policy.uid + "/" +
         build::sha256_hex(build::active_checks_json(*policy.active).dump()).substr(0, 12);
}

bool from_policy(const health::Report& report, const HealthPolicy& policy) {
  return report.source == policy.uid || report.source.starts_with(policy.uid + "/");
}

std::optional<health::Report> active_report(const slurm::Node& node, const std::string& pod_created,
                                            const HealthPolicy& policy) {
  return of_pod(health::read_report(node.extra, health::kActiveExtraKey), pod_created,
                active_source(policy));
}

std::optional<Signal> signal_report(const WorkerPod& w, const json* kube_node,
                                    const std::vector<DeviceTaint>& node_device_taints,
                                    const HealthPolicy& policy, int64_t now) {
  Signal out;
  out.report.ok = false;
  out.report.source = policy.uid;
  const auto seconds_at = [now](const std::string& time) {
    const auto t = kube::parse_time(time);
    return t ? std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count()
             : now;
  };
  if (kube_node != nullptr) {
    for (const auto& c : kube_node->value("/status/conditions"_json_pointer, json::array())) {
      const std::string type = c.value("type", "");
      const auto& named = policy.signals.node_conditions;
      if (c.value("status", "") != "True" ||
          std::find(named.begin(), named.end(), type) == named.end()) {
        continue;
      }
      out.report.at = seconds_at(c.value("lastTransitionTime", ""));
      const std::string reason = c.value("reason", "");
      const std::string message = c.value("message", "");
      out.report.failed.push_back(
          {"node-condition:" + type,
           !message.empty() ? message : (!reason.empty() ? reason : std::string("True"))});
      out.hardware = true;
      return out;
    }
  }
  for (const auto& t : node_device_taints) {
    if (!taint_wanted(t.key, policy.signals.device_taints)) {
      continue;
    }
    out.report.at = seconds_at(t.time_added);
    std::string what = t.driver + " " + t.device + ": " + (t.value.empty() ? t.key : t.value) +
                       " (" + t.effect + ")";
    if (!t.rule.empty()) {
      what += ", by DeviceTaintRule " + t.rule;
    }
    out.report.failed.push_back({"device-taint:" + t.key, what});
    out.hardware = true;
    return out;
  }
  if (policy.signals.pod_cordon_requested && !w.cordon_request.empty()) {
    out.report.at = now;
    out.report.failed.push_back({"cordon-requested", w.plain_cordon_request()
                                                         ? "pod-cordon-requested is set"
                                                         : w.cordon_request});
    return out;
  }
  return std::nullopt;
}

bool tolerates_quarantine(const json& pod_spec) {
  for (const auto& t : pod_spec.value("tolerations", json::array())) {
    const std::string key = t.value("key", "");
    const std::string effect = t.value("effect", "");
    const bool exists = t.value("operator", "Equal") == "Exists";
    // The taint's value is the check's name: only Exists tolerates whatever check it is.
    if (exists && (key.empty() || key == api::kTaintUnhealthy) &&
        (effect.empty() || effect == "NoSchedule")) {
      return true;
    }
  }
  return false;
}

bool check_due(const slurm::Node& node, const std::string& pod_created, const HealthPolicy& policy,
               int64_t now) {
  if (!policy.active) {
    return false;
  }
  const auto last = active_report(node, pod_created, policy);
  if (!last) {
    // A pod whose node was never checked: a replacement (afterReplacement), or a pod the
    // schedule has not reached yet, checked first where it has no report at all.
    // Never checked under these checks (a HealthCheck whose spec.active changed: at once).
    const auto before = health::read_report(node.extra, health::kActiveExtraKey);
    if (!before || before->source != active_source(policy) ||
        policy.active->after_replacement.value_or(true)) {
      return true;
    }
    return now - before->at >= policy.active->interval_seconds;  // on the old pod's schedule
  }
  // A failing verdict is not due again by itself: its reservation goes once it is in, and a node
  // undrained by hand since is the plan's to check again (undrained_after_failure).
  return now - last->at >= policy.active->interval_seconds;
}

bool check_ready(const slurm::Node& node, bool undrained_by_this_plan) {
  return !node.busy() && node.reservation.empty() && !node.has("DOWN") &&
         !node.has("NOT_RESPONDING") && !node.has("COMPLETING") &&
         (!node.drain() || undrained_by_this_plan);
}

namespace {

// The check job's time limit: timeoutSeconds, rounded up to Slurm's minutes.
std::chrono::minutes check_time_limit(const api::ActiveChecks& active) {
  return std::chrono::minutes((active.timeout_seconds + 59) / 60);
}

}  // namespace

slurm::Reservation check_reservation(const std::string& node, const api::ActiveChecks& active,
                                     slurm::Time now) {
  slurm::Reservation r;
  r.name = health::check_reservation(node);
  r.nodes = node;
  r.users = {"slurm"};
  r.start_time = now;
  r.end_time = now + check_time_limit(active) + std::chrono::minutes(1);
  return r;
}

slurm::JobSubmission check_job(const slurm::Node& node, const HealthPolicy& policy) {
  const api::ActiveChecks& active = *policy.active;
  slurm::JobSubmission job;
  job.name = "tightrope-check";
  job.partition = node.partitions.empty() ? "" : node.partitions.front();
  job.reservation = health::check_reservation(node.name);
  // One shell word in single quotes: each ' of the JSON closes, escapes and reopens them.
  std::string config =
      json{{"source", active_source(policy)}, {"active", build::active_checks_json(active)}}.dump(
          -1, ' ', /*ensure_ascii=*/true);
  std::string quoted;
  for (const char ch : config) {
    quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  }
  job.script = "#!/bin/sh\nexec /usr/local/sbin/tightrope-health --active '" + quoted + "'\n";
  job.working_directory = "/tmp";
  job.required_nodes = {node.name};
  job.time_limit = check_time_limit(active);
  job.exclusive = true;
  return job;
}

namespace {

// One line of a worker's words, for Slurm's reason: line breaks become spaces, other control
// characters go.
std::string one_line(std::string text, size_t limit) {
  std::replace_if(
      text.begin(), text.end(), [](char ch) { return ch == '\n' || ch == '\t'; }, ' ');
  return without_controls(text, limit);
}

}  // namespace

std::string taint_value(const std::string& check) {
  std::string out;
  for (const char ch : check) {
    const bool plain =
        std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' || ch == '.';
    out.push_back(plain ? ch : '-');
  }
  out.resize(std::min<size_t>(out.size(), 63));
  // A label value starts and ends with a letter or digit.
  const auto edge = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) == 0; };
  while (!out.empty() && edge(out.back())) {
    out.pop_back();
  }
  while (!out.empty() && edge(out.front())) {
    out.erase(out.begin());
  }
  return out;
}

std::string health_reason(const health::Report& report) {
  if (report.failed.empty()) {
    return std::string(kHealthReason) + "failed";
  }
  const health::Finding& first = report.failed.front();
  std::string out =
      std::string(kHealthReason) + one_line(first.check, 64) + ": " + one_line(first.message, 200);
  if (report.failed.size() > 1) {
    out += " (and " + std::to_string(report.failed.size() - 1) + " more)";
  }
  return out;
}

std::string verifying_reason(const std::string& pod_key) {
  return std::string(kHealthReason) + "awaiting the first checks of pod " + pod_key;
}

bool health_drained(const slurm::Node& node) {
  return node.drain() && operator_reason(node.reason) &&
         node.reason.find(kHealthReason) != std::string::npos;
}

bool awaits_verification(const slurm::Node& node, const HealthPolicy* policy) {
  if (health_drained(node)) {
    return true;
  }
  if (policy == nullptr || !operator_reason(node.reason) || !(node.drain() || node.has("DOWN"))) {
    return false;
  }
  const auto failed = [&](std::string_view key) {
    const auto last = health::read_report(node.extra, key);
    return last && !last->ok && from_policy(*last, *policy);
  };
  return failed(health::kExtraKey) || failed(health::kActiveExtraKey);
}

std::string health_step(const std::string& reason) {
  if (reason.find("is pending termination for") != std::string::npos) {
    return "replacing";
  }
  if (reason.find(std::string(kHealthReason) + "awaiting") != std::string::npos) {
    return "verifying";
  }
  return "drained";
}

int64_t failures_within(const std::vector<api::NodeFailure>& failures, int64_t now,
                        int64_t window_seconds) {
  return std::count_if(failures.begin(), failures.end(),
                       [&](const api::NodeFailure& f) { return f.at > now - window_seconds; });
}

const std::pair<std::string, api::NodeFailure>* fault_follows_pod(
    const std::vector<std::pair<std::string, api::NodeFailure>>& elsewhere, const std::string& uid,
    const std::string& check, int64_t now, int64_t window_seconds) {
  const std::pair<std::string, api::NodeFailure>* newest = nullptr;
  for (const auto& e : elsewhere) {
    const api::NodeFailure& f = e.second;
    if (f.uid != uid && f.check == check && f.at > now - window_seconds &&
        (newest == nullptr || f.at > newest->second.at)) {
      newest = &e;
    }
  }
  return newest;
}

bool quarantined(const json& kube_node) {
  for (const auto& t : kube_node.value("/spec/taints"_json_pointer, json::array())) {
    if (t.value("key", "") == api::kTaintUnhealthy) {
      return true;
    }
  }
  return false;
}

std::optional<NodeRecord> record_failure(const kube::Document& kube_node,
                                         const api::NodeFailure& failure,
                                         const api::Remediation& remediation, int64_t now,
                                         bool at_once) {
  std::vector<api::NodeFailure> failures = api::decode_node_failures(kube_node.doc);
  NodeRecord out;
  out.records = std::none_of(failures.begin(), failures.end(),
                             [&](const api::NodeFailure& f) { return f.uid == failure.uid; });
  if (out.records) {
    failures.push_back(failure);
    if (failures.size() > kNodeFailuresKept) {
      failures.erase(failures.begin(),
                     failures.begin() + static_cast<int64_t>(failures.size() - kNodeFailuresKept));
    }
  }
  out.counted = failures_within(failures, now, remediation.window_seconds);
  out.quarantines =
      (at_once || out.counted >= remediation.quarantine_after) && !quarantined(kube_node.doc);
  if (!out.records && !out.quarantines) {
    return std::nullopt;
  }
  out.patch = json::object();
  out.patch["metadata"]["resourceVersion"] = kube_node.meta.resource_version;
  if (out.records) {
    out.patch["metadata"]["annotations"][api::kAnnotationHealthFailures] =
        api::encode_node_failures(failures);
  }
  if (out.quarantines) {
    json taints = kube_node.doc.value("/spec/taints"_json_pointer, json::array());
    taints.push_back({{"key", api::kTaintUnhealthy},
                      {"value", taint_value(failure.check)},
                      {"effect", "NoSchedule"},
                      {"timeAdded", kube::format_time(slurm::Time(std::chrono::seconds(now)))}});
    out.patch["spec"]["taints"] = taints;
  }
  return out;
}

std::optional<api::NodeRemediation> pod_remediation(const std::string& nodeset,
                                                    const WorkerPod& w) {
  const auto drain = w.slurm_conditions.find(std::string(kSlurmConditionPrefix) + "Drain");
  if (drain == w.slurm_conditions.end()) {
    return std::nullopt;
  }
  const auto& [reason, since] = drain->second;
  const size_t at = reason.find(kHealthReason);
  if (!operator_reason(reason) || at == std::string::npos) {
    return std::nullopt;
  }
  api::NodeRemediation out;
  out.node = w.hostname;
  out.node_set = nodeset;
  out.pod_uid = w.uid;
  out.kube_node = w.kube_node;
  out.since = since;
  const std::string step = health_step(reason);
  out.phase = step == "replacing" ? "Replacing" : (step == "verifying" ? "Verifying" : "Draining");
  // "<check>: <message>" after the marker; a verification names no check.
  const std::string found = reason.substr(at + kHealthReason.size());
  if (step != "verifying") {
    const size_t colon = found.find(": ");
    out.check = found.substr(0, colon);
    out.message = colon == std::string::npos ? "" : found.substr(colon + 2);
  } else {
    out.message = found;
  }
  return out;
}

std::optional<api::KubeNodeHealth> kube_node_health(
    const json& kube_node, const std::function<bool(const std::string&)>& owns,
    int64_t window_seconds, int64_t now) {
  api::KubeNodeHealth out;
  out.name = kube_node.value("/metadata/name"_json_pointer, "");
  bool ours = false;
  for (const auto& f : api::decode_node_failures(kube_node)) {
    if (f.at > now - window_seconds) {
      ours = ours || owns(f.pod);
      out.failures.push_back(kube::format_time(slurm::Time(std::chrono::seconds(f.at))));
    }
  }
  if (!ours) {
    return std::nullopt;
  }
  out.quarantined = quarantined(kube_node);
  return out;
}

}  // namespace tightrope::op
