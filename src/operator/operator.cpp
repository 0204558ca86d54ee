#include "operator/operator.hpp"

#include <functional>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "operator/conditions.hpp"
#include "operator/device_taints.hpp"
#include "operator/reconcile_support.hpp"
#include "operator/resources.hpp"
#include "operator/watches.hpp"

namespace tightrope::op {

using kube::Document;
using kube::Informer;
using kube::MetaOnly;
using kube::Request;
using nlohmann::json;

Operator::Operator(kube::Client& client, kube::EventRecorder& events, OperatorOptions options,
                   metrics::Registry* metrics)
    : log_hints_(client, slurm_),
      runtime_(client, events, slurm_, std::move(options)),
      factory_(client,
               [&] {
                 kube::ReflectorOptions r;
                 r.metrics = metrics;
                 return r;
               }()),
      metrics_(metrics),
      controller_reconciler_(runtime_, cache_),
      restapi_reconciler_(runtime_, cache_),
      accounting_reconciler_(runtime_, cache_),
      loginset_reconciler_(runtime_, cache_),
      token_reconciler_(runtime_, cache_),
      health_reconciler_(runtime_, cache_),
      nodeset_reconciler_(runtime_, cache_),
      connection_reconciler_(runtime_, cache_) {
  if (metrics_ != nullptr) {
    nodeset_metrics_ = std::make_unique<NodeSetMetrics>(*metrics_);
    nodeset_reconciler_.use_metrics(nodeset_metrics_.get());
    cluster_metrics_ = std::make_unique<ClusterMetrics>(*metrics_);
    slurm_.use_metrics(cluster_metrics_.get());
    log_hints_.use_metrics(cluster_metrics_.get());
  }
  runtime_.use_cache(&cache_);
  if (runtime_.options().slurm_hinted_period.count() > 0) {
    slurm_.set_hinted_period(runtime_.options().slurm_hinted_period);
    runtime_.use_log_hints(&log_hints_);
  }
  wire();
}

Operator::~Operator() {
  stop();
}

void Operator::wire() {
  make_controllers();
  wire_slurm();
  wire_nodes();
  wire_devices();
  std::vector<std::string> namespaces = runtime_.options().namespaces;
  if (namespaces.empty()) {
    namespaces.emplace_back();  // all
  }
  for (const auto& ns : namespaces) {
    wire_namespace(watch_namespace(ns));
  }
}

void Operator::make_controllers() {
  const auto make = [&](const char* name, kube::Reconciler& reconciler) {
    kube::ControllerOptions options;
    options.name = name;
    const auto& workers = runtime_.options().workers;
    options.workers = workers.count(name) != 0 ? std::max(1, workers.at(name)) : 1;
    options.metrics = metrics_;
    options.queue.max_delay = runtime_.options().max_retry_delay;
    controllers_.push_back(std::make_unique<kube::Controller>(options, reconciler));
    return controllers_.back().get();
  };
  by_kind_.controllers = make("controller", controller_reconciler_);
  by_kind_.restapis = make("restapi", restapi_reconciler_);
  by_kind_.accountings = make("accounting", accounting_reconciler_);
  by_kind_.loginsets = make("loginset", loginset_reconciler_);
  by_kind_.tokens = make("token", token_reconciler_);
  by_kind_.health_checks = make("healthcheck", health_reconciler_);
  by_kind_.nodesets = make("nodeset", nodeset_reconciler_);
  by_kind_.connections = make("slurm-connection", connection_reconciler_);
}

std::vector<ResourceCache::Ptr> Operator::nodesets_of(const std::string& ns,
                                                      const std::string& controller) const {
  return cache_.by_index(resources::nodesets(), cache_index::kController,
                         kube::object_key(ns, controller));
}

void Operator::wire_slurm() {
  // Slurm changed (nodes, jobs, or whether it answers): the NodeSets those nodes belong to look
  // again; all of the cluster's when that cannot be told, and the Controller when its reach may
  // have changed.
  kube::Controller* const controllers = by_kind_.controllers;
  kube::Controller* const nodesets = by_kind_.nodesets;
  NodeSetMetrics* const sync = nodeset_metrics_.get();
  slurm_.set_listener([this, nodesets, controllers, sync](const std::string& controller_key,
                                                          const NodeSetIndex::Touched* touched) {
    const Request controller = Request::from_key(controller_key);
    if (touched == nullptr) {
      controllers->enqueue(controller);  // SlurmReachable
    } else {
      const auto now = NodeSetMetrics::Clock::now();
      for (const auto& name : touched->nodesets) {
        if (sync != nullptr) {
          sync->seen(controller.namespace_name, name, "slurm", now);
        }
        nodesets->enqueue({controller.namespace_name, name});
      }
      if (touched->unlinked.empty()) {
        return;
      }
    }
    // Nodes no link names yet: by their features, NodeSets being decoded only now.
    std::vector<NodeSetFeature> candidates;
    for (const auto& doc : nodesets_of(controller.namespace_name, controller.name)) {
      if (auto n = api::decode_nodeset(doc->doc)) {
        candidates.push_back({doc->meta.name, n->slurm_name()});
      }
    }
    const auto by_feature =
        touched == nullptr ? std::nullopt : nodesets_touched(candidates, touched->unlinked);
    for (const auto& c : candidates) {
      if (!by_feature || by_feature->count(c.name) != 0) {
        nodesets->enqueue({controller.namespace_name, c.name});
      }
    }
  });
}

void Operator::wire_nodes() {
  // Nodes are cluster-wide: one informer whatever the namespaces. A node's change (cordon,
  // annotations) concerns the NodeSets with pods on it (nodesets_on_node), and every
  // DaemonSet-mode NodeSet.
  auto& kube_nodes =
      factory_.informer<Document>(kube::resources::nodes(), "", kube::decode_document);
  kube_nodes.store().add_index(cache_index::kFailedPod, cache_index::failed_pods);
  kube_nodes.store().add_index(cache_index::kSlurmNodeName, cache_index::slurm_node_name);
  cache_.add(kube::resources::nodes(), &kube_nodes);
  informers_.push_back(&kube_nodes);
  const ResourceCache* cache = &cache_;
  NodeSetMetrics* const sync = nodeset_metrics_.get();
  by_kind_.nodesets->watch_mapped<Document>(kube_nodes, [cache, sync](const Document& node) {
    std::vector<Request> out = nodesets_on_node(*cache, node.meta.name);
    if (sync != nullptr) {
      const auto now = NodeSetMetrics::Clock::now();
      for (const auto& r : out) {
        sync->seen(r.namespace_name, r.name, "node", now);
      }
    }
    return out;
  });
  // A HealthCheck's status.kubeNodes shows the failures kept on Nodes and their quarantine.
  by_kind_.health_checks->watch_mapped<Document>(
      kube_nodes,
      [cache](const Document&) {
        std::vector<Request> out;
        if (cache->caches(resources::health_checks())) {
          for (const auto& h : cache->list_all(resources::health_checks())) {
            out.push_back({h->meta.namespace_name, h->meta.name});
          }
        }
        return out;
      },
      node_health_changed);
  // A clique appearing, going or changing size rewrites every cluster's topology.yaml; other
  // Node changes (heartbeats, most of them) concern no Controller.
  kube::Controller* const controllers = by_kind_.controllers;
  const auto every_controller = [controllers, cache] {
    for (const auto& c : cache->list_all(resources::controllers())) {
      controllers->enqueue({c->meta.namespace_name, c->meta.name});
    }
  };
  kube_nodes.on_add([every_controller](const std::shared_ptr<const Document>& node) {
    if (!gpu_clique(*node).empty()) {
      every_controller();
    }
  });
  kube_nodes.on_update([every_controller](const std::shared_ptr<const Document>& before,
                                          const std::shared_ptr<const Document>& after) {
    if (gpu_clique(*before) != gpu_clique(*after)) {
      every_controller();
    }
  });
  kube_nodes.on_delete([every_controller](const kube::Deleted<Document>& gone) {
    if (gone.object == nullptr || !gpu_clique(*gone.object).empty()) {
      every_controller();
    }
  });
}

void Operator::wire_devices() {
  // Where the API server serves them (DRA is GA since Kubernetes 1.34, DeviceTaintRules in v1
  // since 1.37): an informer of a kind not served would never sync, and the operator never lead.
  if (!runtime_.serves(resources::resource_slices().api_version(), "ResourceSlice", true)) {
    log::info("operator.device_taints_unwatched",
              {{"reason", "the API server does not serve resource.k8s.io/v1 ResourceSlice"}});
    return;
  }
  // Slices as their taints and Node (decode_slice_taints), indexed by Node: a slice's taint
  // concerns the NodeSets with a pod on its Node.
  auto& slices = factory_.informer<Document>(resources::resource_slices(), "", decode_slice_taints);
  slices.store().add_index(cache_index::kNode, slice_node);
  cache_.add(resources::resource_slices(), &slices);
  informers_.push_back(&slices);
  const ResourceCache* cache = &cache_;
  by_kind_.nodesets->watch_mapped<Document>(
      slices,
      [cache](const Document& slice) {
        const auto node = slice_node(slice);
        return node.empty() ? std::vector<Request>{} : nodesets_on_node(*cache, node.front());
      },
      [](const Document& before, const Document& after) { return before.doc != after.doc; });
  if (!runtime_.serves(resources::device_taint_rules().api_version(), "DeviceTaintRule", true)) {
    log::info("operator.device_taint_rules_unwatched",
              {{"reason", "the API server does not serve resource.k8s.io/v1 DeviceTaintRule"}});
    return;
  }
  // A rule may select devices anywhere: every NodeSet looks again (rules change seldom).
  auto& rules =
      factory_.informer<Document>(resources::device_taint_rules(), "", kube::decode_document);
  cache_.add(resources::device_taint_rules(), &rules);
  informers_.push_back(&rules);
  by_kind_.nodesets->watch_mapped<Document>(
      rules,
      [cache](const Document&) {
        std::vector<Request> out;
        for (const auto& n : cache->list_all(resources::nodesets())) {
          out.push_back({n->meta.namespace_name, n->meta.name});
        }
        return out;
      },
      spec_changed);
}

Operator::NamespaceInformers Operator::watch_namespace(const std::string& ns) {
  const std::string managed = std::string(api::kLabelManagedBy) + "=slurm-operator";
  // Not `managed`: the pods of a NodeSet moved from another operator (Slinky's carry no
  // managed-by label) are the NodeSet's too; a NodeSet's pods are told apart by their owner.
  const std::string workers = std::string(api::kLabelName) + "=slurmd";
  const auto cached = [&](const kube::ResourceType& type,
                          const std::string& selector) -> Informer<Document>& {
    auto& informer = factory_.informer<Document>(type, ns, kube::decode_document, selector);
    cache_.add(type, &informer);
    informers_.push_back(&informer);
    return informer;
  };
  const auto crd = [&](const kube::ResourceType& type) -> Informer<Document>& {
    return cached(type, "");
  };
  auto& controller_inf = crd(resources::controllers());
  auto& nodeset_inf = crd(resources::nodesets());
  nodeset_inf.store().add_index(cache_index::kController, cache_index::controller_of);
  auto& restapi_inf = crd(resources::restapis());
  restapi_inf.store().add_index(cache_index::kController, cache_index::controller_of);
  auto& accounting_inf = crd(resources::accountings());
  auto& loginset_inf = crd(resources::loginsets());
  loginset_inf.store().add_index(cache_index::kController, cache_index::controller_of);
  auto& token_inf = crd(resources::tokens());
  const auto meta = [&](const kube::ResourceType& type,
                        const std::string& selector) -> Informer<MetaOnly>& {
    auto& informer = factory_.informer<MetaOnly>(type, ns, kube::decode_meta_only, selector);
    cache_.add_meta(type, &informer);
    informers_.push_back(&informer);
    return informer;
  };
  // Secrets and ConfigMaps: every one, since users' own are referenced by name.
  auto& secrets = meta(kube::resources::secrets(), "");
  auto& config_maps = meta(kube::resources::config_maps(), "");
  auto& services = meta(kube::resources::services(), managed);
  auto& stateful_sets = meta(kube::resources::stateful_sets(), managed);
  auto& deployments = meta(kube::resources::deployments(), managed);
  // slurmd pods as the projection their readers need (CachedPod), not whole documents.
  auto& worker_pods =
      factory_.informer<CachedPod>(kube::resources::pods(), ns, decode_cached_pod, workers);
  worker_pods.store().add_index(cache_index::kOwner, kube::index::by_owner_uid<CachedPod>);
  worker_pods.store().add_index(cache_index::kNode, cache_index::node_of);
  cache_.add_pods(&worker_pods);
  informers_.push_back(&worker_pods);
  auto& revisions = cached(kube::resources::controller_revisions(), managed);
  revisions.store().add_index(cache_index::kOwner, kube::index::by_owner_uid<Document>);
  // Tightrope's own kind, watched only where its CRD is installed (the operator's chart installs
  // it; one installed later is watched after the operator restarts): an informer of a kind the
  // API server does not serve would never sync, and the operator would never lead.
  Informer<Document>* health_inf = nullptr;
  if (runtime_.serves(resources::health_checks().api_version(), "HealthCheck", true)) {
    health_inf = &crd(resources::health_checks());
  } else {
    log::warn("operator.healthchecks_unwatched",
              {{"reason",
                "the API server does not serve tightrope.slurm.net/v1alpha1 "
                "HealthCheck (CRD not installed)"}});
  }
  return {&controller_inf, &nodeset_inf, &restapi_inf, &accounting_inf, &loginset_inf,
          &token_inf,      health_inf,   &secrets,     &config_maps,    &services,
          &stateful_sets,  &deployments, &worker_pods, &revisions};
}

void Operator::wire_namespace(const NamespaceInformers& in) {
  const ResourceCache* cache = &cache_;
  by_kind_.controllers->watch_primary(*in.controller_inf);
  for (auto* owned : {in.services, in.stateful_sets, in.config_maps}) {
    by_kind_.controllers->watch_owned(*owned, "Controller");
  }
  // A NodeSet's own status writes (every job's start and end moves its counts) are not what
  // slurm.conf is made of.
  by_kind_.controllers->watch_mapped<Document>(*in.nodeset_inf, controller_named, spec_changed);
  by_kind_.controllers->watch_mapped<Document>(*in.accounting_inf, [cache](const Document& a) {
    return referencing(*cache, resources::controllers(), a.meta.namespace_name, a.meta.name);
  });
  for (auto* named : {in.secrets, in.config_maps}) {
    by_kind_.controllers->watch_mapped<MetaOnly>(*named, [cache](const MetaOnly& o) {
      return referencing(*cache, resources::controllers(), o.meta.namespace_name, o.meta.name);
    });
  }

  by_kind_.connections->watch_primary(*in.controller_inf);
  by_kind_.connections->watch_mapped<Document>(*in.restapi_inf, controller_named);

  by_kind_.restapis->watch_primary(*in.restapi_inf);
  for (auto* owned : {in.services, in.deployments}) {
    by_kind_.restapis->watch_owned(*owned, "RestApi");
  }
  // A Controller or its ConfigMap changed: its RestApis and LoginSets follow.
  const auto of_controller = [cache](const kube::ResourceType& type, const std::string& ns_name,
                                     const std::string& controller) {
    std::vector<Request> out;
    for (const auto& doc :
         cache->by_index(type, cache_index::kController, kube::object_key(ns_name, controller))) {
      out.push_back({ns_name, doc->meta.name});
    }
    return out;
  };
  by_kind_.restapis->watch_mapped<Document>(*in.controller_inf, [of_controller](const Document& c) {
    return of_controller(resources::restapis(), c.meta.namespace_name, c.meta.name);
  });
  by_kind_.restapis->watch_mapped<MetaOnly>(*in.config_maps, [of_controller](const MetaOnly& cm) {
    const std::string controller = owning(cm.meta, "Controller");
    return controller.empty()
               ? std::vector<Request>{}
               : of_controller(resources::restapis(), cm.meta.namespace_name, controller);
  });

  by_kind_.accountings->watch_primary(*in.accounting_inf);
  for (auto* owned : {in.services, in.stateful_sets}) {
    by_kind_.accountings->watch_owned(*owned, "Accounting");
  }
  by_kind_.accountings->watch_owned(*in.secrets, "Accounting");
  by_kind_.accountings->watch_mapped<MetaOnly>(*in.secrets, [cache](const MetaOnly& o) {
    return referencing(*cache, resources::accountings(), o.meta.namespace_name, o.meta.name);
  });

  by_kind_.loginsets->watch_primary(*in.loginset_inf);
  for (auto* owned : {in.services, in.deployments, in.config_maps, in.secrets}) {
    by_kind_.loginsets->watch_owned(*owned, "LoginSet");
  }
  by_kind_.loginsets->watch_mapped<Document>(
      *in.controller_inf, [of_controller](const Document& c) {
        return of_controller(resources::loginsets(), c.meta.namespace_name, c.meta.name);
      });
  by_kind_.loginsets->watch_mapped<MetaOnly>(*in.secrets, [cache](const MetaOnly& o) {
    return referencing(*cache, resources::loginsets(), o.meta.namespace_name, o.meta.name);
  });

  by_kind_.nodesets->watch_primary(*in.nodeset_inf);
  by_kind_.nodesets->watch_owned(*in.worker_pods, "NodeSet");
  by_kind_.nodesets->watch_owned(*in.revisions, "NodeSet");
  by_kind_.nodesets->watch_mapped<Document>(*in.controller_inf, [of_controller](const Document& c) {
    return of_controller(resources::nodesets(), c.meta.namespace_name, c.meta.name);
  });
  // The Controller's generated files changed (topology.yaml's blocks), or its slurmctld rolled
  // to them (new pods wait for that): its NodeSets follow.
  const auto of_owning_controller = [of_controller](const MetaOnly& o) {
    const std::string controller = owning(o.meta, "Controller");
    return controller.empty()
               ? std::vector<Request>{}
               : of_controller(resources::nodesets(), o.meta.namespace_name, controller);
  };
  by_kind_.nodesets->watch_mapped<MetaOnly>(*in.config_maps, of_owning_controller);
  by_kind_.nodesets->watch_mapped<MetaOnly>(*in.stateful_sets, of_owning_controller);

  if (in.health_inf != nullptr) {
    wire_health_checks(in);
  }

  by_kind_.tokens->watch_primary(*in.token_inf);
  by_kind_.tokens->watch_owned(*in.secrets, "Token");
  by_kind_.tokens->watch_mapped<MetaOnly>(*in.secrets, [cache](const MetaOnly& o) {
    return referencing(*cache, resources::tokens(), o.meta.namespace_name, o.meta.name);
  });
}

void Operator::wire_health_checks(const NamespaceInformers& in) {
  const ResourceCache* cache = &cache_;
  by_kind_.health_checks->watch_primary(*in.health_inf);
  by_kind_.health_checks->watch_owned(*in.config_maps, "HealthCheck");
  // Every HealthCheck of the namespace: a NodeSet's labels decide which one it follows, and a
  // ConfigMap may be one's scripts.
  const auto every_health_check = [cache](const std::string& ns) {
    std::vector<Request> out;
    for (const auto& h : cache->list(resources::health_checks(), ns)) {
      out.push_back({ns, h->meta.name});
    }
    return out;
  };
  // Its status shows what the NodeSets' planners do: their WorkersHealthy.
  by_kind_.health_checks->watch_mapped<Document>(
      *in.nodeset_inf,
      [every_health_check](const Document& n) { return every_health_check(n.meta.namespace_name); },
      [](const Document& before, const Document& after) {
        const auto healthy = [](const Document& d) {
          const api::Condition* c = find_condition(conditions_of(d), "WorkersHealthy");
          return c != nullptr ? std::make_optional(*c) : std::nullopt;
        };
        return spec_changed(before, after) || healthy(before) != healthy(after);
      });
  // ... and status.remediations, which the pods' drain conditions show a moment after the
  // planner acted: WorkersHealthy alone would leave it behind (so does status.kubeNodes, whose
  // Nodes wire_nodes watches).
  by_kind_.health_checks->watch_mapped<CachedPod>(
      *in.worker_pods,
      [every_health_check](const CachedPod& p) {
        return every_health_check(p.meta.namespace_name);
      },
      pod_drain_changed);
  by_kind_.health_checks->watch_mapped<MetaOnly>(*in.config_maps, [cache](const MetaOnly& cm) {
    std::vector<Request> out;
    for (const auto& h : health_checks_in(*cache, cm.meta.namespace_name)) {
      if (h.spec.passive.scripts && h.spec.passive.scripts->name == cm.meta.name) {
        out.push_back({cm.meta.namespace_name, h.metadata.name});
      }
    }
    return out;
  });
  // A NodeSet's planner remediates by the HealthCheck it follows (its budget, replace, quarantine).
  by_kind_.nodesets->watch_mapped<Document>(*in.health_inf, [cache](const Document& h) {
    std::vector<Request> out;
    for (const auto& n : cache->list(resources::nodesets(), h.meta.namespace_name)) {
      out.push_back({h.meta.namespace_name, n->meta.name});
    }
    return out;
  });
  // slurm.conf runs the program once a HealthCheck selects one of a cluster's NodeSets.
  by_kind_.controllers->watch_mapped<Document>(*in.health_inf, [cache](const Document& h) {
    std::vector<Request> out;
    for (const auto& c : cache->list(resources::controllers(), h.meta.namespace_name)) {
      out.push_back({h.meta.namespace_name, c->meta.name});
    }
    return out;
  });
}

void Operator::start_informers() {
  factory_.start_all();
}

bool Operator::wait_for_sync(std::chrono::milliseconds timeout) {
  return factory_.wait_for_sync(timeout);
}

bool Operator::synced() const {
  for (const auto* informer : informers_) {
    if (!informer->has_synced()) {
      return false;
    }
  }
  return true;
}

void Operator::start_controllers() {
  if (controllers_running_) {
    return;
  }
  nodeset_reconciler_.forget_expectations();
  for (auto& c : controllers_) {
    c->start();
  }
  controllers_running_ = true;
}

void Operator::stop_controllers() {
  if (!controllers_running_) {
    return;
  }
  for (auto& c : controllers_) {
    c->stop();
  }
  controllers_running_ = false;
  // What a leader reported goes with its term: a standby's series would be stale, and summed
  // with the new leader's they would count every job and node twice.
  log_hints_.stop_all();
  slurm_.release_all();
  if (nodeset_metrics_) {
    nodeset_metrics_->forget_all();
  }
}

void Operator::stop() {
  slurm_.stop();
  stop_controllers();
  factory_.stop_all();
}

}  // namespace tightrope::op
