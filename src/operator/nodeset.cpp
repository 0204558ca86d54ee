#include "operator/nodeset.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <semaphore>
#include <thread>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "kube/time.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/build/topology.hpp"
#include "operator/resources.hpp"
#include "operator/ssh_keys.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

// Writes in flight at once for one NodeSet: enough that a thousand pods do not wait on one
// another's round trips, few enough that the API server and slurmrestd are not flooded.
constexpr size_t kMaxConcurrentWrites = 16;
constexpr size_t kMaxConcurrentCreates = 32;

bool has_finalizer(const json& object, std::string_view finalizer) {
  const json list = object.value("/metadata/finalizers"_json_pointer, json::array());
  return std::find(list.begin(), list.end(), std::string(finalizer)) != list.end();
}

// fn(0) ... fn(count - 1), at most `width` at a time, on this thread and helpers.
void run_parallel(size_t count, size_t width, const std::function<void(size_t)>& fn) {
  if (count <= 1 || width <= 1) {
    for (size_t i = 0; i < count; ++i) {
      fn(i);
    }
    return;
  }
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      fn(i);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < std::min(count, width); ++k) {
    helpers.emplace_back(work);
  }
  work();
  for (auto& t : helpers) {
    t.join();
  }
}

}  // namespace

void PodExpectations::created(const std::string& nodeset, const std::string& pod,
                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset].creations[pod] = now;
}

void PodExpectations::deleted(const std::string& nodeset, const std::string& pod_uid,
                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset].deletions[pod_uid] = now;
}

void PodExpectations::patched(const std::string& nodeset, const std::string& pod_uid,
                              const std::string& resource_version, Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset].patches[pod_uid] = {resource_version, now};
}

PendingPods PodExpectations::pending(const std::string& nodeset,
                                     const std::vector<WorkerPod>& cached, Clock::time_point now) {
  std::lock_guard lock(mu_);
  PendingPods out;
  const auto it = by_nodeset_.find(nodeset);
  if (it == by_nodeset_.end()) {
    return out;
  }
  std::set<std::string> names;
  std::set<std::string> alive;                  // uids of pods not terminating
  std::map<std::string, std::string> versions;  // uid -> resourceVersion
  for (const auto& w : cached) {
    names.insert(w.name);
    versions[w.uid] = w.resource_version;
    if (!w.terminating) {
      alive.insert(w.uid);
    }
  }
  Entry& e = it->second;
  std::erase_if(e.creations,
                [&](const auto& c) { return names.count(c.first) != 0 || now - c.second > ttl_; });
  std::erase_if(e.deletions,
                [&](const auto& d) { return alive.count(d.first) == 0 || now - d.second > ttl_; });
  for (const auto& [name, at] : e.creations) {
    out.creations.insert(name);
  }
  std::erase_if(e.patches, [&](const auto& p) {
    const auto seen = versions.find(p.first);
    return seen == versions.end() || seen->second != p.second.first || now - p.second.second > ttl_;
  });
  for (const auto& [uid, at] : e.deletions) {
    out.deletions.insert(uid);
  }
  for (const auto& [uid, patch] : e.patches) {
    out.patches.insert(uid);
  }
  if (e.creations.empty() && e.deletions.empty() && e.patches.empty()) {
    by_nodeset_.erase(it);
  }
  return out;
}

void PodExpectations::forget(const std::string& nodeset) {
  std::lock_guard lock(mu_);
  by_nodeset_.erase(nodeset);
}

void PodExpectations::forget_all() {
  std::lock_guard lock(mu_);
  by_nodeset_.clear();
}

namespace {

// What Slinky's CRD requires in every NodeSet status written, for a path that counted nothing.
json required_status(const std::string& nodeset_name) {
  return {{"nodeSetHash", ""}, {"selector", build::nodeset_selector(nodeset_name)}};
}

// The NodeSet's ComputeDomain made (created once: its spec is immutable), and whether the
// claim template NVIDIA's controller makes for it is there for pods to claim; why not if not.
std::optional<Readiness> ensure_compute_domain(Runtime& rt, const api::NodeSet& n) {
  if (!build::wants_compute_domain(n)) {
    return std::nullopt;
  }
  const std::string kind = "ComputeDomain";
  if (!rt.serves(std::string(build::kComputeDomainApiVersion), kind)) {
    return Readiness{false, "ComputeDomainCRDMissing",
                     "annotation " + std::string(api::kAnnotationComputeDomain) +
                         " asks for a ComputeDomain, but the API server does not serve " +
                         std::string(build::kComputeDomainApiVersion) +
                         " ComputeDomain: install NVIDIA's DRA driver for GPUs (ComputeDomains)"};
  }
  const std::string& ns = n.metadata.namespace_name;
  const std::string name = build::compute_domain_name(n);
  auto domain = rt.kube().get(resources::compute_domains(), ns, name);
  if (!domain && domain.error().kind == kube::ErrorKind::kNotFound) {
    auto made = rt.kube().create(resources::compute_domains(), ns, build::build_compute_domain(n));
    if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
      return Readiness{false, "ComputeDomainFailed",
                       "creating ComputeDomain " + name + ": " + made.error().message};
    }
  } else if (!domain) {
    return Readiness{false, "ComputeDomainFailed",
                     "reading ComputeDomain " + name + ": " + domain.error().message};
  }
  const std::string channel = build::channel_template_name(n);
  auto claim_template = rt.kube().get(resources::resource_claim_templates(), ns, channel);
  if (claim_template) {
    return std::nullopt;
  }
  const std::string status =
      domain ? domain->value("/status/status"_json_pointer, std::string("not reported"))
             : std::string("just created");
  std::string message = "ComputeDomain " + name + " (status: " + status;
  message += "): its ResourceClaimTemplate " + channel;
  message += claim_template.error().kind == kube::ErrorKind::kNotFound
                 ? " does not exist yet; NVIDIA's compute-domain controller makes it (is the "
                   "DRA driver running?)"
                 : " cannot be read: " + claim_template.error().message;
  return Readiness{false, "WaitingForComputeDomain", message};
}

}  // namespace

std::optional<Readiness> NodeSetReconciler::ensure_ssh(const api::NodeSet& n) {
  if (!n.spec.ssh.enabled) {
    return std::nullopt;
  }
  const std::string& ns = n.metadata.namespace_name;
  const SecretKey sssd =
      read_secret_key(runtime_, ns, n.spec.ssh.sssd_conf_ref, "spec.ssh.sssdConfRef");
  if (!sssd.problem.ready) {
    return sssd.problem;
  }
  std::vector<json> objects;
  // Made once: a worker whose host key changed looks like an attack to users' ssh.
  const std::string keys_name = build::nodeset_host_keys_name(n);
  if (auto keys = runtime_.secret_data(ns, keys_name); !keys) {
    if (keys.error().kind != kube::ErrorKind::kNotFound) {
      return Readiness{false, "SecretUnreadable", keys.error().message};
    }
    objects.push_back(build::build_nodeset_host_keys_secret(n, generate_ssh_host_keys()));
    log::info("nodeset.host_keys_generated", {{"nodeset", kube::object_key(ns, n.metadata.name)}});
  }
  objects.push_back(build::build_nodeset_ssh_config_map(n));
  if (auto applied = apply_all(runtime_, objects, nullptr, &applied_, &cache_); !applied) {
    return Readiness{false, "ApplyFailed", applied.error()};
  }
  return std::nullopt;
}

std::optional<Readiness> NodeSetReconciler::slurmctld_has_loaded(const api::NodeSet& n,
                                                                 const api::Controller& c) {
  if (c.spec.external) {
    return std::nullopt;  // a slurmctld elsewhere: its administrator reconfigures it
  }
  const std::string& ns = n.metadata.namespace_name;
  // Both memoized by resourceVersion: at rest, no request.
  auto config_map =
      runtime_.object(kube::resources::config_maps(), ns, build::controller_config_map_name(c));
  auto statefulset =
      runtime_.object(kube::resources::stateful_sets(), ns, build::controller_statefulset_name(c));
  for (const auto* read : {&config_map, &statefulset}) {
    if (!*read) {
      return Readiness{false, "WaitingForSlurmctld",
                       "slurmctld's configuration cannot be read yet: " + read->error().message};
    }
  }
  if (auto lacking = build::slurmctld_lacks_nodeset(n, *config_map, *statefulset)) {
    return Readiness{false, "WaitingForSlurmctld", *lacking};
  }
  return std::nullopt;
}

kube::ReconcileOutcome NodeSetReconciler::reconcile(const kube::Request& request) {
  const auto began = NodeSetMetrics::Clock::now();
  const kube::ResourceType& type = resources::nodesets();
  const std::string key = request.key();
  const auto doc = cache_.get(type, key);
  if (!doc) {
    expectations_.forget(key);
    if (metrics_ != nullptr) {
      metrics_->forget(request.namespace_name, request.name);
    }
    std::lock_guard lock(decoded_mu_);
    decoded_.erase(key);
    return settled();
  }
  if (doc->meta.deleting) {
    return finish_deletion(*doc);
  }
  auto loaded = load(runtime_, type, *doc, &api::decode_nodeset, required_status(doc->meta.name));
  if (!loaded) {
    return settled();
  }
  NodeSetWorld world = observe(*doc, std::move(*loaded), key);
  world.pods_wait_for = ensure_compute_domain(runtime_, world.nodeset);
  if (!world.pods_wait_for) {
    world.pods_wait_for = ensure_ssh(world.nodeset);
  }
  if (!world.pods_wait_for && world.controller) {
    world.pods_wait_for = slurmctld_has_loaded(world.nodeset, *world.controller);
  }
  const api::NodeSet& n = world.nodeset;
  const kube::ObjectReference self{type.api_version(), type.kind, n.metadata.namespace_name,
                                   n.metadata.name, n.metadata.uid};

  const NodeSetPlan plan = plan_nodeset(world);
  const std::vector<ActionFailure> failures = execute(key, self, world, plan.actions);
  if (!failures.empty()) {
    const ActionFailure& first = failures.front();
    runtime_.events().warning(
        self, first.action->failure_reason,
        first.message +
            (failures.size() > 1 ? " (and " + std::to_string(failures.size() - 1) + " more)" : ""));
  }
  NodeSetVerdict verdict = conclude(world, plan, failures, Runtime::now());
  const auto measure = [&](const json& status) {
    if (metrics_ != nullptr) {
      std::vector<api::Condition> all = verdict.conditions;
      all.push_back({"Ready", verdict.readiness.ready ? "True" : "False", verdict.readiness.reason,
                     "", 0, ""});
      metrics_->report(n.metadata.namespace_name, n.metadata.name, status, all, began);
    }
  };
  if (plan.stop) {
    // Nothing was counted: what the status said stays (HPA reads selector, and Slinky's CRD
    // requires nodeSetHash and selector).
    const json kept = kept_status(world.status, required_status(n.metadata.name));
    measure(kept);
    return report(runtime_, type, n.metadata, world.conditions, std::move(verdict.conditions),
                  verdict.readiness, verdict.next, kept, kept != kept_status(world.status));
  }
  measure(plan.status);
  if (auto published =
          runtime_.publish(type, n.metadata, world.conditions, std::move(verdict.conditions),
                           verdict.readiness, plan.status, plan.status_changed);
      !published) {
    return fail("writing status: " + published.error().message);
  }
  return verdict.next;
}

NodeSetWorld NodeSetReconciler::observe(const kube::Document& nodeset, api::NodeSet n,
                                        const std::string& key) {
  NodeSetWorld world;
  world.now = std::chrono::system_clock::now();
  world.nodeset = std::move(n);
  const api::NodeSet& ns_ref = world.nodeset;
  const std::string& ns = ns_ref.metadata.namespace_name;
  for (const auto& f : nodeset.doc.value("/metadata/finalizers"_json_pointer, json::array())) {
    if (f.is_string()) {
      world.finalizers.push_back(f.get<std::string>());
    }
  }
  world.resource_version = nodeset.meta.resource_version;
  world.status = nodeset.doc.value("status", json::object());
  world.conditions = conditions_of(nodeset);
  world.controller = controller_of(cache_, ns, ns_ref.spec.controller_ref.name);
  world.mirror_slurm_drains = runtime_.options().mirror_slurm_drains;
  world.propagated_node_conditions = runtime_.options().propagated_node_conditions;

  for (const auto& r : cache_.list(kube::resources::controller_revisions(), ns)) {
    const kube::OwnerReference* owner = r->meta.controller_ref();
    if (owner != nullptr && owner->uid == ns_ref.metadata.uid) {
      world.revisions.emplace_back(r->doc.value("revision", int64_t{0}), r->meta.name);
    }
  }
  {
    // Each pod is decoded once a version (and NodeSet generation: names follow the spec).
    std::lock_guard lock(decoded_mu_);
    DecodedPods& known = decoded_[key];
    DecodedPods now;
    now.generation = ns_ref.metadata.generation;
    for (const auto& p : cache_.list(kube::resources::pods(), ns)) {
      const kube::OwnerReference* owner = p->meta.controller_ref();
      if (owner == nullptr || owner->uid != ns_ref.metadata.uid) {
        continue;
      }
      const auto seen = known.pods.find(p->meta.uid);
      if (known.generation == now.generation && seen != known.pods.end() &&
          seen->second.first == p->meta.resource_version) {
        now.pods.insert(known.pods.extract(seen));
      } else {
        now.pods[p->meta.uid] = {p->meta.resource_version, worker_pod(ns_ref, p->doc)};
      }
      world.pods.push_back(now.pods[p->meta.uid].second);
      world.pods.back().resource_version = p->meta.resource_version;
    }
    known = std::move(now);
  }
  world.expected = expectations_.pending(key, world.pods, PodExpectations::Clock::now());
  for (auto& node : cache_.list_all(kube::resources::nodes())) {
    world.kube_nodes.emplace(node->meta.name, std::move(node));
  }

  // Slurm's side, from the cluster's change feed: no client yet (the Controller makes it, or
  // lacks a RestApi or jwtKeyRef), a new feed that has not answered yet, or a failing one. Only
  // the last is an outage; the others are how an operator starts.
  if (!world.controller) {
    return world;
  }
  // Read through a memo kept by resourceVersion: a GET only when the Controller rewrote it.
  if (auto config =
          runtime_.config_map_data(ns, build::controller_config_map_name(*world.controller))) {
    if (const auto topology = config->find(std::string(build::kTopologyFile));
        topology != config->end()) {
      world.topology_blocks = build::topology_blocks(topology->second);
    }
    // cgroup.conf is the operator's unless a configFileRefs ConfigMap brings one.
    std::optional<std::string> cgroup_conf;
    if (const auto own = config->find("cgroup.conf"); own != config->end()) {
      cgroup_conf = own->second;
    }
    for (const auto& ref : world.controller->spec.config_file_refs) {
      if (auto brought = runtime_.config_map_data(ns, ref.name)) {
        if (const auto file = brought->find("cgroup.conf"); file != brought->end()) {
          cgroup_conf = file->second;
        }
      }
    }
    if (const auto slurm_conf = config->find("slurm.conf"); slurm_conf != config->end()) {
      world.confinement = confinement_config(slurm_conf->second, cgroup_conf);
    }
  }
  const std::string cluster_key = kube::object_key(ns, world.controller->metadata.name);
  const auto feed = runtime_.slurm().feed(cluster_key);
  const auto client = runtime_.slurm().get(cluster_key);
  SlurmView& slurm = world.slurm;
  if (!feed || !client) {
    slurm.health = SlurmHealth::kNoClient;
    slurm.problem = "the operator has no Slurm client for Controller " + cluster_key +
                    " (it needs a RestApi and a jwtKeyRef)";
  } else if (const auto health = feed->health();
             !health.synced && health.consecutive_failures == 0) {
    slurm.health = SlurmHealth::kWaiting;
    slurm.problem = "waiting for slurmrestd's first answer";
  } else if (!health.synced || health.consecutive_failures > 0) {
    slurm.health = SlurmHealth::kUnreachable;
    slurm.problem = "slurmrestd does not answer: " +
                    (health.last_error ? health.last_error->message : std::string("not yet read"));
  } else {
    slurm.health = SlurmHealth::kSynced;
    slurm.snapshot = feed->snapshot();
    if (ns_ref.spec.update_strategy.type == "ScheduledUpdate" ||
        std::find(world.finalizers.begin(), world.finalizers.end(),
                  api::kFinalizerNodeSetReservation) != world.finalizers.end()) {
      // Not NotFound: unreadable. The plan then makes it, and that write says why it fails.
      if (auto got = client->get_reservation(maintenance_reservation_name(ns_ref))) {
        slurm.reservation = std::move(*got);
      }
    }
  }
  return world;
}

std::vector<ActionFailure> NodeSetReconciler::execute(const std::string& key,
                                                      const kube::ObjectReference& self,
                                                      const NodeSetWorld& world,
                                                      const std::vector<Action>& actions) {
  std::vector<std::vector<const Action*>> chains;
  std::map<std::string, size_t> chain_of;
  std::vector<const Action*> creations;
  for (const Action& a : actions) {
    log::debug("nodeset.action", {{"nodeset", key}, {"action", to_string(a.change)}});
    if (std::holds_alternative<CreatePod>(a.change)) {
      creations.push_back(&a);
      continue;
    }
    const auto [it, fresh] = chain_of.emplace(a.chain, chains.size());
    if (fresh) {
      chains.emplace_back();
    }
    chains[it->second].push_back(&a);
  }
  // Deletions, drains and the NodeSet's own writes first, then creations, then the chains that
  // only mirror state (pod conditions, labels, node links): a new pod never waits behind a
  // thousand condition patches for the API server's rate limit.
  std::vector<const std::vector<const Action*>*> decisions;
  std::vector<const std::vector<const Action*>*> mirrors;
  for (const auto& chain : chains) {
    const bool mirror_only = std::all_of(chain.begin(), chain.end(), [](const Action* a) {
      return a->on_failure == FailureEffect::kSync;
    });
    (mirror_only ? mirrors : decisions).push_back(&chain);
  }
  std::mutex mu;
  std::vector<ActionFailure> failures;
  const auto run_chain = [&](const std::vector<const Action*>& chain) {
    for (const Action* a : chain) {
      if (auto error = perform(key, world, *a)) {
        std::lock_guard lock(mu);
        failures.push_back({a, to_string(a->change) + ": " + *error});
        if (a->guards_rest) {
          break;
        }
        continue;
      }
      for (const auto& e : a->events) {
        if (e.warning) {
          runtime_.events().warning(self, e.reason, e.message);
        } else {
          runtime_.events().normal(self, e.reason, e.message);
        }
      }
    }
  };
  run_parallel(decisions.size(), kMaxConcurrentWrites, [&](size_t i) { run_chain(*decisions[i]); });
  // Slow start, as Kubernetes' own controllers create pods: batches of 1, 2, 4, ... up to
  // kMaxConcurrentCreates at once, each only after the previous one fully succeeded, so that a
  // refusal (quota, admission) costs one request.
  for (size_t next = 0, batch = 1; next < creations.size();
       batch = std::min(batch * 2, kMaxConcurrentCreates)) {
    const size_t end = std::min(creations.size(), next + batch);
    const size_t failed_before = failures.size();
    run_parallel(end - next, batch, [&](size_t i) { run_chain({creations[next + i]}); });
    next = end;
    if (failures.size() > failed_before) {
      break;
    }
  }
  run_parallel(mirrors.size(), kMaxConcurrentWrites, [&](size_t i) { run_chain(*mirrors[i]); });
  return failures;
}

std::optional<std::string> NodeSetReconciler::perform(const std::string& key,
                                                      const NodeSetWorld& world,
                                                      const Action& action) {
  const api::NodeSet& n = world.nodeset;
  const std::string& ns = n.metadata.namespace_name;
  const auto kube_error = [](const auto& result,
                             bool gone_is_fine = false) -> std::optional<std::string> {
    if (result || (gone_is_fine && result.error().kind == kube::ErrorKind::kNotFound)) {
      return std::nullopt;
    }
    return result.error().message;
  };
  const auto slurm_client = [&]() {
    return runtime_.slurm().get(kube::object_key(ns, n.spec.controller_ref.name));
  };
  const auto slurm_error = [](const auto& result,
                              bool gone_is_fine = false) -> std::optional<std::string> {
    if (result || (gone_is_fine && result.error().kind == slurm::ErrorKind::kNotFound)) {
      return std::nullopt;
    }
    return result.error().message;
  };
  const std::string kNoClient = "the operator has no Slurm client for this NodeSet's Controller";

  if (const auto* c = std::get_if<CreateRevision>(&action.change)) {
    return kube_error(runtime_.apply(c->revision));
  }
  if (const auto* c = std::get_if<DeleteRevision>(&action.change)) {
    return kube_error(runtime_.remove_owned(kube::resources::controller_revisions(), ns, c->name,
                                            n.metadata.uid));
  }
  if (const auto* c = std::get_if<SetFinalizers>(&action.change)) {
    // With the resourceVersion the patch fails on a concurrent change instead of losing it.
    json patch = json::object();
    patch["metadata"]["finalizers"] = c->finalizers;
    patch["metadata"]["resourceVersion"] = world.resource_version;
    return kube_error(runtime_.kube().patch(resources::nodesets(), ns, n.metadata.name,
                                            kube::PatchType::kMerge, patch));
  }
  if (const auto* c = std::get_if<CreatePod>(&action.change)) {
    for (const auto& claim : c->claims) {
      auto made = runtime_.kube().create(kube::resources::persistent_volume_claims(), ns, claim);
      if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
        return "PersistentVolumeClaim " + claim["metadata"].value("name", "") + ": " +
               made.error().message;
      }
    }
    auto made = runtime_.kube().create(kube::resources::pods(), ns, c->pod);
    if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
      return made.error().message;
    }
    expectations_.created(key, c->name, PodExpectations::Clock::now());
    return std::nullopt;
  }
  if (const auto* c = std::get_if<DeletePod>(&action.change)) {
    kube::DeleteOptions options;
    options.precondition_uid = c->uid;
    if (auto error = kube_error(
            runtime_.kube().remove(kube::resources::pods(), ns, c->name, options), true)) {
      return error;
    }
    expectations_.deleted(key, c->uid, PodExpectations::Clock::now());
    log::info("nodeset.pod_deleted", {{"nodeset", key}, {"pod", c->name}, {"why", c->why}});
    return std::nullopt;
  }
  if (const auto* c = std::get_if<GiveClaimsToPod>(&action.change)) {
    for (const auto& [claim, owners] : c->owners) {
      json patch = json::object();
      patch["metadata"]["ownerReferences"] = owners;
      if (auto error = kube_error(runtime_.kube().patch(kube::resources::persistent_volume_claims(),
                                                        ns, claim, kube::PatchType::kMerge, patch),
                                  true)) {
        return "PersistentVolumeClaim " + claim + ": " + *error;
      }
    }
    return std::nullopt;
  }
  if (const auto* c = std::get_if<PatchPod>(&action.change)) {
    // A pod gone meanwhile needs nothing more.
    auto error = kube_error(runtime_.kube().patch(kube::resources::pods(), ns, c->name,
                                                  c->status ? kube::PatchType::kStrategicMerge
                                                            : kube::PatchType::kMerge,
                                                  c->patch, c->status ? "status" : ""),
                            true);
    if (!error && !c->uid.empty()) {
      expectations_.patched(key, c->uid, c->seen_version, PodExpectations::Clock::now());
    }
    return error;
  }
  if (const auto* c = std::get_if<PatchKubeNode>(&action.change)) {
    return kube_error(runtime_.kube().patch(
        kube::resources::nodes(), "", c->name,
        c->status ? kube::PatchType::kStrategicMerge : kube::PatchType::kMerge, c->patch,
        c->status ? "status" : ""));
  }

  // Slurm.
  const auto client = slurm_client();
  if (!client) {
    return kNoClient;
  }
  // slurmrestd serves users and slurmd registrations too: the operator takes a few of its
  // threads, not all of them.
  slurm_writes_.acquire();
  struct Release {
    std::counting_semaphore<>& s;
    ~Release() { s.release(); }
  } release{slurm_writes_};
  if (const auto* c = std::get_if<DrainSlurmNode>(&action.change)) {
    log::info("nodeset.draining", {{"nodeset", key}, {"node", c->node}, {"reason", c->reason}});
    return slurm_error(client->drain(c->node, c->reason));
  }
  if (const auto* c = std::get_if<UndrainSlurmNode>(&action.change)) {
    log::info("nodeset.undraining", {{"nodeset", key}, {"node", c->node}});
    return slurm_error(client->undrain(c->node));
  }
  if (const auto* c = std::get_if<ResumeSlurmNode>(&action.change)) {
    return slurm_error(client->resume(c->node));
  }
  if (const auto* c = std::get_if<UpdateSlurmNode>(&action.change)) {
    return slurm_error(client->update_node(c->node, c->update));
  }
  if (const auto* c = std::get_if<DeleteSlurmNode>(&action.change)) {
    log::info("nodeset.slurm_node_pruned", {{"nodeset", key}, {"node", c->node}});
    return slurm_error(client->delete_node(c->node), true);
  }
  if (const auto* c = std::get_if<ReleaseReservation>(&action.change)) {
    return slurm_error(client->delete_reservation(c->name), true);
  }
  if (const auto* c = std::get_if<SyncReservation>(&action.change)) {
    return c->update ? slurm_error(client->update_reservation(c->wanted.name, *c->update))
                     : slurm_error(client->create_reservation(c->wanted));
  }
  return "unknown action";
}

Result<Done, std::string> NodeSetReconciler::hold_finalizer(const kube::Document& nodeset,
                                                            std::string_view finalizer, bool hold) {
  if (has_finalizer(nodeset.doc, finalizer) == hold) {
    return Done{};
  }
  json finalizers = nodeset.doc.value("/metadata/finalizers"_json_pointer, json::array());
  const std::string name(finalizer);
  if (hold) {
    finalizers.push_back(name);
  } else {
    finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), name), finalizers.end());
  }
  // With the resourceVersion the patch fails on a concurrent change instead of losing it.
  json patch = json::object();
  patch["metadata"]["finalizers"] = finalizers;
  patch["metadata"]["resourceVersion"] = nodeset.meta.resource_version;
  auto patched = runtime_.kube().patch(resources::nodesets(), nodeset.meta.namespace_name,
                                       nodeset.meta.name, kube::PatchType::kMerge, patch);
  if (!patched) {
    return fail(patched.error().message);
  }
  return Done{};
}

Result<Done, std::string> NodeSetReconciler::release_reservation(
    slurm::Client& client, const std::string& name, const kube::ObjectReference& self) {
  auto removed = client.delete_reservation(name);
  if (!removed && removed.error().kind != slurm::ErrorKind::kNotFound) {
    return fail("deleting Slurm reservation " + name + ": " + removed.error().message);
  }
  if (removed) {
    runtime_.events().normal(self, "DeletedReservation",
                             "Deleted Slurm maintenance reservation " + name);
  }
  return Done{};
}

// A NodeSet being deleted keeps its finalizer until its maintenance reservation is gone; when
// Slurm cannot be asked it waits (the finalizer can be removed by hand after deleting the
// reservation with scontrol).
kube::ReconcileOutcome NodeSetReconciler::finish_deletion(const kube::Document& nodeset) {
  const bool reservation = has_finalizer(nodeset.doc, api::kFinalizerNodeSetReservation);
  const bool slurm_nodes = has_finalizer(nodeset.doc, api::kFinalizerNodeSetSlurmNodes);
  if (!reservation && !slurm_nodes) {
    return settled();
  }
  auto decoded = api::decode_nodeset(nodeset.doc);
  if (!decoded) {
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false);
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetSlurmNodes, false);
    return settled();
  }
  if (slurm_nodes) {
    if (auto wait = remove_slurm_nodes(nodeset, *decoded)) {
      return *wait;
    }
    return settled();  // the patch that dropped the finalizer brings the next reconcile
  }
  const kube::ObjectReference self{resources::nodesets().api_version(), resources::nodesets().kind,
                                   nodeset.meta.namespace_name, nodeset.meta.name,
                                   nodeset.meta.uid};
  const std::string name = maintenance_reservation_name(*decoded);
  const auto client = runtime_.slurm().get(
      kube::object_key(nodeset.meta.namespace_name, decoded->spec.controller_ref.name));
  if (!client) {
    // No Controller (or no RestApi) left to reach Slurm through: nothing to wait for.
    runtime_.events().warning(self, "ReservationLeft",
                              "No Slurm client for Controller " +
                                  decoded->spec.controller_ref.name + ": reservation " + name +
                                  " is left for scontrol delete reservation=" + name);
    (void)hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false);
    return settled();
  }
  if (auto released = release_reservation(*client, name, self); !released) {
    runtime_.events().warning(self, "ReservationNotDeleted", released.error());
    return after(std::chrono::seconds(10));
  }
  if (auto dropped = hold_finalizer(nodeset, api::kFinalizerNodeSetReservation, false); !dropped) {
    return retry();
  }
  return settled();
}

std::optional<kube::ReconcileOutcome> NodeSetReconciler::remove_slurm_nodes(
    const kube::Document& nodeset, const api::NodeSet& n) {
  const std::string& ns = nodeset.meta.namespace_name;
  const kube::ObjectReference self{resources::nodesets().api_version(), resources::nodesets().kind,
                                   ns, nodeset.meta.name, nodeset.meta.uid};
  // Bounded where nothing can be lost: pods already ending that will not go, or records Slurm
  // cannot be asked to delete once every pod is gone, hold a deleted NodeSet this long at most.
  constexpr auto kGiveUpAfter = std::chrono::minutes(3);
  const auto since = kube::parse_time(
      nodeset.doc.value("/metadata/deletionTimestamp"_json_pointer, std::string()));
  const bool given_up = since && std::chrono::system_clock::now() - *since > kGiveUpAfter;
  const auto drop = [&](const std::string& left) -> std::optional<kube::ReconcileOutcome> {
    log::info("nodeset.slurm_nodes_released",
              {{"nodeset", kube::object_key(ns, nodeset.meta.name)}, {"left", left}});
    if (!left.empty()) {
      runtime_.events().warning(self, "SlurmNodesLeft", left);
    }
    if (auto dropped = hold_finalizer(nodeset, api::kFinalizerNodeSetSlurmNodes, false); !dropped) {
      return retry();
    }
    return std::nullopt;
  };

  const std::string key = kube::object_key(ns, n.spec.controller_ref.name);
  // The whole cluster going (helm uninstall): its jobs end with slurmctld, nothing to wait for.
  if (const auto controller = cache_.get(resources::controllers(), key);
      !controller || controller->meta.deleting) {
    return drop("");
  }
  std::vector<std::shared_ptr<const kube::Document>> pods;
  for (const auto& p : cache_.list(kube::resources::pods(), ns)) {
    const kube::OwnerReference* owner = p->meta.controller_ref();
    if (owner != nullptr && owner->uid == nodeset.meta.uid) {
      pods.push_back(p);
    }
  }
  const auto client = runtime_.slurm().get(key);
  const auto feed = runtime_.slurm().feed(key);
  const bool reachable =
      client && feed && feed->health().synced && feed->health().consecutive_failures == 0;
  if (!reachable) {
    // Fail-closed, as a scale-in: a pod whose jobs cannot be seen stays, however long.
    const bool running = std::any_of(pods.begin(), pods.end(), [](const auto& p) {
      return !p->meta.deleting &&
             p->doc.value("/status/phase"_json_pointer, std::string()) == "Running";
    });
    if (running || !given_up) {
      if (running) {
        runtime_.events().warning(self, "DeletionBlocked",
                                  "Slurm cannot be asked whether the NodeSet's pods run jobs: "
                                  "they stay until it can");
      }
      return after(std::chrono::seconds(5));
    }
    return drop("Slurm could not be reached for " + std::to_string(kGiveUpAfter.count()) +
                " min: the Slurm node records of this NodeSet are left for scontrol delete");
  }
  // Its pods first, drain-first as in a scale-in (garbage collection would take them only after
  // the NodeSet is gone, jobs or not): a pod goes once its Slurm node is drained and idle, or
  // when it has no Slurm node or is not running; each one's preStop marks its node down.
  const slurm::SlurmSnapshot slurm_now = feed->snapshot();
  size_t pods_left = 0;
  std::string busy;
  bool stuck_only = true;
  for (const auto& p : pods) {
    ++pods_left;
    if (p->meta.deleting) {
      continue;
    }
    stuck_only = false;
    const std::string hostname = p->doc.value("/spec/hostname"_json_pointer, p->meta.name);
    const auto node = slurm_now.nodes->find(hostname);
    const bool running = p->doc.value("/status/phase"_json_pointer, std::string()) == "Running";
    if (running && node != slurm_now.nodes->end()) {
      if (!node->second.drain() || node->second.has("UNDRAIN")) {
        const std::string reason =
            condemned_reason(kube::object_key(ns, p->meta.name), "NodeSet deletion");
        log::info("nodeset.draining", {{"nodeset", kube::object_key(ns, nodeset.meta.name)},
                                       {"node", hostname},
                                       {"reason", reason}});
        if (auto drained = client->drain(hostname, reason); !drained) {
          log::warn("nodeset.drain_failed",
                    {{"node", hostname}, {"error", drained.error().message}});
        }
        continue;  // deleted once the feed shows the drain, and no job
      }
      if (node->second.busy()) {
        busy += (busy.empty() ? "" : ", ") + hostname;
        continue;
      }
    }
    kube::DeleteOptions options;
    options.precondition_uid = p->meta.uid;
    (void)runtime_.kube().remove(kube::resources::pods(), ns, p->meta.name, options);
  }
  if (!busy.empty()) {
    runtime_.events().normal(self, "DeletionWaitsForJobs",
                             "Drained for NodeSet deletion, waiting for their jobs: " + busy);
  }
  if (pods_left > 0 && !(stuck_only && given_up)) {
    log::info("nodeset.deletion_waits_for_pods",
              {{"nodeset", kube::object_key(ns, nodeset.meta.name)},
               {"pods", std::to_string(pods_left)},
               {"busy", busy}});
    return after(std::chrono::seconds(2));
  }
  if (n.spec.prune_slurm_node_records != "NodeNotFound") {
    return drop("");  // the records stay, DOWN, as a scale-in leaves them
  }
  std::string kept;
  // A record is the NodeSet's when its comment names the NodeSet, or, without such a comment (a
  // slurmd that registered again clears it), when it carries the NodeSet's feature, which each
  // of its slurmd registers with and no other NodeSet of the cluster can.
  const std::string feature = n.slurm_name();
  for (const auto& [name, node] : *slurm_now.nodes) {
    const json info = json::parse(node.comment, nullptr, false);
    const bool linked = info.is_object() && info.contains("nodeSetUID");
    const bool ours = linked ? info.value("nodeSetUID", "") == nodeset.meta.uid
                             : std::find(node.features.begin(), node.features.end(), feature) !=
                                   node.features.end();
    if (!ours) {
      continue;
    }
    if (node.busy()) {
      kept += (kept.empty() ? "" : ", ") + name;
      continue;
    }
    if (auto removed = client->delete_node(name); removed) {
      runtime_.events().normal(self, "SlurmNodeDeleted",
                               "Deleted Slurm node " + name + ": its NodeSet is deleted");
    } else {
      kept += (kept.empty() ? "" : ", ") + name;
    }
  }
  return drop(kept.empty() ? "" : "Slurm node records left (busy or not deleted): " + kept);
}

}  // namespace tightrope::op
