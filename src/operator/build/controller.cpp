#include "operator/build/controller.hpp"

#include <algorithm>
#include <set>

#include "api/well_known.hpp"
#include "operator/build/common.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/health.hpp"
#include "operator/build/power.hpp"
#include "operator/build/topology.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op::build {

using nlohmann::json;

namespace {

Owner owner_of(const api::Controller& c) {
  return {"Controller", c.metadata.name, c.metadata.uid};
}

json labels_of(const api::Controller& c) {
  json labels = component_labels("slurmctld", c.metadata.name, "controller");
  labels[api::kLabelCluster] = c.metadata.name;
  return labels;
}

// Keys whose values are comma lists: a user's extraConf adds to the operator's list.
const std::set<std::string>& merged_keys() {
  static const std::set<std::string> keys = {"slurmctldparameters", "authinfo",
                                             "authaltparameters",   "grestypes",
                                             "prologflags",         "suspendexcparts"};
  return keys;
}

// Appends the items of `extra` (a comma list) missing from `base`.
std::string union_list(const std::string& base, const std::string& extra) {
  std::vector<std::string> items;
  std::set<std::string> seen;
  auto add = [&](const std::string& list) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      const std::string item =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty() && seen.insert(item).second) {
        items.push_back(item);
      }
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  };
  add(base);
  add(extra);
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += ',';
    }
    out += item;
  }
  return out;
}

// Every ConfigMap key of a list of refs, sorted by ConfigMap then key.
std::vector<std::string> files_of(const std::vector<api::LocalRef>& refs,
                                  const ControllerInputs& in) {
  std::vector<std::string> files;
  for (const auto& ref : refs) {
    if (const auto it = in.config_maps.find(ref.name); it != in.config_maps.end()) {
      for (const auto& [key, value] : it->second) {
        files.push_back(key);
      }
    }
  }
  return files;
}

// `any_power`: some NodeSet of the cluster is power-saved. Its partition says how its nodes
// power down; every other partition keeps its nodes up (SuspendTime=INFINITE), since their slurmd
// could not be powered up again. What the partition's config says wins.
std::string partition_line(const api::NodeSet& n, bool any_power) {
  std::string line = "PartitionName=" + n.slurm_name() + " Nodes=" + n.slurm_name();
  if (!n.spec.partition.config.empty()) {
    line += " " + n.spec.partition.config;
  }
  const std::string said = lower(n.spec.partition.config);
  const auto unless_said = [&](const char* key, const std::string& value) {
    if (said.find(lower(key) + "=") == std::string::npos) {
      line += " " + std::string(key) + "=" + value;
    }
  };
  if (const auto power = nodeset_power_saving(n); power && *power) {
    unless_said("SuspendTime", std::to_string((*power)->suspend_time));
    unless_said("ResumeTimeout", std::to_string((*power)->resume_timeout));
    unless_said("SuspendTimeout", std::to_string((*power)->suspend_timeout));
  } else if (any_power) {
    unless_said("SuspendTime", "INFINITE");
  }
  return line;
}

std::vector<const api::NodeSet*> sorted_nodesets(const ControllerInputs& in) {
  std::vector<const api::NodeSet*> out;
  for (const auto& n : in.nodesets) {
    if (!n.metadata.deleting) {
      out.push_back(&n);
    }
  }
  std::sort(out.begin(), out.end(), [](const api::NodeSet* a, const api::NodeSet* b) {
    return a->metadata.name < b->metadata.name;
  });
  return out;
}

bool any_gpus(const ControllerInputs& in) {
  return std::any_of(in.nodesets.begin(), in.nodesets.end(), [](const api::NodeSet& n) {
    const auto gpus = nodeset_gpus(n);
    return !n.metadata.deleting && gpus && gpus->wants_gpus();
  });
}

// A GPU NodeSet's first gres.conf line: what it asks for, so that a NodeSet can tell whether the
// gres.conf slurmctld loaded has its current request.
std::string gres_conf_heading(const api::NodeSet& n, const GpuRequest& gpus) {
  return "# NodeSet " + n.metadata.name + ": " +
         (gpus.wants_gpus() ? gpus.item : std::string("what autodetection finds"));
}

// Whether a referenced ConfigMap brings this file, which the operator then does not write.
bool brought_file(const ControllerInputs& in, const std::string& file) {
  return std::any_of(in.config_maps.begin(), in.config_maps.end(),
                     [&](const auto& map) { return map.second.count(file) != 0; });
}

// A cgroup.conf of the administrator's that says CgroupPlugin=disabled.
bool brought_cgroups_disabled(const ControllerInputs& in) {
  return std::any_of(in.config_maps.begin(), in.config_maps.end(), [](const auto& map) {
    const auto file = map.second.find("cgroup.conf");
    if (file == map.second.end()) {
      return false;
    }
    const auto conf = slurm::parse_slurm_conf(file->second, "cgroup.conf");
    return conf && lower(conf->get("CgroupPlugin").value_or("")) == "disabled";
  });
}

}  // namespace

int64_t max_node_count(const ControllerInputs& in) {
  int64_t nodes = 0;
  for (const api::NodeSet* n : sorted_nodesets(in)) {
    // status.replicas counts a DaemonSet-mode NodeSet's pods, which spec.replicas does not.
    nodes += std::max(n->spec.replicas.value_or(1), n->status.replicas);
  }
  int64_t count = kMinMaxNodeCount;
  while (count < 2 * nodes) {
    count *= 2;
  }
  return count;
}

std::string controller_config_map_name(const api::Controller& c) {
  return c.metadata.name + "-config";
}
std::string controller_statefulset_name(const api::Controller& c) {
  return c.metadata.name + "-controller";
}
std::vector<std::string> controller_pod_names(const api::Controller& c) {
  std::vector<std::string> pods;
  if (c.spec.external) {
    return pods;
  }
  const int replicas = c.spec.ha.enabled ? 1 + static_cast<int>(c.spec.ha.backups) : 1;
  for (int i = 0; i < replicas; ++i) {
    pods.push_back(controller_statefulset_name(c) + "-" + std::to_string(i));
  }
  return pods;
}
std::string controller_service_name(const api::Controller& c) {
  return c.metadata.name + "-controller";
}
std::string controller_headless_service_name(const api::Controller& c) {
  return c.metadata.name + "-controller-internal";
}

std::string controller_conf_server(const api::Controller& c) {
  if (c.spec.external) {
    return c.spec.external_config.host + ":" + std::to_string(c.spec.external_config.port);
  }
  return controller_service_name(c) + "." + c.metadata.namespace_name + ":" +
         std::to_string(kSlurmctldPort);
}

std::vector<std::string> owned_slurm_conf_keys() {
  return {"ClusterName",
          "SlurmctldHost",
          "SlurmctldAddr",
          "ControlMachine",
          "BackupController",
          "SlurmctldPort",
          "SlurmdPort",
          "SlurmUser",
          "AuthType",
          "CredType",
          "AuthAltTypes",
          "StateSaveLocation",
          "AccountingStorageType",
          "AccountingStorageHost",
          "AccountingStoragePort",
          "MetricsType"};
}

api::FieldErrors check_controller_config(const api::Controller& c, const ControllerInputs& in) {
  api::FieldErrors errors;
  auto extra = slurm::parse_slurm_conf(c.spec.extra_conf, "extraConf");
  if (!extra) {
    errors.push_back({"spec.extraConf", extra.error().to_string()});
  } else {
    slurm::OwnedConf owned;
    for (const auto& key : owned_slurm_conf_keys()) {
      owned.keys.insert(key);
    }
    for (const api::NodeSet* n : sorted_nodesets(in)) {
      owned.records.insert("NodeSet=" + n->slurm_name());
      if (n->spec.partition.enabled) {
        owned.records.insert("PartitionName=" + n->slurm_name());
      }
    }
    owned.owner = "the operator";
    for (const auto& e : slurm::validate_extra_conf(*extra, owned)) {
      errors.push_back({"spec.extraConf", e.to_string()});
    }
  }
  const auto check_refs = [&](const std::vector<api::LocalRef>& refs, const std::string& field) {
    for (size_t i = 0; i < refs.size(); ++i) {
      const auto it = in.config_maps.find(refs[i].name);
      if (it == in.config_maps.end()) {
        continue;  // a missing ConfigMap is the reconciler's condition, not a spec error
      }
      for (const char* forbidden : {"slurm.conf", "slurmdbd.conf"}) {
        if (it->second.count(forbidden) != 0) {
          errors.push_back({field + "[" + std::to_string(i) + "]",
                            "ConfigMap \"" + refs[i].name + "\" holds " + forbidden +
                                ", which the operator generates: put its lines in "
                                "spec.extraConf instead"});
        }
      }
    }
  };
  // Every file lands in /etc/slurm: two ConfigMaps may not bring the same name, nor take one
  // the operator writes.
  std::map<std::string, std::string> seen = {
      {"slurm.key", "the operator"}, {"jwt.key", "the operator"}, {"jwks.json", "the operator"}};
  for (const auto& [refs, field_name, scripts] : c.spec.config_refs()) {
    const std::string field = field_name;
    for (size_t i = 0; i < refs->size(); ++i) {
      const auto it = in.config_maps.find((*refs)[i].name);
      if (it == in.config_maps.end()) {
        continue;
      }
      for (const auto& [file, content] : it->second) {
        std::string who = "ConfigMap \"";
        who += (*refs)[i].name;
        who += '"';
        const auto [where, fresh] = seen.emplace(file, who);
        if (!fresh && where->second != who) {
          std::string message = who;
          message += " brings /etc/slurm/" + file + ", which " + where->second;
          message += " already provides";
          errors.push_back({field + "[" + std::to_string(i) + "]", message});
        }
      }
    }
  }
  for (const auto& [refs, field, scripts] : c.spec.config_refs()) {
    check_refs(*refs, field);
  }
  return errors;
}

namespace {

// The Controller's extraConf as build_slurm_conf uses it: list-valued keys the operator also
// sets are merged into its lines, the rest is appended as written (check_controller_config
// refused what cannot be), and the keys the operator writes only when the user does not.
struct ExtraConf {
  std::map<std::string, std::string> merged;  // lower-case key -> the user's list
  std::string text;                           // the rest, as written
  std::set<std::string> user_keys;            // lower-case
};

ExtraConf read_extra_conf(const std::string& extra_conf) {
  ExtraConf out;
  auto extra = slurm::parse_slurm_conf(extra_conf, "extraConf");
  if (!extra) {
    return out;
  }
  slurm::SlurmConf rest;
  for (const auto& line : extra->lines()) {
    if (line.kind == slurm::ConfLine::Kind::kSetting && !slurm::is_record_key(line.key())) {
      for (const auto& [key, value] : line.pairs) {
        out.user_keys.insert(lower(key));
      }
    }
    if (line.kind == slurm::ConfLine::Kind::kSetting && line.pairs.size() == 1 &&
        merged_keys().count(lower(line.key())) != 0) {
      auto& value = out.merged[lower(line.key())];
      value = union_list(value, line.pairs.front().second);
      continue;
    }
    rest.append(line);
  }
  out.text = rest.render();
  return out;
}

// Power saving where a NodeSet has it (build/power.hpp). slurmctld turns it on only when the
// global SuspendTime is set as it starts, and its Resume/SuspendTimeout are global too: they are
// the power-saved NodeSets' tightest, while each of their partitions says its own. The other
// NodeSets' partitions are left out (SuspendExcParts). Slurm logs each node it powers up or down
// ("power_save: ... waking nodes"); the operator acts on the node states it reads, so the
// programs Slurm calls have nothing left to do.
void append_power_saving(slurm::SlurmConf& conf, const ExtraConf& extra,
                         const ControllerInputs& in) {
  std::optional<PowerSaving> tightest;
  std::string others;
  for (const api::NodeSet* n : sorted_nodesets(in)) {
    if (const auto power = nodeset_power_saving(*n); power && *power) {
      PowerSaving& t = tightest ? *tightest : tightest.emplace(**power);
      t.suspend_time = std::min(t.suspend_time, (*power)->suspend_time);
      t.resume_timeout = std::max(t.resume_timeout, (*power)->resume_timeout);
      t.suspend_timeout = std::max(t.suspend_timeout, (*power)->suspend_timeout);
    } else if (n->spec.partition.enabled) {
      others = union_list(others, n->slurm_name());
    }
  }
  const auto theirs = extra.merged.find("suspendexcparts");
  if (!tightest) {
    if (theirs != extra.merged.end()) {
      conf.set("SuspendExcParts", theirs->second);
    }
    return;
  }
  const auto soft = [&](const char* key, const std::string& value) {
    if (extra.user_keys.count(lower(key)) == 0) {
      conf.set(key, value);
    }
  };
  soft("SuspendTime", std::to_string(tightest->suspend_time));
  soft("ResumeTimeout", std::to_string(tightest->resume_timeout));
  soft("SuspendTimeout", std::to_string(tightest->suspend_timeout));
  soft("ResumeProgram", "/bin/true");
  soft("SuspendProgram", "/bin/true");
  const std::string excluded =
      theirs == extra.merged.end() ? others : union_list(others, theirs->second);
  if (!excluded.empty()) {
    conf.set("SuspendExcParts", excluded);
  }
}

bool any_power_saved(const ControllerInputs& in) {
  return std::any_of(in.nodesets.begin(), in.nodesets.end(),
                     [](const api::NodeSet& n) { return !n.metadata.deleting && power_saved(n); });
}

// One NodeSet line per NodeSet, and its partition where enabled.
void append_nodesets(slurm::SlurmConf& conf, const api::Controller& c, const ControllerInputs& in) {
  const auto nodesets = sorted_nodesets(in);
  const bool any_power = any_power_saved(in);
  const bool nvlink = build_topology_yaml(c, in).has_value();
  if (!nodesets.empty()) {
    conf.append_blank();
    conf.append_comment("# One NodeSet (and partition, where enabled) per NodeSet resource");
  }
  for (const api::NodeSet* n : nodesets) {
    conf.append_setting({{"NodeSet", n->slurm_name()}, {"Feature", n->slurm_name()}});
    if (n->spec.partition.enabled) {
      std::string text = partition_line(*n, any_power);
      // A NodeSet on NVLink cliques schedules its partition's jobs on the cliques' blocks,
      // unless its partition names a topology of its own.
      if (nvlink && nodeset_on_cliques(*n) &&
          lower(n->spec.partition.config).find("topology=") == std::string::npos) {
        text += " Topology=" + std::string(kNvlinkTopology);
      }
      auto line = slurm::parse_slurm_conf(text, "partition");
      if (line && !line->lines().empty()) {
        conf.append(line->lines().front());
      }
    }
  }
}

}  // namespace

std::string build_slurm_conf(const api::Controller& c, const ControllerInputs& in) {
  const api::ControllerSpec& s = c.spec;
  const ExtraConf extra = read_extra_conf(s.extra_conf);
  const std::map<std::string, std::string>& merged = extra.merged;
  const auto with_extra = [&](const char* key, const std::string& value) {
    const auto it = merged.find(lower(key));
    return it == merged.end() ? value : union_list(value, it->second);
  };

  slurm::SlurmConf conf;
  conf.append_comment("# slurm.conf of Slurm cluster " + c.cluster_name() +
                      ", generated by the operator from Controller " + c.metadata.namespace_name +
                      "/" + c.metadata.name + ". Edit the Controller, not this file.");
  conf.set("ClusterName", c.cluster_name());
  conf.set("SlurmUser", "slurm");
  if (s.external) {
    conf.append_setting({{"SlurmctldHost", s.external_config.host}});
    conf.set("SlurmctldPort", std::to_string(s.external_config.port));
  } else {
    for (const std::string& pod : controller_pod_names(c)) {
      // The pod's name, and its address through the headless Service.
      std::string host = pod;
      host += "(" + pod + "." + controller_headless_service_name(c) + ".";
      host += c.metadata.namespace_name + ")";
      conf.append_setting({{"SlurmctldHost", host}});
    }
    conf.set("SlurmctldPort", std::to_string(kSlurmctldPort));
    if (s.ha.enabled) {
      // Clients reach the slurmctld in control through the client Service, which selects it
      // (the active label): no wait on a dead primary's connection timeout first.
      conf.set("SlurmctldAddr", controller_service_name(c) + "." + c.metadata.namespace_name);
    }
    conf.set("StateSaveLocation", "/var/spool/slurmctld");
  }
  const auto soft = [&](const char* key, const std::string& value) {
    if (extra.user_keys.count(lower(key)) == 0) {
      conf.set(key, value);
    }
  };
  soft("SlurmdUser", "root");
  conf.set("SlurmdPort", std::to_string(kSlurmdPort));
  soft("SlurmdSpoolDir", "/var/spool/slurmd");
  soft("MaxNodeCount", std::to_string(max_node_count(in)));
  soft("SlurmctldLogFile", "/var/log/slurm/slurmctld.log");
  // The scheduler's allocations (sched: Allocate ...) into the same log: with slurmctld's own
  // lines they are what the operator follows for hints of change (docs/slurm.md).
  soft("SlurmSchedLogFile", "/var/log/slurm/slurmctld.log");
  soft("SlurmSchedLogLevel", "1");
  soft("SlurmdLogFile", "/var/log/slurm/slurmd.log");
  // Workers run Tightrope's checks once a HealthCheck selects one of the cluster's NodeSets
  // (the program does nothing on the others); not before, since images other than Tightrope's
  // lack the program. A site's own HealthCheckProgram (LBNL NHC) wins, with its interval.
  if (in.health_check_interval && site_health_check_program(c).empty()) {
    conf.set("HealthCheckProgram", std::string(kHealthCheckProgram));
    soft("HealthCheckInterval", std::to_string(*in.health_check_interval));
    soft("HealthCheckTimeout", std::to_string(health_check_timeout(*in.health_check_interval)));
    soft("HealthCheckNodeState", "ANY");
  }
  conf.set("AuthType", "auth/slurm");
  conf.set("CredType", "cred/slurm");
  conf.set("AuthAltTypes", "auth/jwt");
  std::string alt = "jwt_key=/etc/slurm/jwt.key";
  if (s.jwks_key_ref) {
    alt += ",jwks=/etc/slurm/jwks.json";
  }
  conf.set("AuthAltParameters", with_extra("AuthAltParameters", alt));
  conf.set("AuthInfo", with_extra("AuthInfo", "use_client_ids"));
  conf.set("SlurmctldParameters",
           with_extra("SlurmctldParameters", "enable_configless,reconfig_on_restart"));
  if (s.metrics.enabled) {
    conf.set("MetricsType", "metrics/openmetrics");
  }
  // Always, as Slinky does: a GPU NodeSet added later then needs no change of slurm.conf on
  // the login pods and slurmds that already run (srun refuses --gres=gpu without it).
  conf.set("GresTypes", with_extra("GresTypes", "gpu"));
  // pam_slurm_adopt lets a user into a worker (NodeSet spec.ssh) by their job's extern step,
  // which only Contain makes.
  if (std::any_of(in.nodesets.begin(), in.nodesets.end(), [](const api::NodeSet& n) {
        return !n.metadata.deleting && n.spec.ssh.enabled;
      })) {
    conf.set("PrologFlags", with_extra("PrologFlags", "Contain"));
  } else if (merged.count("prologflags") != 0) {
    conf.set("PrologFlags", merged.at("prologflags"));
  }
  // With GPUs, a job gets only the devices, CPUs and memory Slurm gave it: task/cgroup holds it
  // to them (cgroup.conf's Constrain* below), task/affinity binds its tasks. Slurm's default is
  // no task plugin, under which ConstrainDevices is inert and every job sees every GPU of its
  // pod. The administrator's TaskPlugin wins, and so does a cgroup.conf of theirs that turns
  // cgroups off (task/cgroup would stop slurmd).
  if (any_gpus(in) && !brought_cgroups_disabled(in)) {
    soft("TaskPlugin", "task/cgroup,task/affinity");
  }
  // Each job its own IMEX channel, where a NodeSet has a ComputeDomain; the administrator's
  // SwitchType wins.
  if (std::any_of(in.nodesets.begin(), in.nodesets.end(), [](const api::NodeSet& n) {
        return !n.metadata.deleting && wants_compute_domain(n);
      })) {
    soft("SwitchType", "switch/nvidia_imex");
  }
  if (s.accounting_ref) {
    conf.set("AccountingStorageType", "accounting_storage/slurmdbd");
    if (in.accounting && in.accounting->spec.external) {
      conf.set("AccountingStorageHost", in.accounting->spec.external_config.host);
      conf.set("AccountingStoragePort", std::to_string(in.accounting->spec.external_config.port));
    } else {
      conf.set("AccountingStorageHost",
               s.accounting_ref->name + "-accounting." + c.metadata.namespace_name);
      conf.set("AccountingStoragePort", std::to_string(kSlurmdbdPort));
    }
  } else {
    conf.set("AccountingStorageType", "accounting_storage/none");
  }
  // slurmctld's own scripts by absolute path; slurmd's by bare name, which configless mode
  // ships to every slurmd along with slurm.conf.
  const auto scripts = [&](const char* key, const std::vector<api::LocalRef>& refs,
                           bool on_slurmd) {
    for (const auto& file : files_of(refs, in)) {
      conf.append_setting({{key, on_slurmd ? file : std::string("/etc/slurm/").append(file)}});
    }
  };
  scripts("PrologSlurmctld", s.prolog_slurmctld_script_refs, false);
  scripts("EpilogSlurmctld", s.epilog_slurmctld_script_refs, false);
  scripts("Prolog", s.prolog_script_refs, true);
  scripts("Epilog", s.epilog_script_refs, true);
  append_power_saving(conf, extra, in);
  append_nodesets(conf, c, in);
  std::string text = conf.render();
  if (!extra.text.empty() && extra.text.find_first_not_of(" \n\t") != std::string::npos) {
    text += "\n### EXTRA CONFIG ###\n" + extra.text;
    if (text.back() != '\n') {
      text += '\n';
    }
  }
  return text;
}

std::optional<std::string> build_cgroup_conf(const ControllerInputs& in) {
  if (brought_file(in, "cgroup.conf")) {
    return std::nullopt;
  }
  // Each slurmd picks cgroup/v1 or cgroup/v2 by what its node mounts: one cluster may span
  // hosts of both kinds, and the operator cannot see a host's cgroup version.
  std::string conf = "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n";
  if (any_gpus(in)) {
    // A job sees only the GPUs, CPUs and memory it was given (TaskPlugin=task/cgroup, which
    // slurm.conf then has unless the administrator chose another).
    conf +=
        "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\nConstrainDevices=yes\n";
  }
  return conf;
}

std::optional<std::string> build_gres_conf(const api::Controller& c, const ControllerInputs& in) {
  if (brought_file(in, "gres.conf")) {
    return std::nullopt;
  }
  std::string conf = "# gres.conf of Slurm cluster " + c.cluster_name() +
                     ", generated by the operator from Controller " + c.metadata.namespace_name +
                     "/" + c.metadata.name + " and its NodeSets.\n";
  // A privileged slurmd sees every GPU of its host: only the nodes of NodeSets that ask for
  // GPUs look for them, or a CPU worker on a GPU host would offer GPUs it was not given.
  conf += "AutoDetect=off\n";
  const int64_t max_nodes = max_node_count(in);
  for (const api::NodeSet* n : sorted_nodesets(in)) {
    const auto gpus = nodeset_gpus(*n);
    if (!gpus || !gpus->in_gres_conf()) {
      continue;
    }
    conf += gres_conf_heading(*n, *gpus) + "\n";
    if (n->spec.scaling_mode == "DaemonSet") {
      // Its nodes are named after Kubernetes Nodes, which come and go: their lines belong in
      // a gres.conf of the administrator's (spec.configFileRefs).
      conf += "# (DaemonSet mode: no lines; bring a gres.conf that names its nodes)\n";
      continue;
    }
    const std::string nodes = "NodeName=" + nodeset_hostlist(*n, max_nodes);
    conf += nodes + " AutoDetect=" + gpus->autodetect + "\n";
    for (const auto& line : gpus->gres_conf_lines) {
      std::string typed = line;
      if (!gpus->type.empty() && lower(line).find("type=") == std::string::npos &&
          lower(line).find("name=gpu") != std::string::npos) {
        typed += " Type=" + gpus->type;
      }
      conf += nodes;
      conf += ' ' + typed + '\n';
    }
  }
  return conf;
}

namespace {

json controller_config_data(const api::Controller& c, const ControllerInputs& in) {
  json data = {{"slurm.conf", build_slurm_conf(c, in)}};
  if (auto cgroup = build_cgroup_conf(in)) {
    data["cgroup.conf"] = *cgroup;
  }
  if (auto gres = build_gres_conf(c, in)) {
    data["gres.conf"] = *gres;
  }
  if (auto topology = build_topology_yaml(c, in)) {
    data[std::string(kTopologyFile)] = *topology;
  }
  return data;
}

// The generated files' `data` and every referenced ConfigMap's.
std::string config_hash_of(const json& data, const api::Controller& c, const ControllerInputs& in) {
  std::string all = data.dump();
  const auto add_refs = [&](const std::vector<api::LocalRef>& refs) {
    for (const auto& ref : refs) {
      if (const auto it = in.config_maps.find(ref.name); it != in.config_maps.end()) {
        all += ref.name;
        for (const auto& [key, value] : it->second) {
          all += '\n';
          all += key;
          all += '\n';
          all += value;
        }
      }
    }
  };
  for (const auto& [refs, field, scripts] : c.spec.config_refs()) {
    add_refs(*refs);
  }
  return sha256_hex(all);
}

}  // namespace

json build_controller_config_map(const api::Controller& c, const ControllerInputs& in) {
  json data = controller_config_data(c, in);
  json meta = object_meta(controller_config_map_name(c), c.metadata.namespace_name, labels_of(c),
                          owner_of(c));
  meta["annotations"] = {{api::kAnnotationControllerConfigHash, config_hash_of(data, c, in)}};
  return {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta}, {"data", std::move(data)}};
}

std::string controller_config_hash(const api::Controller& c, const ControllerInputs& in) {
  return config_hash_of(controller_config_data(c, in), c, in);
}

std::optional<std::string> slurmctld_lacks_nodeset(const api::NodeSet& n, const json& config_map,
                                                   const json& statefulset) {
  const std::string map_name = config_map.value("/metadata/name"_json_pointer, std::string());
  const auto has_line = [](const std::string& text, const std::string& line, bool whole) {
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find('\n', at), text.size());
      const std::string_view got(text.data() + at, end - at);
      if (whole ? got == line
                : got.starts_with(line) && (got.size() == line.size() || got[line.size()] == ' ')) {
        return true;
      }
      at = end + 1;
    }
    return false;
  };
  const std::string slurm_conf = config_map.value("/data/slurm.conf"_json_pointer, std::string());
  if (!has_line(slurm_conf, "NodeSet=" + n.slurm_name(), false)) {
    return "ConfigMap " + map_name + " has no NodeSet=" + n.slurm_name() +
           " line yet (the Controller has not written this NodeSet into slurm.conf)";
  }
  const auto gpus = nodeset_gpus(n);
  // Absent when a configFileRefs ConfigMap brings gres.conf: the administrator's lines.
  const std::string gres_conf = config_map.value("/data/gres.conf"_json_pointer, std::string());
  if (gpus && gpus->in_gres_conf() && n.spec.scaling_mode != "DaemonSet" && !gres_conf.empty()) {
    const std::string heading = gres_conf_heading(n, *gpus);
    if (!has_line(gres_conf, heading, true)) {
      return "ConfigMap " + map_name + "'s gres.conf does not yet have \"" + heading + "\"";
    }
  }
  const std::string set_name = statefulset.value("/metadata/name"_json_pointer, std::string());
  const std::string want = annotation(config_map, api::kAnnotationControllerConfigHash);
  const std::string mounted =
      annotation(statefulset.value("/spec/template"_json_pointer, json::object()),
                 api::kAnnotationSlurmConfigHash);
  if (!mounted.empty() && mounted != want) {
    return "StatefulSet " + set_name + "'s pod template is not yet at ConfigMap " + map_name +
           "'s content (" + std::string(api::kAnnotationSlurmConfigHash) + " " +
           mounted.substr(0, 12) + ", the ConfigMap's " + want.substr(0, 12) + ")";
  }
  const auto number = [&](const char* pointer) {
    return statefulset.value(json::json_pointer(pointer), int64_t{0});
  };
  if (number("/status/observedGeneration") < number("/metadata/generation")) {
    return "StatefulSet " + set_name + "'s controller has not yet seen its new pod template";
  }
  const int64_t replicas = statefulset.value("/spec/replicas"_json_pointer, int64_t{1});
  const int64_t updated = number("/status/updatedReplicas");
  const int64_t ready = number("/status/readyReplicas");
  // A backup that cannot be scheduled (HA on one Node) must not hold the workers back: all pods
  // at the new template, one of them Ready.
  if (updated < replicas || ready < 1) {
    return "slurmctld is starting with the new configuration: " + std::to_string(updated) + " of " +
           std::to_string(replicas) + " pods of StatefulSet " + set_name +
           " at the new template, " + std::to_string(ready) + " Ready";
  }
  return std::nullopt;
}

json build_controller_statefulset(const api::Controller& c, const ControllerInputs& in) {
  const api::ControllerSpec& s = c.spec;
  const int replicas = s.ha.enabled ? 1 + static_cast<int>(s.ha.backups) : 1;
  // /etc/slurm: the generated files, the keys, and every referenced file, read-only.
  json sources = json::array(
      {{{"configMap", {{"name", controller_config_map_name(c)}}}},
       {{"secret",
         {{"name", s.slurm_key_ref.name},
          {"items", json::array({{{"key", s.slurm_key_ref.key}, {"path", "slurm.key"}}})}}}}});
  if (const api::KeyRef* jwt = s.jwt_key()) {
    sources.push_back({{"secret",
                        {{"name", jwt->name},
                         {"items", json::array({{{"key", jwt->key}, {"path", "jwt.key"}}})}}}});
  }
  if (s.jwks_key_ref) {
    sources.push_back(
        {{"configMap",
          {{"name", s.jwks_key_ref->name},
           {"items", json::array({{{"key", s.jwks_key_ref->key}, {"path", "jwks.json"}}})}}}});
  }
  for (const auto& ref : s.config_file_refs) {
    sources.push_back({{"configMap", {{"name", ref.name}}}});
  }
  // Scripts must be executable; a projected source sets modes per item only.
  for (const auto& [refs, field, scripts] : s.config_refs()) {
    if (!scripts) {
      continue;
    }
    for (const auto& ref : *refs) {
      json items = json::array();
      if (const auto it = in.config_maps.find(ref.name); it != in.config_maps.end()) {
        for (const auto& [key, value] : it->second) {
          items.push_back({{"key", key}, {"path", key}, {"mode", 0755}});
        }
      }
      json source = {{"name", ref.name}};
      if (!items.empty()) {
        source["items"] = items;
      }
      sources.push_back({{"configMap", source}});
    }
  }
  json volumes = json::array(
      {{{"name", "slurm-etc"}, {"projected", {{"defaultMode", 0600}, {"sources", sources}}}},
       {{"name", "run"}, {"emptyDir", {{"medium", "Memory"}}}},
       {{"name", "slurmctld-auth"}, {"emptyDir", {{"medium", "Memory"}}}},
       logfile_volume()});
  json claim_templates = json::array();
  const bool persistent = s.persistence.enabled.value_or(true);
  if (!persistent) {
    volumes.push_back({{"name", "statesave"}, {"emptyDir", json::object()}});
  } else if (!s.persistence.existing_claim.empty()) {
    volumes.push_back({{"name", "statesave"},
                       {"persistentVolumeClaim", {{"claimName", s.persistence.existing_claim}}}});
  } else {
    json claim = merge_over({{"accessModes", json::array({"ReadWriteOnce"})},
                             {"resources", {{"requests", {{"storage", "4Gi"}}}}}},
                            s.persistence.claim_spec);
    claim_templates.push_back({{"metadata", {{"name", "statesave"}}}, {"spec", claim}});
  }
  const json probe_live = {{"httpGet", {{"path", "/livez"}, {"port", "slurmctld"}}}};
  json slurmctld = {
      {"name", "slurmctld"},
      {"image", slurm_image("slurmctld")},
      {"ports",
       json::array(
           {{{"name", "slurmctld"}, {"containerPort", kSlurmctldPort}, {"protocol", "TCP"}}})},
      {"startupProbe", merge_over(probe_live, {{"periodSeconds", 10}, {"failureThreshold", 6}})},
      {"livenessProbe", probe_live},
      // A standby must stay Ready (it answers /livez, not /readyz), or HA loses its endpoint.
      {"readinessProbe",
       {{"httpGet", {{"path", s.ha.enabled ? "/livez" : "/readyz"}, {"port", "slurmctld"}}}}},
      {"securityContext", unprivileged_daemon()},
      {"volumeMounts",
       json::array({{{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}},
                    {{"name", "run"}, {"mountPath", "/run"}},
                    {{"name", "slurmctld-auth"}, {"mountPath", "/run/slurmctld"}},
                    {{"name", "logfile"}, {"mountPath", "/var/log/slurm"}},
                    {{"name", "statesave"}, {"mountPath", "/var/spool/slurmctld"}}})}};
  slurmctld = merge_over(slurmctld, s.slurmctld);
  json init = json::array({logfile_sidecar("slurmctld.log", s.logfile)});
  if (s.inplace_reconfigure) {
    // Reconfigures slurmctld when the mounted files change, instead of a new pod.
    json reconfigure = {
        {"name", "reconfigure"},
        {"image", slurm_image("slurmctld")},
        {"restartPolicy", "Always"},
        {"command",
         json::array({"sh", "-c",
                      "trap 'exit 0' TERM; last=$(cat /etc/slurm/* 2>/dev/null | sha256sum); "
                      "while sleep 5 & wait $!; do "
                      "now=$(cat /etc/slurm/* 2>/dev/null | sha256sum); if [ \"$now\" != "
                      "\"$last\" ]; then scontrol reconfigure && last=$now; fi; done"})},
        {"securityContext", unprivileged_daemon()},
        {"volumeMounts",
         json::array({{{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}},
                      {{"name", "slurmctld-auth"}, {"mountPath", "/run/slurmctld"}}})}};
    init.push_back(merge_over(reconfigure, s.reconfigure));
  }
  json base = {{"automountServiceAccountToken", false},
               {"securityContext",
                {{"runAsNonRoot", true},
                 {"runAsUser", kSlurmUid},
                 {"runAsGroup", kSlurmUid},
                 {"fsGroup", kSlurmUid},
                 {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
               {"initContainers", init},
               {"containers", json::array({slurmctld})},
               {"volumes", volumes}};
  if (s.ha.enabled) {
    base["affinity"] = {
        {"podAntiAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           json::array({{{"topologyKey", "kubernetes.io/hostname"},
                         {"labelSelector",
                          {{"matchLabels", selector_labels("slurmctld", c.metadata.name)}}}}})}}}};
  }
  // A new hash in the pod template rolls the pods; in-place reconfigure hashes only the keys.
  json annotations = {{api::kAnnotationSlurmKeyHash, in.slurm_key_hash},
                      {api::kAnnotationJwtKeyHash, in.jwt_key_hash},
                      {api::kAnnotationDefaultContainer, "slurmctld"}};
  if (!s.inplace_reconfigure) {
    annotations[api::kAnnotationSlurmConfigHash] = controller_config_hash(c, in);
  }
  json spec = {{"replicas", replicas},
               {"serviceName", controller_headless_service_name(c)},
               {"revisionHistoryLimit", 0},
               {"podManagementPolicy", "Parallel"},
               {"selector", {{"matchLabels", selector_labels("slurmctld", c.metadata.name)}}},
               {"template", pod_template(labels_of(c), annotations, base, s.template_)}};
  if (!claim_templates.empty()) {
    spec["volumeClaimTemplates"] = claim_templates;
  }
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", object_meta(controller_statefulset_name(c), c.metadata.namespace_name,
                                   labels_of(c), owner_of(c))},
          {"spec", spec}};
}

json build_controller_headless_service(const api::Controller& c) {
  // Its own component label: the ServiceMonitor selects the client Service only, so that each
  // slurmctld is scraped once (and, with HA, only the active one).
  json labels = labels_of(c);
  labels[api::kLabelComponent] = "controller-internal";
  json svc =
      service(controller_headless_service_name(c), c.metadata.namespace_name, labels, owner_of(c),
              {{"clusterIP", "None"},
               {"publishNotReadyAddresses", true},
               {"selector", selector_labels("slurmctld", c.metadata.name)},
               {"ports", json::array({{{"name", "slurmctld"},
                                       {"port", kSlurmctldPort},
                                       {"targetPort", "slurmctld"},
                                       {"protocol", "TCP"}}})}},
              {});
  return svc;
}

json build_controller_service(const api::Controller& c) {
  json selector = selector_labels("slurmctld", c.metadata.name);
  if (c.spec.ha.enabled) {
    // Only the slurmctld that answers as primary (labelled by the reconciler after a ping).
    selector[api::kLabelControllerActive] = "true";
  }
  return service(controller_service_name(c), c.metadata.namespace_name, labels_of(c), owner_of(c),
                 {{"selector", selector},
                  {"ports", json::array({{{"name", "slurmctld"},
                                          {"port", kSlurmctldPort},
                                          {"targetPort", "slurmctld"},
                                          {"protocol", "TCP"}}})}},
                 c.spec.service);
}

json build_controller_service_monitor(const api::Controller& c) {
  const api::ServiceMonitorSpec& m = c.spec.metrics.service_monitor;
  json endpoints = json::array();
  std::vector<api::MetricEndpoint> wanted = m.endpoints;
  if (wanted.empty()) {
    for (const char* path :
         {"/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler"}) {
      wanted.push_back({path, "", ""});
    }
  }
  for (const auto& e : wanted) {
    // Four paths on one port would make four targets with the same labels, whose `up` and
    // scrape series collide: the path tells them apart.
    json endpoint = {{"port", "slurmctld"},
                     {"path", e.path},
                     {"relabelings", json::array({{{"action", "replace"},
                                                   {"sourceLabels", {"__metrics_path__"}},
                                                   {"targetLabel", "metrics_path"}}})}};
    const std::string interval = e.interval.empty() ? m.interval : e.interval;
    const std::string timeout = e.scrape_timeout.empty() ? m.scrape_timeout : e.scrape_timeout;
    if (!interval.empty()) {
      endpoint["interval"] = interval;
    }
    if (!timeout.empty()) {
      endpoint["scrapeTimeout"] = timeout;
    }
    endpoints.push_back(endpoint);
  }
  json meta =
      object_meta(controller_service_name(c), c.metadata.namespace_name, labels_of(c), owner_of(c));
  for (const auto& [k, v] : m.labels) {
    meta["labels"][k] = v;
  }
  if (!m.annotations.empty()) {
    meta["annotations"] = m.annotations;
  }
  return {{"apiVersion", "monitoring.coreos.com/v1"},
          {"kind", "ServiceMonitor"},
          {"metadata", meta},
          {"spec",
           {{"namespaceSelector", {{"matchNames", json::array({c.metadata.namespace_name})}}},
            {"selector",
             {{"matchLabels", merge_over(selector_labels("slurmctld", c.metadata.name),
                                         {{api::kLabelComponent, "controller"}})}}},
            {"endpoints", endpoints}}}};
}

std::vector<json> build_controller_objects(const api::Controller& c, const ControllerInputs& in,
                                           bool service_monitor_crd_installed) {
  std::vector<json> out = {build_controller_config_map(c, in)};
  if (c.spec.external) {
    return out;
  }
  out.push_back(build_controller_headless_service(c));
  out.push_back(build_controller_service(c));
  out.push_back(build_controller_statefulset(c, in));
  if (c.spec.metrics.enabled && c.spec.metrics.service_monitor.enabled &&
      service_monitor_crd_installed) {
    out.push_back(build_controller_service_monitor(c));
  }
  return out;
}

}  // namespace tightrope::op::build
