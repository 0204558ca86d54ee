#include "operator/slurm_clients.hpp"

namespace tightrope::op {

std::shared_ptr<slurm::Client> SlurmClients::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = clients_.find(key);
  return it == clients_.end() ? nullptr : it->second.client;
}

std::shared_ptr<slurm::Client> SlurmClients::ensure(const std::string& key, const std::string& url,
                                                    slurm::KeyLoader jwt_key,
                                                    const std::string& key_name) {
  std::lock_guard lock(mu_);
  auto& entry = clients_[key];
  if (entry.client && entry.url == url && entry.key_name == key_name) {
    return entry.client;
  }
  slurm::ClientOptions options;
  options.url = url;
  // Reconciles wait on these calls: fail in seconds and let the work queue retry.
  options.timeout = std::chrono::milliseconds(5000);
  options.max_attempts = 2;
  // The operator acts as SlurmUser; tokens are short and minted again at 80 %.
  auto tokens = std::make_shared<slurm::MintingTokenSource>(std::move(jwt_key), key_name, "slurm",
                                                            std::chrono::minutes(15));
  entry = {url, key_name, std::make_shared<slurm::Client>(options, tokens)};
  return entry.client;
}

void SlurmClients::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  clients_.erase(key);
}

}  // namespace tightrope::op
