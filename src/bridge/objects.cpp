#include "bridge/objects.hpp"

#include <algorithm>
#include <array>

#include "bridge/well_known.hpp"
#include "kube/quantity.hpp"

namespace tightrope::bridge {

namespace {

using simdjson::dom::element;

bool starts_with_any(std::string_view key, const auto& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [key](std::string_view p) { return key.starts_with(p); });
}

// The annotations of `object` kept by `keep`.
template <typename Keep>
Annotations read_annotations(element object, Keep keep) {
  Annotations out;
  simdjson::dom::object annotations;
  if (object["metadata"]["annotations"].get_object().get(annotations) != simdjson::SUCCESS) {
    return out;
  }
  for (const auto field : annotations) {
    std::string_view value;
    if (keep(field.key) && field.value.get_string().get(value) == simdjson::SUCCESS) {
      out.emplace(std::string(field.key), std::string(value));
    }
  }
  return out;
}

int64_t quantity_milli(element resources, std::string_view name) {
  const std::string_view text = kube::string_at(resources, name);
  return text.empty() ? 0 : kube::parse_quantity_milli(text).value_or(0);
}

int64_t quantity(element resources, std::string_view name) {
  const std::string_view text = kube::string_at(resources, name);
  return text.empty() ? 0 : kube::parse_quantity(text).value_or(0);
}

int64_t gpus_of(element resources) {
  return quantity(resources, "nvidia.com/gpu") + quantity(resources, "amd.com/gpu");
}

// What one container asks: its requests, else its limits (Kubernetes defaults the one to the
// other).
Resources container_needs(element container) {
  element requests;
  element limits;
  const bool has_requests = container["resources"]["requests"].get(requests) == simdjson::SUCCESS;
  const bool has_limits = container["resources"]["limits"].get(limits) == simdjson::SUCCESS;
  Resources r;
  const auto pick = [&](auto read, std::string_view name) -> int64_t {
    const int64_t requested = has_requests ? read(requests, name) : 0;
    return requested > 0 ? requested : (has_limits ? read(limits, name) : 0);
  };
  r.cpu_milli = pick(quantity_milli, "cpu");
  r.memory_bytes = pick(quantity, "memory");
  r.gpus = std::max(has_requests ? gpus_of(requests) : 0, has_limits ? gpus_of(limits) : 0);
  return r;
}

// Containers run together, init containers one at a time before them: a pod needs the larger
// of the two, plus its runtime class's overhead.
Resources pod_needs(element spec) {
  Resources containers;
  Resources init;
  simdjson::dom::array list;
  if (spec["containers"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element c : list) {
      const Resources r = container_needs(c);
      containers.cpu_milli += r.cpu_milli;
      containers.memory_bytes += r.memory_bytes;
      containers.gpus += r.gpus;
    }
  }
  if (spec["initContainers"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element c : list) {
      const Resources r = container_needs(c);
      init.cpu_milli = std::max(init.cpu_milli, r.cpu_milli);
      init.memory_bytes = std::max(init.memory_bytes, r.memory_bytes);
      init.gpus = std::max(init.gpus, r.gpus);
    }
  }
  Resources out{std::max(containers.cpu_milli, init.cpu_milli),
                std::max(containers.memory_bytes, init.memory_bytes),
                std::max(containers.gpus, init.gpus)};
  element overhead;
  if (spec["overhead"].get(overhead) == simdjson::SUCCESS) {
    out.cpu_milli += quantity_milli(overhead, "cpu");
    out.memory_bytes += quantity(overhead, "memory");
  }
  return out;
}

}  // namespace

const std::string* Pod::annotation(std::string_view key) const {
  const auto it = annotations.find(key);
  return it == annotations.end() ? nullptr : &it->second;
}

kube::DecodeResult decode_pod(element object, Pod* out) {
  if (auto ok = kube::decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  static constexpr std::array<std::string_view, 4> kKept = {
      kJobAnnotationPrefix, kAnnotationSlurmNode, kAnnotationLwsSize, kAnnotationCompletionIndex};
  out->annotations =
      read_annotations(object, [](std::string_view key) { return starts_with_any(key, kKept); });
  element spec;
  if (object["spec"].get(spec) != simdjson::SUCCESS) {
    return fail(std::string("the pod has no spec"));
  }
  out->scheduler_name = kube::string_at(spec, "schedulerName");
  out->node_name = kube::string_at(spec, "nodeName");
  std::string_view phase;
  out->phase = object["status"]["phase"].get_string().get(phase) == simdjson::SUCCESS
                   ? std::string(phase)
                   : std::string();
  out->requests = pod_needs(spec);
  int64_t grace = 0;
  if (spec["terminationGracePeriodSeconds"].get_int64().get(grace) == simdjson::SUCCESS) {
    out->termination_grace_seconds = grace;
  }
  simdjson::dom::array list;
  out->finalizers.clear();
  if (object["metadata"]["finalizers"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element f : list) {
      std::string_view name;
      if (f.get_string().get(name) == simdjson::SUCCESS) {
        out->finalizers.emplace_back(name);
      }
    }
  }
  out->finalizer = std::find(out->finalizers.begin(), out->finalizers.end(), kFinalizer) !=
                   out->finalizers.end();
  out->tolerations.clear();
  if (spec["tolerations"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element t : list) {
      out->tolerations.push_back(
          {std::string(kube::string_at(t, "key")), std::string(kube::string_at(t, "operator")),
           std::string(kube::string_at(t, "value")), std::string(kube::string_at(t, "effect"))});
    }
  }
  out->node_selector.clear();
  simdjson::dom::object selector;
  if (spec["nodeSelector"].get_object().get(selector) == simdjson::SUCCESS) {
    for (const auto field : selector) {
      std::string_view value;
      if (field.value.get_string().get(value) == simdjson::SUCCESS) {
        out->node_selector.emplace_back(field.key, value);
      }
    }
  }
  out->resource_claims =
      spec["resourceClaims"].get_array().get(list) == simdjson::SUCCESS && list.size() > 0;
  out->scheduled_message.clear();
  if (object["status"]["conditions"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element c : list) {
      if (kube::string_at(c, "type") == "PodScheduled") {
        out->scheduled_message = kube::string_at(c, "message");
      }
    }
  }
  return std::monostate{};
}

const std::string* Node::annotation(std::string_view key) const {
  const auto it = annotations.find(key);
  return it == annotations.end() ? nullptr : &it->second;
}

std::string Node::slurm_name() const {
  const std::string* label = meta.label(kLabelSlurmNodeName);
  return label != nullptr && !label->empty() ? *label : meta.name;
}

bool Node::external() const {
  return meta.label(kLabelExternalNode) != nullptr;
}

kube::DecodeResult decode_node(element object, Node* out) {
  if (auto ok = kube::decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  static constexpr std::array<std::string_view, 3> kKept = {
      kAnnotationExternalNodePartitions, kAnnotationTopology, kAnnotationCordonedBy};
  out->annotations =
      read_annotations(object, [](std::string_view key) { return starts_with_any(key, kKept); });
  bool unschedulable = false;
  out->unschedulable =
      object["spec"]["unschedulable"].get_bool().get(unschedulable) == simdjson::SUCCESS &&
      unschedulable;
  out->taints.clear();
  simdjson::dom::array list;
  if (object["spec"]["taints"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element t : list) {
      out->taints.push_back({std::string(kube::string_at(t, "key")),
                             std::string(kube::string_at(t, "value")),
                             std::string(kube::string_at(t, "effect"))});
    }
  }
  element allocatable;
  out->allocatable = {};
  if (object["status"]["allocatable"].get(allocatable) == simdjson::SUCCESS) {
    out->allocatable = {quantity_milli(allocatable, "cpu"), quantity(allocatable, "memory"),
                        gpus_of(allocatable)};
  }
  out->address.clear();
  if (object["status"]["addresses"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element a : list) {
      if (kube::string_at(a, "type") == "InternalIP" && out->address.empty()) {
        out->address = kube::string_at(a, "address");
      }
    }
  }
  out->ready = false;
  if (object["status"]["conditions"].get_array().get(list) == simdjson::SUCCESS) {
    for (const element c : list) {
      if (kube::string_at(c, "type") == "Ready") {
        out->ready = kube::string_at(c, "status") == "True";
      }
    }
  }
  return std::monostate{};
}

kube::DecodeResult decode_batch_job(element object, BatchJob* out) {
  if (auto ok = kube::decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  out->annotations = read_annotations(
      object, [](std::string_view key) { return key.starts_with(kJobAnnotationPrefix); });
  element spec;
  if (object["spec"].get(spec) != simdjson::SUCCESS) {
    return fail(std::string("the job has no spec"));
  }
  int64_t n = 0;
  out->parallelism = spec["parallelism"].get_int64().get(n) == simdjson::SUCCESS ? n : 1;
  out->completions =
      spec["completions"].get_int64().get(n) == simdjson::SUCCESS ? n : out->parallelism;
  out->indexed = kube::string_at(spec, "completionMode") == "Indexed";
  out->active_deadline_seconds = kube::int_at(spec, "activeDeadlineSeconds");
  return std::monostate{};
}

kube::DecodeResult decode_namespace(element object, Namespace* out) {
  if (auto ok = kube::decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  out->annotations = read_annotations(object, [](std::string_view key) {
    return key == kAnnotationNamespaceUser || key == kAnnotationNamespaceUsers;
  });
  return std::monostate{};
}

Annotations annotations_of(const nlohmann::json& object, const std::vector<std::string>& prefixes) {
  Annotations out;
  const auto it = object.find("metadata");
  if (it == object.end() || !it->contains("annotations") || !(*it)["annotations"].is_object()) {
    return out;
  }
  for (const auto& [key, value] : (*it)["annotations"].items()) {
    if (value.is_string() && starts_with_any(key, prefixes)) {
      out.emplace(key, value.get<std::string>());
    }
  }
  return out;
}

}  // namespace tightrope::bridge
