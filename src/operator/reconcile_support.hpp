// What the reconcilers share: how a reconcile ends (retry with backoff, look again later, or
// settled), reporting Ready, loading a resource with defaults and validation, applying built
// objects, and reading the Controller a resource names.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/validation.hpp"
#include "kube/controller.hpp"
#include "operator/cache.hpp"
#include "operator/runtime.hpp"
#include "slurm/model.hpp"

namespace tightrope::op {

// The identity of a cached resource, for status and events even when its spec cannot be read.
api::ObjectMeta meta_of(const kube::Document& doc);
std::vector<api::Condition> conditions_of(const kube::Document& doc);

// Why a resource is not ready, and when to look again.
struct NotReady {
  Readiness why;
  kube::ReconcileOutcome next;
};

// After a failure the work queue retries with backoff (capped by the queue's max delay).
kube::ReconcileOutcome retry();
kube::ReconcileOutcome after(std::chrono::milliseconds delay);
kube::ReconcileOutcome settled();

// Reports `ready` and decides what follows: a transient cause is retried, a spec problem waits
// for the spec (or a watched object) to change.
// `extra` holds the status fields besides conditions; server-side apply removes every field the
// operator wrote before and leaves out now, so a path that has nothing new to say passes the
// stored ones (kept_status) with extra_changed false.
kube::ReconcileOutcome report(Runtime& rt, const kube::ResourceType& type,
                              const api::ObjectMeta& meta,
                              const std::vector<api::Condition>& before,
                              std::vector<api::Condition> conditions, const Readiness& ready,
                              kube::ReconcileOutcome next,
                              const nlohmann::json& extra = nlohmann::json::object(),
                              bool extra_changed = true);

// The stored status without its conditions, with the fields of `required` it lacks added
// (Slinky's NodeSet CRD requires nodeSetHash and selector in every status written).
nlohmann::json kept_status(const nlohmann::json& stored,
                           const nlohmann::json& required = nlohmann::json::object());

// Decodes a resource and applies defaults and validation; the fields at fault if it fails.
template <typename T>
api::Decoded<T> checked(const kube::Document& doc,
                        api::Decoded<T> (*decode)(const nlohmann::json&)) {
  auto decoded = decode(doc.doc);
  if (!decoded) {
    return decoded;
  }
  api::apply_defaults(*decoded);
  if (api::FieldErrors errors = api::validate(*decoded); !errors.empty()) {
    return fail(std::move(errors));
  }
  return decoded;
}

// checked(); nullopt after reporting InvalidSpec, with the stored status kept and
// `required_status` added where missing.
template <typename T>
std::optional<T> load(Runtime& rt, const kube::ResourceType& type, const kube::Document& doc,
                      api::Decoded<T> (*decode)(const nlohmann::json&),
                      const nlohmann::json& required_status = nlohmann::json::object()) {
  auto decoded = checked(doc, decode);
  if (decoded) {
    return std::move(*decoded);
  }
  const api::FieldErrors& errors = decoded.error();
  // The webhook refuses such objects; one written around it stays as it is until fixed.
  const nlohmann::json stored = doc.doc.value("status", nlohmann::json::object());
  const nlohmann::json kept = kept_status(stored, required_status);
  (void)report(rt, type, meta_of(doc), conditions_of(doc), conditions_of(doc),
               {false, "InvalidSpec", api::join(errors)}, settled(), kept,
               kept != kept_status(stored));
  return std::nullopt;
}

// What the operator last applied of each object it owns, so that a reconcile that builds the
// same object again writes nothing: a steady cluster costs the API server no writes. An object
// is applied again when what is built differs, when the cache shows another resourceVersion
// than the apply returned (someone edited or deleted it: the watch brings the reconcile that
// undoes it), and, for kinds the operator does not cache, once `refresh` has passed. Safe to
// use from several workers.
class AppliedObjects {
 public:
  explicit AppliedObjects(std::chrono::seconds refresh) : refresh_(refresh) {}
  bool unchanged(const nlohmann::json& object, const ResourceCache& cache) const;
  // `stored` is the object as the API server answered the apply.
  void remember(const nlohmann::json& object, const nlohmann::json& stored);

 private:
  struct Entry {
    std::string body;
    std::string resource_version;
    std::chrono::steady_clock::time_point at;
  };
  std::chrono::seconds refresh_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// Applies each object in order, except those `applied` says are unchanged; `stored` (when
// given) gets each object applied as stored, by "Kind/name".
kube::ReconcileOutcome apply_all(Runtime& rt, const std::vector<nlohmann::json>& objects,
                                 std::map<std::string, nlohmann::json>* stored,
                                 AppliedObjects* applied = nullptr,
                                 const ResourceCache* cache = nullptr);

// status.<field> of an owned object: from `stored` when this reconcile applied it, else read
// from the API server (the cache keeps no status of owned objects).
int64_t owned_status_int(Runtime& rt, const std::map<std::string, nlohmann::json>& stored,
                         const kube::ResourceType& type, const std::string& ns,
                         const std::string& name, const char* field);

// A reconciler of one of the operator's kinds: it reads the cache and writes through the runtime.
class ResourceReconciler : public kube::Reconciler {
 public:
  ResourceReconciler(Runtime& runtime, const ResourceCache& cache)
      : runtime_(runtime), cache_(cache) {}

 protected:
  Runtime& runtime_;
  const ResourceCache& cache_;
  AppliedObjects applied_{std::chrono::minutes(5)};
};

// status.<field> of an object as an integer, 0 when absent.
int64_t status_int(const nlohmann::json& object, const char* field);

// The Controller `name` in `ns` from the cache, with defaults; nullopt when absent or unreadable.
std::optional<api::Controller> controller_of(const ResourceCache& cache, const std::string& ns,
                                             const std::string& name);

// The slurmctld in control, whose pod carries the active label the Controller's Service selects
// with HA: the first one that answers slurmrestd's ping, in SlurmctldHost order (a backup takes
// control when those before it stop answering), its SlurmctldHost name, which is its pod's;
// "" when none answers. Slurm's `primary` only says whether it is the first configured.
std::string active_slurmctld(const slurm::Ping& ping);

// HA: how often a Controller's reconcile asks which slurmctld is in control, at most, so that
// the Service follows a failover within seconds rather than a doctor's check period.
inline constexpr std::chrono::seconds kActiveSlurmctldPeriod{5};

// ---- A move from another operator of these kinds (Slinky's slurm-operator).
// A resource Tightrope has never reconciled (no Ready condition of its own: Slinky writes none)
// whose workload another operator made is adopted: what that operator made is kept as it is,
// its pods running on, until the resource's spec changes. The generation it was adopted at is
// kept on the resource (kAnnotationAdoptedGeneration); the adoption ends when the generation
// moves past it, and the resource's objects are then built and applied as Tightrope's.

// Whether the resource is adopted at its current generation.
bool adoption_in_force(const api::ObjectMeta& meta);
// Whether Tightrope has reconciled the resource before (its Ready condition).
bool reconciled_before(const std::vector<api::Condition>& conditions);
// Records the adoption on the resource (with the pods' revision for a NodeSet), with an Event
// that says what is kept. Precondition on the resourceVersion the decision was made from.
kube::Result<Done> record_adoption(Runtime& rt, const kube::ResourceType& type,
                                   const api::ObjectMeta& meta, const std::string& what,
                                   const std::string& revision = "");
// For the kinds with one workload (StatefulSet or Deployment): true while the workload is kept
// as adopted (and still exists), the adoption recorded here when the resource was never
// reconciled and `workload` exists but was not applied by Tightrope. An error when that cannot
// be known or recorded: nothing may be written over first.
kube::Result<bool> keep_adopted(Runtime& rt, const kube::ResourceType& type,
                                const api::ObjectMeta& meta,
                                const std::vector<api::Condition>& conditions,
                                const kube::ResourceType& workload,
                                const std::string& workload_name);

// sha256 of a key, "" for none.
std::string key_hash(const std::string& key);

}  // namespace tightrope::op
