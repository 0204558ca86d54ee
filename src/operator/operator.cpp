#include "operator/operator.hpp"

#include <array>
#include <functional>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

using kube::Document;
using kube::Informer;
using kube::MetaOnly;
using kube::Request;
using nlohmann::json;

namespace {

// Copies each container's waiting state (reason and message), and nothing else of its status,
// into a pod document decoded without its container statuses; in a crash loop, also how it last
// ended (exit code, and the kubelet's message: with FallbackToLogsOnError, the log's end).
void keep_waiting_states(simdjson::dom::element object, kube::Document* out) {
  for (const char* field : {"initContainerStatuses", "containerStatuses"}) {
    simdjson::dom::array statuses;
    if (object["status"][field].get(statuses) != simdjson::SUCCESS) {
      continue;
    }
    for (const auto status : statuses) {
      simdjson::dom::element waiting;
      simdjson::dom::element name;
      if (status["state"]["waiting"].get(waiting) != simdjson::SUCCESS ||
          status["name"].get(name) != simdjson::SUCCESS) {
        continue;
      }
      nlohmann::json kept = nlohmann::json::object();
      kept["name"] = kube::to_json(name);
      kept["state"]["waiting"] = kube::to_json(waiting);
      std::string_view reason;
      simdjson::dom::element terminated;
      if (waiting["reason"].get(reason) == simdjson::SUCCESS && reason == "CrashLoopBackOff" &&
          status["lastState"]["terminated"].get(terminated) == simdjson::SUCCESS) {
        for (const char* key : {"exitCode", "message"}) {
          simdjson::dom::element value;
          if (terminated[key].get(value) == simdjson::SUCCESS) {
            kept["lastState"]["terminated"][key] = kube::to_json(value);
          }
        }
      }
      out->doc["status"][field].push_back(std::move(kept));
    }
  }
}

// True when `spec` names `name` in any *Ref or *Refs field (a Secret, a ConfigMap, a Controller,
// an Accounting): enough to map a change of the named object to the resources that use it.
bool references(const json& value, const std::string& name, bool in_ref = false) {
  if (value.is_object()) {
    if (in_ref && value.value("name", json()) == name) {
      return true;
    }
    for (const auto& [key, child] : value.items()) {
      const bool ref = key.size() > 3 && (key.ends_with("Ref") || key.ends_with("Refs"));
      if ((ref || (in_ref && child.is_array())) && references(child, name, ref || in_ref)) {
        return true;
      }
      if (!ref && child.is_object() && references(child, name, false)) {
        return true;
      }
    }
  } else if (value.is_array() && in_ref) {
    for (const auto& item : value) {
      if (references(item, name, true)) {
        return true;
      }
    }
  }
  return false;
}

std::vector<Request> referencing(const ResourceCache& cache, const kube::ResourceType& type,
                                 const std::string& ns, const std::string& name) {
  std::vector<Request> out;
  for (const auto& doc : cache.list(type, ns)) {
    const auto spec = doc->doc.find("spec");
    if (spec != doc->doc.end() && references(*spec, name)) {
      out.push_back({ns, doc->meta.name});
    }
  }
  return out;
}

// The Controller a ConfigMap, Service or StatefulSet belongs to, by owner reference.
std::string owning(const kube::ObjectMeta& meta, const std::string& kind) {
  const kube::OwnerReference* owner = meta.controller_ref();
  return owner != nullptr && owner->kind == kind ? owner->name : "";
}

}  // namespace

Operator::Operator(kube::Client& client, kube::EventRecorder& events, OperatorOptions options,
                   metrics::Registry* metrics)
    : runtime_(client, events, slurm_, std::move(options)),
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
      nodeset_reconciler_(runtime_, cache_) {
  if (metrics_ != nullptr) {
    nodeset_metrics_ = std::make_unique<NodeSetMetrics>(*metrics_);
    nodeset_reconciler_.use_metrics(nodeset_metrics_.get());
    cluster_metrics_ = std::make_unique<ClusterMetrics>(*metrics_);
    slurm_.use_metrics(cluster_metrics_.get());
  }
  runtime_.use_cache(&cache_);
  wire();
}

Operator::~Operator() {
  stop();
}

void Operator::wire() {
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
  kube::Controller* controllers = make("controller", controller_reconciler_);
  kube::Controller* restapis = make("restapi", restapi_reconciler_);
  kube::Controller* accountings = make("accounting", accounting_reconciler_);
  kube::Controller* loginsets = make("loginset", loginset_reconciler_);
  kube::Controller* tokens = make("token", token_reconciler_);
  kube::Controller* nodesets = make("nodeset", nodeset_reconciler_);

  // Slurm changed (nodes, jobs, or whether it answers): the NodeSets those nodes belong to look
  // again; all of the cluster's when that cannot be told.
  const ResourceCache* shared_cache = &cache_;
  // The NodeSets of one Controller, as the cache has them.
  const auto nodeset_docs_of = [shared_cache](const std::string& ns,
                                              const std::string& controller) {
    std::vector<ResourceCache::Ptr> out;
    for (auto& doc : shared_cache->list(resources::nodesets(), ns)) {
      if (doc->doc.value("/spec/controllerRef/name"_json_pointer, std::string()) == controller) {
        out.push_back(std::move(doc));
      }
    }
    return out;
  };
  const auto nodesets_of = [nodeset_docs_of](const std::string& ns, const std::string& controller) {
    std::vector<Request> out;
    for (const auto& doc : nodeset_docs_of(ns, controller)) {
      out.push_back({ns, doc->meta.name});
    }
    return out;
  };
  NodeSetMetrics* const sync = nodeset_metrics_.get();
  slurm_.set_listener([nodesets, nodeset_docs_of, sync](const std::string& controller_key,
                                                        const NodeSetIndex::Touched* touched) {
    const Request controller = Request::from_key(controller_key);
    if (touched != nullptr) {
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
    for (const auto& doc : nodeset_docs_of(controller.namespace_name, controller.name)) {
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

  std::vector<std::string> namespaces = runtime_.options().namespaces;
  if (namespaces.empty()) {
    namespaces.emplace_back();  // all
  }
  const std::string managed = std::string(api::kLabelManagedBy) + "=slurm-operator";
  const std::string workers = managed + "," + std::string(api::kLabelName) + "=slurmd";
  // Nodes are cluster-wide: one informer whatever the namespaces. A node's change (cordon,
  // annotations) concerns the NodeSets with pods on it, and every DaemonSet-mode NodeSet.
  auto& kube_nodes =
      factory_.informer<Document>(kube::resources::nodes(), "", kube::decode_document);
  cache_.add(kube::resources::nodes(), &kube_nodes);
  informers_.push_back(&kube_nodes);
  nodesets->watch_mapped<Document>(kube_nodes, [shared_cache, sync](const Document& node) {
    std::vector<Request> out;
    // DaemonSet-mode NodeSets: any Node may start or stop being theirs.
    for (const auto& nodeset : shared_cache->list_all(resources::nodesets())) {
      if (nodeset->doc.value("/spec/scalingMode"_json_pointer, std::string()) == "DaemonSet") {
        out.push_back({nodeset->meta.namespace_name, nodeset->meta.name});
      }
    }
    for (const auto& pod : shared_cache->list_all(kube::resources::pods())) {
      const kube::OwnerReference* owner = pod->meta.controller_ref();
      if (owner != nullptr && owner->kind == "NodeSet" &&
          pod->doc.value("/spec/nodeName"_json_pointer, std::string()) == node.meta.name) {
        out.push_back({pod->meta.namespace_name, owner->name});
      }
    }
    if (sync != nullptr) {
      const auto now = NodeSetMetrics::Clock::now();
      for (const auto& r : out) {
        sync->seen(r.namespace_name, r.name, "node", now);
      }
    }
    return out;
  });
  // A clique appearing, going or changing size rewrites every cluster's topology.yaml; other
  // Node changes (heartbeats, most of them) concern no Controller.
  const auto every_controller = [controllers, shared_cache] {
    for (const auto& c : shared_cache->list_all(resources::controllers())) {
      controllers->enqueue({c->meta.namespace_name, c->meta.name});
    }
  };
  const auto clique = [](const Document& node) {
    return node.doc.value("/metadata/labels"_json_pointer, json::object())
        .value(std::string(api::kLabelGpuClique), std::string());
  };
  kube_nodes.on_add([every_controller, clique](const std::shared_ptr<const Document>& node) {
    if (!clique(*node).empty()) {
      every_controller();
    }
  });
  kube_nodes.on_update([every_controller, clique](const std::shared_ptr<const Document>& before,
                                                  const std::shared_ptr<const Document>& after) {
    if (clique(*before) != clique(*after)) {
      every_controller();
    }
  });
  kube_nodes.on_delete([every_controller, clique](const kube::Deleted<Document>& gone) {
    if (gone.object == nullptr || !clique(*gone.object).empty()) {
      every_controller();
    }
  });
  for (const auto& ns : namespaces) {
    const auto crd = [&](const kube::ResourceType& type) -> Informer<Document>& {
      auto& informer = factory_.informer<Document>(type, ns, kube::decode_document);
      cache_.add(type, &informer);
      informers_.push_back(&informer);
      return informer;
    };
    auto& controller_inf = crd(resources::controllers());
    auto& nodeset_inf = crd(resources::nodesets());
    auto& restapi_inf = crd(resources::restapis());
    auto& accounting_inf = crd(resources::accountings());
    auto& loginset_inf = crd(resources::loginsets());
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
    const auto cached = [&](const kube::ResourceType& type,
                            const std::string& selector) -> Informer<Document>& {
      auto& informer = factory_.informer<Document>(type, ns, kube::decode_document, selector);
      cache_.add(type, &informer);
      informers_.push_back(&informer);
      return informer;
    };
    // slurmd pods without their containers, volumes and container statuses, which no reconciler
    // reads: about a third of what a whole pod costs in the cache. Of the container statuses only
    // a waiting state stays (with a crash loop's last exit), which says why a container does not
    // start.
    auto& worker_pods = factory_.informer<Document>(
        kube::resources::pods(), ns,
        [](simdjson::dom::element object, Document* out) {
          static constexpr std::array<kube::FieldPath, 6> kUnread = {
              {{"spec", "containers"},
               {"spec", "initContainers"},
               {"spec", "volumes"},
               {"spec", "tolerations"},
               {"status", "containerStatuses"},
               {"status", "initContainerStatuses"}}};
          auto decoded = kube::decode_document_without(object, out, kUnread);
          if (decoded) {
            keep_waiting_states(object, out);
          }
          return decoded;
        },
        workers);
    cache_.add(kube::resources::pods(), &worker_pods);
    informers_.push_back(&worker_pods);
    auto& revisions = cached(kube::resources::controller_revisions(), managed);

    const ResourceCache* cache = &cache_;
    controllers->watch_primary(controller_inf);
    for (auto* owned : {&services, &stateful_sets, &config_maps}) {
      controllers->watch_owned(*owned, "Controller");
    }
    controllers->watch_mapped<Document>(nodeset_inf, [](const Document& n) {
      const std::string name = n.doc.value("/spec/controllerRef/name"_json_pointer, std::string());
      return name.empty() ? std::vector<Request>{}
                          : std::vector<Request>{{n.meta.namespace_name, name}};
    });
    controllers->watch_mapped<Document>(restapi_inf, [](const Document& r) {
      const std::string name = r.doc.value("/spec/controllerRef/name"_json_pointer, std::string());
      return name.empty() ? std::vector<Request>{}
                          : std::vector<Request>{{r.meta.namespace_name, name}};
    });
    controllers->watch_mapped<Document>(accounting_inf, [cache](const Document& a) {
      return referencing(*cache, resources::controllers(), a.meta.namespace_name, a.meta.name);
    });
    for (auto* named : {&secrets, &config_maps}) {
      controllers->watch_mapped<MetaOnly>(*named, [cache](const MetaOnly& o) {
        return referencing(*cache, resources::controllers(), o.meta.namespace_name, o.meta.name);
      });
    }

    restapis->watch_primary(restapi_inf);
    for (auto* owned : {&services, &deployments}) {
      restapis->watch_owned(*owned, "RestApi");
    }
    // A Controller or its ConfigMap changed: its RestApis and LoginSets follow.
    const auto of_controller = [cache](const kube::ResourceType& type, const std::string& ns_name,
                                       const std::string& controller) {
      std::vector<Request> out;
      for (const auto& doc : cache->list(type, ns_name)) {
        if (doc->doc.value("/spec/controllerRef/name"_json_pointer, std::string()) == controller) {
          out.push_back({ns_name, doc->meta.name});
        }
      }
      return out;
    };
    restapis->watch_mapped<Document>(controller_inf, [of_controller](const Document& c) {
      return of_controller(resources::restapis(), c.meta.namespace_name, c.meta.name);
    });
    restapis->watch_mapped<MetaOnly>(config_maps, [of_controller](const MetaOnly& cm) {
      const std::string controller = owning(cm.meta, "Controller");
      return controller.empty()
                 ? std::vector<Request>{}
                 : of_controller(resources::restapis(), cm.meta.namespace_name, controller);
    });

    accountings->watch_primary(accounting_inf);
    for (auto* owned : {&services, &stateful_sets}) {
      accountings->watch_owned(*owned, "Accounting");
    }
    accountings->watch_owned(secrets, "Accounting");
    accountings->watch_mapped<MetaOnly>(secrets, [cache](const MetaOnly& o) {
      return referencing(*cache, resources::accountings(), o.meta.namespace_name, o.meta.name);
    });

    loginsets->watch_primary(loginset_inf);
    for (auto* owned : {&services, &deployments, &config_maps, &secrets}) {
      loginsets->watch_owned(*owned, "LoginSet");
    }
    loginsets->watch_mapped<Document>(controller_inf, [of_controller](const Document& c) {
      return of_controller(resources::loginsets(), c.meta.namespace_name, c.meta.name);
    });
    loginsets->watch_mapped<MetaOnly>(secrets, [cache](const MetaOnly& o) {
      return referencing(*cache, resources::loginsets(), o.meta.namespace_name, o.meta.name);
    });

    nodesets->watch_primary(nodeset_inf);
    nodesets->watch_owned(worker_pods, "NodeSet");
    nodesets->watch_owned(revisions, "NodeSet");
    nodesets->watch_mapped<Document>(controller_inf, [nodesets_of](const Document& c) {
      return nodesets_of(c.meta.namespace_name, c.meta.name);
    });
    // The Controller's generated files changed (topology.yaml's blocks), or its slurmctld rolled
    // to them (new pods wait for that): its NodeSets follow.
    const auto of_owning_controller = [nodesets_of](const MetaOnly& o) {
      const std::string controller = owning(o.meta, "Controller");
      return controller.empty() ? std::vector<Request>{}
                                : nodesets_of(o.meta.namespace_name, controller);
    };
    nodesets->watch_mapped<MetaOnly>(config_maps, of_owning_controller);
    nodesets->watch_mapped<MetaOnly>(stateful_sets, of_owning_controller);

    tokens->watch_primary(token_inf);
    tokens->watch_owned(secrets, "Token");
    tokens->watch_mapped<MetaOnly>(secrets, [cache](const MetaOnly& o) {
      return referencing(*cache, resources::tokens(), o.meta.namespace_name, o.meta.name);
    });
  }
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
}

void Operator::stop() {
  slurm_.stop();
  stop_controllers();
  factory_.stop_all();
}

}  // namespace tightrope::op
