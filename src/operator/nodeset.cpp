#include "operator/nodeset.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>
#include <tuple>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "kube/time.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/conditions.hpp"
#include "operator/reconcile_support.hpp"
#include "operator/resources.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

constexpr std::string_view kConditionPrefix = "SlurmNodeState";
constexpr size_t kMaxCreatesPerReconcile = 250;
constexpr size_t kMaxConcurrentCreates = 32;
constexpr std::chrono::seconds kUnregisteredGrace{120};
constexpr std::string_view kFeaturePrefix = "k8s/";

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

std::string annotation(const json& object, std::string_view key) {
  const json* annotations = nullptr;
  if (const auto meta = object.find("metadata"); meta != object.end()) {
    if (const auto it = meta->find("annotations"); it != meta->end() && it->is_object()) {
      annotations = &*it;
    }
  }
  if (annotations == nullptr) {
    return "";
  }
  const auto it = annotations->find(std::string(key));
  return it != annotations->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string label(const json& object, std::string_view key) {
  const auto meta = object.find("metadata");
  if (meta == object.end()) {
    return "";
  }
  const auto labels = meta->find("labels");
  if (labels == meta->end() || !labels->is_object()) {
    return "";
  }
  const auto it = labels->find(std::string(key));
  return it != labels->end() && it->is_string() ? it->get<std::string>() : "";
}

// Slurm repeats a reservation with one of these flags, moving its window on by itself.
bool recurring_reservation(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f == "HOURLY" || f == "DAILY" || f == "WEEKDAY" || f == "WEEKEND" || f == "WEEKLY";
  });
}

bool has_finalizer(const json& object, std::string_view finalizer) {
  const json finalizers = object.value("/metadata/finalizers"_json_pointer, json::array());
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

const json* pod_condition(const json& pod, const std::string& type) {
  const auto status = pod.find("status");
  if (status == pod.end() || !status->contains("conditions")) {
    return nullptr;
  }
  for (const auto& c : (*status)["conditions"]) {
    if (c.value("type", "") == type) {
      return &c;
    }
  }
  return nullptr;
}

WorkerPod worker_pod(const api::NodeSet& n, const json& pod) {
  WorkerPod w;
  const json& meta = pod["metadata"];
  w.name = meta.value("name", "");
  w.uid = meta.value("uid", "");
  w.ordinal = build::nodeset_pod_ordinal(n, w.name);
  w.created = meta.value("creationTimestamp", "");
  w.terminating = meta.contains("deletionTimestamp");
  static const json kNoSpec = json::object();
  const auto spec_it = pod.find("spec");
  const json& spec = spec_it != pod.end() && spec_it->is_object() ? *spec_it : kNoSpec;
  w.kube_node = spec.value("nodeName", "");
  w.hostname = spec.value("hostname", w.name);
  w.revision = label(pod, "controller-revision-hash");
  w.mode = label(pod, api::kLabelNodeSetScalingMode);
  // DaemonSet pods name their Node in a required node affinity; others run where scheduled.
  const json terms = spec.value(
      "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"_json_pointer,
      json::array());
  w.target_node = w.kube_node;
  if (!terms.empty()) {
    const json values = terms[0].value("/matchFields/0/values"_json_pointer, json::array());
    if (values.size() == 1 && values[0].is_string()) {
      w.target_node = values[0].get<std::string>();
    }
  }
  w.phase = pod.value("/status/phase"_json_pointer, std::string("Pending"));
  if (const json* ready = pod_condition(pod, "Ready")) {
    w.ready = ready->value("status", "") == "True";
    w.ready_since = ready->value("lastTransitionTime", "");
  }
  w.cordoned = annotation(pod, api::kAnnotationPodCordon) == "true";
  w.start_failure = container_start_failure(pod);
  const std::string cost = annotation(pod, api::kAnnotationPodDeletionCost);
  int64_t value = 0;
  if (!cost.empty()) {
    const auto [end, ec] = std::from_chars(cost.data(), cost.data() + cost.size(), value);
    if (ec == std::errc() && end == cost.data() + cost.size()) {
      w.deletion_cost = value;
    }
  }
  return w;
}

std::string pod_key(const std::string& ns, const std::string& pod) {
  return ns + "/" + pod;
}

std::string with_prefix(const std::string& text) {
  return std::string(api::kReasonPrefix) + text;
}

// Control characters dropped, at most `limit` characters.
std::string sanitized(const std::string& text, size_t limit) {
  std::string out;
  for (const char ch : text) {
    if (static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f) {
      out.push_back(ch);
    }
    if (out.size() >= limit) {
      break;
    }
  }
  return out;
}

// The reason of a drain for deletion: "pending termination" marks a pod the operator is
// taking away, so a later reconcile (or a restarted operator) knows it from Slurm alone.
std::string condemned_reason(const std::string& key, const std::string& why) {
  return with_prefix("Pod (" + key + ") is pending termination for " + why);
}

bool condemned_in_slurm(const slurm::Node& node) {
  return node.drain() && operator_reason(node.reason) &&
         node.reason.find("is pending termination") != std::string::npos;
}

// An administrator's drain of `slurm_node` shown on its Kubernetes Node: the SlurmNodeDrained
// condition and, with `taint`, a NoSchedule taint. Both follow the drain back when it is undone.
void mirror_admin_drain(Runtime& rt, const kube::Document& kube_node, const std::string& slurm_node,
                        const slurm::Node& node, bool drained, bool taint) {
  const std::string type(api::kNodeConditionSlurmDrained);
  const json conditions = kube_node.doc.value("/status/conditions"_json_pointer, json::array());
  const json* current = nullptr;
  for (const auto& c : conditions) {
    if (c.value("type", "") == type) {
      current = &c;
    }
  }
  const std::string status = drained ? "True" : "False";
  const std::string message = drained ? "Slurm node " + slurm_node + ": " + node.reason : "";
  if ((current != nullptr || drained) &&
      (current == nullptr || current->value("status", "") != status ||
       current->value("message", "") != message)) {
    const std::string stamp = Runtime::now();
    json condition = json::object();
    condition["type"] = type;
    condition["status"] = status;
    condition["reason"] = drained ? "AdminDrain" : "NotDrained";
    condition["message"] = message;
    condition["lastHeartbeatTime"] = stamp;
    condition["lastTransitionTime"] = current != nullptr && current->value("status", "") == status
                                          ? current->value("lastTransitionTime", stamp)
                                          : stamp;
    json patch = json::object();
    patch["status"]["conditions"] = json::array({condition});
    (void)rt.kube().patch(kube::resources::nodes(), "", kube_node.meta.name,
                          kube::PatchType::kStrategicMerge, patch, "status");
  }
  if (!taint) {
    return;
  }
  const std::string key(api::kTaintSlurmDrained);
  json taints = json::array();
  bool has = false;
  for (const auto& t : kube_node.doc.value("/spec/taints"_json_pointer, json::array())) {
    if (t.value("key", "") == key) {
      has = true;
    } else {
      taints.push_back(t);
    }
  }
  if (has == drained) {
    return;
  }
  if (drained) {
    json ours = json::object();
    ours["key"] = key;
    ours["value"] = slurm_node;
    ours["effect"] = "NoSchedule";
    taints.push_back(ours);
  }
  // The list is replaced whole: the resourceVersion makes it conditional on what was read.
  json patch = json::object();
  patch["metadata"]["resourceVersion"] = kube_node.meta.resource_version;
  patch["spec"]["taints"] = taints;
  (void)rt.kube().patch(kube::resources::nodes(), "", kube_node.meta.name, kube::PatchType::kMerge,
                        patch);
}

}  // namespace

std::string container_start_failure(const json& pod) {
  // ContainerCreating and PodInitializing are progress, not failures.
  static const std::set<std::string, std::less<>> kStuck = {
      "ErrImagePull",         "ImagePullBackOff",  "ErrImageNeverPull",
      "InvalidImageName",     "CrashLoopBackOff",  "CreateContainerConfigError",
      "CreateContainerError", "RunContainerError", "PreStartHookError",
      "PostStartHookError"};
  for (const char* field : {"initContainerStatuses", "containerStatuses"}) {
    const json statuses =
        pod.value(json::json_pointer("/status/" + std::string(field)), json::array());
    for (const auto& c : statuses) {
      const json waiting = c.value("/state/waiting"_json_pointer, json::object());
      const std::string reason = waiting.value("reason", "");
      if (kStuck.count(reason) != 0) {
        std::string out = "container " + c.value("name", "") + ": " + reason;
        if (const std::string message = waiting.value("message", ""); !message.empty()) {
          out += ": " + message;
        }
        return out;
      }
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
  out.push_back(std::string(kConditionPrefix) + camel(node.base_state()));
  for (const auto& flag : node.flags()) {
    // How the node was made says nothing about its health.
    if (flag == "DYNAMIC_NORM" || flag == "DYNAMIC_FUTURE" || flag == "CLOUD") {
      continue;
    }
    out.push_back(std::string(kConditionPrefix) + camel(flag));
  }
  return out;
}

bool slurm_drained(const slurm::Node& node) {
  return node.drain() && !node.has("UNDRAIN") && !node.busy();
}

std::string cordon_reason(const json& kube_node, const std::string& key) {
  const std::string given = sanitized(annotation(kube_node, api::kAnnotationNodeCordonReason), 256);
  if (!given.empty()) {
    return with_prefix(given);
  }
  const std::string node = kube_node["metadata"].value("name", "");
  return with_prefix("Node (" + node + ") was cordoned, Pod (" + key + ") must be cordoned");
}

bool operator_reason(const std::string& reason) {
  return reason.starts_with(api::kReasonPrefix);
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

void PodExpectations::created(const std::string& nodeset, const std::string& pod,
                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset].creations[pod] = now;
}

void PodExpectations::deleted(const std::string& nodeset, const std::string& pod_uid,
                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset].deletions[pod_uid] = now;
}

PodExpectations::Pending PodExpectations::pending(const std::string& nodeset,
                                                  const std::vector<WorkerPod>& cached,
                                                  Clock::time_point now) {
  std::lock_guard lock(mu_);
  Pending out;
  const auto it = by_nodeset_.find(nodeset);
  if (it == by_nodeset_.end()) {
    return out;
  }
  std::set<std::string> names;
  std::set<std::string> alive;  // uids of pods not terminating
  for (const auto& w : cached) {
    names.insert(w.name);
    if (!w.terminating) {
      alive.insert(w.uid);
    }
  }
  Entry& e = it->second;
  std::erase_if(e.creations,
                [&](const auto& c) { return names.count(c.first) != 0 || now - c.second > ttl_; });
  std::erase_if(e.deletions,
                [&](const auto& d) { return alive.count(d.first) == 0 || now - d.second > ttl_; });
  for (const auto& [name, at] : e.creations) {
    out.creations.insert(name);
  }
  for (const auto& [uid, at] : e.deletions) {
    out.deletions.insert(uid);
  }
  if (e.creations.empty() && e.deletions.empty()) {
    by_nodeset_.erase(it);
  }
  return out;
}

void PodExpectations::forget(const std::string& nodeset) {
  std::lock_guard lock(mu_);
  by_nodeset_.erase(nodeset);
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

kube::ReconcileOutcome NodeSetReconciler::reconcile(const kube::Request& request) {
  const kube::ResourceType& type = resources::nodesets();
  const auto doc = cache_.get(type, request.key());
  if (!doc) {
    expectations_.forget(request.key());
    return settled();
  }
  if (doc->meta.deleting) {
    return finish_deletion(*doc);
  }
  auto loaded = load(runtime_, type, *doc, &api::decode_nodeset);
  if (!loaded) {
    return settled();
  }
  const api::NodeSet& n = *loaded;
  const std::string& ns = n.metadata.namespace_name;
  const std::vector<api::Condition> before = conditions_of(*doc);
  std::vector<api::Condition> conditions = before;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, n.metadata, before, conditions, ready, std::move(next));
  };
  const kube::ObjectReference self{type.api_version(), type.kind, ns, n.metadata.name,
                                   n.metadata.uid};

  const auto controller = controller_of(cache_, ns, n.spec.controller_ref.name);
  if (!controller) {
    return not_ready({false, "ControllerNotFound",
                      "Controller " + ns + "/" + n.spec.controller_ref.name +
                          " (spec.controllerRef) does not exist"},
                     settled());
  }
  const bool daemon = n.spec.scaling_mode == "DaemonSet";
  const build::NodeSetInputs in{*controller};
  if (auto conf = build::slurmd_conf(n); !conf) {
    return not_ready({false, "InvalidConfig", conf.error()}, settled());
  }

  // What every NodeSet of the cluster shares.
  std::vector<api::NodeSet> siblings;
  for (const auto& d : cache_.list(type, ns)) {
    auto sibling = api::decode_nodeset(d->doc);
    if (sibling && !sibling->metadata.deleting &&
        sibling->spec.controller_ref.name == controller->metadata.name) {
      siblings.push_back(std::move(*sibling));
    }
  }
  for (const json& shared : {build::build_worker_service(*controller, siblings),
                             build::build_worker_pdb(*controller, siblings)}) {
    if (auto applied = apply_all(runtime_, {shared}, nullptr, &applied_, &cache_); !applied) {
      return not_ready({false, "ApplyFailed", applied.error()}, retry());
    }
  }

  // The current revision, kept as a ControllerRevision; older ones beyond the history limit go.
  const std::string revision = build::nodeset_revision_name(n, in);
  std::vector<std::pair<int64_t, std::string>> revisions;  // (number, name)
  bool have_revision = false;
  int64_t highest = 0;
  for (const auto& r : cache_.list(kube::resources::controller_revisions(), ns)) {
    const kube::OwnerReference* owner = r->meta.controller_ref();
    if (owner == nullptr || owner->uid != n.metadata.uid) {
      continue;
    }
    const int64_t number = r->doc.value("revision", int64_t{0});
    highest = std::max(highest, number);
    if (r->meta.name == revision) {
      have_revision = true;
    } else {
      revisions.emplace_back(number, r->meta.name);
    }
  }
  if (!have_revision) {
    auto applied = runtime_.apply(build::build_controller_revision(n, in, highest + 1));
    if (!applied) {
      return not_ready({false, "ApplyFailed", "ControllerRevision: " + applied.error().message},
                       retry());
    }
  }

  // The pods, as the cache has them.
  // Held, not copied: a thousand pods are tens of MB of JSON.
  std::vector<ResourceCache::Ptr> pod_docs;
  for (auto& p : cache_.list(kube::resources::pods(), ns)) {
    const kube::OwnerReference* owner = p->meta.controller_ref();
    if (owner != nullptr && owner->uid == n.metadata.uid) {
      pod_docs.push_back(std::move(p));
    }
  }
  std::set<std::string> revisions_in_use = {revision};
  for (const auto& pod : pod_docs) {
    revisions_in_use.insert(label(pod->doc, "controller-revision-hash"));
  }
  std::sort(revisions.begin(), revisions.end());
  int64_t unused = 0;
  for (const auto& [number, name] : revisions) {
    unused += revisions_in_use.count(name) == 0 ? 1 : 0;
  }
  for (const auto& [number, name] : revisions) {
    if (unused <= n.spec.revision_history_limit) {
      break;
    }
    if (revisions_in_use.count(name) == 0) {
      (void)runtime_.remove_owned(kube::resources::controller_revisions(), ns, name,
                                  n.metadata.uid);
      --unused;
    }
  }

  // Slurm's side, from the cluster's change feed. Without a synced feed nothing is deleted.
  const std::string cluster_key = kube::object_key(ns, controller->metadata.name);
  const auto feed = runtime_.slurm().feed(cluster_key);
  const auto client = runtime_.slurm().get(cluster_key);
  std::string slurm_problem;
  // Why Slurm cannot be asked: no client yet (the Controller makes it, or lacks a RestApi or
  // jwtKeyRef), a new feed that has not answered yet, or a failing one. Only the last is an
  // outage; the others are how an operator starts.
  std::string slurm_reason;
  if (!feed || !client) {
    slurm_problem = "the operator has no Slurm client for Controller " + cluster_key +
                    " (it needs a RestApi and a jwtKeyRef)";
    slurm_reason = "NoSlurmClient";
  } else if (const auto health = feed->health();
             !health.synced && health.consecutive_failures == 0) {
    slurm_problem = "waiting for slurmrestd's first answer";
    slurm_reason = "WaitingForSlurm";
  } else if (!health.synced || health.consecutive_failures > 0) {
    slurm_problem = "slurmrestd does not answer: " +
                    (health.last_error ? health.last_error->message : std::string("not yet read"));
    slurm_reason = "SlurmUnreachable";
  }
  const bool slurm_waiting = slurm_reason == "NoSlurmClient" || slurm_reason == "WaitingForSlurm";
  const bool slurm_ok = slurm_problem.empty();
  // One poll's nodes and jobs, shared with the feed, not copied.
  static const std::map<std::string, slurm::Node> kNoNodes;
  const slurm::SlurmSnapshot slurm_now = slurm_ok ? feed->snapshot() : slurm::SlurmSnapshot{};
  const std::map<std::string, slurm::Node>& nodes = slurm_ok ? *slurm_now.nodes : kNoNodes;
  std::map<std::string, slurm::Time> deadlines;
  if (slurm_ok) {
    deadlines = node_deadlines(*slurm_now.jobs, nodes);
  }

  std::vector<WorkerPod> pods;
  std::map<std::string, const json*> doc_of;
  for (const auto& pod : pod_docs) {
    WorkerPod w = worker_pod(n, pod->doc);
    if (const auto it = deadlines.find(w.hostname); it != deadlines.end()) {
      w.deadline = it->second;
    }
    doc_of[w.name] = &pod->doc;
    pods.push_back(std::move(w));
  }
  // What this operator did that the cache does not show yet: a pod it deleted counts as
  // terminating, one it created as there.
  const auto expected_at = PodExpectations::Clock::now();
  const PodExpectations::Pending expected = expectations_.pending(request.key(), pods, expected_at);
  for (auto& w : pods) {
    if (expected.deletions.count(w.uid) != 0) {
      w.terminating = true;
    }
  }
  // The first stuck pod speaks for all: with a bad image every pod fails the same way.
  std::string failing;
  size_t failing_count = 0;
  for (const auto& w : pods) {
    if (!w.terminating && !w.start_failure.empty()) {
      if (failing_count++ == 0) {
        failing = "pod " + w.name + ": " + w.start_failure;
      }
    }
  }
  if (failing_count > 1) {
    failing += " (and " + std::to_string(failing_count - 1) + " more pods)";
  }
  const auto node_of = [&](const WorkerPod& w) -> const slurm::Node* {
    const auto it = nodes.find(w.hostname);
    return it == nodes.end() ? nullptr : &it->second;
  };

  std::vector<std::string> blocked;   // why a pod that should go cannot
  std::vector<std::string> draining;  // pods waiting for their jobs
  std::set<std::string> deleted;      // pods deleted by this reconcile: nothing more is written
  std::string blocked_reason;
  const auto block = [&](const std::string& reason, const std::string& message) {
    if (blocked_reason.empty()) {
      blocked_reason = reason;
    }
    blocked.push_back(message);
  };
  const auto delete_pod = [&](const WorkerPod& w, const std::string& why) -> bool {
    kube::DeleteOptions options;
    options.precondition_uid = w.uid;
    auto removed = runtime_.kube().remove(kube::resources::pods(), ns, w.name, options);
    if (!removed && removed.error().kind != kube::ErrorKind::kNotFound) {
      block("DeleteFailed", "deleting pod " + w.name + ": " + removed.error().message);
      return false;
    }
    deleted.insert(w.name);
    expectations_.deleted(request.key(), w.uid, PodExpectations::Clock::now());
    runtime_.events().normal(self, "DeletedPod", "Deleted pod " + w.name + ": " + why);
    log::info("nodeset.pod_deleted", {{"nodeset", request.key()}, {"pod", w.name}, {"why", why}});
    return true;
  };
  const auto set_pod_cordon = [&](const WorkerPod& w, bool on) {
    if (w.cordoned == on) {
      return;
    }
    (void)runtime_.kube().patch(
        kube::resources::pods(), ns, w.name, kube::PatchType::kMerge,
        {{"metadata",
          {{"annotations", {{api::kAnnotationPodCordon, on ? json("true") : json(nullptr)}}}}}});
  };

  // whenScaled: Delete: a pod removed by a scale-in takes its claims with it (the pod becomes
  // their owner, so garbage collection deletes them after the pod).
  const auto release_claims = [&](const WorkerPod& w) {
    const std::string suffix =
        daemon ? w.hostname : build::nodeset_padded_ordinal(n, std::max<int64_t>(w.ordinal, 0));
    for (const auto& claim : build::build_nodeset_claims(n, suffix)) {
      json owners = claim["metadata"].value("ownerReferences", json::array());
      json pod_owner = json::object();
      pod_owner["apiVersion"] = "v1";
      pod_owner["kind"] = "Pod";
      pod_owner["name"] = w.name;
      pod_owner["uid"] = w.uid;
      owners.push_back(pod_owner);
      json patch = json::object();
      patch["metadata"]["ownerReferences"] = owners;
      (void)runtime_.kube().patch(kube::resources::persistent_volume_claims(), ns,
                                  claim["metadata"].value("name", ""), kube::PatchType::kMerge,
                                  patch);
    }
  };

  // Pods whose slurmd has exited hold no job: they are replaced.
  std::vector<WorkerPod> active;
  int64_t terminating = 0;
  for (const auto& w : pods) {
    if (w.terminating) {
      ++terminating;
    } else if (w.phase == "Failed" || w.phase == "Succeeded") {
      if (delete_pod(w, "its slurmd exited (phase " + w.phase + ")")) {
        ++terminating;
      }
    } else {
      active.push_back(w);
    }
  }

  // DaemonSet mode: one pod on each Node the pod template accepts (by hostname), replicas
  // ignored.
  std::map<std::string, std::string> eligible;  // Node name -> hostname
  if (daemon) {
    auto probe =
        build::build_nodeset_pod(n, in, build::PodIdentity{"probe", "probe", "", "probe"}, "");
    const json spec = probe ? (*probe)["spec"] : json::object();
    for (const auto& node : cache_.list_all(kube::resources::nodes())) {
      if (!node->meta.deleting && build::daemon_node_eligible(spec, node->doc)) {
        eligible[node->meta.name] = build::daemon_pod_hostname(node->doc);
      }
    }
  }

  // Which pods go (choose_victims), in the order they go.
  const int64_t want = daemon ? static_cast<int64_t>(eligible.size()) : n.spec.replicas.value_or(1);
  Victims victims = choose_victims(n, std::move(active), nodes, want, revision, eligible);
  std::map<std::string, std::string>& condemned = victims.condemned;
  active = std::move(victims.order);

  // ScheduledUpdate: outdated pods are replaced inside the maintenance reservation, made while
  // any is left and removed after; the finalizer marks that one may exist. A pod already
  // drained for an update goes on; one that is not ready holds no job and goes at once.
  const bool scheduled = n.spec.update_strategy.type == "ScheduledUpdate";
  const bool holds_reservation = has_finalizer(doc->doc, api::kFinalizerNodeSetReservation);
  const std::string maint = maintenance_reservation_name(n);
  const auto now = std::chrono::system_clock::now();
  std::optional<api::Condition> reservation;  // the ReservationCreated condition
  std::optional<slurm::Time> window_opens;    // when the update waits for the window
  const auto reservation_state = [&](bool created, const std::string& reason,
                                     const std::string& message) {
    reservation = api::Condition{"ReservationCreated",
                                 created ? "True" : "False",
                                 reason,
                                 message,
                                 n.metadata.generation,
                                 ""};
  };
  std::vector<const WorkerPod*> outdated;
  for (const auto& w : active) {
    if (victims.outdated.count(w.name) != 0) {
      outdated.push_back(&w);
    }
  }
  if (scheduled && outdated.empty()) {
    reservation_state(false, "NoUpdatePending", "every pod is at revision " + revision);
  } else if (scheduled && !slurm_ok) {
    reservation_state(false, slurm_reason, slurm_problem);
  } else if (scheduled) {
    std::vector<std::string> hostnames;
    for (const WorkerPod* w : outdated) {
      if (node_of(*w) != nullptr) {
        hostnames.push_back(w->hostname);
      }
    }
    auto wanted = maintenance_reservation(n, hostnames, now);
    if (!wanted) {
      reservation_state(false, "InvalidWindow", wanted.error());
    } else if (hostnames.empty()) {
      reservation_state(false, "WaitingForSlurmNodes",
                        "no outdated pod has registered its Slurm node yet");
    } else if (auto held = hold_finalizer(*doc, api::kFinalizerNodeSetReservation, true); !held) {
      reservation_state(false, "ApplyFailed", "adding finalizer: " + held.error());
    } else if (auto window = sync_reservation(*client, *wanted, self); !window) {
      reservation_state(false, "SlurmUpdateFailed", window.error());
    } else {
      const bool open = window->first <= now && now < window->second;
      if (!open && now < window->first) {
        window_opens = window->first;
      }
      reservation_state(true, open ? "WindowOpen" : "Scheduled",
                        "Slurm reservation " + maint + " on " + wanted->nodes + " from " +
                            kube::format_time(window->first) + " to " +
                            kube::format_time(window->second));
      if (open) {
        for (const WorkerPod* w : outdated) {
          condemned[w->name] = "scheduled update";
        }
      }
    }
  }
  if (holds_reservation && (!scheduled || outdated.empty()) && slurm_ok) {
    if (auto released = release_reservation(*client, maint, self); !released) {
      reservation_state(true, "RemovalFailed", released.error());
    } else if (auto dropped = hold_finalizer(*doc, api::kFinalizerNodeSetReservation, false);
               !dropped) {
      reservation_state(false, "RemovalFailed", "removing finalizer: " + dropped.error());
    }
  }

  // Drain, wait, delete. Fail-closed at every step where Slurm's answer is missing.
  for (const auto& w : active) {
    const auto it = condemned.find(w.name);
    if (it == condemned.end()) {
      continue;
    }
    const std::string& why = it->second;
    if (why.starts_with("scale-in") && (w.kube_node.empty() || w.phase == "Pending") &&
        n.spec.persistent_volume_claim_retention_policy.when_scaled == "Delete") {
      release_claims(w);
    }
    if (w.kube_node.empty() || w.phase == "Pending") {
      delete_pod(w, "not running yet (" + why + ")");
      continue;
    }
    if (!slurm_ok) {
      block(slurm_reason, "pod " + w.name + " kept: " + slurm_problem);
      continue;
    }
    const slurm::Node* node = node_of(w);
    if (node == nullptr) {
      if (w.ready) {
        block("SlurmNodeNotFound", "pod " + w.name + " kept: Slurm has no node " + w.hostname +
                                       ", so the operator cannot tell whether it runs jobs");
      } else {
        delete_pod(w, "its slurmd never registered (" + why + ")");
      }
      continue;
    }
    if (!node->drain()) {
      const std::string reason = condemned_reason(pod_key(ns, w.name), why);
      if (auto drained = client->drain(w.hostname, reason); !drained) {
        block("SlurmUpdateFailed",
              "draining " + w.hostname + " for pod " + w.name + ": " + drained.error().message);
        continue;
      }
      set_pod_cordon(w, true);
      runtime_.events().normal(self, "DrainingPod",
                               "Draining Slurm node " + w.hostname + " of pod " + w.name +
                                   " before deleting it (" + why + ")");
      draining.push_back(w.name);
      continue;
    }
    if (!slurm_drained(*node)) {
      draining.push_back(w.name);
      continue;
    }
    if (why.starts_with("scale-in") &&
        n.spec.persistent_volume_claim_retention_policy.when_scaled == "Delete") {
      release_claims(w);
    }
    delete_pod(w, "its Slurm node " + w.hostname + " is drained and idle (" + why + ")");
  }

  // New pods: DaemonSet mode, one on each eligible Node without one; else in the lowest free
  // ordinals. Pods on their way out (deleted just now included) still hold their names and
  // Nodes: their replacements wait for them to go.
  struct NewPod {
    Result<json, std::string> pod;
    std::string name;
    std::string claim_suffix;
  };
  std::vector<NewPod> planned;
  if (daemon) {
    std::set<std::string> served;
    for (const auto& w : pods) {
      served.insert(w.target_node);
    }
    for (const auto& [node, hostname] : eligible) {
      if (served.count(node) != 0 || planned.size() >= kMaxCreatesPerReconcile) {
        continue;
      }
      const std::string name = build::daemon_pod_name(n, hostname);
      if (expected.creations.count(name) != 0) {
        continue;
      }
      planned.push_back(
          {build::build_nodeset_pod(n, in, build::PodIdentity{name, hostname, "", hostname}, node),
           name, hostname});
    }
  }
  const int64_t present = static_cast<int64_t>(active.size()) + terminating +
                          static_cast<int64_t>(expected.creations.size());
  int64_t missing = daemon ? 0 : want - present;
  std::set<int64_t> taken;
  for (const auto& w : pods) {
    taken.insert(w.ordinal);
  }
  for (const auto& name : expected.creations) {
    taken.insert(build::nodeset_pod_ordinal(n, name));
  }
  for (int64_t ordinal = 0; missing > 0 && planned.size() < kMaxCreatesPerReconcile; ++ordinal) {
    if (taken.count(ordinal) != 0) {
      continue;
    }
    std::string pinned;
    if (n.spec.pin_to_node) {
      const auto pin = n.status.ordinal_to_node.find(std::to_string(ordinal));
      if (pin != n.status.ordinal_to_node.end() &&
          cache_.get(kube::resources::nodes(), pin->second)) {
        pinned = pin->second;
      }
    }
    planned.push_back({build::build_nodeset_pod(n, in, ordinal, pinned),
                       build::nodeset_pod_name(n, ordinal),
                       build::nodeset_padded_ordinal(n, ordinal)});
    --missing;
  }
  // "" when made (or already there), else what went wrong.
  const auto create_pod = [&](const NewPod& p) -> std::string {
    if (!p.pod) {
      return p.pod.error();
    }
    // Its claims first: the scheduler waits for them, and they outlive the pod.
    for (const auto& claim : build::build_nodeset_claims(n, p.claim_suffix)) {
      auto made = runtime_.kube().create(kube::resources::persistent_volume_claims(), ns, claim);
      if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
        return "creating PersistentVolumeClaim " + claim["metadata"].value("name", "") + ": " +
               made.error().message;
      }
    }
    auto made = runtime_.kube().create(kube::resources::pods(), ns, *p.pod);
    if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
      return "creating pod " + p.name + ": " + made.error().message;
    }
    return "";
  };
  // Slow start, as Kubernetes' own controllers create pods: batches of 1, 2, 4, ... up to
  // kMaxConcurrentCreates at once, each only after the previous one fully succeeded, so that a
  // refusal (quota, admission) costs one request, and a thousand pods do not wait on one
  // another's round trips.
  std::string create_problem;
  std::set<std::string> fresh_hostnames;  // of the pods created now
  for (size_t next = 0, batch = 1; next < planned.size() && create_problem.empty();
       batch = std::min(batch * 2, kMaxConcurrentCreates)) {
    const size_t end = std::min(planned.size(), next + batch);
    std::vector<std::string> problems(end - next);
    std::vector<std::thread> creators;
    for (size_t i = next + 1; i < end; ++i) {
      creators.emplace_back([&, i] { problems[i - next] = create_pod(planned[i]); });
    }
    problems[0] = create_pod(planned[next]);
    for (auto& t : creators) {
      t.join();
    }
    for (size_t i = next; i < end; ++i) {
      if (problems[i - next].empty()) {
        expectations_.created(request.key(), planned[i].name, PodExpectations::Clock::now());
        fresh_hostnames.insert((*planned[i].pod)["spec"].value("hostname", planned[i].name));
      } else if (create_problem.empty()) {
        create_problem = problems[i - next];
      }
    }
    next = end;
  }

  // The pods that stay: Kubernetes cordons reach Slurm, Slurm's state reaches the pods.
  const bool protect = n.spec.workload_disruption_protection.value_or(true);
  int64_t ready = 0;
  int64_t available = 0;
  int64_t updated = 0;
  int64_t slurm_idle = 0;
  int64_t slurm_allocated = 0;
  int64_t slurm_down = 0;
  int64_t slurm_drain = 0;
  for (const auto& w : active) {
    const bool going = condemned.count(w.name) != 0;
    if (w.ready) {
      ++ready;
      const auto since = kube::parse_time(w.ready_since);
      if (!since || *since + std::chrono::seconds(n.spec.min_ready_seconds) <= now) {
        ++available;
      }
    }
    if (w.revision == revision) {
      ++updated;
    }
    const slurm::Node* node = node_of(w);
    if (node == nullptr) {
      // Ready (slurmd answers) yet unknown to a Slurm that answers: slurmd registered nowhere
      // this cluster sees. It holds no job; after a grace period it is replaced.
      const auto since = kube::parse_time(w.ready_since);
      if (slurm_ok && !going && w.ready && since && *since + kUnregisteredGrace <= now) {
        runtime_.events().warning(self, "SlurmNodeNotRegistered",
                                  "Pod " + w.name + " has been ready for " +
                                      std::to_string(kUnregisteredGrace.count()) +
                                      " s but Slurm has no node " + w.hostname + ": replacing it");
        delete_pod(w, "Slurm never registered its node " + w.hostname);
      }
      continue;
    }
    const std::string base = node->base_state();
    slurm_idle += base == "IDLE" ? 1 : 0;
    slurm_allocated += base == "ALLOCATED" || base == "MIXED" ? 1 : 0;
    slurm_down += base == "DOWN" ? 1 : 0;
    slurm_drain += node->drain() ? 1 : 0;

    if (!going && !w.kube_node.empty() && w.phase == "Running") {
      const std::string key = pod_key(ns, w.name);
      const auto kube_node = cache_.get(kube::resources::nodes(), w.kube_node);
      const bool cordoned =
          kube_node && kube_node->doc.value("/spec/unschedulable"_json_pointer, false);
      const bool admin = !node->reason.empty() && !operator_reason(node->reason);
      if (cordoned && !admin) {
        const std::string reason = cordon_reason(kube_node->doc, key);
        if (!node->drain() || node->reason != reason) {
          if (auto drained = client->drain(w.hostname, reason); drained) {
            runtime_.events().normal(self, "NodeCordon",
                                     "Kubernetes node " + w.kube_node + " is cordoned: drained " +
                                         w.hostname + " (pod " + w.name + ")");
          } else {
            block("SlurmUpdateFailed", "draining " + w.hostname + ": " + drained.error().message);
          }
        }
        set_pod_cordon(w, true);
      } else if (!cordoned) {
        if (node->drain() && operator_reason(node->reason)) {
          if (auto undrained = client->undrain(w.hostname); undrained) {
            runtime_.events().normal(self, "NodeUncordon",
                                     "Undrained " + w.hostname + " (pod " + w.name +
                                         "): the operator's drain no longer applies");
          } else {
            block("SlurmUpdateFailed",
                  "undraining " + w.hostname + ": " + undrained.error().message);
          }
        } else if (node->has("DOWN") && !node->has("NOT_RESPONDING") &&
                   operator_reason(node->reason) && w.ready) {
          // Down from a previous pod's preStop; this pod's slurmd runs.
          (void)client->resume(w.hostname);
        }
        set_pod_cordon(w, false);
      }
      if (kube_node &&
          runtime_.options().mirror_slurm_drains != OperatorOptions::DrainMirror::kNone) {
        mirror_admin_drain(
            runtime_, *kube_node, w.hostname, *node, admin && node->drain(),
            runtime_.options().mirror_slurm_drains == OperatorOptions::DrainMirror::kTaint);
      }
      // The pod <-> node link, in the node's comment.
      const std::string info = build::pod_info(n, w.name, w.kube_node).dump();
      slurm::NodeUpdate link;
      if (node->comment != info) {
        link.comment = info;
      }
      if (kube_node) {
        const std::string topology = annotation(kube_node->doc, api::kAnnotationNodeTopologySpec);
        // Never an empty topology: it would unset what the admin configured.
        if (!topology.empty() && topology != node->topology) {
          link.topology = topology;
        }
      }
      if (kube_node) {
        // The Node's features.slinky.slurm.net/spec as k8s/<feature>; the node's other
        // features (its NodeSet's, the admin's) stay.
        const auto wanted = node_features(
            annotation(kube_node->doc, api::kAnnotationNodeFeaturesSpec), node->features);
        if (wanted != node->features) {
          link.features = wanted;
          link.active_features = node_features(
              annotation(kube_node->doc, api::kAnnotationNodeFeaturesSpec), node->active_features);
        }
      }
      if (link.comment || link.topology || link.features) {
        (void)client->update_node(w.hostname, link);
      }
    }

    // Slurm → the pod: conditions and the pod-protect label; a pod deleted just now would
    // answer 404, or take a write it is about to lose.
    if (deleted.count(w.name) != 0) {
      continue;
    }
    const json& pod = *doc_of[w.name];
    const std::vector<std::string> want_types = slurm_condition_types(*node);
    json patch_conditions = json::array();
    std::set<std::string> have;
    if (const auto status = pod.find("status");
        status != pod.end() && status->contains("conditions")) {
      for (const auto& c : (*status)["conditions"]) {
        const std::string t = c.value("type", "");
        if (!t.starts_with(kConditionPrefix)) {
          continue;
        }
        have.insert(t);
        const bool wanted = std::find(want_types.begin(), want_types.end(), t) != want_types.end();
        if (!wanted) {
          patch_conditions.push_back({{"type", t}, {"$patch", "delete"}});
        } else if (c.value("message", "") != node->reason) {
          patch_conditions.push_back({{"type", t},
                                      {"status", "True"},
                                      {"message", node->reason},
                                      {"lastTransitionTime", c.value("lastTransitionTime", "")}});
        }
      }
    }
    for (const auto& t : want_types) {
      if (have.count(t) == 0) {
        patch_conditions.push_back({{"type", t},
                                    {"status", "True"},
                                    {"message", node->reason},
                                    {"lastTransitionTime", Runtime::now()}});
      }
    }
    if (!patch_conditions.empty()) {
      (void)runtime_.kube().patch(kube::resources::pods(), ns, w.name,
                                  kube::PatchType::kStrategicMerge,
                                  {{"status", {{"conditions", patch_conditions}}}}, "status");
    }
    const bool protected_now = label(pod, api::kLabelNodeSetPodProtect) == "true";
    const bool protect_wanted = protect && node->busy();
    if (protected_now != protect_wanted) {
      (void)runtime_.kube().patch(
          kube::resources::pods(), ns, w.name, kube::PatchType::kMerge,
          {{"metadata",
            {{"labels",
              {{api::kLabelNodeSetPodProtect, protect_wanted ? json("true") : json(nullptr)}}}}}});
    }
  }

  // pruneSlurmNodeRecords: NodeNotFound: the Slurm record of a pod of this NodeSet that is gone
  // (its comment names the NodeSet, no pod has its name, no slurmd answers for it, no job on
  // it) is deleted, so sinfo lists what exists. Never a record a pod is coming back to.
  (void)hold_finalizer(*doc, api::kFinalizerNodeSetSlurmNodes,
                       n.spec.prune_slurm_node_records == "NodeNotFound");
  if (slurm_ok && n.spec.prune_slurm_node_records == "NodeNotFound") {
    std::set<std::string> hostnames = fresh_hostnames;
    for (const auto& w : pods) {
      hostnames.insert(w.hostname);
    }
    for (const auto& [name, node] : nodes) {
      const json info = json::parse(node.comment, nullptr, false);
      if (hostnames.count(name) != 0 || !info.is_object() ||
          info.value("nodeSetUID", "") != n.metadata.uid || node.busy() ||
          !(node.has("DOWN") || node.has("NOT_RESPONDING"))) {
        continue;
      }
      if (auto removed = client->delete_node(name); removed) {
        runtime_.events().normal(
            self, "DefunctSlurmNodePruned",
            "Deleted Slurm node " + name + ": its pod " + info.value("podName", "") + " is gone");
      }
    }
  }

  // pinToNode: where each ordinal runs, kept while its pod is away and its node exists.
  json ordinal_to_node = json::object();
  if (n.spec.pin_to_node && !daemon) {
    for (const auto& [ordinal, node] : n.status.ordinal_to_node) {
      int64_t number = -1;
      const auto [end, ec] =
          std::from_chars(ordinal.data(), ordinal.data() + ordinal.size(), number);
      if (ec == std::errc() && number < want && cache_.get(kube::resources::nodes(), node)) {
        ordinal_to_node[ordinal] = node;
      }
    }
    for (const auto& w : active) {
      if (w.ordinal >= 0 && w.ordinal < want && !w.kube_node.empty() && w.phase == "Running") {
        ordinal_to_node[std::to_string(w.ordinal)] = w.kube_node;
      }
    }
  }

  // Status and readiness.
  const auto replicas = static_cast<int64_t>(active.size());
  json status = {{"replicas", replicas},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"updatedReplicas", updated},
                 {"unavailableReplicas", std::max<int64_t>(0, want - available)},
                 {"desired", want},
                 {"slurmIdle", slurm_idle},
                 {"slurmAllocated", slurm_allocated},
                 {"slurmDown", slurm_down},
                 {"slurmDrain", slurm_drain},
                 {"nodeSetHash", revision},
                 {"ordinalToNode", ordinal_to_node},
                 {"selector", std::string(api::kLabelName) + "=slurmd," +
                                  std::string(api::kLabelInstance) + "=" + n.metadata.name}};
  const json old_status = doc->doc.value("status", json::object());
  bool status_changed = false;
  for (const auto& [k, v] : status.items()) {
    if (!old_status.contains(k) || old_status[k] != v) {
      status_changed = true;
    }
  }

  const std::string stamp = Runtime::now();
  if (blocked.empty()) {
    set_condition(conditions,
                  {"DeletionBlocked", "False", "NotBlocked", "", n.metadata.generation, ""}, stamp);
  } else {
    std::string message;
    for (const auto& b : blocked) {
      message += message.empty() ? "" : "; ";
      message += b;
    }
    set_condition(conditions,
                  {"DeletionBlocked", "True", blocked_reason, message, n.metadata.generation, ""},
                  stamp);
  }
  if (reservation) {
    set_condition(conditions, *reservation, stamp);
  } else {
    std::erase_if(conditions,
                  [](const api::Condition& c) { return c.type == "ReservationCreated"; });
  }
  set_condition(
      conditions,
      {"SlurmReachable", slurm_ok ? "True" : (slurm_waiting ? "Unknown" : "False"),
       slurm_ok ? "Responding"
                : (slurm_reason == "WaitingForSlurm"
                       ? "NotYetRead"
                       : (slurm_reason == "NoSlurmClient" ? "NoSlurmClient" : "Unreachable")),
       slurm_ok ? "" : slurm_problem, n.metadata.generation, ""},
      stamp);

  Readiness readiness;
  kube::ReconcileOutcome next = after(std::chrono::seconds(60));
  if (!blocked.empty()) {
    readiness = {false, slurm_waiting ? slurm_reason : "DeletionBlocked",
                 find_condition(conditions, "DeletionBlocked")->message};
    next = after(std::chrono::seconds(5));
  } else if (!create_problem.empty()) {
    readiness = {false, "CreateFailed", create_problem};
    next = retry();
  } else if (!failing.empty()) {
    readiness = {false, "PodsFailing", failing};
    next = after(std::chrono::seconds(30));
  } else if (!slurm_ok) {
    readiness = {false, slurm_reason, slurm_problem};
    next = after(std::chrono::seconds(5));
  } else if (reservation && reservation->reason == "RemovalFailed") {
    readiness = {false, "RemovalFailed", reservation->message};
    next = after(std::chrono::seconds(5));
  } else if (!draining.empty()) {
    std::string names;
    for (const auto& d : draining) {
      names += names.empty() ? "" : ", ";
      names += d;
    }
    readiness = {false, "Draining", "waiting for the jobs on " + names + " to end"};
    next = after(std::chrono::seconds(30));
  } else if (window_opens && replicas == want && ready == want && terminating == 0) {
    readiness = {false, "UpdateScheduled",
                 std::to_string(want - updated) +
                     " pods wait for the maintenance window: " + reservation->message};
    next = after(std::clamp<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(*window_opens - now) +
            std::chrono::seconds(1),
        std::chrono::seconds(1), std::chrono::seconds(60)));
  } else if (replicas != want || ready != want || updated != want || terminating > 0) {
    readiness = {false, "Progressing",
                 progress_message(replicas, want, ready, updated, terminating, revision)};
    if (ready != available) {
      next = after(std::chrono::seconds(n.spec.min_ready_seconds + 1));
    }
  } else {
    readiness = {true, "AllReady", std::to_string(want) + " pods ready and registered in Slurm"};
  }
  if (auto published = runtime_.publish(type, n.metadata, before, std::move(conditions), readiness,
                                        status, status_changed);
      !published) {
    return fail("writing status: " + published.error().message);
  }
  return next;
}

Result<Done, std::string> NodeSetReconciler::hold_finalizer(const kube::Document& nodeset,
                                                            std::string_view finalizer, bool hold) {
  if (has_finalizer(nodeset.doc, finalizer) == hold) {
    return Done{};
  }
  json finalizers = nodeset.doc.value("/metadata/finalizers"_json_pointer, json::array());
  const std::string name(finalizer);
  if (hold) {
    finalizers.push_back(name);
  } else {
    finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), name), finalizers.end());
  }
  // With the resourceVersion the patch fails on a concurrent change instead of losing it.
  json patch = json::object();
  patch["metadata"]["finalizers"] = finalizers;
  patch["metadata"]["resourceVersion"] = nodeset.meta.resource_version;
  auto patched = runtime_.kube().patch(resources::nodesets(), nodeset.meta.namespace_name,
                                       nodeset.meta.name, kube::PatchType::kMerge, patch);
  if (!patched) {
    return fail(patched.error().message);
  }
  return Done{};
}

Result<std::pair<slurm::Time, slurm::Time>, std::string> NodeSetReconciler::sync_reservation(
    slurm::Client& client, const slurm::Reservation& wanted, const kube::ObjectReference& self) {
  auto got = client.get_reservation(wanted.name);
  if (!got && got.error().kind == slurm::ErrorKind::kNotFound) {
    if (auto created = client.create_reservation(wanted); !created) {
      return fail("creating Slurm reservation " + wanted.name + ": " + created.error().message);
    }
    runtime_.events().normal(self, "CreatedReservation",
                             "Created Slurm maintenance reservation " + wanted.name + " on " +
                                 wanted.nodes + " from " + kube::format_time(*wanted.start_time) +
                                 " to " + kube::format_time(*wanted.end_time));
    return std::pair{*wanted.start_time, *wanted.end_time};
  }
  if (!got) {
    return fail("reading Slurm reservation " + wanted.name + ": " + got.error().message);
  }
  // Nodes follow the outdated pods. Slurm moves a recurring window on by itself, so only a
  // one-time window that has not begun follows the spec's times.
  const auto have = slurm::expand_hostlist(got->nodes).value_or(std::vector<std::string>{});
  const auto want = slurm::expand_hostlist(wanted.nodes).value_or(std::vector<std::string>{});
  slurm::ReservationUpdate update;
  if (std::set<std::string>(have.begin(), have.end()) !=
      std::set<std::string>(want.begin(), want.end())) {
    update.nodes = wanted.nodes;
  }
  const auto now = std::chrono::system_clock::now();
  if (!recurring_reservation(wanted.flags) && got->start_time && *got->start_time > now &&
      (got->start_time != wanted.start_time || got->end_time != wanted.end_time)) {
    update.start_time = wanted.start_time;
    update.end_time = wanted.end_time;
  }
  if (update.nodes || update.start_time) {
    if (auto updated = client.update_reservation(wanted.name, update); !updated) {
      return fail("updating Slurm reservation " + wanted.name + ": " + updated.error().message);
    }
    got = client.get_reservation(wanted.name);
    if (!got) {
      return fail("reading Slurm reservation " + wanted.name + ": " + got.error().message);
    }
  }
  return std::pair{got->start_time.value_or(*wanted.start_time),
                   got->end_time.value_or(*wanted.end_time)};
}

Result<Done, std::string> NodeSetReconciler::release_reservation(
    slurm::Client& client, const std::string& name, const kube::ObjectReference& self) {
  auto removed = client.delete_reservation(name);
  if (!removed && removed.error().kind != slurm::ErrorKind::kNotFound) {
    return fail("deleting Slurm reservation " + name + ": " + removed.error().message);
  }
  if (removed) {
    runtime_.events().normal(self, "DeletedReservation",
                             "Deleted Slurm maintenance reservation " + name);
  }
  return Done{};
}

// A NodeSet being deleted keeps its finalizer until its maintenance reservation is gone; when
// Slurm cannot be asked it waits (the finalizer can be removed by hand after deleting the
// reservation with scontrol).
kube::ReconcileOutcome NodeSetReconciler::finish_deletion(const kube::Document& nodeset) {
  const bool reservation = has_finalizer(nodeset.doc, api::kFinalizerNodeSetReservation);
  const bool slurm_nodes = has_finalizer(nodeset.doc, api::kFinalizerNodeSetSlurmNodes);
  if (!reservation && !slurm_nodes) {
    return settled();
  }
  auto decoded = api::decode_nodeset(nodeset.doc);
  if (!decoded) {
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false);
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetSlurmNodes, false);
    return settled();
  }
  if (slurm_nodes) {
    if (auto wait = remove_slurm_nodes(nodeset, *decoded)) {
      return *wait;
    }
    return settled();  // the patch that dropped the finalizer brings the next reconcile
  }
  const kube::ObjectReference self{resources::nodesets().api_version(), resources::nodesets().kind,
                                   nodeset.meta.namespace_name, nodeset.meta.name,
                                   nodeset.meta.uid};
  const std::string name = maintenance_reservation_name(*decoded);
  const auto client = runtime_.slurm().get(
      kube::object_key(nodeset.meta.namespace_name, decoded->spec.controller_ref.name));
  if (!client) {
    // No Controller (or no RestApi) left to reach Slurm through: nothing to wait for.
    runtime_.events().warning(self, "ReservationLeft",
                              "No Slurm client for Controller " +
                                  decoded->spec.controller_ref.name + ": reservation " + name +
                                  " is left for scontrol delete reservation=" + name);
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false);
    return settled();
  }
  if (auto released = release_reservation(*client, name, self); !released) {
    runtime_.events().warning(self, "ReservationNotDeleted", released.error());
    return after(std::chrono::seconds(10));
  }
  if (auto dropped = hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false); !dropped) {
    return retry();
  }
  return settled();
}

std::optional<kube::ReconcileOutcome> NodeSetReconciler::remove_slurm_nodes(
    const kube::Document& nodeset, const api::NodeSet& n) {
  const std::string& ns = nodeset.meta.namespace_name;
  const kube::ObjectReference self{resources::nodesets().api_version(), resources::nodesets().kind,
                                   ns, nodeset.meta.name, nodeset.meta.uid};
  // Bounded: a Slurm that cannot be reached, or a pod that will not go, never keeps a deleted
  // NodeSet for longer than this.
  constexpr auto kGiveUpAfter = std::chrono::minutes(3);
  const auto since = kube::parse_time(
      nodeset.doc.value("/metadata/deletionTimestamp"_json_pointer, std::string()));
  const bool given_up = since && std::chrono::system_clock::now() - *since > kGiveUpAfter;
  const auto drop = [&](const std::string& left) -> std::optional<kube::ReconcileOutcome> {
    log::info("nodeset.slurm_nodes_released",
              {{"nodeset", kube::object_key(ns, nodeset.meta.name)}, {"left", left}});
    if (!left.empty()) {
      runtime_.events().warning(self, "SlurmNodesLeft", left);
    }
    if (auto dropped = hold_finalizer(nodeset, api::kFinalizerNodeSetSlurmNodes, false); !dropped) {
      return retry();
    }
    return std::nullopt;
  };

  const std::string key = kube::object_key(ns, n.spec.controller_ref.name);
  // The whole cluster going (helm uninstall): the records go with slurmctld, nothing to wait for.
  if (const auto controller = cache_.get(resources::controllers(), key);
      !controller || controller->meta.deleting) {
    return drop("");
  }
  const auto client = runtime_.slurm().get(key);
  const auto feed = runtime_.slurm().feed(key);
  const bool reachable =
      client && feed && feed->health().synced && feed->health().consecutive_failures == 0;
  if (!reachable) {
    if (given_up) {
      return drop("Slurm could not be reached for " + std::to_string(kGiveUpAfter.count()) +
                  " min: the Slurm node records of this NodeSet are left for scontrol delete");
    }
    return after(std::chrono::seconds(5));
  }
  // Its pods first (garbage collection would take them only after the NodeSet is gone): each
  // one's preStop marks its Slurm node down, and a record is deleted only once its slurmd is.
  size_t pods_left = 0;
  for (const auto& p : cache_.list(kube::resources::pods(), ns)) {
    const kube::OwnerReference* owner = p->meta.controller_ref();
    if (owner == nullptr || owner->uid != nodeset.meta.uid) {
      continue;
    }
    ++pods_left;
    if (!p->meta.deleting) {
      kube::DeleteOptions options;
      options.precondition_uid = p->meta.uid;
      (void)runtime_.kube().remove(kube::resources::pods(), ns, p->meta.name, options);
    }
  }
  if (pods_left > 0 && !given_up) {
    log::info("nodeset.deletion_waits_for_pods",
              {{"nodeset", kube::object_key(ns, nodeset.meta.name)},
               {"pods", std::to_string(pods_left)}});
    return after(std::chrono::seconds(2));
  }
  std::string kept;
  // A record is the NodeSet's when its comment names the NodeSet, or, without such a comment (a
  // slurmd that registered again clears it), when it carries the NodeSet's feature, which each
  // of its slurmd registers with and no other NodeSet of the cluster can.
  const std::string feature = n.slurm_name();
  const slurm::SlurmSnapshot slurm_now = feed->snapshot();
  for (const auto& [name, node] : *slurm_now.nodes) {
    const json info = json::parse(node.comment, nullptr, false);
    const bool linked = info.is_object() && info.contains("nodeSetUID");
    const bool ours = linked ? info.value("nodeSetUID", "") == nodeset.meta.uid
                             : std::find(node.features.begin(), node.features.end(), feature) !=
                                   node.features.end();
    if (!ours) {
      continue;
    }
    if (node.busy()) {
      kept += (kept.empty() ? "" : ", ") + name;
      continue;
    }
    if (auto removed = client->delete_node(name); removed) {
      runtime_.events().normal(self, "SlurmNodeDeleted",
                               "Deleted Slurm node " + name + ": its NodeSet is deleted");
    } else {
      kept += (kept.empty() ? "" : ", ") + name;
    }
  }
  return drop(kept.empty() ? "" : "Slurm node records left (busy or not deleted): " + kept);
}

}  // namespace tightrope::op
