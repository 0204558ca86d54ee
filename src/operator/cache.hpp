// The operator's view of its own resources: one informer per kind and watched namespace, read
// as one cache. Its custom resources are whole documents (few and small); worker pods, as many
// as Slurm nodes, are CachedPod projections; the objects the operator writes are also known by
// identity alone (MetaOnly), enough to tell whether one still is as the operator left it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/informer.hpp"
#include "operator/cached_pod.hpp"

namespace tightrope::op {

// The indexes the operator's cache keeps, so that a reconcile or a watch mapping reads the few
// objects it concerns instead of scanning every one: at 10,000 workers, every pod on each
// Node's heartbeat.
namespace cache_index {
inline constexpr const char* kOwner = "owner-uid";        // the owners' uids (pods, revisions)
inline constexpr const char* kNode = "node";              // pods: spec.nodeName
inline constexpr const char* kController = "controller";  // "<ns>/<spec.controllerRef.name>"
// Kubernetes Nodes: the pods ("<ns>/<name>") whose failed health checks each Node records.
inline constexpr const char* kFailedPod = "failed-pod";
// Kubernetes Nodes: the Slurm node their slinky.slurm.net/slurm-nodename label names.
inline constexpr const char* kSlurmNodeName = "slurm-nodename";

std::vector<std::string> node_of(const CachedPod& pod);
std::vector<std::string> controller_of(const kube::Document& object);
std::vector<std::string> failed_pods(const kube::Document& kube_node);
std::vector<std::string> slurm_node_name(const kube::Document& kube_node);
}  // namespace cache_index

class ResourceCache {
 public:
  using Ptr = std::shared_ptr<const kube::Document>;
  using PodPtr = std::shared_ptr<const CachedPod>;

  // Registered before the informers start.
  void add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer);
  void add_meta(const kube::ResourceType& type, kube::Informer<kube::MetaOnly>* informer);
  void add_pods(kube::Informer<CachedPod>* informer);

  Ptr get(const kube::ResourceType& type, const std::string& key) const;
  std::vector<Ptr> list(const kube::ResourceType& type, const std::string& ns) const;
  // Every cached object of the type, whatever its namespace.
  std::vector<Ptr> list_all(const kube::ResourceType& type) const;

  // Objects of the type whose index `index` yields `value`; the index is added to each of the
  // type's informers (add_index) before they start.
  std::vector<Ptr> by_index(const kube::ResourceType& type, const std::string& index,
                            const std::string& value) const;

  // Worker pods: those of a namespace, and those an index (cache_index::kOwner, kNode) yields
  // `value` for.
  std::vector<PodPtr> pods(const std::string& ns) const;
  std::vector<PodPtr> pods_by_index(const std::string& index, const std::string& value) const;

  // Whether objects of the type are cached at all (whole or by identity).
  bool caches(const kube::ResourceType& type) const;
  // The cached resourceVersion of an object; nullopt when the cache does not hold it.
  std::optional<std::string> resource_version(const kube::ResourceType& type,
                                              const std::string& key) const;

 private:
  std::map<std::string, std::vector<kube::Informer<kube::Document>*>> informers_;
  std::map<std::string, std::vector<kube::Informer<kube::MetaOnly>*>> meta_informers_;
  std::vector<kube::Informer<CachedPod>*> pod_informers_;
};

}  // namespace tightrope::op
