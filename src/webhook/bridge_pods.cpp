#include "webhook/bridge_pods.hpp"

#include <algorithm>
#include <exception>

#include "bridge/objects.hpp"
#include "bridge/well_known.hpp"
#include "bridge/workload.hpp"

namespace tightrope::webhook {

namespace {

using nlohmann::json;

bool managed_namespace(const std::string& ns, const bridge::BridgeConfig& config,
                       const NamespaceLabels& namespaces) {
  const auto& listed = config.managed_namespaces;
  if (std::find(listed.begin(), listed.end(), ns) != listed.end()) {
    return true;
  }
  if (config.managed_namespace_selector.empty() || !namespaces) {
    return false;
  }
  const auto labels = namespaces(ns);
  if (!labels) {
    return false;
  }
  return std::all_of(config.managed_namespace_selector.begin(),
                     config.managed_namespace_selector.end(), [&](const auto& want) {
                       const auto it = labels->find(want.first);
                       return it != labels->end() && it->second == want.second;
                     });
}

bridge::Annotations annotations(const json& object) {
  return bridge::annotations_of(object, {std::string(bridge::kJobAnnotationPrefix)});
}

// The job options of `object`'s annotations, as errors on its fields.
api::FieldErrors option_errors(const json& object) {
  bridge::JobOptions options;
  return bridge::parse_job_options(annotations(object), &options);
}

bool tolerates(const json& spec, const std::string& scheduler) {
  const auto it = spec.find("tolerations");
  if (it == spec.end() || !it->is_array()) {
    return false;
  }
  return std::any_of(it->begin(), it->end(), [&](const json& t) {
    return t.value("key", "") == bridge::kTaintManagedNode &&
           (t.value("operator", "") == "Exists" || t.value("value", "") == scheduler);
  });
}

void check_pod(const ReviewRequest& r, const bridge::BridgeConfig& config,
               const NamespaceLabels& namespaces, const std::string& ns, Verdict& v) {
  const json& pod = *r.object;
  const json spec = pod.value("spec", json::object());
  std::string scheduler = spec.value("schedulerName", "");
  json patch = json::array();
  if (r.operation == "CREATE" && (scheduler.empty() || scheduler == "default-scheduler") &&
      managed_namespace(ns, config, namespaces)) {
    patch.push_back({{"op", spec.contains("schedulerName") ? "replace" : "add"},
                     {"path", "/spec/schedulerName"},
                     {"value", config.scheduler_name}});
    scheduler = config.scheduler_name;
  }
  if (scheduler != config.scheduler_name) {
    return;  // not the bridge's
  }
  api::FieldErrors errors = option_errors(pod);
  if (r.operation == "CREATE") {
    const json meta = pod.value("metadata", json::object());
    if (meta.contains("labels") && meta["labels"].contains(std::string(bridge::kLabelJobId))) {
      errors.push_back({"metadata.labels[" + std::string(bridge::kLabelJobId) + "]",
                        "is set by slurm-bridge when it submits the pod's Slurm job"});
    }
    if (meta.contains("annotations") &&
        meta["annotations"].contains(std::string(bridge::kAnnotationSlurmNode))) {
      errors.push_back({"metadata.annotations[" + std::string(bridge::kAnnotationSlurmNode) + "]",
                        "is set by slurm-bridge when Slurm allocates the pod's node"});
    }
    if (spec.contains("resourceClaims") && spec["resourceClaims"].is_array() &&
        !spec["resourceClaims"].empty()) {
      errors.push_back({"spec.resourceClaims",
                        "slurm-bridge cannot place pods that claim DRA devices: ask for "
                        "nvidia.com/gpu, or the gres job option"});
    }
    if (spec.contains("nodeName")) {
      // A pod that names its Node would run without Slurm's allocation.
      patch.push_back({{"op", "remove"}, {"path", "/spec/nodeName"}});
    }
    if (!tolerates(spec, config.scheduler_name)) {
      const json toleration = {{"key", std::string(bridge::kTaintManagedNode)},
                               {"operator", "Equal"},
                               {"value", config.scheduler_name},
                               {"effect", "NoExecute"}};
      if (spec.contains("tolerations") && spec["tolerations"].is_array()) {
        patch.push_back({{"op", "add"}, {"path", "/spec/tolerations/-"}, {"value", toleration}});
      } else {
        patch.push_back(
            {{"op", "add"}, {"path", "/spec/tolerations"}, {"value", json::array({toleration})}});
      }
    }
  }
  if (!errors.empty()) {
    deny_invalid(v, std::move(errors));
    return;
  }
  if (!patch.empty()) {
    v.patch = std::move(patch);
  }
}

void check_job(const ReviewRequest& r, const bridge::BridgeConfig& config,
               const NamespaceLabels& namespaces, const std::string& ns, Verdict& v) {
  const json& job = *r.object;
  const std::string scheduler =
      job.value("/spec/template/spec/schedulerName"_json_pointer, std::string());
  const bool bridge_job = scheduler == config.scheduler_name ||
                          ((scheduler.empty() || scheduler == "default-scheduler") &&
                           managed_namespace(ns, config, namespaces));
  if (!bridge_job) {
    return;
  }
  api::FieldErrors errors = option_errors(job);
  if (r.operation == "UPDATE" && errors.empty()) {
    return;
  }
  if (!errors.empty()) {
    deny_invalid(v, std::move(errors));
  }
}

}  // namespace

Verdict admit_bridge(const json& review, const bridge::BridgeConfig& config,
                     const NamespaceLabels& namespaces) {
  Verdict v;
  try {
    ReviewRequest r;
    if (!read_review(review, r, v)) {
      return v;
    }
    if ((r.operation != "CREATE" && r.operation != "UPDATE") || !r.sub_resource.empty()) {
      return v;
    }
    if (r.group.empty() && r.kind == "Pod") {
      check_pod(r, config, namespaces, v.namespace_name, v);
    } else if (r.group == "batch" && r.kind == "Job") {
      check_job(r, config, namespaces, v.namespace_name, v);
    }
  } catch (const std::exception& e) {
    v.allowed = false;
    v.code = 500;
    v.reason = "InternalError";
    v.message = std::string("slurm-bridge admission failed: ") + e.what();
  }
  return v;
}

Verdict admit_bridge(std::string_view body, const bridge::BridgeConfig& config,
                     const NamespaceLabels& namespaces) {
  json review;
  if (Verdict v = parse_review_body(body, review); !v.allowed) {
    return v;
  }
  return admit_bridge(review, config, namespaces);
}

}  // namespace tightrope::webhook
