// The operator's view of its own resources: one informer per kind and watched namespace, read
// as one cache. Objects are whole documents (the six kinds are few and small); the objects the
// operator writes are also known by identity alone (MetaOnly), enough to tell whether one
// still is as the operator left it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/informer.hpp"

namespace tightrope::op {

class ResourceCache {
 public:
  using Ptr = std::shared_ptr<const kube::Document>;

  // Registered before the informers start.
  void add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer);
  void add_meta(const kube::ResourceType& type, kube::Informer<kube::MetaOnly>* informer);

  Ptr get(const kube::ResourceType& type, const std::string& key) const;
  std::vector<Ptr> list(const kube::ResourceType& type, const std::string& ns) const;
  // Every cached object of the type, whatever its namespace.
  std::vector<Ptr> list_all(const kube::ResourceType& type) const;

  // Whether objects of the type are cached at all (whole or by identity).
  bool caches(const kube::ResourceType& type) const;
  // The cached resourceVersion of an object; nullopt when the cache does not hold it.
  std::optional<std::string> resource_version(const kube::ResourceType& type,
                                              const std::string& key) const;

 private:
  std::map<std::string, std::vector<kube::Informer<kube::Document>*>> informers_;
  std::map<std::string, std::vector<kube::Informer<kube::MetaOnly>*>> meta_informers_;
};

}  // namespace tightrope::op
