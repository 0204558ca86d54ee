#include "operator/reconcile_support.hpp"

#include "api/well_known.hpp"
#include "base/log.hpp"
#include "operator/build/common.hpp"
#include "operator/conditions.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

using nlohmann::json;

api::ObjectMeta meta_of(const kube::Document& doc) {
  api::ObjectMeta meta;
  meta.name = doc.meta.name;
  meta.namespace_name = doc.meta.namespace_name;
  meta.uid = doc.meta.uid;
  meta.generation = doc.meta.generation;
  return meta;
}

std::vector<api::Condition> conditions_of(const kube::Document& doc) {
  const auto it = doc.doc.find("status");
  if (it == doc.doc.end() || !it->is_object() || !it->contains("conditions")) {
    return {};
  }
  return api::decode_conditions((*it)["conditions"]);
}

kube::ReconcileOutcome retry() {
  return kube::ReconcileResult{true, {}};
}
kube::ReconcileOutcome after(std::chrono::milliseconds delay) {
  return kube::ReconcileResult{false, delay};
}
kube::ReconcileOutcome settled() {
  return kube::ReconcileResult{};
}

kube::ReconcileOutcome report(Runtime& rt, const kube::ResourceType& type,
                              const api::ObjectMeta& meta,
                              const std::vector<api::Condition>& before,
                              std::vector<api::Condition> conditions, const Readiness& ready,
                              kube::ReconcileOutcome next, const json& extra, bool extra_changed) {
  if (auto published =
          rt.publish(type, meta, before, std::move(conditions), ready, extra, extra_changed);
      !published) {
    return fail("writing status: " + published.error().message);
  }
  return next;
}

json kept_status(const json& stored, const json& required) {
  json kept = stored.is_object() ? stored : json::object();
  kept.erase("conditions");
  for (const auto& [k, v] : required.items()) {
    kept.emplace(k, v);
  }
  return kept;
}

namespace {

// A StatefulSet whose serviceName, volumeClaimTemplates or podManagementPolicy were set
// otherwise (by the operator a cluster was moved from, or an earlier release) cannot be updated.
bool immutable_fields_differ(const json& object, const kube::Error& error) {
  return error.kind == kube::ErrorKind::kInvalid && object.value("kind", "") == "StatefulSet" &&
         error.message.find("field is immutable") != std::string::npos;
}

// Such a StatefulSet is deleted leaving its pods (and their claims) running; the next reconcile
// makes it anew, which takes the pods by its selector and rolls them to its template as its
// update strategy says. Returns why this reconcile stops.
std::string replace_keeping_pods(Runtime& rt, const json& object, const std::string& what,
                                 const kube::Error& error) {
  const json& meta = object["metadata"];
  std::string owner_uid;
  for (const auto& ref : meta.value("ownerReferences", json::array())) {
    if (ref.value("controller", false)) {
      owner_uid = ref.value("uid", "");
    }
  }
  auto removed = rt.remove_owned(kube::resources::stateful_sets(), meta.value("namespace", ""),
                                 meta.value("name", ""), owner_uid,
                                 {kube::PropagationPolicy::kOrphan, /*maybe_foreign=*/true});
  if (!removed) {
    return "applying " + what + ": " + error.message +
           "; deleting it to make it anew: " + removed.error().message;
  }
  if (!*removed) {
    return "applying " + what + ": " + error.message;  // someone else's: never ours to delete
  }
  return what + " had fields that cannot change set otherwise (" + error.message +
         "): deleted with its pods left running, to be made anew";
}

}  // namespace

kube::ReconcileOutcome apply_all(Runtime& rt, const std::vector<json>& objects,
                                 std::map<std::string, json>* stored, AppliedObjects* applied,
                                 const ResourceCache* cache) {
  for (const auto& object : objects) {
    if (applied != nullptr && cache != nullptr && applied->unchanged(object, *cache)) {
      continue;
    }
    auto result = rt.apply(object);
    if (!result) {
      const std::string what =
          object.value("kind", "") + " " + object["metadata"].value("name", "");
      if (immutable_fields_differ(object, result.error())) {
        return fail(replace_keeping_pods(rt, object, what, result.error()));
      }
      return fail("applying " + what + ": " + result.error().message);
    }
    if (applied != nullptr) {
      applied->remember(object, *result);
    }
    if (stored != nullptr) {
      (*stored)[object.value("kind", "") + "/" + object["metadata"].value("name", "")] = *result;
    }
  }
  return settled();
}

namespace {

std::string applied_key(const json& object) {
  const json& meta = object["metadata"];
  return object.value("apiVersion", "") + "/" + object.value("kind", "") + "/" +
         meta.value("namespace", "") + "/" + meta.value("name", "");
}

}  // namespace

bool AppliedObjects::unchanged(const json& object, const ResourceCache& cache) const {
  Entry entry;
  {
    const std::lock_guard lock(mu_);
    const auto it = entries_.find(applied_key(object));
    if (it == entries_.end()) {
      return false;
    }
    entry = it->second;
  }
  if (entry.body != object.dump()) {
    return false;
  }
  const kube::ResourceType* type =
      resources::for_object(object.value("apiVersion", ""), object.value("kind", ""));
  if (type != nullptr && cache.caches(*type)) {
    const json& meta = object["metadata"];
    return cache.resource_version(
               *type, kube::object_key(meta.value("namespace", ""), meta.value("name", ""))) ==
           entry.resource_version;
  }
  return std::chrono::steady_clock::now() - entry.at < refresh_;
}

void AppliedObjects::remember(const json& object, const json& stored) {
  const std::lock_guard lock(mu_);
  entries_[applied_key(object)] =
      Entry{object.dump(), stored.value("/metadata/resourceVersion"_json_pointer, std::string()),
            std::chrono::steady_clock::now()};
}

int64_t owned_status_int(Runtime& rt, const std::map<std::string, json>& stored,
                         const kube::ResourceType& type, const std::string& ns,
                         const std::string& name, const char* field) {
  if (const auto it = stored.find(type.kind + "/" + name); it != stored.end()) {
    return status_int(it->second, field);
  }
  auto current = rt.kube().get(type, ns, name);
  return current ? status_int(*current, field) : 0;
}

int64_t status_int(const json& object, const char* field) {
  const auto status = object.find("status");
  if (status == object.end() || !status->is_object()) {
    return 0;
  }
  const auto it = status->find(field);
  return it != status->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::optional<api::Controller> controller_of(const ResourceCache& cache, const std::string& ns,
                                             const std::string& name) {
  auto doc = cache.get(resources::controllers(), kube::object_key(ns, name));
  if (!doc) {
    return std::nullopt;
  }
  auto decoded = api::decode_controller(doc->doc);
  if (!decoded) {
    return std::nullopt;
  }
  api::apply_defaults(*decoded);
  return std::move(*decoded);
}

std::string key_hash(const std::string& key) {
  return key.empty() ? "" : build::sha256_hex(key);
}

std::string active_slurmctld(const slurm::Ping& ping) {
  return ping.responding ? ping.hostname : "";
}

bool adoption_in_force(const api::ObjectMeta& meta) {
  const auto it = meta.annotations.find(std::string(api::kAnnotationAdoptedGeneration));
  return it != meta.annotations.end() && it->second == std::to_string(meta.generation);
}

bool reconciled_before(const std::vector<api::Condition>& conditions) {
  return find_condition(conditions, "Ready") != nullptr;
}

kube::Result<Done> record_adoption(Runtime& rt, const kube::ResourceType& type,
                                   const api::ObjectMeta& meta, const std::string& what,
                                   const std::string& revision) {
  json annotations = {{api::kAnnotationAdoptedGeneration, std::to_string(meta.generation)}};
  if (!revision.empty()) {
    annotations[api::kAnnotationAdoptedRevision] = revision;
  }
  const json patch = {
      {"metadata", {{"annotations", annotations}, {"resourceVersion", meta.resource_version}}}};
  auto patched =
      rt.kube().patch(type, meta.namespace_name, meta.name, kube::PatchType::kMerge, patch);
  if (!patched) {
    return fail(patched.error());
  }
  const std::string message =
      "adopted " + what + " as the previous operator made it, at generation " +
      std::to_string(meta.generation) + ": kept until the spec changes, nothing restarted";
  rt.events().normal({type.api_version(), type.kind, meta.namespace_name, meta.name, meta.uid},
                     "Adopted", message);
  log::info("operator.adopted", {{"kind", type.kind},
                                 {"object", meta.namespace_name + "/" + meta.name},
                                 {"generation", std::to_string(meta.generation)},
                                 {"what", what}});
  return Done{};
}

kube::Result<bool> keep_adopted(Runtime& rt, const kube::ResourceType& type,
                                const api::ObjectMeta& meta,
                                const std::vector<api::Condition>& conditions,
                                const kube::ResourceType& workload,
                                const std::string& workload_name) {
  const bool in_force = adoption_in_force(meta);
  if (!in_force && reconciled_before(conditions)) {
    return false;
  }
  // Read, not taken from the cache: it holds only objects with Tightrope's labels.
  auto found = rt.kube().get(workload, meta.namespace_name, workload_name);
  if (!found) {
    if (found.error().kind == kube::ErrorKind::kNotFound) {
      return false;  // a new resource, or the adopted workload deleted: Tightrope makes it
    }
    return fail(found.error());
  }
  if (in_force) {
    return true;
  }
  // Tightrope's own (applied before its first Ready was written, which then failed): not adopted.
  for (const auto& m : found->value("/metadata/managedFields"_json_pointer, json::array())) {
    if (m.value("manager", "") == api::kFieldManager && m.value("operation", "") == "Apply") {
      return false;
    }
  }
  if (auto recorded = record_adoption(rt, type, meta, workload.kind + " " + workload_name);
      !recorded) {
    return fail(recorded.error());
  }
  return true;
}

}  // namespace tightrope::op
