#include "operator/build/power.hpp"

#include <charconv>
#include <sstream>

#include "api/well_known.hpp"
#include "kube/quantity.hpp"
#include "operator/build/common.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/nodeset.hpp"

namespace tightrope::op::build {

using nlohmann::json;

namespace {

std::string field_of(std::string_view key) {
  return "metadata.annotations[" + std::string(key) + "]";
}

// The annotation's whole seconds within [low, high]; `fallback` without it.
Result<int64_t, api::FieldError> seconds(const api::NodeSet& n, std::string_view key,
                                         int64_t fallback, int64_t low, int64_t high) {
  const auto it = n.metadata.annotations.find(std::string(key));
  if (it == n.metadata.annotations.end()) {
    return fallback;
  }
  const std::string& text = it->second;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    return fail(api::FieldError{field_of(key), "must be whole seconds from " + std::to_string(low) +
                                                   " to " + std::to_string(high) + ", not \"" +
                                                   text + "\""});
  }
  return value;
}

std::string quantity_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The slurmd container's limit of `resource` in thousandths of its unit; an error names what
// is missing.
Result<int64_t, api::FieldError> limit_milli(const api::NodeSet& n, const std::string& resource) {
  const auto limit = slurmd_limit(n, [&](std::string_view r) { return r == resource; });
  if (!limit) {
    return fail(
        api::FieldError{"spec.slurmd.resources.limits[" + resource + "]",
                        "a power-saved NodeSet needs its slurmd container's " + resource +
                            " limit: Slurm is told each node's size before any pod of it exists"});
  }
  const auto milli = kube::parse_quantity_milli(quantity_text(limit->value));
  if (!milli || *milli <= 0) {
    return fail(api::FieldError{
        limit->field, "\"" + quantity_text(limit->value) + "\" is not a positive quantity"});
  }
  return *milli;
}

}  // namespace

Result<std::optional<PowerSaving>, api::FieldError> nodeset_power_saving(const api::NodeSet& n) {
  if (n.metadata.annotations.count(std::string(api::kAnnotationSuspendTime)) == 0) {
    for (const auto key : {api::kAnnotationResumeTimeout, api::kAnnotationSuspendTimeout}) {
      if (n.metadata.annotations.count(std::string(key)) != 0) {
        return fail(api::FieldError{field_of(key), "has no effect without " +
                                                       std::string(api::kAnnotationSuspendTime) +
                                                       ", which turns power saving on"});
      }
    }
    return std::optional<PowerSaving>();
  }
  PowerSaving p;
  // Slurm looks for idle nodes about every 30 s; a day is longer than any idle worth keeping.
  auto suspend = seconds(n, api::kAnnotationSuspendTime, 0, 30, 86400);
  auto resume = seconds(n, api::kAnnotationResumeTimeout, p.resume_timeout, 30, 86400);
  auto down = seconds(n, api::kAnnotationSuspendTimeout, p.suspend_timeout, 5, 3600);
  for (const auto* r : {&suspend, &resume, &down}) {
    if (!*r) {
      return fail(r->error());
    }
  }
  p.suspend_time = *suspend;
  p.resume_timeout = *resume;
  p.suspend_timeout = *down;
  if (n.spec.scaling_mode == "DaemonSet") {
    return fail(api::FieldError{"spec.scalingMode",
                                "power saving needs StatefulSet mode: in DaemonSet mode each "
                                "pod follows a Node, not a node Slurm powers up"});
  }
  for (const char* resource : {"cpu", "memory"}) {
    if (auto milli = limit_milli(n, resource); !milli) {
      return fail(milli.error());
    }
  }
  return std::optional<PowerSaving>(p);
}

bool power_saved(const api::NodeSet& n) {
  const auto p = nodeset_power_saving(n);
  return p && p->has_value();
}

Result<std::string, std::string> cloud_node_record(const api::NodeSet& n, int64_t ordinal) {
  auto conf = slurmd_conf(n);
  if (!conf) {
    return fail(conf.error());
  }
  bool cpus = false;
  bool memory = false;
  std::istringstream words(*conf);
  for (std::string word; words >> word;) {
    const std::string key = lower(word.substr(0, word.find('=')));
    cpus = cpus || key == "cpus" || key == "procs";
    memory = memory || key == "realmemory";
  }
  std::string line = "NodeName=" + nodeset_pod_hostname(n, ordinal) + " State=CLOUD";
  if (!cpus) {
    auto milli = limit_milli(n, "cpu");
    if (!milli) {
      return fail(milli.error().to_string());
    }
    // Whole CPUs the pod may use: a fraction of one is still one for Slurm to hand out.
    line += " CPUs=" + std::to_string((*milli + 999) / 1000);
  }
  if (!memory) {
    auto milli = limit_milli(n, "memory");
    if (!milli) {
      return fail(milli.error().to_string());
    }
    constexpr int64_t kMiB = int64_t{1024} * 1024;
    line += " RealMemory=" + std::to_string(*milli / 1000 / kMiB);
  }
  return line + " " + *conf;
}

}  // namespace tightrope::op::build
