#include "operator/cache.hpp"

namespace tightrope::op {

namespace cache_index {

std::vector<std::string> node_of(const kube::Document& pod) {
  std::string node = pod.doc.value("/spec/nodeName"_json_pointer, std::string());
  if (node.empty()) {
    return {};
  }
  return {std::move(node)};
}

std::vector<std::string> controller_of(const kube::Document& object) {
  const std::string name = object.doc.value("/spec/controllerRef/name"_json_pointer, std::string());
  if (name.empty()) {
    return {};
  }
  return {kube::object_key(object.meta.namespace_name, name)};
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
