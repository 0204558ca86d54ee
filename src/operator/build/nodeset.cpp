#include "operator/build/nodeset.hpp"

#include <strings.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "operator/build/common.hpp"
#include "operator/build/components.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/power.hpp"

namespace tightrope::op::build {

using nlohmann::json;

namespace {

constexpr std::string_view kWorkerToleration = "nodeset.slinky.slurm.net/worker";

json nodeset_owner_reference(const api::NodeSet& n, bool controller) {
  json ref = owner_reference({"NodeSet", n.metadata.name, n.metadata.uid});
  if (!controller) {
    ref["controller"] = false;
    ref["blockOwnerDeletion"] = false;
  }
  return ref;
}

// Sorted by name: the shared objects do not change when the NodeSets are listed in another order.
json shared_owner_references(const std::vector<api::NodeSet>& nodesets) {
  std::vector<const api::NodeSet*> sorted;
  sorted.reserve(nodesets.size());
  for (const auto& n : nodesets) {
    sorted.push_back(&n);
  }
  std::sort(sorted.begin(), sorted.end(), [](const api::NodeSet* a, const api::NodeSet* b) {
    return a->metadata.name < b->metadata.name;
  });
  json refs = json::array();
  for (const auto* n : sorted) {
    refs.push_back(nodeset_owner_reference(*n, false));
  }
  return refs;
}

json worker_labels(const api::Controller& c) {
  json labels = component_labels("slurmd", c.metadata.name, "worker");
  labels[api::kLabelCluster] = c.metadata.name;
  return labels;
}

}  // namespace

std::string nodeset_padded_ordinal(const api::NodeSet& n, int64_t ordinal) {
  std::string digits = std::to_string(ordinal);
  const auto width = static_cast<size_t>(std::max<int64_t>(n.spec.ordinal_padding, 0));
  if (digits.size() < width) {
    digits.insert(0, width - digits.size(), '0');
  }
  return digits;
}

std::string nodeset_pod_name(const api::NodeSet& n, int64_t ordinal) {
  std::string name = n.metadata.name;
  name += '-';
  name += nodeset_padded_ordinal(n, ordinal);
  return name;
}

std::string nodeset_pod_hostname(const api::NodeSet& n, int64_t ordinal) {
  const auto it = n.spec.template_.spec.find("hostname");
  if (it == n.spec.template_.spec.end() || !it->is_string() || it->get<std::string>().empty()) {
    return nodeset_pod_name(n, ordinal);
  }
  return it->get<std::string>() + nodeset_padded_ordinal(n, ordinal);
}

int64_t nodeset_pod_ordinal(const api::NodeSet& n, const std::string& pod_name) {
  const std::string& prefix = n.metadata.name;
  if (pod_name.size() <= prefix.size() + 1 || !pod_name.starts_with(prefix) ||
      pod_name[prefix.size()] != '-') {
    return -1;
  }
  const char* begin = pod_name.data() + prefix.size() + 1;
  const char* end = pod_name.data() + pod_name.size();
  int64_t ordinal = -1;
  const auto [at, ec] = std::from_chars(begin, end, ordinal);
  return ec == std::errc() && at == end && ordinal >= 0 ? ordinal : -1;
}

std::string nodeset_selector(const std::string& nodeset_name) {
  return std::string(api::kLabelInstance) + "=" + nodeset_name + "," +
         std::string(api::kLabelName) + "=slurmd";
}

std::string worker_service_name(const api::Controller& c) {
  return "slurm-workers-" + c.metadata.name;
}

std::string worker_pdb_name(const api::Controller& c) {
  return "slurm-workers-pdb-" + c.metadata.name;
}

Result<std::string, std::string> slurmd_conf(const api::NodeSet& n) {
  std::map<std::string, std::string> settings;
  std::string features = n.slurm_name();
  std::istringstream words(n.spec.extra_conf);
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail("spec.extraConf: \"" + word + "\" is not Key=Value");
    }
    const std::string key = word.substr(0, eq);
    std::string value = word.substr(eq + 1);
    if (value.empty()) {
      return fail("spec.extraConf: " + key +
                  "= has no value (Slurm would read the next word as its value)");
    }
    if (key == "Features" || key == "Feature") {
      features += ',';
      features += value;
      continue;
    }
    settings[key] = std::move(value);
  }
  settings["Features"] = features;
  const auto gpus = nodeset_gpus(n);
  if (!gpus) {
    return fail(gpus.error().to_string());
  }
  if (gpus->wants_gpus() && !gpus->from_extra_conf) {
    // The count and type must be right at registration: Slurm cannot change a count backed by
    // device files later (scontrol update Gres= only sets it to 0).
    std::string gres;
    for (auto it = settings.begin(); it != settings.end();) {
      if (strcasecmp(it->first.c_str(), "Gres") == 0) {
        gres = it->second;
        it = settings.erase(it);
      } else {
        ++it;
      }
    }
    settings["Gres"] = gres.empty() ? gpus->item : gres + "," + gpus->item;
  }
  std::string conf;
  for (const auto& [key, value] : settings) {
    if (!conf.empty()) {
      conf += ' ';
    }
    conf += key;
    conf += '=';
    conf += value;
  }
  return conf;
}

json nodeset_revision_data(const api::NodeSet& n, const NodeSetInputs& in) {
  const json spec = api::encode(n).at("spec");
  json data = json::object();
  for (const char* field : {"template", "slurmd", "logfile", "ssh", "extraConf", "ordinalPadding",
                            "oversubscribeNode"}) {
    if (spec.contains(field)) {
      data[field] = spec.at(field);
    }
  }
  // Where slurmd finds slurmctld is in every pod's arguments: moving it rolls the workers.
  data["confServer"] = controller_conf_server(in.controller);
  // Power saving changes slurmd's arguments and its pod's end.
  if (power_saved(n)) {
    data["powerSaving"] = true;
  }
  // So are the IMEX channels: asking for them rolls the workers onto the domain.
  if (wants_compute_domain(n)) {
    data["computeDomain"] = compute_domain_name(n);
  }
  return {{"spec", data}};
}

std::string nodeset_revision_name(const api::NodeSet& n, const NodeSetInputs& in) {
  return n.metadata.name + "-" + sha256_hex(nodeset_revision_data(n, in).dump()).substr(0, 10);
}

json build_controller_revision(const api::NodeSet& n, const NodeSetInputs& in, int64_t revision) {
  json labels = component_labels("slurmd", n.metadata.name, "worker");
  labels[api::kLabelCluster] = n.spec.controller_ref.name;
  return {{"apiVersion", "apps/v1"},
          {"kind", "ControllerRevision"},
          {"metadata", object_meta(nodeset_revision_name(n, in), n.metadata.namespace_name, labels,
                                   {"NodeSet", n.metadata.name, n.metadata.uid})},
          {"data", nodeset_revision_data(n, in)},
          {"revision", revision}};
}

Result<json, std::string> build_nodeset_pod(const api::NodeSet& n, const NodeSetInputs& in,
                                            int64_t ordinal, const std::string& pinned_node) {
  return build_nodeset_pod(n, in,
                           {nodeset_pod_name(n, ordinal), nodeset_pod_hostname(n, ordinal),
                            nodeset_padded_ordinal(n, ordinal), nodeset_padded_ordinal(n, ordinal)},
                           pinned_node);
}

std::string daemon_pod_hostname(const nlohmann::json& node) {
  const json annotations = node.value("/metadata/annotations"_json_pointer, json::object());
  const auto given = annotations.find(std::string(api::kAnnotationNodeHostnameOverride));
  if (given != annotations.end() && given->is_string() && !given->get<std::string>().empty()) {
    return given->get<std::string>();
  }
  const std::string name = node.value("/metadata/name"_json_pointer, std::string());
  return name.substr(0, name.find('.'));
}

std::string daemon_pod_name(const api::NodeSet& n, const std::string& hostname) {
  return n.metadata.name + "-" + hostname;
}

std::string nodeset_host_keys_name(const api::NodeSet& n) {
  return n.metadata.name + "-ssh-host-keys";
}

std::string nodeset_ssh_config_name(const api::NodeSet& n) {
  return n.metadata.name + "-ssh-config";
}
std::string nodeset_health_config_name(const api::NodeSet& n) {
  return n.metadata.name + "-health";
}

json build_nodeset_host_keys_secret(const api::NodeSet& n,
                                    const std::map<std::string, std::string>& keys) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", object_meta(nodeset_host_keys_name(n), n.metadata.namespace_name,
                                   component_labels("slurmd", n.metadata.name, "worker"),
                                   {"NodeSet", n.metadata.name, n.metadata.uid})},
          {"type", "Opaque"},
          {"immutable", true},
          {"stringData", keys}};
}

json build_nodeset_ssh_config_map(const api::NodeSet& n) {
  return {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", object_meta(nodeset_ssh_config_name(n), n.metadata.namespace_name,
                               component_labels("slurmd", n.metadata.name, "worker"),
                               {"NodeSet", n.metadata.name, n.metadata.uid})},
      {"data",
       {{"sshd_config", build_sshd_config("NodeSet", n.metadata, n.spec.ssh.extra_sshd_config)}}}};
}

namespace {

// spec.ssh: port 22, sshd_config, the host keys and sssd.conf in the slurmd container.
void add_sshd(const api::NodeSet& n, json& container, json& volumes) {
  json port = json::object();
  port["name"] = "ssh";
  port["containerPort"] = 22;
  port["protocol"] = "TCP";
  container["ports"].push_back(port);
  const auto mount = [&](const char* volume, const std::string& path, const std::string& file) {
    json m = json::object();
    m["name"] = volume;
    m["mountPath"] = path;
    m["subPath"] = file;
    m["readOnly"] = true;
    container["volumeMounts"].push_back(m);
  };
  mount("ssh-config", "/etc/ssh/sshd_config", "sshd_config");
  for (const auto& file : kSshHostKeyFiles) {
    mount("ssh-host-keys", "/etc/ssh/" + std::string(file), std::string(file));
  }
  mount("sssd-conf", "/etc/sssd/sssd.conf", "sssd.conf");
  json config = json::object();
  config["name"] = "ssh-config";
  config["configMap"]["name"] = nodeset_ssh_config_name(n);
  json keys = json::object();
  keys["name"] = "ssh-host-keys";
  keys["secret"]["secretName"] = nodeset_host_keys_name(n);
  keys["secret"]["defaultMode"] = 0600;
  json item = json::object();
  item["key"] = n.spec.ssh.sssd_conf_ref.key;
  item["path"] = "sssd.conf";
  json sssd = json::object();
  sssd["name"] = "sssd-conf";
  sssd["secret"]["secretName"] = n.spec.ssh.sssd_conf_ref.name;
  sssd["secret"]["defaultMode"] = 0600;
  sssd["secret"]["items"] = json::array({item});
  volumes.push_back(config);
  volumes.push_back(keys);
  volumes.push_back(sssd);
}

// The slurmd container of pod `hostname` (spec.slurmd merged over it), with sshd's mounts and
// the volumes they need (added to `ssh_volumes`) when spec.ssh is on.
json slurmd_container(const api::NodeSet& n, const api::Controller& c, const std::string& hostname,
                      const std::string& conf, json& ssh_volumes) {
  const bool power = power_saved(n);
  const auto env_from_limit = [](const char* var, const char* resource, const char* divisor) {
    json ref = json::object();
    ref["containerName"] = "slurmd";
    ref["resource"] = resource;
    ref["divisor"] = divisor;
    json entry = json::object();
    entry["name"] = var;
    entry["valueFrom"]["resourceFieldRef"] = ref;
    return entry;
  };
  // The hostname is known here, so the hook names it. A node the operator drained for a failed
  // health check keeps that reason while DOWN: it is how the replacement is known to wait for its
  // own checks (remediation), and an outside signal's failure is on record nowhere else.
  const std::string prefix(api::kReasonPrefix);
  std::string terminating =
      "held=$(scontrol show node " + hostname + R"( 2>/dev/null | sed -n 's/^ *Reason=\()" +
      prefix + R"(.*healthcheck: .*\) \[[^]]*\]$/\1/p'); scontrol update nodename=)" + hostname +
      R"( state=down reason="${held:-)" + prefix + R"(Pod is terminating}")";
  if (power) {
    // A node Slurm powered down is not to be set DOWN: it could not be powered up again.
    terminating = "case $(scontrol show node " + hostname +
                  R"( 2>/dev/null) in *POWERED_DOWN*|*POWERING_DOWN*) exit 0 ;; esac; )" +
                  terminating;
  }
  // Built a part at a time: deeply nested initializer lists of json cost compilers and
  // clang-tidy minutes.
  json env = json::array();
  env.push_back(env_from_limit("POD_CPUS", "limits.cpu", "1"));
  env.push_back(env_from_limit("POD_MEMORY", "limits.memory", "1Mi"));
  json topology_ref = json::object();
  topology_ref["fieldPath"] =
      "metadata.annotations['" + std::string(api::kAnnotationNodeTopologySpec) + "']";
  json topology = json::object();
  topology["name"] = "SLINKY_TOPOLOGY";
  topology["valueFrom"]["fieldRef"] = topology_ref;
  env.push_back(topology);

  const auto http_probe = [](const char* path) {
    json probe = json::object();
    probe["httpGet"]["path"] = path;
    probe["httpGet"]["port"] = "slurmd";
    return probe;
  };
  json container = json::object();
  container["name"] = "slurmd";
  container["image"] = slurm_image("slurmd");
  // A power-saved node's slurmd says it has just booted (-b): slurmctld waits for that from a
  // node it powers up, and would keep waiting for the host's uptime to reset.
  container["args"] =
      power ? json::array({"-Z", "-b", "--conf-server", controller_conf_server(c), "--conf", conf})
            : json::array({"-Z", "--conf-server", controller_conf_server(c), "--conf", conf});
  container["env"] = env;
  // A slurmd that dies shows the end of its log in the pod's status, and so in the NodeSet's
  // PodsFailing message: "fatal: ..." without kubectl logs.
  container["terminationMessagePolicy"] = "FallbackToLogsOnError";
  json port = json::object();
  port["name"] = "slurmd";
  port["containerPort"] = kSlurmdPort;
  port["protocol"] = "TCP";
  container["ports"] = json::array({port});
  json startup = http_probe("/livez");
  startup["periodSeconds"] = 10;
  startup["failureThreshold"] = 6;
  container["startupProbe"] = startup;
  container["livenessProbe"] = http_probe("/livez");
  container["readinessProbe"] = http_probe("/readyz");
  container["securityContext"]["privileged"] = true;
  container["securityContext"]["capabilities"]["add"] =
      json::array({"BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"});
  container["lifecycle"]["preStop"]["exec"]["command"] =
      json::array({"/bin/sh", "-c", terminating});
  json mount = json::object();
  mount["name"] = "slurm-etc";
  mount["mountPath"] = "/etc/slurm";
  json log_mount = json::object();
  log_mount["name"] = "logfile";
  log_mount["mountPath"] = "/var/log/slurm";
  json health_mount = json::object();
  health_mount["name"] = "health";
  health_mount["mountPath"] = kHealthConfigDir;
  health_mount["readOnly"] = true;
  container["volumeMounts"] = json::array({mount, log_mount, health_mount});
  if (n.spec.ssh.enabled) {
    add_sshd(n, container, ssh_volumes);
  }
  return merge_over(container, n.spec.slurmd);
}

}  // namespace

Result<json, std::string> build_nodeset_pod(const api::NodeSet& n, const NodeSetInputs& in,
                                            const PodIdentity& identity,
                                            const std::string& pinned_node) {
  auto conf = slurmd_conf(n);
  if (!conf) {
    return fail(conf.error());
  }
  const api::Controller& c = in.controller;
  const std::string& name = identity.name;
  const std::string& hostname = identity.hostname;
  json labels = component_labels("slurmd", n.metadata.name, "worker");
  labels[api::kLabelCluster] = c.metadata.name;
  labels[api::kLabelNodeSetPodName] = name;
  if (!identity.index.empty()) {
    labels[api::kLabelNodeSetPodIndex] = identity.index;
  }
  labels[api::kLabelNodeSetPodHostname] = hostname;
  labels[api::kLabelNodeSetScalingMode] = n.spec.scaling_mode;
  labels[std::string(api::kLabelRevision)] = nodeset_revision_name(n, in);

  json ssh_volumes = json::array();
  const json container = slurmd_container(n, c, hostname, *conf, ssh_volumes);

  const std::string workers = worker_service_name(c);
  json base = json::object();
  base["hostname"] = hostname;
  base["subdomain"] = workers;
  base["dnsConfig"]["searches"] =
      json::array({workers + "." + n.metadata.namespace_name + ".svc.cluster.local"});
  base["enableServiceLinks"] = false;
  base["automountServiceAccountToken"] = false;
  json toleration = json::object();
  toleration["key"] = kWorkerToleration;
  toleration["operator"] = "Exists";
  toleration["effect"] = "NoExecute";
  base["tolerations"] = json::array({toleration});
  base["containers"] = json::array({container});
  // slurm.conf's SlurmdLogFile, shown by `kubectl logs <pod> -c logfile`.
  base["initContainers"] = json::array({logfile_sidecar("slurmd.log", n.spec.logfile)});
  json key_item = json::object();
  key_item["key"] = c.spec.slurm_key_ref.key;
  key_item["path"] = "slurm.key";
  json key_source = json::object();
  key_source["secret"]["name"] = c.spec.slurm_key_ref.name;
  key_source["secret"]["items"] = json::array({key_item});
  json volume = json::object();
  volume["name"] = "slurm-etc";
  volume["projected"]["defaultMode"] = 0600;
  volume["projected"]["sources"] = json::array({key_source});
  json health = json::object();
  health["name"] = "health";
  health["configMap"]["name"] = nodeset_health_config_name(n);
  health["configMap"]["optional"] = true;
  health["configMap"]["defaultMode"] = 0755;  // the site's scripts run as they are
  base["volumes"] = json::array({volume, logfile_volume(), health});
  for (const auto& v : ssh_volumes) {
    base["volumes"].push_back(v);
  }
  for (const auto& claim : n.spec.volume_claim_templates) {
    // Mounted where the user's template says (volumeMounts of the same name).
    const std::string claim_name = claim.value("/metadata/name"_json_pointer, std::string());
    json source = json::object();
    source["name"] = claim_name;
    source["persistentVolumeClaim"]["claimName"] =
        nodeset_claim_name(n, claim_name, identity.claim_suffix);
    base["volumes"].push_back(source);
  }
  if (!n.spec.oversubscribe_node) {
    // One slurmd per Kubernetes node, whatever its NodeSet: two would fight over the node.
    json term = json::object();
    term["labelSelector"]["matchLabels"][std::string(api::kLabelName)] = "slurmd";
    term["topologyKey"] = "kubernetes.io/hostname";
    base["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        json::array({term});
  }
  json pod =
      pod_template(labels, {{api::kAnnotationDefaultContainer, "slurmd"}}, base, n.spec.template_);
  // The template's hostname is a prefix: the pod's own is the prefix and ordinal.
  pod["spec"]["hostname"] = hostname;
  if (!pinned_node.empty()) {
    // Back where this ordinal ran (its local disks, its place in the topology), and nowhere else.
    json requirement = json::object();
    requirement["key"] = "metadata.name";
    requirement["operator"] = "In";
    requirement["values"] = json::array({pinned_node});
    json term = json::object();
    term["matchFields"] = json::array({requirement});
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
       ["nodeSelectorTerms"] = json::array({term});
  }
  if (wants_compute_domain(n)) {
    add_channel_claim(n, pod);
  }
  json& meta = pod["metadata"];
  meta["name"] = name;
  meta["namespace"] = n.metadata.namespace_name;
  meta["ownerReferences"] = json::array({nodeset_owner_reference(n, true)});
  return json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", pod["spec"]}};
}

std::string nodeset_claim_name(const api::NodeSet& n, const std::string& claim,
                               const std::string& suffix) {
  return claim + "-" + n.metadata.name + "-" + suffix;
}

std::vector<json> build_nodeset_claims(const api::NodeSet& n, const std::string& suffix) {
  std::vector<json> out;
  out.reserve(n.spec.volume_claim_templates.size());
  for (const auto& claim : n.spec.volume_claim_templates) {
    const std::string name = claim.value("/metadata/name"_json_pointer, std::string());
    json pvc = json::object();
    pvc["apiVersion"] = "v1";
    pvc["kind"] = "PersistentVolumeClaim";
    pvc["metadata"] = claim.value("metadata", json::object());
    pvc["metadata"]["name"] = nodeset_claim_name(n, name, suffix);
    pvc["metadata"]["namespace"] = n.metadata.namespace_name;
    json labels = pvc["metadata"].value("labels", json::object());
    labels.update(selector_labels("slurmd", n.metadata.name));
    pvc["metadata"]["labels"] = labels;
    if (n.spec.persistent_volume_claim_retention_policy.when_deleted == "Delete") {
      pvc["metadata"]["ownerReferences"] = json::array({nodeset_owner_reference(n, false)});
    }
    pvc["spec"] = claim.value("spec", json::object());
    out.push_back(pvc);
  }
  return out;
}

namespace {

std::string node_label(const json& node, const std::string& key) {
  const json labels = node.value("/metadata/labels"_json_pointer, json::object());
  const auto it = labels.find(key);
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

bool has_label(const json& node, const std::string& key) {
  return node.value("/metadata/labels"_json_pointer, json::object()).contains(key);
}

bool requirement_holds(const json& requirement, bool has, const std::string& value) {
  const std::string op = requirement.value("operator", "");
  const json values = requirement.value("values", json::array());
  const auto listed = [&] {
    return std::any_of(values.begin(), values.end(), [&](const json& v) {
      return v.is_string() && v.get<std::string>() == value;
    });
  };
  const auto number = [](const std::string& text, int64_t* out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  if (op == "In") {
    return has && listed();
  }
  if (op == "NotIn") {
    return !has || !listed();
  }
  if (op == "Exists") {
    return has;
  }
  if (op == "DoesNotExist") {
    return !has;
  }
  if ((op == "Gt" || op == "Lt") && has && values.size() == 1 && values[0].is_string()) {
    int64_t have = 0;
    int64_t bound = 0;
    if (!number(value, &have) || !number(values[0].get<std::string>(), &bound)) {
      return false;
    }
    return op == "Gt" ? have > bound : have < bound;
  }
  return false;
}

bool term_holds(const json& term, const json& node) {
  for (const auto& r : term.value("matchExpressions", json::array())) {
    const std::string key = r.value("key", "");
    if (!requirement_holds(r, has_label(node, key), node_label(node, key))) {
      return false;
    }
  }
  for (const auto& r : term.value("matchFields", json::array())) {
    // metadata.name is the only field a node selector term may name.
    if (r.value("key", "") != "metadata.name" ||
        !requirement_holds(r, true, node.value("/metadata/name"_json_pointer, std::string()))) {
      return false;
    }
  }
  return true;
}

// Taints a DaemonSet's pods tolerate without saying so: conditions of the node, not choices.
bool tolerated_by_default(const std::string& key) {
  static const std::set<std::string> keys = {
      "node.kubernetes.io/not-ready",          "node.kubernetes.io/unreachable",
      "node.kubernetes.io/unschedulable",      "node.kubernetes.io/disk-pressure",
      "node.kubernetes.io/memory-pressure",    "node.kubernetes.io/pid-pressure",
      "node.kubernetes.io/network-unavailable"};
  return keys.count(key) != 0;
}

bool tolerates(const json& toleration, const json& taint) {
  const std::string effect = toleration.value("effect", "");
  if (!effect.empty() && effect != taint.value("effect", "")) {
    return false;
  }
  const std::string key = toleration.value("key", "");
  if (toleration.value("operator", "Equal") == "Exists") {
    return key.empty() || key == taint.value("key", "");
  }
  return key == taint.value("key", "") && toleration.value("value", "") == taint.value("value", "");
}

}  // namespace

bool daemon_node_eligible(const json& pod_spec, const json& node) {
  const json selector = pod_spec.value("nodeSelector", json::object());
  for (const auto& [key, value] : selector.items()) {
    if (!value.is_string() || !has_label(node, key) ||
        node_label(node, key) != value.get<std::string>()) {
      return false;
    }
  }
  const json terms = pod_spec.value(
      "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"_json_pointer,
      json::array());
  if (!terms.empty() && std::none_of(terms.begin(), terms.end(),
                                     [&](const json& t) { return term_holds(t, node); })) {
    return false;
  }
  const json tolerations = pod_spec.value("tolerations", json::array());
  for (const auto& taint : node.value("/spec/taints"_json_pointer, json::array())) {
    const std::string effect = taint.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") {
      continue;
    }
    if (tolerated_by_default(taint.value("key", ""))) {
      continue;
    }
    if (std::none_of(tolerations.begin(), tolerations.end(),
                     [&](const json& t) { return tolerates(t, taint); })) {
      return false;
    }
  }
  return true;
}

json build_worker_service(const api::Controller& c, const std::vector<api::NodeSet>& nodesets) {
  json labels = worker_labels(c);
  json meta = {{"name", worker_service_name(c)},
               {"namespace", c.metadata.namespace_name},
               {"labels", labels},
               {"ownerReferences", shared_owner_references(nodesets)}};
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", meta},
          {"spec",
           {{"clusterIP", "None"},
            // Names resolve while a slurmd starts: slurmctld reaches nodes by name at once.
            {"publishNotReadyAddresses", true},
            {"selector", {{api::kLabelName, "slurmd"}, {api::kLabelCluster, c.metadata.name}}},
            {"ports", json::array({{{"name", "slurmd"},
                                    {"port", kSlurmdPort},
                                    {"targetPort", "slurmd"},
                                    {"protocol", "TCP"}}})}}}};
}

json build_worker_pdb(const api::Controller& c, const std::vector<api::NodeSet>& nodesets) {
  json meta = {{"name", worker_pdb_name(c)},
               {"namespace", c.metadata.namespace_name},
               {"labels", worker_labels(c)},
               {"ownerReferences", shared_owner_references(nodesets)}};
  return {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", meta},
      {"spec",
       {{"maxUnavailable", 0},
        {"selector",
         {{"matchLabels",
           {{api::kLabelNodeSetPodProtect, "true"}, {api::kLabelCluster, c.metadata.name}}}}}}}};
}

json pod_info(const api::NodeSet& n, const std::string& pod_name, const std::string& kube_node) {
  return {{"namespace", n.metadata.namespace_name},
          {"podName", pod_name},
          {"node", kube_node},
          {"nodeSetName", n.metadata.name},
          {"nodeSetUID", n.metadata.uid}};
}

}  // namespace tightrope::op::build
