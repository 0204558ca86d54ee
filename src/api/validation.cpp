#include "api/validation.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <string>

#include "api/defaults.hpp"

namespace tightrope::api {
namespace {

void require(FieldErrors& errors, bool ok, std::string field, std::string message) {
  if (!ok) {
    errors.push_back({std::move(field), std::move(message)});
  }
}

void require_key_ref(FieldErrors& errors, const KeyRef& ref, const std::string& field) {
  require(errors, !ref.name.empty(), field + ".name", "required: the Secret's name");
  require(errors, !ref.key.empty(), field + ".key", "required: the key in the Secret");
}

void check_port(FieldErrors& errors, int64_t port, const std::string& field, bool required) {
  if (port == 0 && !required) {
    return;
  }
  require(errors, port >= 1 && port <= 65535, field, "must be a port number from 1 to 65535");
}

// RFC 1123 label: what a pod hostname and a Service name may be.
bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') {
    return false;
  }
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) != 0 ||
          std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '-')) {
      return false;
    }
  }
  return true;
}

// A Kubernetes qualified name (a label key, a taint key): an optional DNS subdomain prefix and
// "/", then up to 63 of [A-Za-z0-9-_.], starting and ending alphanumeric.
bool qualified_name(const std::string& s) {
  const size_t slash = s.find('/');
  const std::string prefix = slash == std::string::npos ? "" : s.substr(0, slash);
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (slash != std::string::npos) {
    if (prefix.empty() || prefix.size() > 253) {
      return false;
    }
    size_t start = 0;
    while (start <= prefix.size()) {
      const size_t dot = std::min(prefix.find('.', start), prefix.size());
      if (!dns_label(prefix.substr(start, dot - start))) {
        return false;
      }
      start = dot + 1;
    }
  }
  if (name.empty() || name.size() > 63 || !alnum(name.front()) || !alnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// maxUnavailable, maxUnhealthy: 3 or "25%", above zero.
bool positive_count_or_percent(const nlohmann::json& value) {
  if (value.is_number_integer()) {
    return value.get<int64_t>() > 0;
  }
  if (!value.is_string()) {
    return false;
  }
  // from_chars, not stoll: "99999999999999999999%" must be refused, not thrown.
  const std::string text = value.get<std::string>();
  if (text.size() < 2 || text.back() != '%') {
    return false;
  }
  const char* digits_end = text.data() + text.size() - 1;
  int64_t percent = 0;
  const auto [end, ec] = std::from_chars(text.data(), digits_end, percent);
  return ec == std::errc() && end == digits_end && percent > 0;
}

void check_replicas(FieldErrors& errors, const std::optional<int64_t>& replicas) {
  require(errors, !replicas || *replicas >= 0, "spec.replicas", "must not be negative");
}

void check_service(FieldErrors& errors, const ServiceTemplate& service) {
  check_port(errors, service.port, "spec.service.port", false);
  check_port(errors, service.node_port, "spec.service.nodePort", false);
}

void check_jwt(FieldErrors& errors, const KeyRef* jwt, const std::optional<KeyRef>& modern) {
  if (jwt == nullptr) {
    errors.push_back({"spec.jwtKeyRef",
                      "required: jwtKeyRef (or jwtHs256KeyRef) names the "
                      "Secret key that holds the auth/jwt HS256 key"});
    return;
  }
  require_key_ref(errors, *jwt, modern ? "spec.jwtKeyRef" : "spec.jwtHs256KeyRef");
}

void immutable(FieldErrors& errors, bool same, std::string field) {
  require(errors, same, std::move(field), "is immutable once set");
}

bool same_jwt(const KeyRef* a, const KeyRef* b) {
  if (a == nullptr || b == nullptr) {
    return a == b;
  }
  return a->name == b->name && a->key == b->key;
}

}  // namespace

FieldErrors validate(const Controller& c) {
  FieldErrors errors;
  const ControllerSpec& s = c.spec;
  const std::string cluster = c.cluster_name();
  require(errors, cluster.size() <= kMaxClusterName, "spec.clusterName",
          "must be at most 40 characters (\"" + cluster + "\" has " +
              std::to_string(cluster.size()) +
              "): slurmdbd names its MySQL tables after it, and MySQL's names are short");
  // Only what slurm.conf cannot hold: its parser ends a value at a blank and a comment at '#'.
  for (char ch : cluster) {
    if (std::isspace(static_cast<unsigned char>(ch)) != 0 || ch == '#' || ch == '=') {
      errors.push_back({"spec.clusterName",
                        "may not hold blanks, '#' or '=': slurm.conf would read \"ClusterName=" +
                            cluster + "\" as something else"});
      break;
    }
  }
  if (s.external) {
    require(errors, !s.external_config.host.empty(), "spec.externalConfig.host",
            "required when external is true: where slurmctld runs");
    check_port(errors, s.external_config.port, "spec.externalConfig.port", true);
  } else {
    require_key_ref(errors, s.slurm_key_ref, "spec.slurmKeyRef");
    check_jwt(errors, s.jwt_key(), s.jwt_key_ref);
  }
  if (s.ha.enabled) {
    require(errors, s.ha.backups >= 1, "spec.ha.backups", "must be at least 1");
    require(errors, s.persistence.enabled.value_or(true), "spec.persistence.enabled",
            "must be true when ha.enabled: every slurmctld shares the state save location");
    require(errors, !s.persistence.existing_claim.empty(), "spec.persistence.existingClaim",
            "required when ha.enabled: a ReadWriteMany claim all slurmctld pods mount");
  }
  if (s.jwks_key_ref) {
    require(errors, !s.jwks_key_ref->name.empty(), "spec.jwksKeyRef.name",
            "required: the ConfigMap's name");
  }
  if (s.accounting_ref) {
    require(errors, !s.accounting_ref->name.empty(), "spec.accountingRef.name",
            "required: the Accounting's name");
  }
  check_service(errors, s.service);
  for (size_t i = 0; i < s.metrics.service_monitor.endpoints.size(); ++i) {
    const auto& path = s.metrics.service_monitor.endpoints[i].path;
    require(errors, !path.empty() && path.front() == '/',
            "spec.metrics.serviceMonitor.endpoints[" + std::to_string(i) + "].path",
            "required: an absolute HTTP path such as /metrics/nodes");
  }
  return errors;
}

FieldErrors validate_update(const Controller& o, const Controller& c) {
  FieldErrors errors = validate(c);
  immutable(errors, o.cluster_name() == c.cluster_name(), "spec.clusterName");
  immutable(errors,
            o.spec.slurm_key_ref.name == c.spec.slurm_key_ref.name &&
                o.spec.slurm_key_ref.key == c.spec.slurm_key_ref.key,
            "spec.slurmKeyRef");
  immutable(errors, same_jwt(o.spec.jwt_key(), c.spec.jwt_key()), "spec.jwtKeyRef");
  immutable(errors,
            o.spec.persistence.enabled.value_or(true) == c.spec.persistence.enabled.value_or(true),
            "spec.persistence.enabled");
  immutable(errors, o.spec.persistence.existing_claim == c.spec.persistence.existing_claim,
            "spec.persistence.existingClaim");
  return errors;
}

FieldErrors validate(const NodeSet& n) {
  FieldErrors errors;
  const NodeSetSpec& s = n.spec;
  require(errors, !s.controller_ref.name.empty(), "spec.controllerRef.name",
          "required: the Controller this NodeSet's slurmd pods join");
  require(errors,
          s.controller_ref.namespace_name.empty() ||
              s.controller_ref.namespace_name == n.metadata.namespace_name,
          "spec.controllerRef.namespace",
          "must be the NodeSet's own namespace (\"" + n.metadata.namespace_name + "\")");
  check_replicas(errors, s.replicas);
  require(errors, s.scaling_mode == "StatefulSet" || s.scaling_mode == "DaemonSet",
          "spec.scalingMode", "must be StatefulSet or DaemonSet");
  const std::string& type = s.update_strategy.type;
  require(errors, type == "RollingUpdate" || type == "OnDelete" || type == "ScheduledUpdate",
          "spec.updateStrategy.type", "must be RollingUpdate, OnDelete or ScheduledUpdate");
  require(errors, positive_count_or_percent(s.update_strategy.max_unavailable),
          "spec.updateStrategy.rollingUpdate.maxUnavailable",
          "must be a positive integer or a positive percentage such as \"25%\"");
  if (type == "ScheduledUpdate") {
    // Parsed where it is used (the NodeSet controller); the CRD's date-time format checks it.
    require(errors, !s.update_strategy.scheduled_update.start_time.empty(),
            "spec.updateStrategy.scheduledUpdate.startTime",
            R"(is required by ScheduledUpdate: an RFC 3339 time such as "2026-12-05T02:00:00Z")");
    const auto duration = parse_duration(s.update_strategy.scheduled_update.duration);
    require(errors, duration && *duration >= std::chrono::minutes(1),
            "spec.updateStrategy.scheduledUpdate.duration",
            "must be a duration of at least 1m, such as \"30m\"");
  }
  for (const auto* policy : {&s.persistent_volume_claim_retention_policy.when_deleted,
                             &s.persistent_volume_claim_retention_policy.when_scaled}) {
    require(errors, *policy == "Retain" || *policy == "Delete",
            policy == &s.persistent_volume_claim_retention_policy.when_deleted
                ? "spec.persistentVolumeClaimRetentionPolicy.whenDeleted"
                : "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
            "must be Retain or Delete");
  }
  require(errors, s.ordinal_padding >= 0 && s.ordinal_padding <= 10, "spec.ordinalPadding",
          "must be from 0 to 10");
  require(errors, s.revision_history_limit >= 0, "spec.revisionHistoryLimit",
          "must not be negative");
  require(errors, s.min_ready_seconds >= 0, "spec.minReadySeconds", "must not be negative");
  require(errors,
          s.prune_slurm_node_records == "Never" || s.prune_slurm_node_records == "NodeNotFound",
          "spec.pruneSlurmNodeRecords", "must be Never or NodeNotFound");
  require(errors, s.partition.config.find('\n') == std::string::npos, "spec.partition.config",
          "must be one line");
  // slurmd's --conf: Key=Value words. An empty value is worse than a typo: Slurm reads the next
  // word as its value (an empty Topology= leaves the node INVALID_REG).
  std::istringstream words(s.extra_conf);
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) {
      require(errors, false, "spec.extraConf",
              "\"" + word +
                  "\" is not Key=Value with a value: slurmd's --conf parser takes the next word "
                  "as the value of a key without one, and the node registers INVALID_REG");
      break;
    }
  }
  if (s.ssh.enabled) {
    require_key_ref(errors, s.ssh.sssd_conf_ref, "spec.ssh.sssdConfRef");
  }
  if (const auto it = s.template_.spec.find("hostname"); it != s.template_.spec.end()) {
    std::string hostname = it->is_string() ? it->get<std::string>() : "";
    while (!hostname.empty() && hostname.back() == '-') {
      hostname.pop_back();
    }
    require(errors, dns_label(hostname), "spec.template.spec.hostname",
            "must be a DNS label (lower-case letters, digits, '-'), optionally ending in '-'");
  }
  return errors;
}

FieldErrors validate_update(const NodeSet& o, const NodeSet& n) {
  FieldErrors errors = validate(n);
  immutable(errors, o.spec.controller_ref.name == n.spec.controller_ref.name, "spec.controllerRef");
  immutable(errors, o.spec.volume_claim_templates == n.spec.volume_claim_templates,
            "spec.volumeClaimTemplates");
  return errors;
}

FieldErrors validate(const LoginSet& l) {
  FieldErrors errors;
  require(errors, !l.spec.controller_ref.name.empty(), "spec.controllerRef.name",
          "required: the Controller the login pods talk to");
  check_replicas(errors, l.spec.replicas);
  require_key_ref(errors, l.spec.sssd_conf_ref, "spec.sssdConfRef");
  check_service(errors, l.spec.service);
  return errors;
}

FieldErrors validate_update(const LoginSet& o, const LoginSet& l) {
  FieldErrors errors = validate(l);
  immutable(errors, o.spec.controller_ref == l.spec.controller_ref, "spec.controllerRef");
  return errors;
}

FieldErrors validate(const RestApi& r) {
  FieldErrors errors;
  require(errors, !r.spec.controller_ref.name.empty(), "spec.controllerRef.name",
          "required: the Controller slurmrestd serves");
  check_replicas(errors, r.spec.replicas);
  check_service(errors, r.spec.service);
  return errors;
}

// A RestApi may move to another Controller, as Slinky's allows: its pods roll with the new
// cluster's slurm.conf and key.
FieldErrors validate_update(const RestApi& /*old*/, const RestApi& r) {
  return validate(r);
}

FieldErrors validate(const Accounting& a) {
  FieldErrors errors;
  const AccountingSpec& s = a.spec;
  if (s.external) {
    require(errors, !s.external_config.host.empty(), "spec.externalConfig.host",
            "required when external is true: where slurmdbd runs");
    check_port(errors, s.external_config.port, "spec.externalConfig.port", true);
    return errors;
  }
  require_key_ref(errors, s.slurm_key_ref, "spec.slurmKeyRef");
  check_jwt(errors, s.jwt_key(), s.jwt_key_ref);
  require(errors, !s.storage_config.host.empty(), "spec.storageConfig.host",
          "required: the MySQL/MariaDB host slurmdbd stores accounting in");
  check_port(errors, s.storage_config.port, "spec.storageConfig.port", true);
  require_key_ref(errors, s.storage_config.password_key_ref, "spec.storageConfig.passwordKeyRef");
  check_service(errors, s.service);
  return errors;
}

FieldErrors validate_update(const Accounting& o, const Accounting& a) {
  FieldErrors errors = validate(a);
  immutable(errors, same_jwt(o.spec.jwt_key(), a.spec.jwt_key()), "spec.jwtKeyRef");
  return errors;
}

FieldErrors validate(const Token& t) {
  FieldErrors errors;
  const TokenSpec& s = t.spec;
  require(errors, !s.username.empty(), "spec.username", "required: the Slurm user of the token");
  check_jwt(errors, s.jwt_key(), s.jwt_key_ref);
  const auto lifetime = parse_duration(s.lifetime);
  require(errors, lifetime && lifetime->count() > 0, "spec.lifetime",
          R"(must be a duration above zero, such as "15m" or "24h": a token that expires )"
          R"(as it is issued is refused by slurmrestd and would be issued again at once)");
  return errors;
}

FieldErrors validate_update(const Token& o, const Token& t) {
  FieldErrors errors = validate(t);
  immutable(errors, same_jwt(o.spec.jwt_key(), t.spec.jwt_key()), "spec.jwtKeyRef");
  return errors;
}

FieldErrors validate(const HealthCheck& h) {
  FieldErrors errors;
  const HealthCheckSpec& s = h.spec;
  const auto& expressions = s.node_set_selector.match_expressions;
  for (size_t i = 0; i < expressions.size(); ++i) {
    const auto& e = expressions[i];
    const std::string at = "spec.nodeSetSelector.matchExpressions[" + std::to_string(i) + "]";
    require(errors, !e.key.empty(), at + ".key", "required: the label the term looks at");
    const bool with_values = e.op == "In" || e.op == "NotIn";
    require(errors, with_values || e.op == "Exists" || e.op == "DoesNotExist", at + ".operator",
            "must be In, NotIn, Exists or DoesNotExist");
    if (with_values) {
      require(errors, !e.values.empty(), at + ".values", "required by " + e.op);
    } else {
      require(errors, e.values.empty(), at + ".values", "must be empty for " + e.op);
    }
  }
  const PassiveChecks& p = s.passive;
  require(errors, p.interval_seconds >= 10 && p.interval_seconds <= 86400,
          "spec.passive.intervalSeconds",
          "must be from 10 to 86400: each worker runs its checks that often");
  require(errors, p.timeout_seconds >= 1 && p.timeout_seconds < p.interval_seconds,
          "spec.passive.timeoutSeconds",
          "must be at least 1 and below intervalSeconds: a check must end before the next begins");
  for (size_t i = 0; i < p.checks.size(); ++i) {
    const bool known = std::find(kBuiltinHealthChecks.begin(), kBuiltinHealthChecks.end(),
                                 p.checks[i]) != kBuiltinHealthChecks.end();
    require(errors, known, "spec.passive.checks[" + std::to_string(i) + "]",
            "unknown check \"" + p.checks[i] + "\": must be mounts, memory, cpus, gpus or dcgm");
  }
  for (size_t i = 0; i < p.mounts.size(); ++i) {
    const std::string& m = p.mounts[i];
    require(errors, !m.empty() && m.front() == '/' && m.find("/../") == std::string::npos,
            "spec.passive.mounts[" + std::to_string(i) + "]", "must be an absolute path");
  }
  // dcgmi's --host argument, passed as one argument (never through a shell): a name or an
  // address, and a port.
  require(errors,
          p.dcgm_host.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789.:[]_-") == std::string::npos &&
              (p.dcgm_host.empty() || p.dcgm_host.front() != '-'),
          "spec.passive.dcgmHost", "must be host[:port], such as nvidia-dcgm.gpu-operator:5555");
  if (p.scripts) {
    require(errors, !p.scripts->name.empty(), "spec.passive.scripts.configMapRef.name",
            "required: the ConfigMap whose keys are the site's check scripts");
  }
  if (s.active) {
    const ActiveChecks& a = *s.active;
    require(errors, a.interval_seconds >= 600 && a.interval_seconds <= int64_t{31} * 86400,
            "spec.active.intervalSeconds",
            "must be from 600 to 2678400: how often an idle worker is taken for its checks");
    require(errors, a.timeout_seconds >= 10 && a.timeout_seconds <= 3600,
            "spec.active.timeoutSeconds", "must be from 10 to 3600: the check job's time limit");
    for (size_t i = 0; i < a.checks.size(); ++i) {
      const bool known = std::find(kBuiltinActiveChecks.begin(), kBuiltinActiveChecks.end(),
                                   a.checks[i]) != kBuiltinActiveChecks.end();
      require(errors, known, "spec.active.checks[" + std::to_string(i) + "]",
              "unknown check \"" + a.checks[i] + "\": must be cpu, memory-bandwidth or nccl");
    }
    require(errors, a.max_concurrent.is_null() || positive_count_or_percent(a.max_concurrent),
            "spec.active.maxConcurrent",
            "must be a positive integer or a positive percentage such as \"10%\"");
    require(errors, a.min_cpu_gflops >= 0, "spec.active.minCpuGflops", "must not be negative");
    require(errors, a.min_memory_bandwidth_mbps >= 0, "spec.active.minMemoryBandwidthMBps",
            "must not be negative");
    require(errors, a.min_nccl_bus_bandwidth_gbps >= 0, "spec.active.minNcclBusBandwidthGBps",
            "must not be negative");
    require(errors, a.nccl_tests.empty() || a.nccl_tests.front() == '/', "spec.active.ncclTests",
            "must be an absolute path to all_reduce_perf");
  }
  for (size_t i = 0; i < s.signals.node_conditions.size(); ++i) {
    const std::string& type = s.signals.node_conditions[i];
    require(errors, !type.empty() && type != "Ready",
            "spec.signals.nodeConditions[" + std::to_string(i) + "]",
            type.empty() ? "must name a Node condition type"
                         : "must not be Ready: a Ready Node is the healthy one");
  }
  for (size_t i = 0; i < s.signals.device_taints.size(); ++i) {
    const std::string& key = s.signals.device_taints[i];
    require(errors, key == "*" || qualified_name(key),
            "spec.signals.deviceTaints[" + std::to_string(i) + "]",
            "must be a device taint key (a label name such as gpu.example.com/xid) or \"*\"");
  }
  const Remediation& r = s.remediation;
  require(errors, positive_count_or_percent(r.max_unhealthy), "spec.remediation.maxUnhealthy",
          "must be a positive integer or a positive percentage such as \"10%\"");
  require(errors, r.quarantine_after >= 1, "spec.remediation.quarantineAfter",
          "must be at least 1");
  require(errors, r.window_seconds >= 60, "spec.remediation.windowSeconds", "must be at least 60");
  return errors;
}

FieldErrors validate_update(const HealthCheck& /*old_object*/, const HealthCheck& h) {
  return validate(h);
}

}  // namespace tightrope::api
