#include "api/codec.hpp"

#include <type_traits>
#include <utility>

#include "api/well_known.hpp"

namespace tightrope::api {
namespace {

using nlohmann::json;

// Reads the fields of one JSON object, recording a FieldError (with the dotted path) for each
// value of the wrong type. An absent or null field leaves the target as it is.
class Reader {
 public:
  Reader(const json* object, std::string path, FieldErrors* errors)
      : object_(object), path_(std::move(path)), errors_(errors) {}

  Reader child(std::string_view field) const {
    const json* v = find(field);
    if (v != nullptr && !v->is_object()) {
      error(field, "must be an object");
      v = nullptr;
    }
    return {v, where(field), errors_};
  }
  bool has(std::string_view field) const { return find(field) != nullptr; }

  void str(std::string_view field, std::string* out) const {
    if (const json* v = find(field)) {
      if (v->is_string()) {
        *out = v->get<std::string>();
      } else {
        error(field, "must be a string");
      }
    }
  }
  void integer(std::string_view field, int64_t* out) const {
    if (const json* v = find(field)) {
      if (v->is_number_integer()) {
        *out = v->get<int64_t>();
      } else {
        error(field, "must be an integer");
      }
    }
  }
  void integer(std::string_view field, std::optional<int64_t>* out) const {
    if (has(field)) {
      int64_t value = 0;
      integer(field, &value);
      *out = value;
    }
  }
  void boolean(std::string_view field, bool* out) const {
    if (const json* v = find(field)) {
      if (v->is_boolean()) {
        *out = v->get<bool>();
      } else {
        error(field, "must be a boolean");
      }
    }
  }
  void boolean(std::string_view field, std::optional<bool>* out) const {
    if (has(field)) {
      bool value = false;
      boolean(field, &value);
      *out = value;
    }
  }
  void object(std::string_view field, json* out) const {
    if (const json* v = find(field)) {
      if (v->is_object()) {
        *out = *v;
      } else {
        error(field, "must be an object");
      }
    }
  }
  void array(std::string_view field, json* out) const {
    if (const json* v = find(field)) {
      if (v->is_array()) {
        *out = *v;
      } else {
        error(field, "must be a list");
      }
    }
  }
  void any(std::string_view field, json* out) const {
    if (const json* v = find(field)) {
      *out = *v;
    }
  }
  void strings(std::string_view field, std::vector<std::string>* out) const {
    each(field, [&](const Reader&, const json& item, const std::string& at) {
      if (item.is_string()) {
        out->push_back(item.get<std::string>());
      } else {
        errors_->push_back({at, "must be a string"});
      }
    });
  }
  void string_map(std::string_view field, StringMap* out) const {
    if (const json* v = find(field)) {
      if (!v->is_object()) {
        error(field, "must be a map of strings");
        return;
      }
      for (const auto& [key, value] : v->items()) {
        if (value.is_string()) {
          (*out)[key] = value.get<std::string>();
        } else if (!value.is_null()) {
          errors_->push_back({where(field) + "." + key, "must be a string"});
        }
      }
    }
  }
  void key_ref(std::string_view field, KeyRef* out) const {
    const Reader r = child(field);
    r.str("name", &out->name);
    r.str("key", &out->key);
    r.boolean("optional", &out->optional);
  }
  void key_ref(std::string_view field, std::optional<KeyRef>* out) const {
    if (has(field)) {
      KeyRef ref;
      key_ref(field, &ref);
      *out = ref;
    }
  }
  void local_ref(std::string_view field, LocalRef* out) const {
    child(field).str("name", &out->name);
  }
  void local_ref(std::string_view field, std::optional<LocalRef>* out) const {
    if (has(field)) {
      LocalRef ref;
      local_ref(field, &ref);
      *out = ref;
    }
  }
  void local_refs(std::string_view field, std::vector<LocalRef>* out) const {
    each(field, [&](const Reader& item, const json&, const std::string&) {
      LocalRef ref;
      item.str("name", &ref.name);
      out->push_back(ref);
    });
  }
  void metadata(std::string_view field, Metadata* out) const {
    const Reader r = child(field);
    r.string_map("labels", &out->labels);
    r.string_map("annotations", &out->annotations);
  }
  void pod_template(std::string_view field, PodTemplate* out) const {
    const Reader r = child(field);
    r.metadata("metadata", &out->metadata);
    r.object("spec", &out->spec);
  }
  void service(std::string_view field, ServiceTemplate* out) const {
    const Reader r = child(field);
    r.metadata("metadata", &out->metadata);
    r.object("spec", &out->spec);
    r.integer("port", &out->port);
    r.integer("nodePort", &out->node_port);
  }
  void external(std::string_view field, ExternalConfig* out) const {
    const Reader r = child(field);
    r.str("host", &out->host);
    r.integer("port", &out->port);
  }
  void conditions(std::string_view field, std::vector<Condition>* out) const {
    each(field, [&](const Reader& c, const json&, const std::string&) {
      Condition condition;
      c.str("type", &condition.type);
      c.str("status", &condition.status);
      c.str("reason", &condition.reason);
      c.str("message", &condition.message);
      c.integer("observedGeneration", &condition.observed_generation);
      c.str("lastTransitionTime", &condition.last_transition_time);
      out->push_back(std::move(condition));
    });
  }

  // Calls fn for each element of a list field, with a Reader on it when it is an object.
  template <typename Fn>
  void each(std::string_view field, Fn fn) const {
    const json* v = find(field);
    if (v == nullptr) {
      return;
    }
    if (!v->is_array()) {
      error(field, "must be a list");
      return;
    }
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      const std::string at = where(field) + "[" + std::to_string(i) + "]";
      fn(Reader(item.is_object() ? &item : nullptr, at, errors_), item, at);
    }
  }

 private:
  const json* find(std::string_view field) const {
    if (object_ == nullptr) {
      return nullptr;
    }
    const auto it = object_->find(field);
    return it == object_->end() || it->is_null() ? nullptr : &*it;
  }
  std::string where(std::string_view field) const {
    return path_.empty() ? std::string(field) : path_ + "." + std::string(field);
  }
  void error(std::string_view field, std::string message) const {
    errors_->push_back({where(field), std::move(message)});
  }

  const json* object_;
  std::string path_;
  FieldErrors* errors_;
};

void read_meta(const json& doc, ObjectMeta* meta, FieldErrors* errors) {
  const Reader root(&doc, "", errors);
  const Reader m = root.child("metadata");
  m.str("name", &meta->name);
  m.str("namespace", &meta->namespace_name);
  m.str("uid", &meta->uid);
  m.str("resourceVersion", &meta->resource_version);
  m.integer("generation", &meta->generation);
  m.str("creationTimestamp", &meta->creation_timestamp);
  meta->deleting = m.has("deletionTimestamp");
  m.string_map("labels", &meta->labels);
  m.string_map("annotations", &meta->annotations);
}

// Decodes the common parts, then the kind's spec and status with `read`.
template <typename T, typename Fn>
Decoded<T> decode(const json& doc, Fn read) {
  FieldErrors errors;
  if (!doc.is_object()) {
    return fail(FieldErrors{{"", "must be a JSON object"}});
  }
  T out;
  read_meta(doc, &out.metadata, &errors);
  const Reader root(&doc, "", &errors);
  read(root.child("spec"), root.child("status"), &out);
  if (!errors.empty()) {
    return fail(std::move(errors));
  }
  return out;
}

// ---- Writing: a field is set only when it holds something.

void put(json& o, const char* field, const std::string& v) {
  if (!v.empty()) {
    o[field] = v;
  }
}
void put(json& o, const char* field, int64_t v) {
  if (v != 0) {
    o[field] = v;
  }
}
void put(json& o, const char* field, bool v) {
  if (v) {
    o[field] = true;
  }
}
void put(json& o, const char* field, const std::optional<int64_t>& v) {
  if (v) {
    o[field] = *v;
  }
}
void put(json& o, const char* field, const std::optional<bool>& v) {
  if (v) {
    o[field] = *v;
  }
}
void put(json& o, const char* field, const json& v) {
  if (!v.is_null() && !v.empty()) {
    o[field] = v;
  }
}
void put(json& o, const char* field, const StringMap& v) {
  if (!v.empty()) {
    o[field] = v;
  }
}
void put(json& o, const char* field, const std::vector<std::string>& v) {
  if (!v.empty()) {
    o[field] = v;
  }
}
json ref_json(const KeyRef& r) {
  json o = json::object();
  put(o, "name", r.name);
  put(o, "key", r.key);
  put(o, "optional", r.optional);
  return o;
}
void put(json& o, const char* field, const KeyRef& r) {
  if (!r.empty() || r.optional) {
    o[field] = ref_json(r);
  }
}
void put(json& o, const char* field, const std::optional<KeyRef>& r) {
  if (r) {
    o[field] = ref_json(*r);
  }
}
void put(json& o, const char* field, const std::optional<LocalRef>& r) {
  if (r) {
    o[field] = {{"name", r->name}};
  }
}
void put(json& o, const char* field, const std::vector<LocalRef>& refs) {
  if (!refs.empty()) {
    json a = json::array();
    for (const auto& r : refs) {
      a.push_back({{"name", r.name}});
    }
    o[field] = a;
  }
}
json metadata_json(const Metadata& m) {
  json o = json::object();
  put(o, "labels", m.labels);
  put(o, "annotations", m.annotations);
  return o;
}
void put(json& o, const char* field, const PodTemplate& t) {
  json v = json::object();
  put(v, "metadata", metadata_json(t.metadata));
  put(v, "spec", t.spec);
  put(o, field, v);
}
void put(json& o, const char* field, const ServiceTemplate& s) {
  json v = json::object();
  put(v, "metadata", metadata_json(s.metadata));
  put(v, "spec", s.spec);
  put(v, "port", s.port);
  put(v, "nodePort", s.node_port);
  put(o, field, v);
}
void put(json& o, const char* field, const ExternalConfig& e) {
  json v = json::object();
  put(v, "host", e.host);
  put(v, "port", e.port);
  put(o, field, v);
}

template <typename T>
json header(const T& object, const char* kind) {
  json meta = json::object();
  put(meta, "name", object.metadata.name);
  put(meta, "namespace", object.metadata.namespace_name);
  put(meta, "labels", object.metadata.labels);
  put(meta, "annotations", object.metadata.annotations);
  const std::string_view api_version =
      std::is_same_v<T, HealthCheck> ? kTightropeApiVersion : kApiVersion;
  return {{"apiVersion", api_version}, {"kind", kind}, {"metadata", meta}};
}

void finish(json& doc, const json& spec, const json& status) {
  doc["spec"] = spec;
  if (!status.empty()) {
    doc["status"] = status;
  }
}

}  // namespace

std::string join(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) {
      out += "; ";
    }
    out += e.to_string();
  }
  return out;
}

json encode_conditions(const std::vector<Condition>& conditions) {
  json a = json::array();
  for (const auto& c : conditions) {
    json o = {{"type", c.type},
              {"status", c.status},
              {"reason", c.reason},
              {"message", c.message},
              {"lastTransitionTime", c.last_transition_time}};
    put(o, "observedGeneration", c.observed_generation);
    a.push_back(o);
  }
  return a;
}

std::vector<Condition> decode_conditions(const json& array) {
  FieldErrors ignored;
  const json holder = {{"conditions", array}};
  std::vector<Condition> out;
  Reader(&holder, "", &ignored).conditions("conditions", &out);
  return out;
}

// ---- Controller.

Decoded<Controller> decode_controller(const json& doc) {
  return decode<Controller>(doc, [](const Reader& s, const Reader& st, Controller* c) {
    ControllerSpec& spec = c->spec;
    s.str("clusterName", &spec.cluster_name);
    s.key_ref("slurmKeyRef", &spec.slurm_key_ref);
    s.key_ref("jwtHs256KeyRef", &spec.jwt_hs256_key_ref);
    s.key_ref("jwtKeyRef", &spec.jwt_key_ref);
    s.key_ref("jwksKeyRef", &spec.jwks_key_ref);
    s.local_ref("accountingRef", &spec.accounting_ref);
    s.boolean("external", &spec.external);
    s.external("externalConfig", &spec.external_config);
    const Reader ha = s.child("ha");
    ha.boolean("enabled", &spec.ha.enabled);
    ha.integer("backups", &spec.ha.backups);
    s.object("slurmctld", &spec.slurmctld);
    s.boolean("inplaceReconfigure", &spec.inplace_reconfigure);
    s.object("reconfigure", &spec.reconfigure);
    s.object("logfile", &spec.logfile);
    s.pod_template("template", &spec.template_);
    s.str("extraConf", &spec.extra_conf);
    s.local_refs("configFileRefs", &spec.config_file_refs);
    s.local_refs("prologScriptRefs", &spec.prolog_script_refs);
    s.local_refs("epilogScriptRefs", &spec.epilog_script_refs);
    s.local_refs("prologSlurmctldScriptRefs", &spec.prolog_slurmctld_script_refs);
    s.local_refs("epilogSlurmctldScriptRefs", &spec.epilog_slurmctld_script_refs);
    const Reader p = s.child("persistence");
    p.boolean("enabled", &spec.persistence.enabled);
    p.str("existingClaim", &spec.persistence.existing_claim);
    // The rest of persistence is an inline PersistentVolumeClaimSpec, passed through.
    json claim;
    s.any("persistence", &claim);  // a non-object was reported by child() above
    if (!claim.is_object()) {
      claim = json::object();
    }
    claim.erase("enabled");
    claim.erase("existingClaim");
    spec.persistence.claim_spec = claim;
    s.service("service", &spec.service);
    const Reader m = s.child("metrics");
    m.boolean("enabled", &spec.metrics.enabled);
    const Reader sm = m.child("serviceMonitor");
    ServiceMonitorSpec& mon = spec.metrics.service_monitor;
    sm.boolean("enabled", &mon.enabled);
    sm.string_map("labels", &mon.labels);
    sm.string_map("annotations", &mon.annotations);
    sm.str("interval", &mon.interval);
    sm.str("scrapeTimeout", &mon.scrape_timeout);
    sm.each("endpoints", [&](const Reader& e, const json&, const std::string&) {
      MetricEndpoint endpoint;
      e.str("path", &endpoint.path);
      e.str("interval", &endpoint.interval);
      e.str("scrapeTimeout", &endpoint.scrape_timeout);
      mon.endpoints.push_back(endpoint);
    });
    st.conditions("conditions", &c->status.conditions);
  });
}

json encode(const Controller& c) {
  const ControllerSpec& s = c.spec;
  json spec = json::object();
  put(spec, "clusterName", s.cluster_name);
  put(spec, "slurmKeyRef", s.slurm_key_ref);
  put(spec, "jwtHs256KeyRef", s.jwt_hs256_key_ref);
  put(spec, "jwtKeyRef", s.jwt_key_ref);
  put(spec, "jwksKeyRef", s.jwks_key_ref);
  put(spec, "accountingRef", s.accounting_ref);
  put(spec, "external", s.external);
  put(spec, "externalConfig", s.external_config);
  if (s.ha.enabled || s.ha.backups != 1) {
    spec["ha"] = {{"enabled", s.ha.enabled}, {"backups", s.ha.backups}};
  }
  put(spec, "slurmctld", s.slurmctld);
  put(spec, "inplaceReconfigure", s.inplace_reconfigure);
  put(spec, "reconfigure", s.reconfigure);
  put(spec, "logfile", s.logfile);
  put(spec, "template", s.template_);
  put(spec, "extraConf", s.extra_conf);
  put(spec, "configFileRefs", s.config_file_refs);
  put(spec, "prologScriptRefs", s.prolog_script_refs);
  put(spec, "epilogScriptRefs", s.epilog_script_refs);
  put(spec, "prologSlurmctldScriptRefs", s.prolog_slurmctld_script_refs);
  put(spec, "epilogSlurmctldScriptRefs", s.epilog_slurmctld_script_refs);
  json persistence =
      s.persistence.claim_spec.is_object() ? s.persistence.claim_spec : json::object();
  put(persistence, "enabled", s.persistence.enabled);
  put(persistence, "existingClaim", s.persistence.existing_claim);
  put(spec, "persistence", persistence);
  put(spec, "service", s.service);
  json monitor = json::object();
  const ServiceMonitorSpec& mon = s.metrics.service_monitor;
  put(monitor, "enabled", mon.enabled);
  put(monitor, "labels", mon.labels);
  put(monitor, "annotations", mon.annotations);
  put(monitor, "interval", mon.interval);
  put(monitor, "scrapeTimeout", mon.scrape_timeout);
  if (!mon.endpoints.empty()) {
    json endpoints = json::array();
    for (const auto& e : mon.endpoints) {
      json o = json::object();
      put(o, "path", e.path);
      put(o, "interval", e.interval);
      put(o, "scrapeTimeout", e.scrape_timeout);
      endpoints.push_back(o);
    }
    monitor["endpoints"] = endpoints;
  }
  json metrics = json::object();
  put(metrics, "enabled", s.metrics.enabled);
  put(metrics, "serviceMonitor", monitor);
  put(spec, "metrics", metrics);
  json status = json::object();
  if (!c.status.conditions.empty()) {
    status["conditions"] = encode_conditions(c.status.conditions);
  }
  json doc = header(c, "Controller");
  finish(doc, spec, status);
  return doc;
}

// ---- NodeSet.

Decoded<NodeSet> decode_nodeset(const json& doc) {
  return decode<NodeSet>(doc, [](const Reader& s, const Reader& st, NodeSet* n) {
    NodeSetSpec& spec = n->spec;
    const Reader ref = s.child("controllerRef");
    ref.str("name", &spec.controller_ref.name);
    ref.str("namespace", &spec.controller_ref.namespace_name);
    s.integer("replicas", &spec.replicas);
    s.str("scalingMode", &spec.scaling_mode);
    s.object("slurmd", &spec.slurmd);
    const Reader ssh = s.child("ssh");
    ssh.boolean("enabled", &spec.ssh.enabled);
    ssh.str("extraSshdConfig", &spec.ssh.extra_sshd_config);
    ssh.key_ref("sssdConfRef", &spec.ssh.sssd_conf_ref);
    s.object("logfile", &spec.logfile);
    s.pod_template("template", &spec.template_);
    s.str("extraConf", &spec.extra_conf);
    const Reader partition = s.child("partition");
    partition.boolean("enabled", &spec.partition.enabled);
    partition.str("config", &spec.partition.config);
    s.array("volumeClaimTemplates", &spec.volume_claim_templates);
    const Reader update = s.child("updateStrategy");
    update.str("type", &spec.update_strategy.type);
    update.child("rollingUpdate").any("maxUnavailable", &spec.update_strategy.max_unavailable);
    const Reader scheduled = update.child("scheduledUpdate");
    scheduled.str("startTime", &spec.update_strategy.scheduled_update.start_time);
    scheduled.str("duration", &spec.update_strategy.scheduled_update.duration);
    scheduled.strings("flags", &spec.update_strategy.scheduled_update.flags);
    s.integer("revisionHistoryLimit", &spec.revision_history_limit);
    const Reader retention = s.child("persistentVolumeClaimRetentionPolicy");
    retention.str("whenDeleted", &spec.persistent_volume_claim_retention_policy.when_deleted);
    retention.str("whenScaled", &spec.persistent_volume_claim_retention_policy.when_scaled);
    s.integer("minReadySeconds", &spec.min_ready_seconds);
    s.integer("ordinalPadding", &spec.ordinal_padding);
    s.boolean("pinToNode", &spec.pin_to_node);
    s.boolean("taintKubeNodes", &spec.taint_kube_nodes);
    s.boolean("workloadDisruptionProtection", &spec.workload_disruption_protection);
    s.str("pruneSlurmNodeRecords", &spec.prune_slurm_node_records);
    s.boolean("oversubscribeNode", &spec.oversubscribe_node);

    NodeSetStatus& status = n->status;
    st.integer("replicas", &status.replicas);
    st.integer("updatedReplicas", &status.updated_replicas);
    st.integer("readyReplicas", &status.ready_replicas);
    st.integer("availableReplicas", &status.available_replicas);
    st.integer("unavailableReplicas", &status.unavailable_replicas);
    st.integer("desired", &status.desired);
    st.integer("slurmIdle", &status.slurm_idle);
    st.integer("slurmAllocated", &status.slurm_allocated);
    st.integer("slurmDown", &status.slurm_down);
    st.integer("slurmDrain", &status.slurm_drain);
    st.integer("observedGeneration", &status.observed_generation);
    st.str("nodeSetHash", &status.node_set_hash);
    st.integer("collisionCount", &status.collision_count);
    st.conditions("conditions", &status.conditions);
    st.string_map("ordinalToNode", &status.ordinal_to_node);
    st.str("selector", &status.selector);
  });
}

json encode(const NodeSet& n) {
  const NodeSetSpec& s = n.spec;
  json spec = json::object();
  json ref = {{"name", s.controller_ref.name}};
  put(ref, "namespace", s.controller_ref.namespace_name);
  spec["controllerRef"] = ref;
  put(spec, "replicas", s.replicas);
  put(spec, "scalingMode", s.scaling_mode);
  put(spec, "slurmd", s.slurmd);
  json ssh = json::object();
  put(ssh, "enabled", s.ssh.enabled);
  put(ssh, "extraSshdConfig", s.ssh.extra_sshd_config);
  put(ssh, "sssdConfRef", s.ssh.sssd_conf_ref);
  put(spec, "ssh", ssh);
  put(spec, "logfile", s.logfile);
  put(spec, "template", s.template_);
  put(spec, "extraConf", s.extra_conf);
  json partition = json::object();
  put(partition, "enabled", s.partition.enabled);
  put(partition, "config", s.partition.config);
  put(spec, "partition", partition);
  put(spec, "volumeClaimTemplates", s.volume_claim_templates);
  json update = json::object();
  put(update, "type", s.update_strategy.type);
  if (!s.update_strategy.max_unavailable.is_null()) {
    update["rollingUpdate"] = {{"maxUnavailable", s.update_strategy.max_unavailable}};
  }
  json scheduled = json::object();
  put(scheduled, "startTime", s.update_strategy.scheduled_update.start_time);
  put(scheduled, "duration", s.update_strategy.scheduled_update.duration);
  put(scheduled, "flags", s.update_strategy.scheduled_update.flags);
  put(update, "scheduledUpdate", scheduled);
  put(spec, "updateStrategy", update);
  put(spec, "revisionHistoryLimit", s.revision_history_limit);
  json retention = json::object();
  put(retention, "whenDeleted", s.persistent_volume_claim_retention_policy.when_deleted);
  put(retention, "whenScaled", s.persistent_volume_claim_retention_policy.when_scaled);
  put(spec, "persistentVolumeClaimRetentionPolicy", retention);
  put(spec, "minReadySeconds", s.min_ready_seconds);
  put(spec, "ordinalPadding", s.ordinal_padding);
  put(spec, "pinToNode", s.pin_to_node);
  put(spec, "taintKubeNodes", s.taint_kube_nodes);
  put(spec, "workloadDisruptionProtection", s.workload_disruption_protection);
  put(spec, "pruneSlurmNodeRecords", s.prune_slurm_node_records);
  put(spec, "oversubscribeNode", s.oversubscribe_node);

  const NodeSetStatus& st = n.status;
  json status = json::object();
  put(status, "replicas", st.replicas);
  put(status, "updatedReplicas", st.updated_replicas);
  put(status, "readyReplicas", st.ready_replicas);
  put(status, "availableReplicas", st.available_replicas);
  put(status, "unavailableReplicas", st.unavailable_replicas);
  put(status, "desired", st.desired);
  put(status, "slurmIdle", st.slurm_idle);
  put(status, "slurmAllocated", st.slurm_allocated);
  put(status, "slurmDown", st.slurm_down);
  put(status, "slurmDrain", st.slurm_drain);
  put(status, "observedGeneration", st.observed_generation);
  put(status, "nodeSetHash", st.node_set_hash);
  put(status, "collisionCount", st.collision_count);
  if (!st.conditions.empty()) {
    status["conditions"] = encode_conditions(st.conditions);
  }
  put(status, "ordinalToNode", st.ordinal_to_node);
  put(status, "selector", st.selector);
  json doc = header(n, "NodeSet");
  finish(doc, spec, status);
  return doc;
}

// ---- LoginSet.

Decoded<LoginSet> decode_loginset(const json& doc) {
  return decode<LoginSet>(doc, [](const Reader& s, const Reader& st, LoginSet* l) {
    LoginSetSpec& spec = l->spec;
    s.local_ref("controllerRef", &spec.controller_ref);
    s.integer("replicas", &spec.replicas);
    s.object("login", &spec.login);
    s.object("initconf", &spec.initconf);
    s.pod_template("template", &spec.template_);
    s.str("rootSshAuthorizedKeys", &spec.root_ssh_authorized_keys);
    s.str("extraSshdConfig", &spec.extra_sshd_config);
    s.key_ref("sssdConfRef", &spec.sssd_conf_ref);
    s.object("strategy", &spec.strategy);
    s.service("service", &spec.service);
    st.integer("replicas", &l->status.replicas);
    st.conditions("conditions", &l->status.conditions);
    st.str("selector", &l->status.selector);
  });
}

json encode(const LoginSet& l) {
  const LoginSetSpec& s = l.spec;
  json spec = {{"controllerRef", {{"name", s.controller_ref.name}}}};
  put(spec, "replicas", s.replicas);
  put(spec, "login", s.login);
  put(spec, "initconf", s.initconf);
  put(spec, "template", s.template_);
  put(spec, "rootSshAuthorizedKeys", s.root_ssh_authorized_keys);
  put(spec, "extraSshdConfig", s.extra_sshd_config);
  put(spec, "sssdConfRef", s.sssd_conf_ref);
  put(spec, "strategy", s.strategy);
  put(spec, "service", s.service);
  json status = json::object();
  put(status, "replicas", l.status.replicas);
  if (!l.status.conditions.empty()) {
    status["conditions"] = encode_conditions(l.status.conditions);
  }
  put(status, "selector", l.status.selector);
  json doc = header(l, "LoginSet");
  finish(doc, spec, status);
  return doc;
}

// ---- RestApi.

Decoded<RestApi> decode_restapi(const json& doc) {
  return decode<RestApi>(doc, [](const Reader& s, const Reader& st, RestApi* r) {
    s.local_ref("controllerRef", &r->spec.controller_ref);
    s.integer("replicas", &r->spec.replicas);
    s.object("slurmrestd", &r->spec.slurmrestd);
    s.pod_template("template", &r->spec.template_);
    s.service("service", &r->spec.service);
    st.conditions("conditions", &r->status.conditions);
  });
}

json encode(const RestApi& r) {
  json spec = {{"controllerRef", {{"name", r.spec.controller_ref.name}}}};
  put(spec, "replicas", r.spec.replicas);
  put(spec, "slurmrestd", r.spec.slurmrestd);
  put(spec, "template", r.spec.template_);
  put(spec, "service", r.spec.service);
  json status = json::object();
  if (!r.status.conditions.empty()) {
    status["conditions"] = encode_conditions(r.status.conditions);
  }
  json doc = header(r, "RestApi");
  finish(doc, spec, status);
  return doc;
}

// ---- Accounting.

Decoded<Accounting> decode_accounting(const json& doc) {
  return decode<Accounting>(doc, [](const Reader& s, const Reader& st, Accounting* a) {
    AccountingSpec& spec = a->spec;
    s.key_ref("slurmKeyRef", &spec.slurm_key_ref);
    s.key_ref("jwtHs256KeyRef", &spec.jwt_hs256_key_ref);
    s.key_ref("jwtKeyRef", &spec.jwt_key_ref);
    s.key_ref("jwksKeyRef", &spec.jwks_key_ref);
    s.boolean("external", &spec.external);
    s.external("externalConfig", &spec.external_config);
    s.object("slurmdbd", &spec.slurmdbd);
    s.pod_template("template", &spec.template_);
    const Reader storage = s.child("storageConfig");
    storage.str("host", &spec.storage_config.host);
    storage.integer("port", &spec.storage_config.port);
    storage.str("database", &spec.storage_config.database);
    storage.str("username", &spec.storage_config.username);
    storage.key_ref("passwordKeyRef", &spec.storage_config.password_key_ref);
    s.str("extraConf", &spec.extra_conf);
    s.service("service", &spec.service);
    st.conditions("conditions", &a->status.conditions);
  });
}

json encode(const Accounting& a) {
  const AccountingSpec& s = a.spec;
  json spec = json::object();
  put(spec, "slurmKeyRef", s.slurm_key_ref);
  put(spec, "jwtHs256KeyRef", s.jwt_hs256_key_ref);
  put(spec, "jwtKeyRef", s.jwt_key_ref);
  put(spec, "jwksKeyRef", s.jwks_key_ref);
  put(spec, "external", s.external);
  put(spec, "externalConfig", s.external_config);
  put(spec, "slurmdbd", s.slurmdbd);
  put(spec, "template", s.template_);
  json storage = json::object();
  put(storage, "host", s.storage_config.host);
  put(storage, "port", s.storage_config.port);
  put(storage, "database", s.storage_config.database);
  put(storage, "username", s.storage_config.username);
  put(storage, "passwordKeyRef", s.storage_config.password_key_ref);
  put(spec, "storageConfig", storage);
  put(spec, "extraConf", s.extra_conf);
  put(spec, "service", s.service);
  json status = json::object();
  if (!a.status.conditions.empty()) {
    status["conditions"] = encode_conditions(a.status.conditions);
  }
  json doc = header(a, "Accounting");
  finish(doc, spec, status);
  return doc;
}

// ---- Token.

Decoded<Token> decode_token(const json& doc) {
  return decode<Token>(doc, [](const Reader& s, const Reader& st, Token* t) {
    TokenSpec& spec = t->spec;
    s.key_ref("jwtHs256KeyRef", &spec.jwt_hs256_key_ref);
    s.key_ref("jwtKeyRef", &spec.jwt_key_ref);
    s.str("username", &spec.username);
    s.str("lifetime", &spec.lifetime);
    s.boolean("refresh", &spec.refresh);
    s.key_ref("secretRef", &spec.secret_ref);
    st.str("issuedAt", &t->status.issued_at);
    st.conditions("conditions", &t->status.conditions);
  });
}

json encode(const Token& t) {
  const TokenSpec& s = t.spec;
  json spec = json::object();
  put(spec, "jwtHs256KeyRef", s.jwt_hs256_key_ref);
  put(spec, "jwtKeyRef", s.jwt_key_ref);
  put(spec, "username", s.username);
  put(spec, "lifetime", s.lifetime);
  put(spec, "refresh", s.refresh);
  put(spec, "secretRef", s.secret_ref);
  json status = json::object();
  put(status, "issuedAt", t.status.issued_at);
  if (!t.status.conditions.empty()) {
    status["conditions"] = encode_conditions(t.status.conditions);
  }
  json doc = header(t, "Token");
  finish(doc, spec, status);
  return doc;
}

namespace {

// An item that is not an object reads as a requirement without a key, which validation refuses.
void read_selector(const Reader& r, LabelSelector* out) {
  r.string_map("matchLabels", &out->match_labels);
  r.each("matchExpressions", [&](const Reader& e, const json&, const std::string&) {
    LabelSelector::Requirement requirement;
    e.str("key", &requirement.key);
    e.str("operator", &requirement.op);
    e.strings("values", &requirement.values);
    out->match_expressions.push_back(std::move(requirement));
  });
}

json selector_json(const LabelSelector& s) {
  json o = json::object();
  put(o, "matchLabels", s.match_labels);
  if (!s.match_expressions.empty()) {
    json expressions = json::array();
    for (const auto& e : s.match_expressions) {
      json item = {{"key", e.key}, {"operator", e.op}};
      put(item, "values", e.values);
      expressions.push_back(std::move(item));
    }
    o["matchExpressions"] = std::move(expressions);
  }
  return o;
}

}  // namespace

Decoded<HealthCheck> decode_health_check(const json& doc) {
  return decode<HealthCheck>(doc, [](const Reader& s, const Reader& st, HealthCheck* h) {
    HealthCheckSpec& spec = h->spec;
    read_selector(s.child("nodeSetSelector"), &spec.node_set_selector);
    const Reader passive = s.child("passive");
    passive.integer("intervalSeconds", &spec.passive.interval_seconds);
    passive.strings("checks", &spec.passive.checks);
    passive.strings("mounts", &spec.passive.mounts);
    passive.child("scripts").local_ref("configMapRef", &spec.passive.scripts);
    passive.integer("timeoutSeconds", &spec.passive.timeout_seconds);
    passive.str("dcgmHost", &spec.passive.dcgm_host);
    if (s.has("active")) {
      const Reader active = s.child("active");
      ActiveChecks& a = spec.active.emplace();
      active.integer("intervalSeconds", &a.interval_seconds);
      active.boolean("afterReplacement", &a.after_replacement);
      active.strings("checks", &a.checks);
      active.integer("timeoutSeconds", &a.timeout_seconds);
      active.any("maxConcurrent", &a.max_concurrent);
      active.integer("minCpuGflops", &a.min_cpu_gflops);
      active.integer("minMemoryBandwidthMBps", &a.min_memory_bandwidth_mbps);
      active.integer("minNcclBusBandwidthGBps", &a.min_nccl_bus_bandwidth_gbps);
      active.str("ncclTests", &a.nccl_tests);
    }
    const Reader signals = s.child("signals");
    signals.strings("nodeConditions", &spec.signals.node_conditions);
    signals.strings("deviceTaints", &spec.signals.device_taints);
    signals.boolean("podCordonRequested", &spec.signals.pod_cordon_requested);
    const Reader remediation = s.child("remediation");
    remediation.any("maxUnhealthy", &spec.remediation.max_unhealthy);
    remediation.boolean("replace", &spec.remediation.replace);
    remediation.integer("quarantineAfter", &spec.remediation.quarantine_after);
    remediation.integer("windowSeconds", &spec.remediation.window_seconds);

    HealthCheckStatus& status = h->status;
    st.integer("observedGeneration", &status.observed_generation);
    st.conditions("conditions", &status.conditions);
    st.each("remediations", [&](const Reader& r, const json&, const std::string&) {
      NodeRemediation n;
      r.str("node", &n.node);
      r.str("nodeSet", &n.node_set);
      r.str("podUID", &n.pod_uid);
      r.str("kubeNode", &n.kube_node);
      r.str("check", &n.check);
      r.str("message", &n.message);
      r.str("phase", &n.phase);
      r.str("since", &n.since);
      status.remediations.push_back(std::move(n));
    });
    st.each("kubeNodes", [&](const Reader& r, const json&, const std::string&) {
      KubeNodeHealth k;
      r.str("name", &k.name);
      r.strings("failures", &k.failures);
      r.boolean("quarantined", &k.quarantined);
      status.kube_nodes.push_back(std::move(k));
    });
  });
}

json encode(const HealthCheck& h) {
  const HealthCheckSpec& s = h.spec;
  json spec = json::object();
  spec["nodeSetSelector"] = selector_json(s.node_set_selector);
  json passive = json::object();
  put(passive, "intervalSeconds", s.passive.interval_seconds);
  put(passive, "checks", s.passive.checks);
  put(passive, "mounts", s.passive.mounts);
  if (s.passive.scripts) {
    passive["scripts"]["configMapRef"]["name"] = s.passive.scripts->name;
  }
  put(passive, "timeoutSeconds", s.passive.timeout_seconds);
  put(passive, "dcgmHost", s.passive.dcgm_host);
  put(spec, "passive", passive);
  if (s.active) {
    const ActiveChecks& a = *s.active;
    json active = json::object();
    put(active, "intervalSeconds", a.interval_seconds);
    put(active, "afterReplacement", a.after_replacement);
    put(active, "checks", a.checks);
    put(active, "timeoutSeconds", a.timeout_seconds);
    if (!a.max_concurrent.is_null()) {
      active["maxConcurrent"] = a.max_concurrent;
    }
    put(active, "minCpuGflops", a.min_cpu_gflops);
    put(active, "minMemoryBandwidthMBps", a.min_memory_bandwidth_mbps);
    put(active, "minNcclBusBandwidthGBps", a.min_nccl_bus_bandwidth_gbps);
    put(active, "ncclTests", a.nccl_tests);
    spec["active"] = std::move(active);
  }
  json signals = json::object();
  put(signals, "nodeConditions", s.signals.node_conditions);
  put(signals, "deviceTaints", s.signals.device_taints);
  put(signals, "podCordonRequested", s.signals.pod_cordon_requested);
  put(spec, "signals", signals);
  json remediation = json::object();
  if (!s.remediation.max_unhealthy.is_null()) {
    remediation["maxUnhealthy"] = s.remediation.max_unhealthy;
  }
  put(remediation, "replace", s.remediation.replace);
  put(remediation, "quarantineAfter", s.remediation.quarantine_after);
  put(remediation, "windowSeconds", s.remediation.window_seconds);
  put(spec, "remediation", remediation);

  json status = encode_health_status(h.status);
  json doc = header(h, "HealthCheck");
  finish(doc, spec, status);
  return doc;
}

json encode_health_status(const HealthCheckStatus& st) {
  json status = json::object();
  put(status, "observedGeneration", st.observed_generation);
  if (!st.conditions.empty()) {
    status["conditions"] = encode_conditions(st.conditions);
  }
  if (!st.remediations.empty()) {
    json list = json::array();
    for (const auto& n : st.remediations) {
      json item = json::object();
      put(item, "node", n.node);
      put(item, "nodeSet", n.node_set);
      put(item, "podUID", n.pod_uid);
      put(item, "kubeNode", n.kube_node);
      put(item, "check", n.check);
      put(item, "message", n.message);
      put(item, "phase", n.phase);
      put(item, "since", n.since);
      list.push_back(std::move(item));
    }
    status["remediations"] = std::move(list);
  }
  if (!st.kube_nodes.empty()) {
    json list = json::array();
    for (const auto& k : st.kube_nodes) {
      json item = json::object();
      put(item, "name", k.name);
      put(item, "failures", k.failures);
      put(item, "quarantined", k.quarantined);
      list.push_back(std::move(item));
    }
    status["kubeNodes"] = std::move(list);
  }
  return status;
}

std::vector<NodeFailure> decode_node_failures(const json& kube_node) {
  std::vector<NodeFailure> out;
  const json annotations = kube_node.value("/metadata/annotations"_json_pointer, json::object());
  const auto it = annotations.find(kAnnotationHealthFailures);
  if (it == annotations.end() || !it->is_string()) {
    return out;
  }
  const json list = json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
  for (const auto& f : list.is_array() ? list : json::array()) {
    if (f.is_object() && f.contains("at") && f["at"].is_number_integer()) {
      out.push_back(
          {f.value("pod", ""), f.value("uid", ""), f.value("check", ""), f["at"].get<int64_t>()});
    }
  }
  return out;
}

std::string encode_node_failures(const std::vector<NodeFailure>& failures) {
  json list = json::array();
  for (const auto& f : failures) {
    list.push_back({{"pod", f.pod}, {"uid", f.uid}, {"check", f.check}, {"at", f.at}});
  }
  return list.dump();
}

}  // namespace tightrope::api
