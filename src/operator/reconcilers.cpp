#include "operator/reconcilers.hpp"

#include <algorithm>
#include <utility>

#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/validation.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "base/memory.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/components.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/health.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/cluster_metrics.hpp"
#include "operator/conditions.hpp"
#include "operator/diagnosis.hpp"
#include "operator/health.hpp"
#include "operator/reconcile_support.hpp"
#include "operator/resources.hpp"
#include "operator/ssh_keys.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op {

using nlohmann::json;
using std::chrono::seconds;

// ---- Controller.

std::optional<Readiness> ControllerReconciler::read_inputs(const api::Controller& c,
                                                           build::ControllerInputs& in) {
  const std::string& ns = c.metadata.namespace_name;
  for (const auto& n : cache_.by_index(resources::nodesets(), cache_index::kController,
                                       kube::object_key(ns, c.metadata.name))) {
    if (auto nodeset = api::decode_nodeset(n->doc);
        nodeset && nodeset->spec.controller_ref.name == c.metadata.name) {
      api::apply_defaults(*nodeset);
      in.nodesets.push_back(std::move(*nodeset));
    }
  }
  {
    // Cliques are cluster-wide: every Node's, whatever its pods.
    const auto nodes = cache_.list_all(kube::resources::nodes());
    std::vector<const json*> docs;
    docs.reserve(nodes.size());
    for (const auto& node : nodes) {
      docs.push_back(&node->doc);
    }
    in.gpu_cliques = build::gpu_cliques(docs);
    const kube::ObjectReference self{resources::controllers().api_version(), "Controller", ns,
                                     c.metadata.name, c.metadata.uid};
    for (const auto& [node, why] : in.gpu_cliques.odd) {
      std::string message = "Node " + node;
      message += ": " + why;
      runtime_.events().warning(self, "OddGpuClique", message);
    }
  }
  in.health_check_interval =
      build::health_check_interval(health_checks_in(cache_, ns), in.nodesets);
  if (c.spec.accounting_ref) {
    if (auto a = cache_.get(resources::accountings(),
                            kube::object_key(ns, c.spec.accounting_ref->name))) {
      if (auto accounting = api::decode_accounting(a->doc)) {
        in.accounting = std::move(*accounting);
      }
    }
  }
  for (const auto& [refs, field, scripts] : c.spec.config_refs()) {
    for (const auto& ref : *refs) {
      auto data = runtime_.config_map_data(ns, ref.name);
      if (!data) {
        const bool missing = data.error().kind == kube::ErrorKind::kNotFound;
        return Readiness{false, missing ? "ConfigMapNotFound" : "ConfigMapUnreadable",
                         "ConfigMap " + ns + "/" + ref.name + " (" + field + ")" +
                             (missing ? " does not exist" : ": " + data.error().message)};
      }
      in.config_maps[ref.name] = std::move(*data);
    }
  }
  if (!c.spec.external) {
    const SecretKey slurm_key =
        read_secret_key(runtime_, ns, c.spec.slurm_key_ref, "spec.slurmKeyRef");
    if (!slurm_key.problem.ready) {
      return slurm_key.problem;
    }
    in.slurm_key_hash = key_hash(slurm_key.value);
  }
  if (const api::KeyRef* ref = c.spec.jwt_key()) {
    const SecretKey key = read_secret_key(runtime_, ns, *ref, "spec.jwtKeyRef");
    if (!key.problem.ready) {
      return key.problem;
    }
    in.jwt_key_hash = key_hash(key.value);
  }
  return std::nullopt;
}

std::optional<Readiness> ControllerReconciler::apply_controller_objects(
    const api::Controller& c, const build::ControllerInputs& in, std::vector<json>& objects,
    std::map<std::string, json>& stored) {
  const std::string& ns = c.metadata.namespace_name;
  // Discovery is asked only while a ServiceMonitor is wanted; one that is not is pruned if the
  // CRD was there when last asked.
  const bool want_monitor = c.spec.metrics.enabled && c.spec.metrics.service_monitor.enabled;
  const bool monitors = runtime_.serves("monitoring.coreos.com/v1", "ServiceMonitor",
                                        want_monitor && !c.spec.external);
  objects = build::build_controller_objects(c, in, monitors);
  if (auto applied = apply_all(runtime_, objects, &stored, &applied_, &cache_); !applied) {
    return Readiness{false, "ApplyFailed", applied.error()};
  }
  // The headless Service and the budget all NodeSets of the cluster share, each NodeSet an
  // owner: written here, once for all of them. With no NodeSet left they go (garbage collection).
  std::vector<api::NodeSet> workers;
  for (const auto& n : in.nodesets) {
    if (!n.metadata.deleting) {
      workers.push_back(n);
    }
  }
  if (!workers.empty()) {
    if (auto applied = apply_all(
            runtime_,
            {build::build_worker_service(c, workers), build::build_worker_pdb(c, workers)}, nullptr,
            &applied_, &cache_);
        !applied) {
      return Readiness{false, "ApplyFailed", applied.error()};
    }
  }
  // What the spec no longer asks for.
  std::vector<std::pair<const kube::ResourceType*, std::string>> unwanted;
  if (monitors && (!want_monitor || c.spec.external)) {
    unwanted.emplace_back(&resources::service_monitors(), build::controller_service_name(c));
  }
  if (c.spec.external) {
    unwanted.emplace_back(&kube::resources::stateful_sets(), build::controller_statefulset_name(c));
    unwanted.emplace_back(&kube::resources::services(), build::controller_service_name(c));
    unwanted.emplace_back(&kube::resources::services(), build::controller_headless_service_name(c));
  }
  for (const auto& [t, name] : unwanted) {
    if (auto removed = runtime_.remove_owned(*t, ns, name, c.metadata.uid); !removed) {
      return Readiness{false, "PruneFailed", removed.error().message};
    }
  }
  return std::nullopt;
}

kube::ReconcileOutcome ControllerReconciler::reconcile(const kube::Request& request) {
  const auto doc = cache_.get(resources::controllers(), request.key());
  if (!doc || doc->meta.deleting) {
    std::lock_guard lock(reported_mu_);
    reported_.erase(request.key());
    diagnosed_at_.erase(request.key());
    return settled();  // owned objects go with it (garbage collection)
  }
  const kube::ResourceType& type = resources::controllers();
  auto loaded = load(runtime_, type, *doc, &api::decode_controller);
  if (!loaded) {
    return settled();
  }
  const api::Controller& c = *loaded;
  const std::string& ns = c.metadata.namespace_name;
  const auto before = c.status.conditions;
  auto conditions = before;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, c.metadata, before, conditions, ready, std::move(next));
  };

  // Moved from another operator: its slurmctld, slurm.conf and Services stay as they are, and
  // slurmctld runs on, until the spec changes.
  bool adopted = false;
  if (!c.spec.external) {
    auto kept = keep_adopted(runtime_, type, c.metadata, before, kube::resources::stateful_sets(),
                             build::controller_statefulset_name(c));
    if (!kept) {
      return retry();  // nothing written before the adoption is known
    }
    adopted = *kept;
  }
  std::map<std::string, json> stored;
  std::vector<json> objects;
  build::ControllerInputs in;
  if (!adopted) {
    if (auto problem = read_inputs(c, in)) {
      return not_ready(*problem, retry());
    }
    if (auto errors = build::check_controller_config(c, in); !errors.empty()) {
      return not_ready({false, "InvalidConfig", api::join(errors)}, settled());
    }
    if (auto done = apply_controller_objects(c, in, objects, stored)) {
      return not_ready(*done, retry());
    }
  }

  // Slurm as the cluster's connection reaches it (SlurmClients::reach, the same as each
  // NodeSet's): the connection's feed proves the whole path, token included, and a change of
  // its health wakes this reconcile. Nothing is asked of Slurm here but the doctor's checks,
  // at most once a check period.
  const SlurmReach reach = runtime_.slurm().reach(request.key());
  const bool reachable = reach.ok();
  set_condition(
      conditions,
      {"SlurmReachable",
       reachable ? "True" : (reach.health == SlurmHealth::kUnreachable ? "False" : "Unknown"),
       reach.reason, reach.message, c.metadata.generation, ""},
      Runtime::now());
  kube::ReconcileOutcome next = settled();
  const auto client = reachable ? runtime_.slurm().get(request.key()) : nullptr;
  if (client) {
    next = after(std::chrono::duration_cast<std::chrono::milliseconds>(
        runtime_.options().slurm_check_period));
    if (!adopted) {  // the doctor's checks compare what Tightrope builds
      diagnose(c, doc->doc, objects, in.slurm_key_hash, *client, conditions);
    }
  }
  if (c.spec.ha.enabled && !c.spec.external && !adopted) {
    follow_active_slurmctld(c, client.get());
    next = after(std::chrono::duration_cast<std::chrono::milliseconds>(std::min(
        runtime_.options().slurm_check_period, std::chrono::seconds(kActiveSlurmctldPeriod))));
  }

  Readiness ready;
  if (reachable) {
    ready = {true, "SlurmctldResponding", "slurmctld answers through slurmrestd"};
  } else if (reach.health == SlurmHealth::kUnreachable) {
    ready = {false, "SlurmUnreachable", reach.message};
  } else if (c.spec.external) {
    ready = {true, "External",
             "slurmctld runs outside Kubernetes at " + build::controller_conf_server(c)};
  } else {
    const int64_t want = c.spec.ha.enabled ? 1 + c.spec.ha.backups : 1;
    const int64_t have = owned_status_int(runtime_, stored, kube::resources::stateful_sets(), ns,
                                          build::controller_statefulset_name(c), "readyReplicas");
    ready =
        have >= 1
            ? Readiness{true, "SlurmctldReady",
                        std::to_string(have) + "/" + std::to_string(want) + " slurmctld pods ready"}
            : Readiness{false, "SlurmctldNotReady",
                        "0/" + std::to_string(want) + " slurmctld pods ready"};
  }
  return report(runtime_, type, c.metadata, before, conditions, ready, next);
}

void ControllerReconciler::follow_active_slurmctld(const api::Controller& c,
                                                   slurm::Client* client) {
  std::string active;
  if (client != nullptr) {
    if (auto pings = client->ping()) {
      active = active_slurmctld(*pings);
    }
  }
  const std::string& ns = c.metadata.namespace_name;
  // Read from the API server: the operator's pod cache holds the worker pods only.
  auto pods = runtime_.kube().list(kube::resources::pods(), ns,
                                   {std::string(api::kLabelInstance) + "=" + c.metadata.name + "," +
                                        std::string(api::kLabelName) + "=slurmctld",
                                    "", 0, "", "", std::nullopt});
  if (!pods) {
    return;
  }
  const auto labelled = [](const json& pod) {
    return pod.value("/metadata/labels"_json_pointer, json::object())
               .value(std::string(api::kLabelControllerActive), std::string()) == "true";
  };
  if (active.empty()) {
    // None answers, or Slurm cannot be asked. Clients and slurmd reach slurmctld through the
    // client Service (SlurmctldAddr, --conf-server), slurmrestd too: with no pod labelled none
    // of them could reach one, nor could this reconcile ever learn which one is in control. The
    // label stays where it is; with none, it goes to the first configured (pod 0), as in Slinky.
    for (const auto& pod : pods->items) {
      if (labelled(pod)) {
        return;
      }
    }
    active = build::controller_statefulset_name(c) + "-0";
  }
  for (const auto& pod : pods->items) {
    const std::string name = pod["metadata"].value("name", "");
    const bool is_active = name == active;
    const bool is_labelled = labelled(pod);
    if (is_labelled == is_active) {
      continue;
    }
    if (auto patched = runtime_.kube().patch(
            kube::resources::pods(), ns, name, kube::PatchType::kMerge,
            {{"metadata",
              {{"labels",
                {{api::kLabelControllerActive, is_active ? json("true") : json(nullptr)}}}}}});
        !patched) {
      log::warn("controller.active_label_failed",
                {{"pod", kube::object_key(ns, name)}, {"error", patched.error().message}});
    }
  }
}

void ControllerReconciler::diagnose(const api::Controller& c, const json& doc,
                                    const std::vector<json>& objects,
                                    const std::string& slurm_key_hash, slurm::Client& client,
                                    std::vector<api::Condition>& conditions) {
  const std::string& ns = c.metadata.namespace_name;
  const std::string key = kube::object_key(ns, c.metadata.name);
  auto feed = runtime_.slurm().feed(key);
  if (!feed || !feed->health().synced) {
    return;  // the next check, once the feed has read Slurm
  }
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(reported_mu_);
    auto [last, first] = diagnosed_at_.try_emplace(key, now);
    if (!first && now - last->second < runtime_.options().slurm_check_period) {
      return;  // the Healthy condition stays as the last check wrote it
    }
    last->second = now;
  }
  DiagnosisInputs in;
  in.now = std::chrono::system_clock::now();
  in.namespace_name = ns;
  in.controller = doc;
  in.slurm_key_hash = slurm_key_hash;
  in.snapshot = feed->snapshot();
  for (const auto& n : cache_.by_index(resources::nodesets(), cache_index::kController, key)) {
    in.nodesets.push_back(n->doc);
  }
  std::set<std::string> hosts;  // the Nodes its workers run on: the only ones a check reads
  for (const auto& p : cache_.pods(ns)) {
    if (const std::string* cluster = p->meta.label(api::kLabelCluster);
        cluster != nullptr && *cluster == c.metadata.name) {
      // The checks read documents: made for this check, dropped with it.
      in.pods.push_back(pod_document(*p));
      hosts.insert(p->node_name);
    }
  }
  for (const auto& host : hosts) {
    if (auto node = cache_.get(kube::resources::nodes(), host)) {
      in.kube_nodes.push_back(node->doc);
    }
  }
  for (const auto& o : objects) {
    if (o.value("kind", "") == "ConfigMap" &&
        o.value("/metadata/name"_json_pointer, std::string()) ==
            build::controller_config_map_name(c)) {
      in.slurm_conf = o.value("/data/slurm.conf"_json_pointer, std::string());
    }
  }
  if (auto reservations = client.list_reservations()) {
    in.reservations = std::move(*reservations);
  }
  const auto found = problems(doctor::diagnose(diagnosis_view(std::move(in)), operator_checks()));
  // The checks' view (a document for each worker pod, lookups over the Slurm snapshot) is gone:
  // at 10,000 workers, megabytes the allocator would otherwise keep until the next check.
  return_free_memory();
  set_condition(conditions, healthy_condition(found, c.metadata.generation), Runtime::now());

  std::set<std::string> now;
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const auto& f : found) {
    now.insert(finding_key(f));
    ++counts[{f.check, std::string(doctor::to_string(f.severity))}];
  }
  std::set<std::string> before;
  {
    std::lock_guard lock(reported_mu_);
    before = std::exchange(reported_[key], now);
  }
  const kube::ObjectReference self{resources::controllers().api_version(), "Controller", ns,
                                   c.metadata.name, c.metadata.uid};
  for (const auto& f : found) {
    if (before.count(finding_key(f)) == 0) {
      runtime_.events().warning(self, reason_of(f.check), f.subject + ": " + f.message);
    }
  }
  if (ClusterMetrics* metrics = runtime_.slurm().metrics()) {
    metrics->findings(ns, c.metadata.name, counts);
  }
}

// ---- RestApi.

std::optional<Readiness> RestApiReconciler::apply_restapi_objects(
    const api::RestApi& r, const api::Controller& controller, std::map<std::string, json>& stored) {
  const std::string& ns = r.metadata.namespace_name;
  build::RestApiInputs in{controller, "", ""};
  if (!controller.spec.external) {
    const SecretKey slurm_key =
        read_secret_key(runtime_, ns, controller.spec.slurm_key_ref, "Controller spec.slurmKeyRef");
    if (!slurm_key.problem.ready) {
      return slurm_key.problem;
    }
    in.slurm_key_hash = key_hash(slurm_key.value);
  }
  auto config = runtime_.config_map_data(ns, build::controller_config_map_name(controller));
  if (!config) {
    return Readiness{false, "ControllerConfigNotReady",
                     "ConfigMap " + ns + "/" + build::controller_config_map_name(controller) +
                         " with slurm.conf is not there yet: " + config.error().message};
  }
  in.config_hash = build::sha256_hex((*config)["slurm.conf"]);
  if (auto applied =
          apply_all(runtime_, build::build_restapi_objects(r, in), &stored, &applied_, &cache_);
      !applied) {
    return Readiness{false, "ApplyFailed", applied.error()};
  }
  return std::nullopt;
}

kube::ReconcileOutcome RestApiReconciler::reconcile(const kube::Request& request) {
  const auto doc = cache_.get(resources::restapis(), request.key());
  if (!doc || doc->meta.deleting) {
    return settled();
  }
  const kube::ResourceType& type = resources::restapis();
  auto loaded = load(runtime_, type, *doc, &api::decode_restapi);
  if (!loaded) {
    return settled();
  }
  const api::RestApi& r = *loaded;
  const std::string& ns = r.metadata.namespace_name;
  const auto& before = r.status.conditions;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, r.metadata, before, before, ready, std::move(next));
  };
  auto controller = controller_of(cache_, ns, r.spec.controller_ref.name);
  if (!controller) {
    // Watched: the Controller's creation brings this back.
    return not_ready({false, "ControllerNotFound",
                      "Controller " + ns + "/" + r.spec.controller_ref.name +
                          " (spec.controllerRef) does not exist"},
                     settled());
  }
  auto kept = keep_adopted(runtime_, type, r.metadata, before, kube::resources::deployments(),
                           build::restapi_name(r));
  if (!kept) {
    return retry();  // nothing written before the adoption is known
  }
  std::map<std::string, json> stored;
  if (!*kept) {
    if (auto problem = apply_restapi_objects(r, *controller, stored)) {
      return not_ready(*problem, retry());
    }
  }
  const int64_t available = owned_status_int(runtime_, stored, kube::resources::deployments(), ns,
                                             build::restapi_name(r), "availableReplicas");
  const int64_t want = r.spec.replicas.value_or(1);
  const Readiness ready =
      available >= 1 || want == 0
          ? Readiness{true, "SlurmrestdAvailable",
                      std::to_string(available) + "/" + std::to_string(want) +
                          " slurmrestd pods available"}
          : Readiness{false, "SlurmrestdNotAvailable",
                      "0/" + std::to_string(want) + " slurmrestd pods available"};
  return report(runtime_, type, r.metadata, before, before, ready, settled());
}

// ---- Accounting.

std::optional<NotReady> AccountingReconciler::apply_accounting_objects(
    const api::Accounting& a, std::map<std::string, json>& stored) {
  const std::string& ns = a.metadata.namespace_name;
  auto extra = slurm::parse_slurm_conf(a.spec.extra_conf, "extraConf");
  if (!extra) {
    return NotReady{{false, "InvalidConfig", "spec.extraConf: " + extra.error().to_string()},
                    settled()};
  }
  slurm::OwnedConf owned;
  for (const auto& key : build::owned_slurmdbd_conf_keys()) {
    owned.keys.insert(key);
  }
  if (auto errors = slurm::validate_extra_conf(*extra, owned); !errors.empty()) {
    std::string message;
    for (const auto& e : errors) {
      message += (message.empty() ? "spec.extraConf: " : "; ") + e.to_string();
    }
    return NotReady{{false, "InvalidConfig", message}, settled()};
  }
  build::AccountingInputs in;
  const SecretKey slurm_key =
      read_secret_key(runtime_, ns, a.spec.slurm_key_ref, "spec.slurmKeyRef");
  if (!slurm_key.problem.ready) {
    return NotReady{slurm_key.problem, retry()};
  }
  in.slurm_key_hash = key_hash(slurm_key.value);
  const SecretKey jwt = read_secret_key(runtime_, ns, *a.spec.jwt_key(), "spec.jwtKeyRef");
  if (!jwt.problem.ready) {
    return NotReady{jwt.problem, retry()};
  }
  in.jwt_key_hash = key_hash(jwt.value);
  const SecretKey password = read_secret_key(runtime_, ns, a.spec.storage_config.password_key_ref,
                                             "spec.storageConfig.passwordKeyRef");
  if (!password.problem.ready) {
    return NotReady{password.problem, retry()};
  }
  in.storage_password = password.value;
  if (auto applied =
          apply_all(runtime_, build::build_accounting_objects(a, in), &stored, &applied_, &cache_);
      !applied) {
    return NotReady{{false, "ApplyFailed", applied.error()}, retry()};
  }
  return std::nullopt;
}

kube::ReconcileOutcome AccountingReconciler::reconcile(const kube::Request& request) {
  const auto doc = cache_.get(resources::accountings(), request.key());
  if (!doc || doc->meta.deleting) {
    return settled();
  }
  const kube::ResourceType& type = resources::accountings();
  auto loaded = load(runtime_, type, *doc, &api::decode_accounting);
  if (!loaded) {
    return settled();
  }
  const api::Accounting& a = *loaded;
  const std::string& ns = a.metadata.namespace_name;
  const auto& before = a.status.conditions;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, a.metadata, before, before, ready, std::move(next));
  };
  if (a.spec.external) {
    for (const auto& [t, name] :
         {std::pair{&kube::resources::stateful_sets(), build::accounting_name(a)},
          std::pair{&kube::resources::services(), build::accounting_name(a)},
          std::pair{&kube::resources::secrets(), build::accounting_name(a)}}) {
      if (auto removed = runtime_.remove_owned(*t, ns, name, a.metadata.uid); !removed) {
        return not_ready({false, "PruneFailed", removed.error().message}, retry());
      }
    }
    return not_ready({true, "External",
                      "slurmdbd runs outside Kubernetes at " + a.spec.external_config.host + ":" +
                          std::to_string(a.spec.external_config.port)},
                     settled());
  }
  auto kept = keep_adopted(runtime_, type, a.metadata, before, kube::resources::stateful_sets(),
                           build::accounting_name(a));
  if (!kept) {
    return retry();  // nothing written before the adoption is known
  }
  std::map<std::string, json> stored;
  if (!*kept) {
    if (auto problem = apply_accounting_objects(a, stored)) {
      return not_ready(problem->why, problem->next);
    }
  }
  const int64_t ready_pods = owned_status_int(runtime_, stored, kube::resources::stateful_sets(),
                                              ns, build::accounting_name(a), "readyReplicas");
  return not_ready(ready_pods >= 1
                       ? Readiness{true, "SlurmdbdReady", "slurmdbd is ready"}
                       : Readiness{false, "SlurmdbdNotReady", "slurmdbd is not ready (0/1 pods)"},
                   settled());
}

// ---- LoginSet.

std::optional<NotReady> LoginSetReconciler::apply_loginset_objects(
    const api::LoginSet& l, const api::Controller& controller,
    std::map<std::string, json>& stored) {
  const std::string& ns = l.metadata.namespace_name;
  build::LoginSetInputs in{controller, {}, "", ""};
  const SecretKey slurm_key =
      read_secret_key(runtime_, ns, controller.spec.slurm_key_ref, "Controller spec.slurmKeyRef");
  if (!slurm_key.problem.ready) {
    return NotReady{slurm_key.problem, retry()};
  }
  in.slurm_key_hash = key_hash(slurm_key.value);
  const SecretKey sssd = read_secret_key(runtime_, ns, l.spec.sssd_conf_ref, "spec.sssdConfRef");
  if (!sssd.problem.ready) {
    return NotReady{sssd.problem, retry()};
  }
  // sssd.conf is mounted from the user's Secret: its hash rolls the login pods when it changes.
  in.sssd_conf_hash = key_hash(sssd.value);
  // Host keys are made once: a login node whose keys changed looks like an attack to users.
  auto keys = runtime_.secret_data(ns, build::loginset_host_keys_name(l));
  if (keys) {
    in.host_keys = std::move(*keys);
  } else if (keys.error().kind == kube::ErrorKind::kNotFound) {
    in.host_keys = generate_ssh_host_keys();
    log::info("loginset.host_keys_generated",
              {{"loginset", kube::object_key(ns, l.metadata.name)}});
  } else {
    return NotReady{{false, "SecretUnreadable", keys.error().message}, retry()};
  }
  if (auto applied =
          apply_all(runtime_, build::build_loginset_objects(l, in), &stored, &applied_, &cache_);
      !applied) {
    return NotReady{{false, "ApplyFailed", applied.error()}, retry()};
  }
  return std::nullopt;
}

kube::ReconcileOutcome LoginSetReconciler::reconcile(const kube::Request& request) {
  const auto doc = cache_.get(resources::loginsets(), request.key());
  if (!doc || doc->meta.deleting) {
    return settled();
  }
  const kube::ResourceType& type = resources::loginsets();
  // Slinky's CRD requires status.selector in every status written.
  const std::string selector = std::string(api::kLabelInstance) + "=" + doc->meta.name + "," +
                               std::string(api::kLabelName) + "=login";
  auto loaded = load(runtime_, type, *doc, &api::decode_loginset, {{"selector", selector}});
  if (!loaded) {
    return settled();
  }
  const api::LoginSet& l = *loaded;
  const std::string& ns = l.metadata.namespace_name;
  const auto& before = l.status.conditions;
  // A path that did not count the pods keeps the count the status has.
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next,
                             std::optional<int64_t> replicas = std::nullopt) {
    return report(runtime_, type, l.metadata, before, before, ready, std::move(next),
                  {{"replicas", replicas.value_or(l.status.replicas)}, {"selector", selector}});
  };
  auto controller = controller_of(cache_, ns, l.spec.controller_ref.name);
  if (!controller) {
    return not_ready({false, "ControllerNotFound",
                      "Controller " + ns + "/" + l.spec.controller_ref.name +
                          " (spec.controllerRef) does not exist"},
                     settled());
  }
  auto kept = keep_adopted(runtime_, type, l.metadata, before, kube::resources::deployments(),
                           build::loginset_name(l));
  if (!kept) {
    return retry();  // nothing written before the adoption is known
  }
  std::map<std::string, json> stored;
  if (!*kept) {
    if (auto problem = apply_loginset_objects(l, *controller, stored)) {
      return not_ready(problem->why, problem->next);
    }
  }
  const int64_t available = owned_status_int(runtime_, stored, kube::resources::deployments(), ns,
                                             build::loginset_name(l), "availableReplicas");
  const int64_t replicas = owned_status_int(runtime_, stored, kube::resources::deployments(), ns,
                                            build::loginset_name(l), "replicas");
  const int64_t want = l.spec.replicas.value_or(1);
  return not_ready(available >= 1 || want == 0
                       ? Readiness{true, "LoginAvailable",
                                   std::to_string(available) + "/" + std::to_string(want) +
                                       " login pods available"}
                       : Readiness{false, "LoginNotAvailable",
                                   "0/" + std::to_string(want) + " login pods available"},
                   settled(), replicas);
}

// ---- Token.

kube::ReconcileOutcome TokenReconciler::reconcile(const kube::Request& request) {
  const auto doc = cache_.get(resources::tokens(), request.key());
  if (!doc || doc->meta.deleting) {
    return settled();
  }
  const kube::ResourceType& type = resources::tokens();
  auto loaded = load(runtime_, type, *doc, &api::decode_token);
  if (!loaded) {
    return settled();
  }
  const api::Token& t = *loaded;
  const std::string& ns = t.metadata.namespace_name;
  const auto& before = t.status.conditions;
  const auto not_ready = [&](const Readiness& ready, kube::ReconcileOutcome next) {
    return report(runtime_, type, t.metadata, before, before, ready, std::move(next));
  };
  const SecretKey key = read_secret_key(runtime_, ns, *t.spec.jwt_key(), "spec.jwtKeyRef");
  if (!key.problem.ready) {
    return not_ready(key.problem, retry());
  }
  const seconds lifetime = *api::parse_duration(t.spec.lifetime);
  const bool refresh = t.spec.refresh.value_or(true);
  const api::KeyRef& target = *t.spec.secret_ref;
  const auto now = std::chrono::system_clock::now();

  // The token in the Secret stays while it is ours, signed with today's key, for this user and
  // lifetime, and (when refreshed) younger than 80 % of its life.
  std::optional<slurm::VerifiedJwt> current;
  bool immutable = false;
  auto existing = runtime_.kube().get(kube::resources::secrets(), ns, target.name);
  if (existing) {
    bool ours = false;
    for (const auto& ref :
         existing->value("/metadata/ownerReferences"_json_pointer, json::array())) {
      ours = ours || ref.value("uid", "") == t.metadata.uid;
    }
    if (!ours) {
      return not_ready({false, "SecretConflict",
                        "Secret " + ns + "/" + target.name +
                            " (spec.secretRef) exists and belongs to someone else"},
                       settled());
    }
    immutable = existing->value("immutable", false);
    auto data = runtime_.secret_data(ns, target.name);
    if (data && data->count(target.key) != 0) {
      current = slurm::verify_jwt(key.value, (*data)[target.key]);
    }
  } else if (existing.error().kind != kube::ErrorKind::kNotFound) {
    return not_ready({false, "SecretUnreadable", existing.error().message}, retry());
  }
  const bool valid = current && current->user == t.spec.username &&
                     current->expires_at - current->issued_at == lifetime &&
                     (!refresh || now < build::token_refresh_at(current->issued_at, lifetime));
  if (!valid) {
    if (existing && (immutable || !refresh)) {
      // An immutable Secret cannot be updated: replace it.
      if (auto removed =
              runtime_.remove_owned(kube::resources::secrets(), ns, target.name, t.metadata.uid);
          !removed) {
        return not_ready({false, "ApplyFailed", removed.error().message}, retry());
      }
    }
    const auto issued = std::chrono::time_point_cast<seconds>(now);
    const std::string jwt =
        slurm::mint_jwt(key.value, {t.spec.username, issued, lifetime, "slurm-operator", ""});
    if (auto applied = runtime_.apply(build::build_token_secret(t, jwt, issued, issued + lifetime));
        !applied) {
      return not_ready({false, "ApplyFailed", applied.error().message}, retry());
    }
    current = slurm::VerifiedJwt{t.spec.username, issued, issued + lifetime};
    log::info("token.issued", {{"token", request.key()},
                               {"user", t.spec.username},
                               {"expires", kube::format_time(issued + lifetime)}});
  }
  const Readiness ready{true, "Issued",
                        "JWT for Slurm user " + t.spec.username + " in Secret " + target.name +
                            ", expires " + kube::format_time(current->expires_at)};
  kube::ReconcileOutcome next = settled();
  if (refresh) {
    const auto wait = build::token_refresh_at(current->issued_at, lifetime) - now;
    next = after(std::max(std::chrono::milliseconds(1000),
                          std::chrono::duration_cast<std::chrono::milliseconds>(wait)));
  }
  return report(runtime_, type, t.metadata, before, before, ready, next,
                {{"issuedAt", kube::format_time(current->issued_at)}});
}

}  // namespace tightrope::op
