#include "operator/confinement.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "operator/build/common.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op {
namespace {

using build::join;
using build::lower;
using nlohmann::json;

// A file parsed once; an unreadable one reads as empty (Slurm's defaults).
slurm::SlurmConf parsed(std::string_view text) {
  auto conf = slurm::parse_slurm_conf(text, "");
  return conf ? std::move(*conf) : slurm::SlurmConf{};
}

// "v1, writable, memory controller"
std::string describe(const HostCgroups& h) {
  if (h.cgroup == "none") {
    return "no cgroups";
  }
  return "cgroup " + h.cgroup +
         (h.writable
              ? (h.remounted ? ", writable (remounted in an unprivileged container)" : ", writable")
              : ", read-only") +
         (h.memory ? ", memory controller" : ", no memory controller") +
         (h.devices ? (*h.devices ? ", device control" : ", no device control") : "");
}

// "2 nodes: cgroup v1, writable, memory controller" per kind of host.
std::string summary(const std::vector<NodeCgroups>& nodes) {
  std::map<std::string, int> kinds;
  for (const auto& n : nodes) {
    if (n.host) {
      ++kinds[describe(*n.host)];
    }
  }
  std::vector<std::string> parts;
  parts.reserve(kinds.size());
  for (const auto& [kind, count] : kinds) {
    parts.push_back(std::to_string(count) + (count == 1 ? " node: " : " nodes: ") + kind);
  }
  return join(parts, "; ");
}

// The first few items, then how many more.
std::string first_few(const std::vector<std::string>& items) {
  constexpr size_t kShown = 3;
  std::vector<std::string> shown(
      items.begin(), items.begin() + static_cast<ptrdiff_t>(std::min(kShown, items.size())));
  std::string out = join(shown, "; ");
  if (items.size() > kShown) {
    out += " (and " + std::to_string(items.size() - kShown) + " more)";
  }
  return out;
}

// The kubelet's oom_score_adj for a container without a memory request: 1000 in a BestEffort pod,
// 999 in a Burstable one. A request lowers it (1000 - 1000 * request / the Node's memory), and
// then the OOM killer weighs a job's task, which holds the memory, well above slurmstepd.
constexpr int64_t kNoMemoryRequestScore = 999;

api::Condition condition(std::string status, std::string reason, std::string message) {
  return {"JobsConfined", std::move(status), std::move(reason), std::move(message), 0, ""};
}

}  // namespace

bool ConfinementConfig::cgroups_disabled() const {
  return lower(cgroup_plugin) == "disabled";
}

bool ConfinementConfig::proctrack_cgroup() const {
  return !cgroups_disabled() && lower(proctrack) == "proctrack/cgroup";
}

bool ConfinementConfig::task_cgroup() const {
  if (cgroups_disabled()) {
    return false;
  }
  // A comma-separated list; the "task/" prefix is optional.
  std::string list = lower(task_plugins);
  std::erase_if(list, [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    if (name == "task/cgroup" || name == "cgroup") {
      return true;
    }
    start = end + 1;
  }
  return false;
}

ConfinementConfig confinement_config(std::string_view slurm_conf,
                                     std::optional<std::string_view> cgroup_conf) {
  ConfinementConfig c;
  const slurm::SlurmConf slurm = parsed(slurm_conf);
  c.proctrack = slurm.get("ProctrackType").value_or("proctrack/cgroup");
  c.task_plugins = slurm.get("TaskPlugin").value_or("");
  c.cgroup_plugin = "autodetect";
  if (cgroup_conf) {
    const slurm::SlurmConf cgroup = parsed(*cgroup_conf);
    c.cgroup_plugin = cgroup.get("CgroupPlugin").value_or("autodetect");
    c.constrain_ram = lower(cgroup.get("ConstrainRAMSpace").value_or("no")) == "yes";
    c.constrain_devices = lower(cgroup.get("ConstrainDevices").value_or("no")) == "yes";
  }
  return c;
}

std::optional<HostCgroups> host_cgroups(std::string_view extra) {
  if (extra.empty() || extra.front() != '{') {
    return std::nullopt;
  }
  const json doc = json::parse(extra, nullptr, false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  const auto it = doc.find(kHostExtraKey);
  if (it == doc.end() || !it->is_object()) {
    return std::nullopt;
  }
  const json& h = *it;
  const auto boolean = [&](const char* key) {
    const auto f = h.find(key);
    return f != h.end() && f->is_boolean() && f->get<bool>();
  };
  HostCgroups host;
  const auto cgroup = h.find("cgroup");
  if (cgroup == h.end() || !cgroup->is_string()) {
    return std::nullopt;
  }
  host.cgroup = cgroup->get<std::string>();
  host.writable = boolean("writable");
  host.memory = boolean("memory");
  host.oom_protect = boolean("oomProtect");
  host.oom_even = boolean("oomEven");
  host.remounted = boolean("remounted");
  if (const auto devices = h.find("devices"); devices != h.end() && devices->is_boolean()) {
    host.devices = devices->get<bool>();
  }
  if (const auto adj = h.find("oomScoreAdj"); adj != h.end() && adj->is_number_integer()) {
    host.oom_score_adj = adj->get<int64_t>();
  }
  return host;
}

api::Condition jobs_confined(const ConfinementConfig& config,
                             const std::vector<NodeCgroups>& nodes) {
  std::vector<NodeCgroups> reported;
  for (const auto& n : nodes) {
    if (n.host) {
      reported.push_back(n);
    }
  }
  const size_t silent = nodes.size() - reported.size();
  const std::string unreported = silent == 0 ? ""
                                             : " (" + std::to_string(silent) +
                                                   (silent == 1 ? " node has" : " nodes have") +
                                                   " not reported its host)";
  const std::string hosts = reported.empty() ? "" : "; this NodeSet's hosts: " + summary(reported);

  if (!config.needs_cgroups() || !config.task_cgroup()) {
    std::string what;
    if (config.cgroups_disabled()) {
      what = "CgroupPlugin=disabled: Slurm tracks jobs by process tree (" + config.proctrack +
             ") and does not hold them to their CPUs and memory";
    } else if (config.proctrack_cgroup()) {
      what =
          "TaskPlugin does not include task/cgroup: Slurm tracks jobs by cgroup but does not "
          "hold them to their CPUs and memory";
    } else {
      what = "ProctrackType=" + config.proctrack +
             " and no task/cgroup: Slurm tracks jobs by process tree and does not hold them to "
             "their CPUs and memory";
    }
    return condition("False", "NotConfigured", what + hosts);
  }
  if (reported.empty()) {
    return condition("Unknown", "NotReported",
                     nodes.empty() ? "no slurmd of this NodeSet is registered yet"
                                   : "no slurmd of this NodeSet has reported its host's cgroups "
                                     "(an image without the slurmd entrypoint's probe, or "
                                     "slurmd args that set --extra)");
  }

  std::vector<std::string> cannot;
  std::vector<std::string> open_devices;
  std::vector<std::string> exposed;
  for (const auto& n : reported) {
    const HostCgroups& h = *n.host;
    if (h.cgroup != "v1" && h.cgroup != "v2") {
      cannot.push_back(n.node + ": no cgroup filesystem at /sys/fs/cgroup");
    } else if (!h.writable) {
      cannot.push_back(n.node + ": cgroup " + h.cgroup + " is read-only in the container");
    } else if (config.constrain_ram && !h.memory) {
      cannot.push_back(n.node + ": cgroup " + h.cgroup +
                       " has no memory controller (ConstrainRAMSpace=yes)");
    } else if (config.constrain_devices && h.devices == false) {
      open_devices.push_back(n.node + " (cgroup " + h.cgroup + ": " +
                             (h.cgroup == "v2" ? "CAP_BPF and CAP_NET_ADMIN" : "CAP_SYS_ADMIN") +
                             ")");
    } else if (config.constrain_ram && !h.oom_protect && !h.oom_even &&
               h.oom_score_adj >= kNoMemoryRequestScore) {
      exposed.push_back(n.node);
    }
  }
  if (!cannot.empty()) {
    return condition("False", "HostCannotConfine",
                     first_few(cannot) +
                         ". Run the slurmd container privileged, or fall back to "
                         "ProctrackType=proctrack/linuxproc, TaskPlugin=task/none and "
                         "CgroupPlugin=disabled" +
                         unreported);
  }
  if (!open_devices.empty()) {
    return condition("False", "DevicesUnconfined",
                     "ConstrainDevices=yes, but slurmd cannot hold a job to its devices on " +
                         first_few(open_devices) +
                         ": the slurmd container lacks those capabilities, and a job may open "
                         "every device of its pod" +
                         unreported);
  }
  if (!exposed.empty()) {
    return condition(
        "False", "OomUnprotected",
        "slurmstepd cannot lower its oom_score_adj (no CAP_SYS_RESOURCE) and the container has no "
        "memory request on " +
            first_few(exposed) +
            ": a job over its memory may lose its slurmstepd and hang RUNNING. Give the slurmd "
            "container a memory request (the kubelet then sets a lower score)" +
            unreported);
  }
  return condition("True", "CgroupsEnforced",
                   std::string("task/cgroup holds jobs to their CPUs") +
                       (config.constrain_ram ? " and memory" : " (ConstrainRAMSpace=no)") +
                       (config.constrain_devices ? ", and to their devices" : "") + "; " +
                       summary(reported) + unreported);
}

}  // namespace tightrope::op
