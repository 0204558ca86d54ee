#include "operator/build/gpus.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "api/well_known.hpp"
#include "operator/build/common.hpp"
#include "operator/build/nodeset.hpp"

namespace tightrope::op::build {

using nlohmann::json;

namespace {

constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string annotation(const api::NodeSet& n, std::string_view key) {
  const auto it = n.metadata.annotations.find(std::string(key));
  return it == n.metadata.annotations.end() ? std::string() : it->second;
}

std::optional<SlurmdLimit> gpu_limit(const api::NodeSet& n) {
  return slurmd_limit(n, [](std::string_view resource) {
    return resource == kResourceGpu || resource.starts_with(kMigResourcePrefix);
  });
}

}  // namespace

std::optional<SlurmdLimit> slurmd_limit(const api::NodeSet& n,
                                        const std::function<bool(std::string_view)>& matches) {
  std::optional<SlurmdLimit> found;
  const auto look = [&](const json& container, const std::string& field) {
    const json limits = container.value("/resources/limits"_json_pointer, json::object());
    if (!limits.is_object()) {
      return;
    }
    for (const auto& [resource, value] : limits.items()) {
      if (matches(resource)) {
        std::string where = field;
        where += ".resources.limits[" + resource + "]";
        found = SlurmdLimit{std::move(where), resource, value};
      }
    }
  };
  if (n.spec.slurmd.is_object()) {
    look(n.spec.slurmd, "spec.slurmd");
  }
  const json containers = n.spec.template_.spec.value("containers", json::array());
  for (size_t i = 0; containers.is_array() && i < containers.size(); ++i) {
    if (containers[i].value("name", std::string()) == "slurmd") {
      look(containers[i], "spec.template.spec.containers[" + std::to_string(i) + "]");
    }
  }
  return found;
}

namespace {

// The one nvidia.com/gpu.product the template pins its pods to (nodeSelector, or every required
// node affinity term naming the same single value), and where it says so.
std::optional<std::pair<std::string, std::string>> pinned_product(const api::NodeSet& n) {
  const json& spec = n.spec.template_.spec;
  const std::string key(api::kLabelGpuProduct);
  if (const auto sel = spec.value("nodeSelector", json::object()); sel.is_object()) {
    if (const auto it = sel.find(key); it != sel.end() && it->is_string()) {
      return std::make_pair(it->get<std::string>(), "spec.template.spec.nodeSelector[" + key + "]");
    }
  }
  const json terms = spec.value(
      "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/"
      "nodeSelectorTerms"_json_pointer,
      json::array());
  std::optional<std::string> agreed;
  for (const auto& term : terms.is_array() ? terms : json::array()) {
    std::optional<std::string> in_term;
    for (const auto& e : term.value("matchExpressions", json::array())) {
      const json values = e.value("values", json::array());
      if (e.value("key", std::string()) == key && e.value("operator", std::string()) == "In" &&
          values.size() == 1 && values[0].is_string()) {
        in_term = values[0].get<std::string>();
      }
    }
    if (!in_term || (agreed && *agreed != *in_term)) {
      return std::nullopt;
    }
    agreed = in_term;
  }
  if (agreed) {
    return std::make_pair(*agreed, std::string("spec.template.spec.affinity.nodeAffinity"));
  }
  return std::nullopt;
}

// Gres= items are separated by commas, except inside a "(S:0,1)" socket list.
std::vector<std::string> gres_items(std::string_view value) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (const char c : value) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (c == ',' && depth == 0) {
      items.push_back(std::move(item));
      item.clear();
      continue;
    }
    item += c;
  }
  items.push_back(std::move(item));
  return items;
}

bool is_gpu_item(std::string_view item) {
  return item == "gpu" || item.starts_with("gpu:") || item.starts_with("gpu(");
}

// "gpu[:type][:count][(S:...)]" -> count (1 when absent) and type.
std::pair<int64_t, std::string> parse_gpu_item(std::string_view item) {
  item = item.substr(0, item.find('('));
  std::vector<std::string> parts;
  std::istringstream in{std::string(item)};
  for (std::string part; std::getline(in, part, ':');) {
    parts.push_back(part);
  }
  int64_t count = 1;
  if (parts.size() >= 2 && all_digits(parts.back())) {
    count = std::stoll(parts.back());
    parts.pop_back();
  }
  return {count, parts.size() >= 2 ? parts[1] : std::string()};
}

// The Gres= value of spec.extraConf, when it has one.
std::optional<std::string> extra_conf_gres(const api::NodeSet& n) {
  std::istringstream words(n.spec.extra_conf);
  std::optional<std::string> gres;
  for (std::string word; words >> word;) {
    if (lower(word.substr(0, word.find('='))) == "gres" && word.find('=') != std::string::npos) {
      gres = word.substr(word.find('=') + 1);
    }
  }
  return gres;
}

}  // namespace

std::optional<std::string> slurm_gpu_type(std::string_view product) {
  const std::string p = lower(product);
  if (p.empty() || p.ends_with("-shared") || p.find("-mig-") != std::string::npos) {
    return std::nullopt;
  }
  std::string type = p;
  std::replace(type.begin(), type.end(), '-', '_');
  std::replace(type.begin(), type.end(), ' ', '_');
  return type;
}

namespace {

// What the NodeSet's annotations, limits and extraConf ask for (nodeset_gpus).
Result<GpuRequest, api::FieldError> gpus_as_asked(const api::NodeSet& n) {
  GpuRequest r;
  const std::string autodetect_key(api::kAnnotationGresAutodetect);
  const std::string autodetect_field = "metadata.annotations[" + autodetect_key + "]";
  const std::string given_autodetect = annotation(n, api::kAnnotationGresAutodetect);
  if (!given_autodetect.empty() && given_autodetect != "nvml" && given_autodetect != "nvidia" &&
      given_autodetect != "full" && given_autodetect != "off") {
    return fail(api::FieldError{autodetect_field,
                                "must be nvml, nvidia, full or off (gres.conf's "
                                "AutoDetect), not \"" +
                                    given_autodetect + "\""});
  }
  std::istringstream lines(annotation(n, api::kAnnotationGresConf));
  for (std::string line; std::getline(lines, line);) {
    line.erase(0, line.find_first_not_of(" \t"));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
      line.pop_back();
    }
    if (line.empty() || line.front() == '#') {
      continue;
    }
    if (lower(line).find("nodename=") != std::string::npos) {
      return fail(api::FieldError{
          "metadata.annotations[" + std::string(api::kAnnotationGresConf) + "]",
          "\"" + line + "\": leave NodeName= out, the operator names the NodeSet's nodes"});
    }
    r.gres_conf_lines.push_back(line);
  }
  // Explicit lines name the devices: autodetection would add the host's others.
  r.autodetect = !given_autodetect.empty()    ? given_autodetect
                 : !r.gres_conf_lines.empty() ? std::string("off")
                                              : std::string(kDefaultGresAutodetect);

  const auto limit = gpu_limit(n);
  if (limit) {
    const json& v = limit->value;
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      r.limit = v.get<int64_t>();
    } else if (v.is_string() && all_digits(v.get<std::string>())) {
      r.limit = std::stoll(v.get<std::string>());
    } else {
      return fail(api::FieldError{limit->field, "must be a whole number of GPUs, not " + v.dump()});
    }
  }
  const bool mig_resource =
      limit && std::string_view(limit->resource).starts_with(kMigResourcePrefix);

  const auto gres = extra_conf_gres(n);
  if (gres) {
    for (const auto& item : gres_items(*gres)) {
      if (!is_gpu_item(item)) {
        continue;
      }
      const auto [count, type] = parse_gpu_item(item);
      if (limit && count > r.limit) {
        return fail(api::FieldError{"spec.extraConf",
                                    "Gres " + item + " registers " + std::to_string(count) +
                                        " GPUs, but " + limit->field + " gives each pod " +
                                        std::to_string(r.limit) +
                                        ": Slurm would hand out GPUs the pod does not have"});
      }
      r.item = item;
      r.type = type;
      r.type_from = "spec.extraConf";
      r.from_extra_conf = true;
      return r;
    }
  }
  if (r.limit == 0) {
    // Without a count, autodetection on the pod's host only where the annotation asks for it
    // (a privileged pod sees every GPU of its host).
    r.autodetect_only = !given_autodetect.empty() && given_autodetect != "off";
    return r;
  }

  const std::string type_key(api::kAnnotationGpuType);
  const auto pinned = pinned_product(n);
  if (pinned && lower(pinned->first).ends_with("-shared")) {
    return fail(api::FieldError{
        pinned->second,
        pinned->first + " is a shared (time-sliced) GPU: its nvidia.com/gpu count is replicas "
                        "of fewer devices, and Slurm would hand out GPUs that are not there; give "
                        "the real devices' Gres=gpu:<type>:<count> in spec.extraConf"});
  }
  const bool mig =
      mig_resource || (pinned && lower(pinned->first).find("-mig-") != std::string::npos);
  const std::string mig_field = mig_resource ? limit->field : pinned ? pinned->second : "";
  if (mig && r.autodetect != "nvml") {
    return fail(api::FieldError{
        mig_field,
        "MIG devices are seen only by Slurm's NVML plugin (gres.conf AutoDetect=nvml): "
        "on a slurmd image built with it, set the annotations " +
            autodetect_key + ": nvml and " + type_key + ": <MIG profile>"});
  }
  if (std::string given = annotation(n, api::kAnnotationGpuType); !given.empty()) {
    if (given.find_first_of(":,=() \t") != std::string::npos) {
      return fail(api::FieldError{"metadata.annotations[" + type_key + "]",
                                  "\"" + given +
                                      "\" is not a GRES type (no ':', ',', '=', "
                                      "parentheses or blanks)"});
    }
    r.type = given;
    r.type_from = "metadata.annotations[" + type_key + "]";
  } else if (mig) {
    return fail(
        api::FieldError{mig_field, "a MIG device: name its profile in the annotation " + type_key});
  } else if (pinned) {
    r.type = *slurm_gpu_type(pinned->first);
    r.type_from = pinned->second;
  }
  r.item = "gpu:" + (r.type.empty() ? std::string() : r.type + ":") + std::to_string(r.limit);
  return r;
}

// Slurm makes a power-saved NodeSet's nodes itself, before any pod, from gres.conf: it refuses
// AutoDetect for such nodes ("Cannot use AutoDetect on cloud/dynamic node") and ignores a GPU
// without its device file. Their GPUs are the gres-conf annotation's File= lines, which hold where
// a pod has all of its host's GPUs at the same paths; a pod's share of a host is known only once
// it runs.
Result<GpuRequest, api::FieldError> named_for_power_saving(const api::NodeSet& n, GpuRequest r) {
  if (n.metadata.annotations.count(std::string(api::kAnnotationSuspendTime)) == 0 ||
      !r.in_gres_conf()) {
    return r;
  }
  const std::string given = annotation(n, api::kAnnotationGresAutodetect);
  const bool files = std::any_of(
      r.gres_conf_lines.begin(), r.gres_conf_lines.end(),
      [](const std::string& line) { return lower(line).find("file=") != std::string::npos; });
  if ((!given.empty() && given != "off") || r.autodetect_only || !files) {
    return fail(api::FieldError{
        "metadata.annotations[" + std::string(api::kAnnotationGresConf) + "]",
        "a power-saved NodeSet's GPUs must be named with their device files (Name=gpu "
        "File=/dev/nvidia[0-7]): Slurm makes its nodes before any pod exists, cannot autodetect "
        "GPUs for them and ignores a GPU without its file; this fits pods that hold all of "
        "their host's GPUs"});
  }
  r.autodetect = "off";
  return r;
}

}  // namespace

Result<GpuRequest, api::FieldError> nodeset_gpus(const api::NodeSet& n) {
  auto r = gpus_as_asked(n);
  if (!r) {
    return r;
  }
  return named_for_power_saving(n, std::move(*r));
}

std::string nodeset_hostlist(const api::NodeSet& n, int64_t max_node_count) {
  const std::string first = nodeset_pod_hostname(n, 0);
  const std::string prefix = first.substr(0, first.size() - nodeset_padded_ordinal(n, 0).size());
  return prefix + "[" + nodeset_padded_ordinal(n, 0) + "-" +
         std::to_string(std::max<int64_t>(max_node_count, 1) - 1) + "]";
}

}  // namespace tightrope::op::build
