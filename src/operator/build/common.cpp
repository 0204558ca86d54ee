#include "operator/build/common.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include "api/well_known.hpp"

namespace tightrope::op::build {

using nlohmann::json;

std::string slurm_image(std::string_view component) {
  return std::string(kImageRegistry) + std::string(component) + ":" + std::string(kSlurmImageTag);
}

json owner_reference(const Owner& owner) {
  const std::string_view api_version =
      owner.kind == "HealthCheck" ? api::kTightropeApiVersion : api::kApiVersion;
  return {{"apiVersion", api_version}, {"kind", owner.kind}, {"name", owner.name},
          {"uid", owner.uid},          {"controller", true}, {"blockOwnerDeletion", true}};
}

json component_labels(std::string_view name, std::string_view instance,
                      std::string_view component) {
  return {{api::kLabelName, name},
          {api::kLabelInstance, instance},
          {api::kLabelComponent, component},
          {api::kLabelPartOf, "slurm"},
          {api::kLabelManagedBy, "slurm-operator"}};
}

json selector_labels(std::string_view name, std::string_view instance) {
  return {{api::kLabelName, name}, {api::kLabelInstance, instance}};
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

json object_meta(std::string_view name, std::string_view namespace_name, const json& labels,
                 const Owner& owner) {
  return {{"name", name},
          {"namespace", namespace_name},
          {"labels", labels},
          {"ownerReferences", json::array({owner_reference(owner)})}};
}

namespace {

// Lists whose entries Kubernetes identifies by name (strategic merge's patchMergeKey).
bool merged_by_name(const std::string& field) {
  static const std::set<std::string> fields = {
      "containers", "initContainers", "ephemeralContainers", "volumes",       "volumeMounts",
      "env",        "ports",          "volumeDevices",       "resourceClaims"};
  return fields.count(field) != 0;
}

// Lists without one identity, where the user's entries add to the operator's.
bool appended(const std::string& field) {
  return field == "tolerations" || field == "imagePullSecrets" || field == "hostAliases";
}

json merge_list(const std::string& field, const json& base, const json& user) {
  if (appended(field)) {
    json out = base;
    for (const auto& item : user) {
      out.push_back(item);
    }
    return out;
  }
  if (!merged_by_name(field)) {
    return user;
  }
  json out = base;
  for (const auto& item : user) {
    bool merged = false;
    if (item.is_object() && item.contains("name")) {
      for (auto& existing : out) {
        if (existing.is_object() && existing.value("name", json()) == item["name"]) {
          existing = merge_over(existing, item);
          merged = true;
          break;
        }
      }
    }
    if (!merged) {
      out.push_back(item);
    }
  }
  return out;
}

}  // namespace

json merge_over(const json& base, const json& user) {
  if (!base.is_object() || !user.is_object()) {
    return user.is_null() ? base : user;
  }
  json out = base;
  for (const auto& [field, value] : user.items()) {
    if (value.is_null()) {
      continue;
    }
    const auto it = out.find(field);
    if (it == out.end()) {
      out[field] = value;
    } else if (it->is_object() && value.is_object()) {
      *it = merge_over(*it, value);
    } else if (it->is_array() && value.is_array()) {
      *it = merge_list(field, *it, value);
    } else {
      *it = value;
    }
  }
  return out;
}

json logfile_sidecar(std::string_view file, const json& user) {
  json mount = json::object();
  mount["name"] = "logfile";
  mount["mountPath"] = "/var/log/slurm";
  json sidecar = json::object();
  sidecar["name"] = "logfile";
  sidecar["image"] = kHelperImage;
  sidecar["restartPolicy"] = "Always";
  // The shell is the container's PID 1, which ignores a SIGTERM it has no handler for: without
  // the trap, and cat waited for in the background, every pod took its whole grace period to end.
  sidecar["command"] = json::array(
      {"sh", "-c",
       "trap 'exit 0' TERM; f=/var/log/slurm/" + std::string(file) +
           "; while true; do [ -p $f ] || { rm -f $f; mkfifo -m 0666 $f; }; cat $f & wait $!; "
           "done"});
  sidecar["volumeMounts"] = json::array({mount});
  sidecar["securityContext"] = unprivileged_daemon();
  return merge_over(sidecar, user);
}

json unprivileged_daemon() {
  return {{"allowPrivilegeEscalation", false},
          {"capabilities", {{"drop", json::array({"ALL"})}}},
          {"readOnlyRootFilesystem", true}};
}

json logfile_volume() {
  json volume = json::object();
  volume["name"] = "logfile";
  volume["emptyDir"]["medium"] = "Memory";
  return volume;
}

json pod_template(const json& labels, const json& annotations, const json& base_spec,
                  const api::PodTemplate& user) {
  json meta_labels = json::object();
  for (const auto& [k, v] : user.metadata.labels) {
    meta_labels[k] = v;
  }
  meta_labels.update(labels);  // the operator's labels select the pods: they win
  json meta_annotations = json::object();
  for (const auto& [k, v] : user.metadata.annotations) {
    meta_annotations[k] = v;
  }
  meta_annotations.update(annotations);
  json metadata = {{"labels", meta_labels}};
  if (!meta_annotations.empty()) {
    metadata["annotations"] = meta_annotations;
  }
  return {{"metadata", metadata}, {"spec", merge_over(base_spec, user.spec)}};
}

json service(std::string_view name, std::string_view namespace_name, const json& labels,
             const Owner& owner, const json& base_spec, const api::ServiceTemplate& user) {
  json meta = object_meta(name, namespace_name, labels, owner);
  for (const auto& [k, v] : user.metadata.labels) {
    if (!meta["labels"].contains(k)) {
      meta["labels"][k] = v;
    }
  }
  if (!user.metadata.annotations.empty()) {
    meta["annotations"] = user.metadata.annotations;
  }
  json spec = merge_over(base_spec, user.spec);
  if (spec.contains("ports") && !spec["ports"].empty()) {
    if (user.port != 0) {
      spec["ports"][0]["port"] = user.port;
    }
    if (user.node_port != 0) {
      spec["ports"][0]["nodePort"] = user.node_port;
    }
  }
  return {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", meta}, {"spec", spec}};
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : separator) + p;
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr);
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(length) * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace tightrope::op::build
