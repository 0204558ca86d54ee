// Discovery: which resource serves a kind ("Widget" in "example.com/v1" -> "widgets",
// namespaced). Answers are cached per group/version and read again when a kind is missing, so
// a CRD installed after start is found. Knows nothing of Slurm.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kube/client.hpp"

namespace tightrope::kube {

class Discovery {
 public:
  explicit Discovery(Client& client) : client_(client) {}

  // `api_version` as in an object: "v1", "apps/v1", "slinky.slurm.net/v1beta1".
  Result<ResourceType> for_kind(const std::string& api_version, const std::string& kind);
  // Every resource of a group/version (subresources left out).
  Result<std::vector<ResourceType>> resources_of(const std::string& api_version);
  // Forget what was read (after CRDs changed).
  void invalidate();

 private:
  Result<std::vector<ResourceType>> fetch(const std::string& api_version);

  Client& client_;
  std::mutex mu_;
  std::map<std::string, std::vector<ResourceType>> cache_;
};

}  // namespace tightrope::kube
