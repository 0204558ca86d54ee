#include "operator/slurm_clients.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "base/log.hpp"
#include "kube/controller.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::op {

namespace {

struct FeedAndClient {
  FeedAndClient(std::shared_ptr<slurm::Client> c, const slurm::FeedOptions& options)
      : client(std::move(c)), feed(*client, options) {}
  std::shared_ptr<slurm::Client> client;
  slurm::ChangeFeed feed;
};

// The NodeSet a node's comment links it to; "" without a link.
std::string linked_nodeset(const slurm::Node& node) {
  if (node.comment.empty() || node.comment.front() != '{') {
    return "";
  }
  const auto link = nlohmann::json::parse(node.comment, nullptr, false);
  return link.is_object() ? link.value("nodeSetName", "") : "";
}

}  // namespace

NodeSetIndex::Touched NodeSetIndex::update(const slurm::ChangeFeed::Changes& changes) {
  Touched out;
  for (const auto& e : changes.nodes) {
    const auto known = nodeset_of_.find(e.node.name);
    if (known != nodeset_of_.end()) {
      out.nodesets.insert(known->second);  // where it was: it may have left that NodeSet
    }
    const std::string linked =
        e.type == slurm::NodeEvent::Type::kRemoved ? "" : linked_nodeset(e.node);
    if (!linked.empty()) {
      nodeset_of_[e.node.name] = linked;
      out.nodesets.insert(linked);
      continue;
    }
    if (known != nodeset_of_.end()) {
      nodeset_of_.erase(known);
    }
    if (e.type != slurm::NodeEvent::Type::kRemoved) {
      out.unlinked.push_back(e.node);
    }
  }
  // A job's change concerns the nodes it runs (or ran) on.
  std::set<std::string> names;
  for (const auto& e : changes.jobs) {
    for (const std::string* hostlist : {&e.job.nodes, e.previous ? &e.previous->nodes : nullptr}) {
      if (hostlist == nullptr || hostlist->empty()) {
        continue;
      }
      const auto expanded = slurm::expand_hostlist(*hostlist);
      if (!expanded) {
        out.everything = true;
        return out;
      }
      names.insert(expanded->begin(), expanded->end());
    }
  }
  for (const auto& name : names) {
    if (const auto it = nodeset_of_.find(name); it != nodeset_of_.end()) {
      out.nodesets.insert(it->second);
    } else if (const auto node = changes.snapshot.nodes->find(name);
               node != changes.snapshot.nodes->end()) {
      out.unlinked.push_back(node->second);
    }
  }
  return out;
}

std::string NodeSetIndex::nodeset_of(const std::string& node) const {
  const auto it = nodeset_of_.find(node);
  return it == nodeset_of_.end() ? "" : it->second;
}

SlurmReach reach_of(const std::optional<slurm::FeedHealth>& health, const std::string& url,
                    const std::optional<std::pair<std::string, std::string>>& absent) {
  if (!health) {
    if (absent) {
      return {SlurmHealth::kNoClient, absent->first, absent->second};
    }
    return {SlurmHealth::kNoClient, "NotConnected",
            "the operator has not connected to this cluster's Slurm yet"};
  }
  if (!health->synced && health->consecutive_failures == 0) {
    return {SlurmHealth::kWaiting, "NotYetRead", "waiting for slurmrestd's first answer at " + url};
  }
  if (!health->synced || health->consecutive_failures > 0) {
    const bool refused =
        health->last_error && health->last_error->kind == slurm::ErrorKind::kUnauthorized;
    return {SlurmHealth::kUnreachable, refused ? "Unauthorized" : "Unreachable",
            "slurmrestd at " + url + " does not answer: " +
                (health->last_error ? health->last_error->message : std::string("not yet read"))};
  }
  return {SlurmHealth::kSynced, "Responding", "slurmctld answers through " + url};
}

SlurmReach SlurmClients::reach(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = clients_.find(key);
  if (it == clients_.end() || !it->second.feed) {
    const auto absent = absent_.find(key);
    return reach_of(std::nullopt, "",
                    absent == absent_.end()
                        ? std::nullopt
                        : std::optional<std::pair<std::string, std::string>>(absent->second));
  }
  return reach_of(it->second.feed->health(), it->second.url, std::nullopt);
}

SlurmClients::~SlurmClients() {
  stop();
}

void SlurmClients::set_listener(ChangeListener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
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
  std::unique_lock lock(mu_);
  auto& entry = clients_[key];
  if (entry.client && entry.url == url && entry.key_name == key_name) {
    return entry.client;
  }
  absent_.erase(key);
  stop_feed(entry);
  slurm::ClientOptions options;
  options.url = url;
  // Reconciles wait on these calls: fail in seconds and let the work queue retry.
  options.timeout = std::chrono::milliseconds(5000);
  options.max_attempts = 2;
  ClusterMetrics* const metrics = metrics_;
  const kube::Request controller = kube::Request::from_key(key);
  const std::string& ns = controller.namespace_name;
  const std::string& name = controller.name;
  if (metrics != nullptr) {
    options.on_attempt = metrics->attempts(ns, name);
  }
  // The operator acts as SlurmUser; tokens are short and minted again at 80 %.
  auto tokens = std::make_shared<slurm::MintingTokenSource>(std::move(jwt_key), key_name, "slurm",
                                                            std::chrono::minutes(15));
  auto client = std::make_shared<slurm::Client>(options, tokens);
  std::shared_ptr<slurm::ChangeFeed> feed;
  if (listener_) {
    // Its own client: a feed request never waits behind a reconcile's, nor one behind it.
    auto feed_client = std::make_shared<slurm::Client>(options, tokens);
    slurm::FeedOptions feed_options;
    feed_options.period = kFeedPeriod;
    feed_options.follow_jobs = true;
    // Jobs that touch no node (submitted, held) only feed the job metrics: at rest they are
    // read every 10 s, which halves what an idle cluster's slurmrestd answers.
    feed_options.jobs_at_rest = std::chrono::seconds(10);
    feed_options.max_backoff = std::chrono::milliseconds(10000);
    feed_options.hinted_period = hinted_period_;
    // The feed refers to its client: both live in one block, the feed destroyed first.
    auto both = std::make_shared<FeedAndClient>(feed_client, feed_options);
    feed = std::shared_ptr<slurm::ChangeFeed>(both, &both->feed);
    const ChangeListener listener = listener_;
    auto index = std::make_shared<NodeSetIndex>();
    feed->subscribe_changes(
        [listener, key, index, metrics, ns, name](const slurm::ChangeFeed::Changes& changes) {
          const NodeSetIndex::Touched touched = index->update(changes);
          if (metrics != nullptr) {
            metrics->report(ns, name, *changes.snapshot.jobs, *changes.snapshot.nodes,
                            [&](const std::string& node) { return index->nodeset_of(node); });
          }
          listener(key, touched.everything ? nullptr : &touched);
        });
    feed->subscribe_health([listener, key, metrics, ns, name](const slurm::FeedHealth& health) {
      if (metrics != nullptr) {
        metrics->up(ns, name, health.synced && health.consecutive_failures == 0);
      }
      listener(key, nullptr);
    });
    feed->start();
  }
  entry = {url, key_name, std::move(client), std::move(feed)};
  log::info("slurm.connected", {{"controller", key}, {"url", url}});
  auto made = entry.client;
  const ChangeListener listener = listener_;
  lock.unlock();
  if (listener) {
    listener(key, nullptr);  // its reach changed: NotYetRead
  }
  return made;
}

void SlurmClients::disconnect(const std::string& key, const std::string& reason,
                              const std::string& message) {
  std::unique_lock lock(mu_);
  const std::pair<std::string, std::string> why{reason, message};
  const auto was = absent_.find(key);
  const bool news = clients_.count(key) != 0 || was == absent_.end() || was->second != why;
  absent_[key] = why;
  if (const auto it = clients_.find(key); it != clients_.end()) {
    log::info("slurm.disconnected", {{"controller", key}, {"reason", reason}});
    stop_feed(it->second);
    clients_.erase(it);
    if (metrics_ != nullptr) {
      const kube::Request controller = kube::Request::from_key(key);
      metrics_->forget(controller.namespace_name, controller.name);
    }
  }
  const ChangeListener listener = listener_;
  lock.unlock();
  if (news && listener) {
    listener(key, nullptr);
  }
}

void SlurmClients::erase(const std::string& key) {
  disconnect(key, "", "");
  std::lock_guard lock(mu_);
  absent_.erase(key);
}

void SlurmClients::release_all() {
  std::lock_guard lock(mu_);
  for (auto& [key, entry] : clients_) {
    stop_feed(entry);
    if (metrics_ != nullptr) {
      const kube::Request controller = kube::Request::from_key(key);
      metrics_->forget(controller.namespace_name, controller.name);
    }
  }
  if (!clients_.empty()) {
    log::info("slurm.released", {{"connections", std::to_string(clients_.size())}});
  }
  clients_.clear();
  absent_.clear();
}

void SlurmClients::stop() {
  std::lock_guard lock(mu_);
  for (auto& [key, entry] : clients_) {
    stop_feed(entry);
  }
}

}  // namespace tightrope::op
