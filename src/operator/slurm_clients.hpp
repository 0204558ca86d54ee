// One Slurm REST client per Controller, shared by the reconcilers that talk to its cluster (the
// Controller's own, and the NodeSet controller's). A client exists while the Controller has a
// RestApi to reach; its JWT is minted by the operator from the Controller's auth/jwt key.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "slurm/client.hpp"
#include "slurm/token.hpp"

namespace tightrope::op {

class SlurmClients {
 public:
  // The client of Controller `key` ("namespace/name"), or null when it has none.
  std::shared_ptr<slurm::Client> get(const std::string& key) const;
  // The client for this URL: kept when it exists for the same URL and key source, else made
  // anew. `key_name` names the key's Secret in errors.
  std::shared_ptr<slurm::Client> ensure(const std::string& key, const std::string& url,
                                        slurm::KeyLoader jwt_key, const std::string& key_name);
  void erase(const std::string& key);

 private:
  struct Entry {
    std::string url;
    std::string key_name;
    std::shared_ptr<slurm::Client> client;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> clients_;
};

}  // namespace tightrope::op
