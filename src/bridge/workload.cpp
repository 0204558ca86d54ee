#include "bridge/workload.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "bridge/well_known.hpp"
#include "kube/quantity.hpp"

namespace tightrope::bridge {

namespace {

using nlohmann::json;

std::optional<int64_t> whole_number(std::string_view text) {
  int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

bool has_space(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

// "gpu", "gpu:2", "gpu:a100:2": a GRES name, an optional type and an optional count.
bool gres_spec(std::string_view text) {
  if (text.empty() || has_space(text) || text.front() == ':' || text.back() == ':') {
    return false;
  }
  return std::count(text.begin(), text.end(), ':') <= 2 && text.find(',') == std::string::npos;
}

std::string in_quotes(std::string_view text) {
  return '"' + std::string(text) + '"';
}

std::string field_of(std::string_view key) {
  return "metadata.annotations[" + std::string(key) + "]";
}

constexpr std::array<std::string_view, 18> kOptionNames = {
    "account",  "constraints", "cpu-per-task", "exclusive",    "gres",      "group-id",
    "job-name", "licenses",    "max-nodes",    "mem-per-node", "min-nodes", "partition",
    "priority", "qos",         "reservation",  "timelimit",    "user-id",   "wckey"};

std::string known_options() {
  std::string out;
  for (const auto name : kOptionNames) {
    out.append(out.empty() ? "" : ", ").append(name);
  }
  return out;
}

}  // namespace

std::optional<GroupKey> GroupKey::parse(std::string_view key) {
  const size_t a = key.find('/');
  const size_t b = a == std::string_view::npos ? a : key.find('/', a + 1);
  if (b == std::string_view::npos || a == 0 || b == a + 1 || b + 1 == key.size()) {
    return std::nullopt;
  }
  return GroupKey{std::string(key.substr(0, a)), std::string(key.substr(a + 1, b - a - 1)),
                  std::string(key.substr(b + 1))};
}

GroupKey group_of(const Pod& pod, const BatchJob* job) {
  const std::string& ns = pod.meta.namespace_name;
  if (const std::string* group = pod.meta.label(kLabelPodGroup); group != nullptr) {
    return {ns, "PodGroup", *group};
  }
  const std::string* lws = pod.meta.label(kLabelLwsName);
  const std::string* index = pod.meta.label(kLabelLwsGroupIndex);
  if (lws != nullptr && index != nullptr) {
    return {ns, "LeaderWorkerSet", *lws + "-" + *index};
  }
  const kube::OwnerReference* owner = pod.meta.controller_ref();
  if (job != nullptr && owner != nullptr && owner->kind == "Job" && owner->name == job->meta.name &&
      job->gang()) {
    return {ns, "Job", job->meta.name};
  }
  return {ns, "Pod", pod.meta.name};
}

int64_t group_size(const GroupKey& group, const Pod& any_pod, const BatchJob* job,
                   std::optional<int64_t> pod_group_min_member) {
  if (group.kind == "Job" && job != nullptr) {
    return job->completions;
  }
  if (group.kind == "LeaderWorkerSet") {
    const std::string* size = any_pod.annotation(kAnnotationLwsSize);
    return std::max<int64_t>(1, size != nullptr ? whole_number(*size).value_or(1) : 1);
  }
  if (group.kind == "PodGroup") {
    return std::max<int64_t>(1, pod_group_min_member.value_or(1));
  }
  return 1;
}

api::FieldErrors parse_job_options(const Annotations& annotations, JobOptions* out) {
  api::FieldErrors errors;
  for (const auto& entry : annotations) {
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    if (!key.starts_with(kJobAnnotationPrefix)) {
      continue;
    }
    const std::string_view name = std::string_view(key).substr(kJobAnnotationPrefix.size());
    const auto bad = [&](const std::string& why) { errors.push_back({field_of(key), why}); };
    const auto text = [&](std::string* into) {
      if (value.empty() || has_space(value)) {
        bad("must be a non-empty word without spaces, got " + in_quotes(value));
      } else {
        *into = value;
      }
    };
    const auto positive = [&](std::optional<int64_t>* into, const char* what) {
      const auto n = whole_number(value);
      if (!n || *n < 1) {
        bad(std::string("must be a whole number of ") + what + " above 0, got " + in_quotes(value));
      } else {
        *into = n;
      }
    };
    if (name == "account") {
      text(&out->account);
    } else if (name == "constraints") {
      text(&out->constraints);
    } else if (name == "cpu-per-task") {
      const auto milli = kube::parse_quantity_milli(value);
      if (!milli || *milli <= 0) {
        bad(R"(must be a CPU quantity above 0 ("2", "500m"), got )" + in_quotes(value));
      } else {
        out->cpu_per_task = (*milli + 999) / 1000;
      }
    } else if (name == "exclusive") {
      if (value != "true" && value != "false") {
        bad(R"(must be "true" or "false", got )" + in_quotes(value));
      } else {
        out->exclusive = value == "true";
      }
    } else if (name == "gres") {
      if (!gres_spec(value)) {
        bad(R"(must be a GRES as name[:type][:count] ("gpu:2"), got )" + in_quotes(value));
      } else {
        out->gres = value;
      }
    } else if (name == "group-id") {
      text(&out->group_id);
    } else if (name == "job-name") {
      if (value.empty()) {
        bad("must not be empty");
      } else {
        out->job_name = value;
      }
    } else if (name == "licenses") {
      text(&out->licenses);
    } else if (name == "max-nodes") {
      positive(&out->max_nodes, "nodes");
    } else if (name == "mem-per-node") {
      const auto bytes = kube::parse_quantity(value);
      if (!bytes || *bytes <= 0) {
        bad(R"(must be a memory quantity above 0 ("4Gi"), got )" + in_quotes(value));
      } else {
        out->mem_per_node_mib = (*bytes + (1 << 20) - 1) >> 20;
      }
    } else if (name == "min-nodes") {
      positive(&out->min_nodes, "nodes");
    } else if (name == "partition") {
      text(&out->partition);
    } else if (name == "priority") {
      const auto n = whole_number(value);
      if (!n || *n < 0) {
        bad("must be a whole number, 0 or above, got " + in_quotes(value));
      } else {
        out->priority = n;
      }
    } else if (name == "qos") {
      text(&out->qos);
    } else if (name == "reservation") {
      text(&out->reservation);
    } else if (name == "timelimit") {
      positive(&out->time_limit_minutes, "minutes");
    } else if (name == "user-id") {
      text(&out->user_id);
    } else if (name == "wckey") {
      text(&out->wckey);
    } else {
      bad("is not a job option; known: " + known_options());
    }
  }
  if (out->min_nodes && out->max_nodes && *out->min_nodes > *out->max_nodes) {
    errors.push_back({field_of(std::string(kJobAnnotationPrefix) + "min-nodes"),
                      "must not be above max-nodes (" + std::to_string(*out->max_nodes) + ")"});
  }
  return errors;
}

std::string JobClaim::encode() const {
  return json{{"pods", pods}, {"group", group}}.dump();
}

std::optional<JobClaim> JobClaim::decode(std::string_view admin_comment) {
  if (admin_comment.empty() || admin_comment.front() != '{') {
    return std::nullopt;
  }
  const json doc = json::parse(admin_comment, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("pods") || !doc["pods"].is_array()) {
    return std::nullopt;
  }
  JobClaim claim;
  for (const auto& p : doc["pods"]) {
    if (p.is_string()) {
      claim.pods.push_back(p.get<std::string>());
    }
  }
  if (doc.contains("group") && doc["group"].is_string()) {
    claim.group = doc["group"].get<std::string>();
  }
  return claim;
}

Annotations job_annotations(const Pod& pod, const Annotations& workload) {
  Annotations out;
  for (const auto& [key, value] : pod.annotations) {
    if (key.starts_with(kJobAnnotationPrefix)) {
      out[key] = value;
    }
  }
  for (const auto& [key, value] : workload) {
    if (key.starts_with(kJobAnnotationPrefix)) {
      out[key] = value;
    }
  }
  return out;
}

tightrope::Result<slurm::ExternalJob, api::FieldErrors> to_external_job(
    const GroupKey& group, const std::vector<const Pod*>& pods, const Annotations& annotations,
    const JobDefaults& defaults, const BatchJob* batch_job) {
  JobOptions options;
  api::FieldErrors errors = parse_job_options(annotations, &options);
  if (!options.user_id.empty()) {
    const auto& allowed = defaults.allowed_users;
    const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
    if (!any && std::find(allowed.begin(), allowed.end(), options.user_id) == allowed.end()) {
      errors.push_back({field_of(std::string(kJobAnnotationPrefix) + "user-id"),
                        "namespace " + group.namespace_name + " may not run jobs as " +
                            in_quotes(options.user_id) + " (its annotation " +
                            std::string(kAnnotationNamespaceUsers) + " lists who it may)"});
    }
  }
  if (!errors.empty()) {
    return fail(std::move(errors));
  }
  Resources most;
  JobClaim claim{group.key(), {}};
  for (const Pod* pod : pods) {
    most.cpu_milli = std::max(most.cpu_milli, pod->requests.cpu_milli);
    most.memory_bytes = std::max(most.memory_bytes, pod->requests.memory_bytes);
    most.gpus = std::max(most.gpus, pod->requests.gpus);
    claim.pods.push_back(pod->meta.namespace_name + "/" + pod->meta.name);
  }
  slurm::ExternalJob job;
  job.name = options.job_name.empty() ? group.namespace_name + "/" + group.name : options.job_name;
  job.partition = options.partition.empty() ? defaults.partition : options.partition;
  job.account = options.account;
  job.qos = options.qos;
  job.reservation = options.reservation;
  job.constraints = options.constraints;
  job.licenses = options.licenses;
  job.wckey = options.wckey;
  job.user = options.user_id.empty() ? defaults.user : options.user_id;
  job.group = options.group_id;
  job.mcs_label = defaults.mcs_label;
  job.admin_comment = claim.encode();
  job.priority = options.priority;
  job.tasks = static_cast<int64_t>(pods.size());
  job.cpus_per_task =
      options.cpu_per_task.value_or(std::max<int64_t>(1, (most.cpu_milli + 999) / 1000));
  const int64_t memory_mib =
      options.mem_per_node_mib.value_or((most.memory_bytes + (1 << 20) - 1) >> 20);
  if (memory_mib > 0) {
    job.memory_per_cpu_mib = (memory_mib + job.cpus_per_task - 1) / job.cpus_per_task;
  }
  if (!options.gres.empty()) {
    job.tres_per_task = "gres/" + options.gres;
  } else if (most.gpus > 0) {
    job.tres_per_task = "gres/gpu:" + std::to_string(most.gpus);
  }
  job.exclusive = options.exclusive.value_or(true);
  if (job.exclusive) {
    job.tasks_per_node = 1;
    job.min_nodes = job.tasks;
    job.max_nodes = job.tasks;
  } else {
    job.min_nodes = 1;
    job.max_nodes = job.tasks;
  }
  job.min_nodes = options.min_nodes.value_or(job.min_nodes);
  job.max_nodes = std::max(job.min_nodes, options.max_nodes.value_or(job.max_nodes));
  if (options.time_limit_minutes) {
    job.time_limit = std::chrono::minutes(*options.time_limit_minutes);
  } else if (batch_job != nullptr && batch_job->active_deadline_seconds > 0) {
    job.time_limit = std::chrono::minutes((batch_job->active_deadline_seconds + 59) / 60);
  }
  return job;
}

}  // namespace tightrope::bridge
