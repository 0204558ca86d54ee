// Which reconciles a watched object's change brings: the mappings the operator wires (an object
// to the keys of the resources that read it), each a function of the object alone, so that each
// is tested without informers. What needs the cache to answer (who references a Secret) takes it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/controller.hpp"
#include "kube/object.hpp"
#include "operator/cache.hpp"
#include "operator/cached_pod.hpp"

namespace tightrope::op {

// True when `spec` names `name` in any *Ref or *Refs field (a Secret, a ConfigMap, a Controller,
// an Accounting): enough to map a change of the named object to the resources that use it.
bool references(const nlohmann::json& spec, const std::string& name);

// The resources of `type` in `ns` whose spec references `name` (references()).
std::vector<kube::Request> referencing(const ResourceCache& cache, const kube::ResourceType& type,
                                       const std::string& ns, const std::string& name);

// The name of the controlling owner of kind `kind`, "" when it has none.
std::string owning(const kube::ObjectMeta& meta, const std::string& kind);

// The Controller an object names in spec.controllerRef (a NodeSet, a RestApi, a LoginSet): none
// when it names none.
std::vector<kube::Request> controller_named(const kube::Document& object);

// Whether an update changed what a reconciler of another kind reads of the object: its spec (the
// generation), its labels or annotations, or whether it is being deleted. A status write does not.
bool spec_changed(const kube::Document& before, const kube::Document& after);

// The NodeSets a change of a Node (or of its devices) concerns: those with a pod on it, and every
// DaemonSet-mode one (any Node may start or stop being theirs).
std::vector<kube::Request> nodesets_on_node(const ResourceCache& cache, const std::string& node);

// A Node's GPU clique label, "" without one: a clique's change rewrites topology.yaml.
std::string gpu_clique(const kube::Document& node);

// What a HealthCheck's status shows of a worker pod changed: its Slurm drain condition (the
// remediation step is in the reason), written by the NodeSet's sync after the planner acted.
bool pod_drain_changed(const CachedPod& before, const CachedPod& after);

// What a HealthCheck's status shows of a Kubernetes Node changed: the failures kept on it or its
// quarantine taint.
bool node_health_changed(const kube::Document& before, const kube::Document& after);

}  // namespace tightrope::op
