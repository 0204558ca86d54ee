#include "operator/slurm_clients.hpp"

#include <set>

#include "slurm/hostlist.hpp"

namespace tightrope::op {

namespace {

struct FeedAndClient {
  FeedAndClient(std::shared_ptr<slurm::Client> c, const slurm::FeedOptions& options)
      : client(std::move(c)), feed(*client, options) {}
  std::shared_ptr<slurm::Client> client;
  slurm::ChangeFeed feed;
};

}  // namespace

SlurmClients::~SlurmClients() {
  stop();
}

void SlurmClients::set_listener(ChangeListener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

void SlurmClients::set_feed_period(std::chrono::milliseconds period) {
  std::lock_guard lock(mu_);
  feed_period_ = period;
}

std::shared_ptr<slurm::Client> SlurmClients::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = clients_.find(key);
  return it == clients_.end() ? nullptr : it->second.client;
}

std::shared_ptr<slurm::ChangeFeed> SlurmClients::feed(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = clients_.find(key);
  return it == clients_.end() ? nullptr : it->second.feed;
}

void SlurmClients::stop_feed(Entry& entry) {
  if (entry.feed) {
    entry.feed->stop();
  }
}

std::shared_ptr<slurm::Client> SlurmClients::ensure(const std::string& key, const std::string& url,
                                                    slurm::KeyLoader jwt_key,
                                                    const std::string& key_name) {
  std::lock_guard lock(mu_);
  auto& entry = clients_[key];
  if (entry.client && entry.url == url && entry.key_name == key_name) {
    return entry.client;
  }
  stop_feed(entry);
  slurm::ClientOptions options;
  options.url = url;
  // Reconciles wait on these calls: fail in seconds and let the work queue retry.
  options.timeout = std::chrono::milliseconds(5000);
  options.max_attempts = 2;
  // The operator acts as SlurmUser; tokens are short and minted again at 80 %.
  auto tokens = std::make_shared<slurm::MintingTokenSource>(std::move(jwt_key), key_name, "slurm",
                                                            std::chrono::minutes(15));
  auto client = std::make_shared<slurm::Client>(options, tokens);
  std::shared_ptr<slurm::ChangeFeed> feed;
  if (listener_) {
    // Its own client: a feed request never waits behind a reconcile's, nor one behind it.
    auto feed_client = std::make_shared<slurm::Client>(options, tokens);
    slurm::FeedOptions feed_options;
    feed_options.period = feed_period_;
    feed_options.follow_jobs = true;
    feed_options.max_backoff = std::chrono::milliseconds(10000);
    // The feed refers to its client: both live in one block, the feed destroyed first.
    auto both = std::make_shared<FeedAndClient>(feed_client, feed_options);
    feed = std::shared_ptr<slurm::ChangeFeed>(both, &both->feed);
    const ChangeListener listener = listener_;
    feed->subscribe([listener, key](const std::vector<slurm::NodeEvent>& events) {
      std::vector<slurm::Node> changed;
      changed.reserve(events.size());
      for (const auto& e : events) {
        changed.push_back(e.node);
      }
      listener(key, &changed);
    });
    // A job's change concerns the nodes it runs (or ran) on. The feed outlives its subscribers.
    slurm::ChangeFeed* source = feed.get();
    feed->subscribe_jobs([listener, key, source](const std::vector<slurm::JobEvent>& events) {
      const slurm::SlurmSnapshot now = source->snapshot();
      std::set<std::string> names;
      for (const auto& e : events) {
        for (const std::string* hostlist :
             {&e.job.nodes, e.previous ? &e.previous->nodes : nullptr}) {
          if (hostlist == nullptr || hostlist->empty()) {
            continue;
          }
          const auto expanded = slurm::expand_hostlist(*hostlist);
          if (!expanded) {
            listener(key, nullptr);
            return;
          }
          names.insert(expanded->begin(), expanded->end());
        }
      }
      std::vector<slurm::Node> changed;
      for (const auto& name : names) {
        if (const auto it = now.nodes->find(name); it != now.nodes->end()) {
          changed.push_back(it->second);
        }
      }
      if (!changed.empty()) {
        listener(key, &changed);
      }
    });
    feed->subscribe_health([listener, key](const slurm::FeedHealth&) { listener(key, nullptr); });
    feed->start();
  }
  entry = {url, key_name, std::move(client), std::move(feed)};
  return entry.client;
}

void SlurmClients::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = clients_.find(key);
  if (it != clients_.end()) {
    stop_feed(it->second);
    clients_.erase(it);
  }
}

void SlurmClients::stop() {
  std::lock_guard lock(mu_);
  for (auto& [key, entry] : clients_) {
    stop_feed(entry);
  }
}

}  // namespace tightrope::op
