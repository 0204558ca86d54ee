#include "api/defaults.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace tightrope::api {

const KeyRef* ControllerSpec::jwt_key() const {
  return jwt_key_ref ? &*jwt_key_ref : jwt_hs256_key_ref ? &*jwt_hs256_key_ref : nullptr;
}

std::array<ControllerSpec::ConfigRefs, 5> ControllerSpec::config_refs() const {
  return {{{&config_file_refs, "spec.configFileRefs", false},
           {&prolog_script_refs, "spec.prologScriptRefs", true},
           {&epilog_script_refs, "spec.epilogScriptRefs", true},
           {&prolog_slurmctld_script_refs, "spec.prologSlurmctldScriptRefs", true},
           {&epilog_slurmctld_script_refs, "spec.epilogSlurmctldScriptRefs", true}}};
}
const KeyRef* AccountingSpec::jwt_key() const {
  return jwt_key_ref ? &*jwt_key_ref : jwt_hs256_key_ref ? &*jwt_hs256_key_ref : nullptr;
}
const KeyRef* TokenSpec::jwt_key() const {
  return jwt_key_ref ? &*jwt_key_ref : jwt_hs256_key_ref ? &*jwt_hs256_key_ref : nullptr;
}

std::string Controller::cluster_name() const {
  return spec.cluster_name.empty() ? metadata.namespace_name + "_" + metadata.name
                                   : spec.cluster_name;
}

std::string NodeSet::slurm_name() const {
  std::string hostname;
  if (const auto it = spec.template_.spec.find("hostname");
      it != spec.template_.spec.end() && it->is_string()) {
    hostname = it->get<std::string>();
  }
  while (!hostname.empty() && hostname.back() == '-') {
    hostname.pop_back();
  }
  return hostname.empty() ? metadata.name : hostname;
}

void apply_defaults(Controller& c) {
  if (!c.spec.persistence.enabled) {
    c.spec.persistence.enabled = true;
  }
  if (c.spec.ha.backups < 1) {
    c.spec.ha.backups = 1;
  }
}

void apply_defaults(NodeSet& n) {
  NodeSetSpec& s = n.spec;
  if (!s.replicas) {
    s.replicas = 1;
  }
  if (s.scaling_mode.empty()) {
    s.scaling_mode = "StatefulSet";
  }
  if (s.update_strategy.type.empty()) {
    s.update_strategy.type = "RollingUpdate";
  }
  if (s.update_strategy.max_unavailable.is_null()) {
    s.update_strategy.max_unavailable = "25%";
  }
  if (s.update_strategy.scheduled_update.duration.empty()) {
    s.update_strategy.scheduled_update.duration = "30m";
  }
  if (s.persistent_volume_claim_retention_policy.when_deleted.empty()) {
    s.persistent_volume_claim_retention_policy.when_deleted = "Retain";
  }
  if (s.persistent_volume_claim_retention_policy.when_scaled.empty()) {
    s.persistent_volume_claim_retention_policy.when_scaled = "Retain";
  }
  if (!s.workload_disruption_protection) {
    s.workload_disruption_protection = true;
  }
  if (s.prune_slurm_node_records.empty()) {
    s.prune_slurm_node_records = "Never";
  }
}

void apply_defaults(LoginSet& l) {
  if (!l.spec.replicas) {
    l.spec.replicas = 1;
  }
}

void apply_defaults(RestApi& r) {
  if (!r.spec.replicas) {
    r.spec.replicas = 1;
  }
}

void apply_defaults(Accounting& a) {
  if (a.spec.storage_config.port == 0) {
    a.spec.storage_config.port = 3306;
  }
  if (a.spec.storage_config.database.empty()) {
    a.spec.storage_config.database = "slurm_acct_db";
  }
}

void apply_defaults(Token& t) {
  if (t.spec.lifetime.empty()) {
    t.spec.lifetime = std::string(kDefaultTokenLifetime);
  }
  if (!t.spec.refresh) {
    t.spec.refresh = true;
  }
  if (!t.spec.secret_ref) {
    t.spec.secret_ref = KeyRef{};
  }
  if (t.spec.secret_ref->name.empty()) {
    t.spec.secret_ref->name = t.metadata.name + "-jwt-" + t.spec.username;
  }
  if (t.spec.secret_ref->key.empty()) {
    t.spec.secret_ref->key = std::string(kTokenSecretKey);
  }
}

void apply_defaults(HealthCheck& h) {
  PassiveChecks& p = h.spec.passive;
  if (p.interval_seconds == 0) {
    p.interval_seconds = kDefaultHealthInterval;
  }
  if (p.checks.empty()) {
    p.checks.assign(kBuiltinHealthChecks.begin(), kBuiltinHealthChecks.end());
  }
  if (p.timeout_seconds == 0) {
    p.timeout_seconds = kDefaultHealthTimeout;
  }
  if (h.spec.active) {
    ActiveChecks& a = *h.spec.active;
    if (a.interval_seconds == 0) {
      a.interval_seconds = kDefaultActiveInterval;
    }
    if (!a.after_replacement) {
      a.after_replacement = true;
    }
    if (a.checks.empty()) {
      a.checks.assign(kBuiltinActiveChecks.begin(), kBuiltinActiveChecks.end());
    }
    if (a.timeout_seconds == 0) {
      a.timeout_seconds = kDefaultActiveTimeout;
    }
    if (a.max_concurrent.is_null()) {
      a.max_concurrent = 1;
    }
    if (a.nccl_tests.empty()) {
      a.nccl_tests = std::string(kDefaultNcclTests);
    }
  }
  Remediation& r = h.spec.remediation;
  if (r.max_unhealthy.is_null()) {
    r.max_unhealthy = 1;
  }
  if (!r.replace) {
    r.replace = true;
  }
  if (r.quarantine_after == 0) {
    r.quarantine_after = kDefaultQuarantineAfter;
  }
  if (r.window_seconds == 0) {
    r.window_seconds = kDefaultHealthWindow;
  }
}

bool LabelSelector::matches(const StringMap& labels) const {
  for (const auto& [key, value] : match_labels) {
    const auto it = labels.find(key);
    if (it == labels.end() || it->second != value) {
      return false;
    }
  }
  for (const auto& e : match_expressions) {
    const auto it = labels.find(e.key);
    const bool listed = it != labels.end() &&
                        std::find(e.values.begin(), e.values.end(), it->second) != e.values.end();
    const bool ok = e.op == "In"             ? listed
                    : e.op == "NotIn"        ? !listed
                    : e.op == "Exists"       ? it != labels.end()
                    : e.op == "DoesNotExist" ? it == labels.end()
                                             : false;
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  if (text == "0") {
    return std::chrono::seconds(0);
  }
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.')) {
      ++i;
    }
    if (i == start) {
      return std::nullopt;
    }
    // The whole run must be one number: "1.2.3h" is not a duration.
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc() || end != text.data() + i) {
      return std::nullopt;
    }
    // As Go, the unit runs to the next number, so that "µs" (two bytes in UTF-8) is one.
    const size_t unit_start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) == 0 &&
           text[i] != '.') {
      ++i;
    }
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit == "h") {
      scale = 3600;
    } else if (unit == "m") {
      scale = 60;
    } else if (unit == "s") {
      scale = 1;
    } else if (unit == "ms") {
      scale = 1e-3;
    } else if (unit == "us" || unit == "µs" || unit == "μs") {  // micro sign, Greek mu
      scale = 1e-6;
    } else if (unit == "ns") {
      scale = 1e-9;
    } else {
      return std::nullopt;
    }
    total += value * scale;
  }
  if (!std::isfinite(total) || total > 1e12) {
    return std::nullopt;
  }
  return std::chrono::seconds(static_cast<int64_t>(total));
}

}  // namespace tightrope::api
