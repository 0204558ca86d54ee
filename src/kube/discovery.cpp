#include "kube/discovery.hpp"

namespace tightrope::kube {

Result<std::vector<ResourceType>> Discovery::fetch(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version =
      slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  auto doc = client_.get_path(group.empty() ? "/api/" + version : "/apis/" + group + "/" + version);
  if (!doc) {
    return fail(doc.error());
  }
  std::vector<ResourceType> out;
  const auto list = doc->find("resources");
  if (list == doc->end() || !list->is_array()) {
    return out;
  }
  for (const auto& r : *list) {
    const std::string name = r.value("name", "");
    if (name.empty() || name.find('/') != std::string::npos) {
      continue;  // "pods/status" and the like are subresources
    }
    out.push_back({group, version, name, r.value("kind", ""), r.value("namespaced", false)});
  }
  return out;
}

Result<std::vector<ResourceType>> Discovery::resources_of(const std::string& api_version) {
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(api_version); it != cache_.end()) {
      return it->second;
    }
  }
  auto fetched = fetch(api_version);
  if (!fetched) {
    return fail(fetched.error());
  }
  std::lock_guard lock(mu_);
  cache_[api_version] = *fetched;
  return std::move(*fetched);
}

Result<ResourceType> Discovery::for_kind(const std::string& api_version, const std::string& kind) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto all = resources_of(api_version);
    if (!all) {
      if (all.error().kind != ErrorKind::kNotFound || attempt == 1) {
        return fail(all.error());
      }
    } else {
      for (const auto& type : *all) {
        if (type.kind == kind) {
          return type;
        }
      }
    }
    // Not there: the answer may predate a new CRD; ask once more.
    std::lock_guard lock(mu_);
    cache_.erase(api_version);
  }
  Error e;
  e.kind = ErrorKind::kNotFound;
  e.message = "discovery: no resource serves kind " + kind + " in " + api_version;
  return fail(std::move(e));
}

void Discovery::invalidate() {
  std::lock_guard lock(mu_);
  cache_.clear();
}

}  // namespace tightrope::kube
