// What every reconciler of the operator shares: the Kubernetes client and event recorder, the
// Slurm clients, the options, and the few ways it writes to Kubernetes — server-side apply as
// one field manager, deletion of what it owns, reading a Secret's keys, and status with
// conditions and an Event when readiness changes.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "kube/client.hpp"
#include "kube/events.hpp"
#include "operator/cache.hpp"
#include "operator/slurm_clients.hpp"

namespace tightrope::op {

class LogHints;

struct OperatorOptions {
  std::vector<std::string> namespaces;  // empty: every namespace
  // Where the operator reaches a RestApi's slurmrestd: {service} and {namespace} are replaced.
  // Outside the cluster (or in tests) a fixed URL.
  std::string slurmrestd_url = "http://{service}.{namespace}:6820";
  std::map<std::string, int> workers;  // per controller name; 1 when unset
  // How often a Controller asks Slurm whether it answers (status only; changes are events).
  std::chrono::seconds slurm_check_period{30};
  // While slurmctld's log is followed (log_hints.hpp), how often a cluster's Slurm at rest is
  // polled anyway; 0: no log is followed, Slurm is polled every second.
  std::chrono::seconds slurm_hinted_period{30};
  // What an administrator's drain in Slurm does to the Kubernetes Node of its slurmd pod:
  // nothing (kNone), a SlurmNodeDrained condition (kCondition), or the condition and a
  // NoSchedule taint (kTaint), so that nothing new lands on a node Slurm took out.
  enum class DrainMirror { kNone, kCondition, kTaint };
  DrainMirror mirror_slurm_drains = DrainMirror::kNone;
  // Kubernetes Node condition types (a node problem detector's GPUProblem, ...) whose
  // "(<reason>: <message>)", while True, is the drain reason of a cordoned Node's Slurm nodes
  // (Slinky's meaning). With drain_on_node_conditions they drain those nodes by themselves, and
  // the drain is undone when they clear.
  std::vector<std::string> propagated_node_conditions;
  bool drain_on_node_conditions = false;
  // The longest wait between retries of a failing reconcile.
  std::chrono::seconds max_retry_delay{60};
};

// The readiness a reconcile found: Ready's status, reason and message.
struct Readiness {
  bool ready = false;
  std::string reason;
  std::string message;
};

// How remove_owned deletes: kBackground takes what the object owns with it, kOrphan leaves it
// running (a workload's pods). With `maybe_foreign` the API server is asked even when the cache
// lacks the object: the cache holds only objects with Tightrope's labels, and one another
// operator made has none.
struct Removal {
  kube::PropagationPolicy propagation = kube::PropagationPolicy::kBackground;
  bool maybe_foreign = false;
};

class Runtime {
 public:
  Runtime(kube::Client& kube, kube::EventRecorder& events, SlurmClients& slurm,
          OperatorOptions options);

  // The operator's cache, which lets reads and deletes of objects it knows skip the API server.
  void use_cache(const ResourceCache* cache) { cache_ = cache; }

  kube::Client& kube() { return kube_; }
  kube::EventRecorder& events() { return events_; }
  SlurmClients& slurm() { return slurm_; }
  // The followers of slurmctld's log; null when the operator follows none.
  LogHints* log_hints() { return log_hints_; }
  void use_log_hints(LogHints* hints) { log_hints_ = hints; }
  const OperatorOptions& options() const { return options_; }

  // Server-side apply (force) as "slurm-operator". A Secret's stringData is sent as data, so
  // the applied fields are the stored ones. Returns the object as stored.
  kube::Result<nlohmann::json> apply(const nlohmann::json& object);
  // Deletes the object if its controlling owner has `owner_uid`; absent is success (and known
  // without a request when the cache holds the type).
  // True when it was deleted; false when absent or someone else's.
  kube::Result<bool> remove_owned(const kube::ResourceType& type, const std::string& ns,
                                  const std::string& name, const std::string& owner_uid,
                                  const Removal& how = Removal{});
  // A Secret's or ConfigMap's data (Secret values decoded); kNotFound when absent.
  kube::Result<std::map<std::string, std::string>> secret_data(const std::string& ns,
                                                               const std::string& name);
  kube::Result<std::map<std::string, std::string>> config_map_data(const std::string& ns,
                                                                   const std::string& name);
  // The whole object, read again only when the cache shows another resourceVersion (the type
  // must be cached, by identity at least, or every call is a GET); kNotFound when absent.
  kube::Result<nlohmann::json> object(const kube::ResourceType& type, const std::string& ns,
                                      const std::string& name);
  // Whether the API server serves `kind` in `api_version` (a CRD that may not be installed).
  // With ask = false, the last answer (false if never asked), and no request.
  bool serves(const std::string& api_version, const std::string& kind, bool ask = true);

  // The URL of a RestApi's slurmrestd from the options' template.
  std::string slurmrestd_url(const std::string& service, const std::string& ns) const;

  // Sets Ready (and `conditions`, already set by the caller) on the object's status with
  // observedGeneration, writes status through the status subresource when anything changed,
  // and records an Event when Ready's status or reason changed. `extra_status` (the other status
  // fields, all of them: what is left out is removed) counts as a change unless
  // `extra_changed` is false.
  kube::Result<Done> publish(const kube::ResourceType& type, const api::ObjectMeta& meta,
                             const std::vector<api::Condition>& before,
                             std::vector<api::Condition> conditions, const Readiness& ready,
                             const nlohmann::json& extra_status = nlohmann::json::object(),
                             bool extra_changed = true);

  static std::string now();

 private:
  kube::Client& kube_;
  kube::EventRecorder& events_;
  SlurmClients& slurm_;
  OperatorOptions options_;
  std::mutex serves_mu_;
  std::map<std::string, std::pair<bool, std::chrono::steady_clock::time_point>> serves_;
  const ResourceCache* cache_ = nullptr;
  LogHints* log_hints_ = nullptr;
  // Objects as last read, with their resourceVersion: read again only when the cache shows
  // another one.
  struct Read {
    std::string resource_version;
    nlohmann::json object;
  };
  std::mutex reads_mu_;
  std::map<std::string, Read> reads_;  // by "<resource>/<namespace>/<name>"
  kube::Result<std::map<std::string, std::string>> read_data(const kube::ResourceType& type,
                                                             const std::string& ns,
                                                             const std::string& name);
};

// A missing Secret or key, as a Readiness ("SecretNotFound: Secret slurm/x (spec.slurmKeyRef)
// does not exist"), or the key's value.
struct SecretKey {
  std::string value;
  Readiness problem;  // ready == true when there is none
};
SecretKey read_secret_key(Runtime& runtime, const std::string& ns, const api::KeyRef& ref,
                          const std::string& field);

}  // namespace tightrope::op
