#include "operator/nodeset.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <semaphore>
#include <thread>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "kube/time.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/health.hpp"
#include "operator/build/nodeset.hpp"
#include "operator/build/topology.hpp"
#include "operator/conditions.hpp"
#include "operator/health.hpp"
#include "operator/nodeset_execute.hpp"
#include "operator/resources.hpp"
#include "operator/ssh_keys.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

using nlohmann::json;

namespace {

bool has_finalizer(const json& object, std::string_view finalizer) {
  const json list = object.value("/metadata/finalizers"_json_pointer, json::array());
  return std::find(list.begin(), list.end(), std::string(finalizer)) != list.end();
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

void WritesInFlight::written(const std::string& nodeset, const std::string& node,
                             const std::string& value, Clock::time_point now) {
  std::lock_guard lock(mu_);
  by_nodeset_[nodeset][node] = {value, now};
}

void WritesInFlight::undone(const std::string& nodeset, const std::string& node) {
  std::lock_guard lock(mu_);
  if (const auto it = by_nodeset_.find(nodeset); it != by_nodeset_.end()) {
    it->second.erase(node);
  }
}

std::map<std::string, std::string> WritesInFlight::pending(
    const std::string& nodeset, const std::map<std::string, slurm::Node>& nodes,
    Clock::time_point now) {
  std::map<std::string, std::string> out;
  std::lock_guard lock(mu_);
  const auto entry = by_nodeset_.find(nodeset);
  if (entry == by_nodeset_.end()) {
    return out;
  }
  for (auto it = entry->second.begin(); it != entry->second.end();) {
    const auto& [value, at] = it->second;
    const auto node = nodes.find(it->first);
    if (now - at > seen_within_ || node == nodes.end() || shown_(node->second, value)) {
      it = entry->second.erase(it);
    } else {
      out.emplace(it->first, value);
      ++it;
    }
  }
  if (entry->second.empty()) {
    by_nodeset_.erase(entry);
  }
  return out;
}

void WritesInFlight::forget(const std::string& nodeset) {
  std::lock_guard lock(mu_);
  by_nodeset_.erase(nodeset);
}

WritesInFlight drains_in_flight() {
  return {std::chrono::seconds(15), [](const slurm::Node& node, const std::string& reason) {
            return node.drain() && node.reason == reason;
          }};
}

WritesInFlight checks_in_flight() {
  // The check job may end, and release its reservation, before a snapshot shows it: the report
  // it wrote then ends the check as well (Planner::check_actively).
  return {std::chrono::seconds(30), [](const slurm::Node& node, const std::string& reservation) {
            return node.reservation == reservation;
          }};
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

// What the Kubernetes Nodes say of its pods beyond the Nodes they run on: which Nodes'
// slurm-nodename label names a pod's hostname, how many workers share each pod's Node, and (under a
// HealthCheck) the failures other Nodes keep of its pods' names.
void read_nodes_of_its_pods(const ResourceCache& cache, const std::string& ns,
                            NodeSetWorld& world) {
  for (const auto& w : world.pods) {
    for (const auto& node :
         cache.by_index(kube::resources::nodes(), cache_index::kSlurmNodeName, w.hostname)) {
      world.labelled_nodes[w.hostname].push_back(node->meta.name);
    }
    if (!w.kube_node.empty() && world.workers_on_node.count(w.kube_node) == 0) {
      world.workers_on_node[w.kube_node] =
          cache.pods_by_index(cache_index::kNode, w.kube_node).size();
    }
  }
  if (world.health) {
    for (const auto& w : world.pods) {
      const std::string pod = kube::object_key(ns, w.name);
      for (const auto& node :
           cache.by_index(kube::resources::nodes(), cache_index::kFailedPod, pod)) {
        if (node->meta.name == w.kube_node) {
          continue;
        }
        for (auto& f : api::decode_node_failures(node->doc)) {
          if (f.pod == pod) {
            world.failures_elsewhere[w.name].emplace_back(node->meta.name, std::move(f));
          }
        }
      }
    }
  }
}

// The DRA device taints on the devices of these Nodes, by Node (none where the API server
// serves no ResourceSlices).
std::map<std::string, std::vector<DeviceTaint>> device_taints_on(
    const ResourceCache& cache,
    const std::map<std::string, std::shared_ptr<const kube::Document>>& kube_nodes) {
  std::map<std::string, std::vector<DeviceTaint>> out;
  if (!cache.caches(resources::resource_slices())) {
    return out;
  }
  std::vector<ResourceCache::Ptr> rules;
  if (cache.caches(resources::device_taint_rules())) {
    rules = cache.list_all(resources::device_taint_rules());
  }
  std::vector<const json*> rule_docs;
  rule_docs.reserve(rules.size());
  for (const auto& r : rules) {
    rule_docs.push_back(&r->doc);
  }
  for (const auto& [name, node] : kube_nodes) {
    const auto slices = cache.by_index(resources::resource_slices(), cache_index::kNode, name);
    std::vector<const json*> slice_docs;
    slice_docs.reserve(slices.size());
    for (const auto& slice : slices) {
      slice_docs.push_back(&slice->doc);
    }
    if (auto taints = device_taints(slice_docs, rule_docs); !taints.empty()) {
      out.emplace(name, std::move(taints));
    }
  }
  return out;
}

// What Slinky's CRD requires in every NodeSet status written, for a path that counted nothing.
json required_status(const std::string& nodeset_name) {
  return {{"nodeSetHash", ""}, {"selector", build::nodeset_selector(nodeset_name)}};
}

// Reads the NodeSet's ComputeDomain and the claim template NVIDIA's controller makes for it:
// whether the domain is absent (the plan creates it: once, its spec is immutable), and why pods
// must wait for it, if they must.
std::optional<Readiness> read_compute_domain(Runtime& rt, const api::NodeSet& n, bool& absent) {
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
  absent = !domain && domain.error().kind == kube::ErrorKind::kNotFound;
  if (!domain && !absent) {
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
             : std::string("being created");
  std::string message = "ComputeDomain " + name + " (status: " + status;
  message += "): its ResourceClaimTemplate " + channel;
  message += claim_template.error().kind == kube::ErrorKind::kNotFound
                 ? " does not exist yet; NVIDIA's compute-domain controller makes it (is the "
                   "DRA driver running?)"
                 : " cannot be read: " + claim_template.error().message;
  return Readiness{false, "WaitingForComputeDomain", message};
}

}  // namespace

std::optional<Readiness> NodeSetReconciler::read_ssh(NodeSetWorld& world) {
  const api::NodeSet& n = world.nodeset;
  if (!n.spec.ssh.enabled) {
    return std::nullopt;
  }
  const std::string& ns = n.metadata.namespace_name;
  const SecretKey sssd =
      read_secret_key(runtime_, ns, n.spec.ssh.sssd_conf_ref, "spec.ssh.sssdConfRef");
  if (!sssd.problem.ready) {
    return sssd.problem;
  }
  if (auto keys = runtime_.secret_data(ns, build::nodeset_host_keys_name(n)); !keys) {
    if (keys.error().kind != kube::ErrorKind::kNotFound) {
      return Readiness{false, "SecretUnreadable", keys.error().message};
    }
    world.ssh_host_keys_absent = true;
  }
  world.ssh_config_current = applied_.unchanged(build::build_nodeset_ssh_config_map(n), cache_);
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
    drains_.forget(key);
    checks_.forget(key);
    if (metrics_ != nullptr) {
      metrics_->forget(request.namespace_name, request.name);
    }
    return settled();
  }
  const bool deleting = doc->meta.deleting;
  if (deleting && !has_finalizer(doc->doc, api::kFinalizerNodeSetSlurmNodes) &&
      !has_finalizer(doc->doc, api::kFinalizerNodeSetReservation)) {
    return settled();  // nothing of the operator's holds it
  }
  std::optional<api::NodeSet> loaded;
  if (deleting) {
    auto spec = checked(*doc, &api::decode_nodeset);
    if (!spec) {
      return keep_unreadable(*doc, spec.error());
    }
    loaded = std::move(*spec);
  } else {
    loaded = load(runtime_, type, *doc, &api::decode_nodeset, required_status(doc->meta.name));
    if (!loaded) {
      return settled();
    }
  }
  if (!deleting) {
    if (auto adopted = adopt_revision(*doc, *loaded); !adopted) {
      return retry();  // nothing written before the adoption is known
    }
  }
  NodeSetWorld world = observe(*doc, std::move(*loaded), key);
  if (deleting) {
    world.deleting_since =
        kube::parse_time(doc->doc.value("/metadata/deletionTimestamp"_json_pointer, std::string()));
    if (!world.deleting_since) {
      world.deleting_since = world.now;
    }
    const auto controller = cache_.get(
        resources::controllers(),
        kube::object_key(doc->meta.namespace_name, world.nodeset.spec.controller_ref.name));
    world.controller_deleting = controller && controller->meta.deleting;
  } else {
    world.pods_wait_for = read_compute_domain(runtime_, world.nodeset, world.compute_domain_absent);
    if (!world.pods_wait_for) {
      world.pods_wait_for = read_ssh(world);
    }
    if (!world.pods_wait_for && world.controller) {
      world.pods_wait_for = slurmctld_has_loaded(world.nodeset, *world.controller);
    }
  }
  const api::NodeSet& n = world.nodeset;
  const kube::ObjectReference self{type.api_version(), type.kind, n.metadata.namespace_name,
                                   n.metadata.name, n.metadata.uid};

  const NodeSetPlan plan = plan_nodeset(world);
  const std::vector<ActionFailure> failures = execute(key, self, world, plan.actions);
  if (world.controller && slurm_worth_reading(world, plan.actions)) {
    if (const auto feed = runtime_.slurm().feed(
            kube::object_key(n.metadata.namespace_name, world.controller->metadata.name))) {
      feed->hint();
    }
  }
  if (!failures.empty()) {
    const ActionFailure& first = failures.front();
    runtime_.events().warning(
        self, first.action->failure_reason,
        first.message +
            (failures.size() > 1 ? " (and " + std::to_string(failures.size() - 1) + " more)" : ""));
  } else if (plan.releases_nodeset) {
    log::info("nodeset.released", {{"nodeset", key}});
    return settled();  // gone with its last finalizer: no status to write
  }
  NodeSetVerdict verdict = conclude(world, plan, failures, Runtime::now());
  const auto measure = [&](const json& status) {
    if (metrics_ != nullptr) {
      std::vector<api::Condition> all = verdict.conditions;
      all.push_back({"Ready", verdict.readiness.ready ? "True" : "False", verdict.readiness.reason,
                     "", 0, ""});
      // While Slurm cannot be asked the steps are not known: the last ones stand.
      static const std::map<std::string, int64_t> kNone;
      const std::map<std::string, int64_t>* steps =
          plan.health ? &plan.health->steps : (world.health ? nullptr : &kNone);
      metrics_->report(n.metadata.namespace_name, n.metadata.name, status, all, began, steps);
    }
  };
  if (plan.stop || plan.deleting) {
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

kube::ReconcileOutcome NodeSetReconciler::keep_unreadable(const kube::Document& nodeset,
                                                          const api::FieldErrors& errors) {
  std::vector<std::string> finalizers;
  for (const auto& f : nodeset.doc.value("/metadata/finalizers"_json_pointer, json::array())) {
    if (f.is_string()) {
      finalizers.push_back(f.get<std::string>());
    }
  }
  const Readiness why =
      unreadable_deletion(kube::object_key(nodeset.meta.namespace_name, nodeset.meta.name),
                          api::join(errors), finalizers);
  const api::ObjectMeta meta = meta_of(nodeset);
  const kube::ObjectReference self{resources::nodesets().api_version(), resources::nodesets().kind,
                                   meta.namespace_name, meta.name, meta.uid};
  runtime_.events().warning(self, "DeletionBlocked", why.message);
  log::warn("nodeset.deletion_blocked",
            {{"nodeset", kube::object_key(meta.namespace_name, meta.name)}, {"why", why.message}});
  std::vector<api::Condition> conditions = conditions_of(nodeset);
  set_condition(conditions,
                {"DeletionBlocked", "True", why.reason, why.message, meta.generation, ""},
                Runtime::now());
  const json stored = nodeset.doc.value("status", json::object());
  const json kept = kept_status(stored, required_status(meta.name));
  // A corrected spec is an update, and so a reconcile; the look again is the net.
  return report(runtime_, resources::nodesets(), meta, conditions_of(nodeset),
                std::move(conditions), why, after(std::chrono::seconds(60)), kept,
                kept != kept_status(stored));
}

kube::Result<Done> NodeSetReconciler::adopt_revision(const kube::Document& nodeset,
                                                     api::NodeSet& n) {
  const std::string key(api::kAnnotationAdoptedGeneration);
  if (n.metadata.annotations.count(key) != 0 || reconciled_before(conditions_of(nodeset))) {
    return Done{};
  }
  const std::string hash = nodeset.doc.value("/status/nodeSetHash"_json_pointer, std::string());
  const int64_t observed = nodeset.doc.value("/status/observedGeneration"_json_pointer, int64_t{0});
  if (hash.empty() || observed != n.metadata.generation) {
    return Done{};  // its pods may not be what the spec says: they roll as any others
  }
  bool carried = false;
  for (const auto& p : cache_.pods_by_index(cache_index::kOwner, n.metadata.uid)) {
    carried = carried || (pod_revision(p->meta) == hash && !p->meta.deleting);
  }
  if (!carried) {
    return Done{};
  }
  if (auto recorded = record_adoption(runtime_, resources::nodesets(), n.metadata,
                                      "the pods of revision " + hash, hash);
      !recorded) {
    return recorded;
  }
  n.metadata.annotations[key] = std::to_string(n.metadata.generation);
  n.metadata.annotations[std::string(api::kAnnotationAdoptedRevision)] = hash;
  return Done{};
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
  world.drain_on_node_conditions = runtime_.options().drain_on_node_conditions;
  const std::vector<api::HealthCheck> checks = health_checks_in(cache_, ns);
  if (const api::HealthCheck* h = build::selecting_health_check(checks, ns_ref)) {
    world.health = HealthPolicy{h->metadata.name, h->metadata.uid, h->spec.remediation,
                                h->spec.active, h->spec.signals};
  }
  if (adoption_in_force(ns_ref.metadata)) {
    const auto it = ns_ref.metadata.annotations.find(std::string(api::kAnnotationAdoptedRevision));
    world.adopted_revision = it == ns_ref.metadata.annotations.end() ? "" : it->second;
  }

  for (const auto& r : cache_.by_index(kube::resources::controller_revisions(), cache_index::kOwner,
                                       ns_ref.metadata.uid)) {
    const kube::OwnerReference* owner = r->meta.controller_ref();
    if (owner != nullptr && owner->uid == ns_ref.metadata.uid) {
      world.revisions.emplace_back(r->doc.value("revision", int64_t{0}), r->meta.name);
    }
  }
  for (const auto& p : cache_.pods_by_index(cache_index::kOwner, ns_ref.metadata.uid)) {
    const kube::OwnerReference* owner = p->meta.controller_ref();
    if (owner != nullptr && owner->uid == ns_ref.metadata.uid) {
      world.pods.push_back(worker_pod(ns_ref, *p));
    }
  }
  world.expected = expectations_.pending(key, world.pods, PodExpectations::Clock::now());
  if (ns_ref.spec.scaling_mode == "DaemonSet") {
    // Any Node may be one a pod is wanted on.
    for (auto& node : cache_.list_all(kube::resources::nodes())) {
      world.kube_nodes.emplace(node->meta.name, std::move(node));
    }
  } else {
    // Only the Nodes its pods run on and those its ordinals are pinned to: at 10,000 Nodes a
    // copy of every one each reconcile is most of a steady reconcile's work.
    std::set<std::string> names;
    for (const auto& w : world.pods) {
      names.insert(w.kube_node);
      names.insert(w.target_node);
    }
    for (const auto& [ordinal, node] : ns_ref.status.ordinal_to_node) {
      names.insert(node);
    }
    names.erase("");
    for (const auto& name : names) {
      if (auto node = cache_.get(kube::resources::nodes(), name)) {
        world.kube_nodes.emplace(name, std::move(node));
      }
    }
  }

  read_nodes_of_its_pods(cache_, ns, world);
  if (world.health && !world.health->signals.device_taints.empty()) {
    world.device_taints = device_taints_on(cache_, world.kube_nodes);
  }

  // Slurm's side, from the cluster's connection (SlurmClients::reach): none yet (or the
  // Controller lacks a RestApi or jwtKeyRef), a new feed that has not answered yet, or a failing
  // one. Only the last is an outage; the others are how an operator starts.
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
  SlurmView& slurm = world.slurm;
  const SlurmReach reach = runtime_.slurm().reach(cluster_key);
  slurm.health = reach.health;
  slurm.reason = reach.reason;
  if (!reach.ok()) {
    slurm.problem = reach.message;
    return world;
  }
  const auto feed = runtime_.slurm().feed(cluster_key);
  const auto client = runtime_.slurm().get(cluster_key);
  if (!feed || !client) {  // dropped since: the next reconcile sees why
    slurm.health = SlurmHealth::kNoClient;
    slurm.reason = "NotConnected";
    slurm.problem = "the connection to this cluster's Slurm was just dropped";
    return world;
  }
  slurm.snapshot = feed->snapshot();
  if (slurm.snapshot.nodes) {
    slurm.drains_in_flight =
        drains_.pending(key, *slurm.snapshot.nodes, WritesInFlight::Clock::now());
    slurm.checks_in_flight =
        checks_.pending(key, *slurm.snapshot.nodes, WritesInFlight::Clock::now());
  }
  if (ns_ref.spec.update_strategy.type == "ScheduledUpdate" ||
      std::find(world.finalizers.begin(), world.finalizers.end(),
                api::kFinalizerNodeSetReservation) != world.finalizers.end()) {
    // Not NotFound: unreadable. The plan then makes it, and that write says why it fails.
    if (auto got = client->get_reservation(maintenance_reservation_name(ns_ref))) {
      slurm.reservation = std::move(*got);
    }
  }
  return world;
}

std::vector<ActionFailure> NodeSetReconciler::execute(const std::string& key,
                                                      const kube::ObjectReference& self,
                                                      const NodeSetWorld& world,
                                                      const std::vector<Action>& actions) {
  // The reconciler's writes and events, for the executor.
  struct Writer final : ActionWriter {
    NodeSetReconciler& r;
    const std::string& key;
    const kube::ObjectReference& self;
    const NodeSetWorld& world;
    Writer(NodeSetReconciler& reconciler, const std::string& k, const kube::ObjectReference& s,
           const NodeSetWorld& w)
        : r(reconciler), key(k), self(s), world(w) {}
    std::optional<std::string> write(const Action& a) override { return r.perform(key, world, a); }
    void succeeded(const Action& a) override {
      const std::lock_guard lock(mu);
      events.insert(events.end(), a.events.begin(), a.events.end());
    }
    std::mutex mu;
    std::vector<NodeSetEvent> events;  // recorded once all are done, batched
  } writer(*this, key, self, world);
  for (const Action& a : actions) {
    log::debug("nodeset.action", {{"nodeset", key}, {"action", to_string(a.change)}});
  }
  auto failures = execute_actions(actions, writer);
  for (const auto& e : batch_events(std::move(writer.events))) {
    if (e.warning) {
      runtime_.events().warning(self, e.reason, e.message);
    } else {
      runtime_.events().normal(self, e.reason, e.message);
    }
  }
  return failures;
}

namespace {

// One callable of several lambdas, for an exhaustive std::visit: a Change without its lambda
// does not compile.
template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

template <typename R>
std::optional<std::string> kube_error(const R& result, bool gone_is_fine = false) {
  if (result || (gone_is_fine && result.error().kind == kube::ErrorKind::kNotFound)) {
    return std::nullopt;
  }
  return result.error().message;
}

template <typename R>
std::optional<std::string> slurm_error(const R& result, bool gone_is_fine = false);

// Before a drain or undrain: Slurm's node as it is now, since the plan's snapshot may predate an
// administrator's drain by up to a poll. `leave` is set when that drain is there and must stay
// (the write is done: the next reconcile sees it); returns the read's error.
std::optional<std::string> read_before_drain(slurm::Client& client, const std::string& key,
                                             const std::string& node,
                                             const std::string& seen_reason, bool& leave) {
  const auto now = client.get_node_state(node);
  if (!now) {
    return slurm_error(now);
  }
  leave = reason_changed_by_another(*now, seen_reason);
  if (leave) {
    log::info("nodeset.drain_of_another_kept",
              {{"nodeset", key}, {"node", node}, {"reason", now->reason}});
  }
  return std::nullopt;
}

template <typename R>
std::optional<std::string> slurm_error(const R& result, bool gone_is_fine) {
  if (result || (gone_is_fine && result.error().kind == slurm::ErrorKind::kNotFound)) {
    return std::nullopt;
  }
  return result.error().message;
}

}  // namespace

auto NodeSetReconciler::kube_writes(const std::string& key, const NodeSetWorld& world) {
  const api::NodeSet& n = world.nodeset;
  const std::string& ns = n.metadata.namespace_name;
  kube::Client& kube = runtime_.kube();
  return Overloaded{
      [&](const CreateRevision& c) { return kube_error(runtime_.apply(c.revision)); },
      [&](const CreateComputeDomain& c) -> std::optional<std::string> {
        auto made = kube.create(resources::compute_domains(), ns, c.domain);
        if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
          return made.error().message;
        }
        return std::nullopt;
      },
      [&](const CreateSshHostKeys&) -> std::optional<std::string> {
        // Created, never applied: a key written over looks like an attack to users' ssh.
        auto made = kube.create(kube::resources::secrets(), ns,
                                build::build_nodeset_host_keys_secret(n, generate_ssh_host_keys()));
        if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
          return made.error().message;
        }
        log::info("nodeset.host_keys_generated", {{"nodeset", key}});
        return std::nullopt;
      },
      [&](const ApplyObject& c) -> std::optional<std::string> {
        auto stored = runtime_.apply(c.object);
        if (!stored) {
          return stored.error().message;
        }
        applied_.remember(c.object, *stored);
        return std::nullopt;
      },
      [&](const DeleteRevision& c) {
        return kube_error(runtime_.remove_owned(kube::resources::controller_revisions(), ns, c.name,
                                                n.metadata.uid));
      },
      [&](const SetFinalizers& c) {
        // With the resourceVersion the patch fails on a concurrent change instead of
        // losing it.
        json patch = json::object();
        patch["metadata"]["finalizers"] = c.finalizers;
        patch["metadata"]["resourceVersion"] = world.resource_version;
        return kube_error(
            kube.patch(resources::nodesets(), ns, n.metadata.name, kube::PatchType::kMerge, patch));
      },
      [&](const CreatePod& c) -> std::optional<std::string> {
        for (const auto& claim : c.claims) {
          auto made = kube.create(kube::resources::persistent_volume_claims(), ns, claim);
          if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
            return "PersistentVolumeClaim " + claim["metadata"].value("name", "") + ": " +
                   made.error().message;
          }
        }
        auto made = kube.create(kube::resources::pods(), ns, c.pod);
        if (!made && made.error().kind != kube::ErrorKind::kAlreadyExists) {
          return made.error().message;
        }
        expectations_.created(key, c.name, PodExpectations::Clock::now());
        return std::nullopt;
      },
      [&](const DeletePod& c) -> std::optional<std::string> {
        kube::DeleteOptions options;
        options.precondition_uid = c.uid;
        if (c.at_once) {
          options.grace_period_seconds = 0;
        }
        if (auto error =
                kube_error(kube.remove(kube::resources::pods(), ns, c.name, options), true)) {
          return error;
        }
        expectations_.deleted(key, c.uid, PodExpectations::Clock::now());
        log::info("nodeset.pod_deleted", {{"nodeset", key}, {"pod", c.name}, {"why", c.why}});
        return std::nullopt;
      },
      [&](const GiveClaimsToPod& c) -> std::optional<std::string> {
        for (const auto& [claim, owners] : c.owners) {
          json patch = json::object();
          patch["metadata"]["ownerReferences"] = owners;
          if (auto error = kube_error(kube.patch(kube::resources::persistent_volume_claims(), ns,
                                                 claim, kube::PatchType::kMerge, patch),
                                      true)) {
            return "PersistentVolumeClaim " + claim + ": " + *error;
          }
        }
        return std::nullopt;
      },
      [&](const PatchPod& c) {
        // A pod gone meanwhile needs nothing more.
        auto error = kube_error(
            kube.patch(kube::resources::pods(), ns, c.name,
                       c.status ? kube::PatchType::kStrategicMerge : kube::PatchType::kMerge,
                       c.patch, c.status ? "status" : ""),
            true);
        if (!error && !c.uid.empty()) {
          expectations_.patched(key, c.uid, c.seen_version, PodExpectations::Clock::now());
        }
        return error;
      },
      [&](const PatchKubeNode& c) {
        return kube_error(
            kube.patch(kube::resources::nodes(), "", c.name,
                       c.status ? kube::PatchType::kStrategicMerge : kube::PatchType::kMerge,
                       c.patch, c.status ? "status" : ""));
      }};
}

auto NodeSetReconciler::slurm_writes(const std::string& key, const NodeSetWorld& world) {
  const api::NodeSet& n = world.nodeset;
  // A Slurm write: through the Controller's client, and at most a few at once for the whole
  // operator, since slurmrestd serves users and slurmd registrations too.
  const auto slurm_write =
      [this, &n](const std::function<std::optional<std::string>(slurm::Client&)>& write)
      -> std::optional<std::string> {
    const auto client = runtime_.slurm().get(
        kube::object_key(n.metadata.namespace_name, n.spec.controller_ref.name));
    if (!client) {
      return "the operator has no Slurm client for this NodeSet's Controller";
    }
    slurm_writes_.acquire();
    struct Release {
      std::counting_semaphore<>& s;
      ~Release() { s.release(); }
    } release{slurm_writes_};
    return write(*client);
  };
  // The visitor outlives this call: slurm_write is copied into it, references stay references.
  return Overloaded{
      [this, slurm_write, &key](const DrainSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) -> std::optional<std::string> {
          bool leave = false;
          if (auto error = read_before_drain(client, key, c.node, c.seen_reason, leave);
              error || leave) {
            return error;
          }
          log::info("nodeset.draining", {{"nodeset", key}, {"node", c.node}, {"reason", c.reason}});
          auto error = slurm_error(client.drain(c.node, c.reason));
          if (!error) {
            drains_.written(key, c.node, c.reason, WritesInFlight::Clock::now());
          }
          return error;
        });
      },
      [this, slurm_write, &key](const UndrainSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) -> std::optional<std::string> {
          bool leave = false;
          if (auto error = read_before_drain(client, key, c.node, c.seen_reason, leave);
              error || leave) {
            return error;
          }
          log::info("nodeset.undraining", {{"nodeset", key}, {"node", c.node}});
          drains_.undone(key, c.node);
          return slurm_error(client.undrain(c.node));
        });
      },
      [this, slurm_write, &key](const ResumeSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) -> std::optional<std::string> {
          drains_.undone(key, c.node);
          auto resumed = client.resume(c.node);
          if (!resumed && resumed.error().kind == slurm::ErrorKind::kInvalid) {
            // Refused as a transition: a node neither DOWN nor drained has nothing to resume (a
            // second reconcile before the feed showed the first resume). Done, if so.
            const auto now = client.get_node(c.node);
            if (now && !now->has("DOWN") && !now->drain()) {
              return std::nullopt;
            }
          }
          return slurm_error(resumed);
        });
      },
      [slurm_write](const UpdateSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) {
          return slurm_error(client.update_node(c.node, c.update));
        });
      },
      [slurm_write, &key](const DeleteSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) {
          log::info("nodeset.slurm_node_deleted", {{"nodeset", key}, {"node", c.node}});
          return slurm_error(client.delete_node(c.node), true);
        });
      },
      [slurm_write, &key](const CreateSlurmNode& c) {
        return slurm_write([&](slurm::Client& client) -> std::optional<std::string> {
          auto created = client.create_node(c.record);
          if (!created && client.get_node(c.node)) {
            // Already there: a second reconcile from a snapshot that did not show the first
            // create yet (slurmctld refuses a duplicate, "Node already exists").
            return std::nullopt;
          }
          if (created) {
            log::info("nodeset.slurm_node_created", {{"nodeset", key}, {"record", c.record}});
          }
          return slurm_error(created);
        });
      },
      [slurm_write](const ReleaseReservation& c) {
        return slurm_write([&](slurm::Client& client) {
          return slurm_error(client.delete_reservation(c.name), true);
        });
      },
      [this, slurm_write, &key](const StartActiveCheck& c) {
        return slurm_write([&](slurm::Client& client) -> std::optional<std::string> {
          if (auto made = client.create_reservation(c.reservation); !made) {
            // Already there: a check started from a snapshot that did not show it yet.
            if (client.get_reservation(c.reservation.name)) {
              return std::nullopt;
            }
            return slurm_error(made);
          }
          checks_.written(key, c.node, c.reservation.name, WritesInFlight::Clock::now());
          auto job = client.submit_job(c.job);
          if (!job) {
            // Without its job the reservation would only keep users' jobs off the node. The
            // start stays in flight, so the next try comes only once that has lapsed (30 s).
            (void)client.delete_reservation(c.reservation.name);
            return "submitting the check job: " + job.error().message;
          }
          log::info("nodeset.active_check_started", {{"nodeset", key},
                                                     {"node", c.node},
                                                     {"job", std::to_string(*job)},
                                                     {"reservation", c.reservation.name}});
          return std::nullopt;
        });
      },
      [slurm_write](const SyncReservation& c) {
        return slurm_write([&](slurm::Client& client) {
          return c.update ? slurm_error(client.update_reservation(c.wanted.name, *c.update))
                          : slurm_error(client.create_reservation(c.wanted));
        });
      }};
}

std::optional<std::string> NodeSetReconciler::perform(const std::string& key,
                                                      const NodeSetWorld& world,
                                                      const Action& action) {
  // Every Change has its write in one of the two: one without does not compile.
  return std::visit(Overloaded{kube_writes(key, world), slurm_writes(key, world)}, action.change);
}

}  // namespace tightrope::op
