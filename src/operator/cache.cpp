#include "operator/cache.hpp"

namespace tightrope::op {

void ResourceCache::add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer) {
  informers_[type.resource].push_back(informer);
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
