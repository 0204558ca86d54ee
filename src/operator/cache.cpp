#include "operator/cache.hpp"

namespace tightrope::op {

void ResourceCache::add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer) {
  informers_[type.resource].push_back(informer);
}

void ResourceCache::add_meta(const kube::ResourceType& type,
                             kube::Informer<kube::MetaOnly>* informer) {
  meta_informers_[type.resource].push_back(informer);
}

bool ResourceCache::caches(const kube::ResourceType& type) const {
  return informers_.count(type.resource) != 0 || meta_informers_.count(type.resource) != 0;
}

std::optional<std::string> ResourceCache::resource_version(const kube::ResourceType& type,
                                                           const std::string& key) const {
  if (auto object = get(type, key)) {
    return object->meta.resource_version;
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
