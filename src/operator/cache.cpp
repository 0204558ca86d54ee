#include "operator/cache.hpp"

#include <algorithm>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "kube/resource.hpp"

namespace tightrope::op {

namespace cache_index {

std::vector<std::string> node_of(const CachedPod& pod) {
  if (pod.node_name.empty()) {
    return {};
  }
  return {pod.node_name};
}

std::vector<std::string> controller_of(const kube::Document& object) {
  const std::string name = object.doc.value("/spec/controllerRef/name"_json_pointer, std::string());
  if (name.empty()) {
    return {};
  }
  return {kube::object_key(object.meta.namespace_name, name)};
}

std::vector<std::string> failed_pods(const kube::Document& kube_node) {
  std::vector<std::string> out;
  for (auto& f : api::decode_node_failures(kube_node.doc)) {
    if (std::find(out.begin(), out.end(), f.pod) == out.end()) {
      out.push_back(std::move(f.pod));
    }
  }
  return out;
}

std::vector<std::string> slurm_node_name(const kube::Document& kube_node) {
  const std::string* name = kube_node.meta.label(api::kLabelNodeSlurmNodeName);
  if (name == nullptr || name->empty()) {
    return {};
  }
  return {*name};
}

}  // namespace cache_index

std::vector<ResourceCache::Ptr> ResourceCache::by_index(const kube::ResourceType& type,
                                                        const std::string& index,
                                                        const std::string& value) const {
  std::vector<Ptr> out;
  const auto it = informers_.find(type.resource);
  if (it == informers_.end()) {
    return out;
  }
  for (const auto* informer : it->second) {
    for (auto& object : informer->store().by_index(index, value)) {
      out.push_back(std::move(object));
    }
  }
  return out;
}

void ResourceCache::add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer) {
  informers_[type.resource].push_back(informer);
}

void ResourceCache::add_meta(const kube::ResourceType& type,
                             kube::Informer<kube::MetaOnly>* informer) {
  meta_informers_[type.resource].push_back(informer);
}

void ResourceCache::add_pods(kube::Informer<CachedPod>* informer) {
  pod_informers_.push_back(informer);
}

std::vector<ResourceCache::PodPtr> ResourceCache::pods(const std::string& ns) const {
  std::vector<PodPtr> out;
  for (const auto* informer : pod_informers_) {
    for (auto& pod : informer->store().list()) {
      if (pod->meta.namespace_name == ns) {
        out.push_back(std::move(pod));
      }
    }
  }
  return out;
}

std::vector<ResourceCache::PodPtr> ResourceCache::pods_by_index(const std::string& index,
                                                                const std::string& value) const {
  std::vector<PodPtr> out;
  for (const auto* informer : pod_informers_) {
    for (auto& pod : informer->store().by_index(index, value)) {
      out.push_back(std::move(pod));
    }
  }
  return out;
}

bool ResourceCache::caches(const kube::ResourceType& type) const {
  return informers_.count(type.resource) != 0 || meta_informers_.count(type.resource) != 0 ||
         (type.resource == kube::resources::pods().resource && !pod_informers_.empty());
}

std::optional<std::string> ResourceCache::resource_version(const kube::ResourceType& type,
                                                           const std::string& key) const {
  if (auto object = get(type, key)) {
    return object->meta.resource_version;
  }
  if (type.resource == kube::resources::pods().resource) {
    for (const auto* informer : pod_informers_) {
      if (auto pod = informer->store().get(key)) {
        return pod->meta.resource_version;
      }
    }
  }
  const auto it = meta_informers_.find(type.resource);
  if (it == meta_informers_.end()) {
    return std::nullopt;
  }
  for (const auto* informer : it->second) {
    if (auto object = informer->store().get(key)) {
      return object->meta.resource_version;
    }
  }
  return std::nullopt;
}

ResourceCache::Ptr ResourceCache::get(const kube::ResourceType& type,
                                      const std::string& key) const {
  const auto it = informers_.find(type.resource);
  if (it == informers_.end()) {
    return nullptr;
  }
  for (const auto* informer : it->second) {
    if (auto object = informer->store().get(key)) {
      return object;
    }
  }
  return nullptr;
}

std::vector<ResourceCache::Ptr> ResourceCache::list(const kube::ResourceType& type,
                                                    const std::string& ns) const {
  std::vector<Ptr> out = list_all(type);
  std::erase_if(out, [&](const Ptr& object) { return object->meta.namespace_name != ns; });
  return out;
}

std::vector<ResourceCache::Ptr> ResourceCache::list_all(const kube::ResourceType& type) const {
  std::vector<Ptr> out;
  const auto it = informers_.find(type.resource);
  if (it == informers_.end()) {
    return out;
  }
  for (const auto* informer : it->second) {
    for (auto& object : informer->store().list()) {
      out.push_back(std::move(object));
    }
  }
  return out;
}

}  // namespace tightrope::op
