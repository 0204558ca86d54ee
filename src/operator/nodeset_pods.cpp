// A NodeSet's pods as the controller reads them: WorkerPod from the cached pod, why a
// container does not start, the Node's features, when the work on each Slurm node ends.
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

namespace {

constexpr std::string_view kFeaturePrefix = "k8s/";

}  // namespace

std::string pod_revision(const kube::ObjectMeta& meta) {
  for (const std::string_view key : {api::kLabelRevision, api::kLabelSlinkyRevision}) {
    if (const std::string* value = meta.label(key); value != nullptr && !value->empty()) {
      return *value;
    }
  }
  return "";
}

WorkerPod worker_pod(const api::NodeSet& n, const CachedPod& pod) {
  const auto annotation = [&](std::string_view key) {
    const std::string* value = pod.annotation(key);
    return value != nullptr ? *value : std::string();
  };
  const auto label = [&](std::string_view key) {
    const std::string* value = pod.meta.label(key);
    return value != nullptr ? *value : std::string();
  };
  WorkerPod w;
  w.name = pod.meta.name;
  w.uid = pod.meta.uid;
  w.ordinal = build::nodeset_pod_ordinal(n, w.name);
  w.created = pod.created;
  w.terminating = pod.meta.deleting;
  w.resource_version = pod.meta.resource_version;
  w.kube_node = pod.node_name;
  w.hostname = pod.hostname.empty() ? w.name : pod.hostname;
  w.revision = pod_revision(pod.meta);
  w.mode = label(api::kLabelNodeSetScalingMode);
  if (w.mode.empty()) {
    // Made by another operator (Slinky's writes no such label): a pod pinned to its Node by a
    // required affinity is a DaemonSet's, any other a StatefulSet's.
    w.mode = pod.affinity_node.empty() ? "StatefulSet" : "DaemonSet";
  }
  // DaemonSet pods name their Node in a required node affinity; others run where scheduled.
  w.target_node = pod.affinity_node.empty() ? w.kube_node : pod.affinity_node;
  w.phase = pod.phase.empty() ? "Pending" : pod.phase;
  w.ip = pod.ip;
  if (const auto* ready = pod.condition("Ready")) {
    w.ready = ready->status == "True";
    w.ready_since = ready->last_transition;
  }
  w.cordoned = annotation(api::kAnnotationPodCordon) == "true";
  w.operator_cordon = annotation(api::kAnnotationPodOperatorCordon) == "true";
  if (std::string request = annotation(api::kAnnotationPodCordonRequested);
      request != "false" && request != "False") {
    w.cordon_request = std::move(request);
  }
  w.drain_request = annotation(api::kAnnotationPodDrainReason);
  w.protect_label = label(api::kLabelNodeSetPodProtect) == "true";
  w.deadline_annotation = annotation(api::kAnnotationPodDeadline);
  w.safe_to_evict = annotation(api::kAnnotationSafeToEvict);
  w.do_not_disrupt = annotation(api::kAnnotationDoNotDisrupt);
  for (const auto& c : pod.conditions) {
    if (c.type.starts_with(kSlurmConditionPrefix)) {
      w.slurm_conditions[c.type] = {c.message, c.last_transition};
    }
  }
  w.start_failure = container_start_failure(pod);
  if (const auto* scheduled = pod.condition("PodScheduled");
      scheduled != nullptr && w.kube_node.empty() && scheduled->status == "False" &&
      scheduled->reason == "Unschedulable") {
    w.unschedulable = scheduled->message.empty() ? "no Node can take it" : scheduled->message;
  }
  const std::string cost = annotation(api::kAnnotationPodDeletionCost);
  int64_t value = 0;
  if (!cost.empty()) {
    const auto [end, ec] = std::from_chars(cost.data(), cost.data() + cost.size(), value);
    if (ec == std::errc() && end == cost.data() + cost.size()) {
      w.deletion_cost = value;
    }
  }
  return w;
}

namespace {

// The end of a log tail: its last three non-blank lines, without slurmd's "[time] " stamps,
// joined by " | " and cut to the last 400 characters. A daemon's root cause is rarely its last
// line ("slurmd initialization failed"), but is one of the few before it.
std::string log_end(const std::string& text) {
  constexpr size_t kLines = 3;
  constexpr size_t kMost = 400;
  std::vector<std::string> lines;
  size_t end = text.size();
  while (lines.size() < kLines && end > 0) {
    const size_t start = text.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    end = start == std::string::npos ? 0 : start;
    if (line.starts_with('[')) {
      if (const size_t stamp = line.find("] "); stamp != std::string::npos) {
        line.erase(0, stamp + 2);
      }
    }
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      lines.insert(lines.begin(), std::move(line));
    }
  }
  std::string out = join(lines, " | ");
  return out.size() > kMost ? "..." + out.substr(out.size() - kMost) : out;
}

}  // namespace

std::string container_start_failure(const CachedPod& pod) {
  // ContainerCreating and PodInitializing are progress, not failures.
  static const std::set<std::string, std::less<>> kStuck = {
      "ErrImagePull",         "ImagePullBackOff",  "ErrImageNeverPull",
      "InvalidImageName",     "CrashLoopBackOff",  "CreateContainerConfigError",
      "CreateContainerError", "RunContainerError", "PreStartHookError",
      "PostStartHookError"};
  // Init containers first: the others wait on them.
  for (const bool init : {true, false}) {
    for (const auto& c : pod.waiting) {
      if (c.init != init || kStuck.count(c.reason) == 0) {
        continue;
      }
      std::string out = "container " + c.container + ": " + c.reason;
      // A crash loop's back-off message says nothing of the crash; the last exit does, and
      // with FallbackToLogsOnError its message is the end of the container's log.
      if (c.reason == "CrashLoopBackOff" && c.last_exit_code) {
        out += ": exit code " + std::to_string(*c.last_exit_code);
        if (const std::string tail = log_end(c.last_exit_message); !tail.empty()) {
          out += ": " + tail;
        }
      } else if (!c.message.empty()) {
        out += ": " + c.message;
      }
      return out;
    }
  }
  return "";
}

std::vector<std::string> node_features(const std::string& spec,
                                       const std::vector<std::string>& current) {
  std::vector<std::string> out;
  for (const auto& f : current) {
    if (!f.starts_with(kFeaturePrefix)) {
      out.push_back(f);
    }
  }
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) {
      comma = spec.size();
    }
    std::string word = spec.substr(start, comma - start);
    word.erase(0, word.find_first_not_of(' '));
    word.erase(word.find_last_not_of(' ') + 1);
    if (!word.empty()) {
      std::string feature = std::string(kFeaturePrefix) + word;
      if (std::find(out.begin(), out.end(), feature) == out.end()) {
        out.push_back(std::move(feature));
      }
    }
    start = comma + 1;
  }
  return out;
}

std::string pod_deadline_annotation(const std::optional<slurm::Time>& deadline) {
  if (!deadline) {
    return "";
  }
  if (*deadline == slurm::Time::max()) {
    return "9999-12-31T23:59:59Z";
  }
  return kube::format_time(*deadline);
}

std::map<std::string, slurm::Time> node_last_job_ends(const std::map<int64_t, slurm::Job>& jobs) {
  std::map<std::string, slurm::Time> out;
  for (const auto& [id, job] : jobs) {
    if (job.active() || !job.end_time || job.nodes.empty()) {
      continue;
    }
    const auto names = slurm::expand_hostlist(job.nodes);
    if (!names) {
      continue;
    }
    for (const auto& name : *names) {
      auto [it, inserted] = out.emplace(name, *job.end_time);
      if (!inserted) {
        it->second = std::max(it->second, *job.end_time);
      }
    }
  }
  return out;
}

std::map<std::string, slurm::Time> node_deadlines(const std::map<int64_t, slurm::Job>& jobs,
                                                  const std::map<std::string, slurm::Node>& nodes) {
  std::map<std::string, slurm::Time> out;
  for (const auto& [id, job] : jobs) {
    if (!job.has("RUNNING") && !job.has("COMPLETING") && !job.has("SUSPENDED")) {
      continue;
    }
    // Slurm's end_time is the start plus the limit, moved on by suspensions; a job without a
    // limit never ends.
    slurm::Time end = slurm::Time::max();
    if (job.time_limit) {
      if (job.end_time && job.end_time > job.start_time) {
        end = *job.end_time;
      } else if (job.start_time) {
        end = *job.start_time + *job.time_limit;
      }
    }
    const auto names = slurm::expand_hostlist(job.nodes);
    if (!names) {
      continue;
    }
    for (const auto& name : *names) {
      auto [it, inserted] = out.emplace(name, end);
      if (!inserted) {
        it->second = std::max(it->second, end);
      }
    }
  }
  for (const auto& [name, node] : nodes) {
    if (node.busy() && out.count(name) == 0) {
      out.emplace(name, slurm::Time::max());
    }
  }
  return out;
}

}  // namespace tightrope::op
