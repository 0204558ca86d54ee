// The operator's view of its own resources: one informer per kind and watched namespace, read
// as one cache. Objects are whole documents (the six kinds are few and small).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kube/informer.hpp"

namespace tightrope::op {

class ResourceCache {
 public:
  using Ptr = std::shared_ptr<const kube::Document>;

  // Registered before the informers start.
  void add(const kube::ResourceType& type, kube::Informer<kube::Document>* informer);

  Ptr get(const kube::ResourceType& type, const std::string& key) const;
  std::vector<Ptr> list(const kube::ResourceType& type, const std::string& ns) const;
  // Every cached object of the type, whatever its namespace.
  std::vector<Ptr> list_all(const kube::ResourceType& type) const;

 private:
  std::map<std::string, std::vector<kube::Informer<kube::Document>*>> informers_;
};

}  // namespace tightrope::op
