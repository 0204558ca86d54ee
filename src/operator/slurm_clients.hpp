// The operator's connection to each cluster's Slurm, one per Controller: a Slurm REST client
// shared by the reconcilers that talk to the cluster, the cluster's Slurm cache (a change feed:
// slurmrestd asked about once a second what changed, nodes and jobs, kept as one immutable
// snapshot), an index of which NodeSet each Slurm node belongs to (one node's change wakes one
// NodeSet), and the one definition of whether Slurm can be asked (reach). Connections are made
// and dropped by the SlurmConnectionReconciler alone, from the Controller and its RestApis; a
// client exists while the Controller has a RestApi to reach and a jwtKeyRef, its JWT minted by
// the operator from that key.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/cluster_metrics.hpp"
#include "slurm/client.hpp"
#include "slurm/feed.hpp"
#include "slurm/token.hpp"

namespace tightrope::op {

// Which NodeSet each Slurm node of one cluster belongs to, by the link the operator writes in the
// node's comment (its nodeSetName), kept from the feed's changes. Used on the feed's thread only.
// Whether a cluster's Slurm can be asked: read by every condition that says so (the
// Controller's and its NodeSets' SlurmReachable) and every decision that needs Slurm's answer.
enum class SlurmHealth {
  kNoClient,     // no connection: no RestApi names the Controller, no jwtKeyRef, not made yet
  kWaiting,      // a new feed that has not answered yet
  kUnreachable,  // the feed fails: slurmrestd away, or the token refused
  kSynced,
};

struct SlurmReach {
  SlurmHealth health = SlurmHealth::kNoClient;
  // SlurmReachable's reason: Responding, NotYetRead, Unreachable, Unauthorized, NoRestApi,
  // NoJwtKey, NotConnected.
  std::string reason;
  std::string message;  // where Slurm answers, or why it cannot be asked
  bool ok() const { return health == SlurmHealth::kSynced; }
};

// The reach of a connection to `url` whose feed is in `health`; without a feed (nullopt), of no
// connection, for the reason and message in `absent` (none recorded: not made yet).
SlurmReach reach_of(const std::optional<slurm::FeedHealth>& health, const std::string& url,
                    const std::optional<std::pair<std::string, std::string>>& absent);

class NodeSetIndex {
 public:
  struct Touched {
    std::set<std::string> nodesets;     // NodeSet names
    std::vector<slurm::Node> unlinked;  // changed nodes with no link yet (just registered)
    bool everything = false;            // a job's node list that does not parse: ask all
  };
  // The NodeSets a poll's changes concern: those of the nodes that changed (before and after a
  // link changed) and of the nodes whose jobs did.
  Touched update(const slurm::ChangeFeed::Changes& changes);
  // The NodeSet a Slurm node belongs to, "" when it names none.
  std::string nodeset_of(const std::string& node) const;

 private:
  std::map<std::string, std::string> nodeset_of_;
};

class SlurmClients {
 public:
  // Told the Controller's key and what a poll's changes concern; null when anything may have
  // changed (the feed's health, a connection made or dropped). Runs on the feed's thread or the
  // connection reconciler's: it should only enqueue.
  using ChangeListener =
      std::function<void(const std::string& controller_key, const NodeSetIndex::Touched* touched)>;

  SlurmClients() = default;
  // Feeds made from now on poll at rest only this often while hints are live (0: never).
  void set_hinted_period(std::chrono::milliseconds period) { hinted_period_ = period; }
  ~SlurmClients();
  SlurmClients(const SlurmClients&) = delete;
  SlurmClients& operator=(const SlurmClients&) = delete;

  // Set before the first ensure(); with none, no feed runs.
  void set_listener(ChangeListener listener);
  // Set before the first ensure(): every client counts its requests there, every feed reports
  // its snapshot and health.
  void use_metrics(ClusterMetrics* metrics) { metrics_ = metrics; }
  ClusterMetrics* metrics() const { return metrics_; }

  // The client of Controller `key` ("namespace/name"), or null when it has none.
  std::shared_ptr<slurm::Client> get(const std::string& key) const;
  // Its change feed, or null.
  std::shared_ptr<slurm::ChangeFeed> feed(const std::string& key) const;
  // Whether Controller `key`'s Slurm can be asked, and why not.
  SlurmReach reach(const std::string& key) const;
  // The client for this URL: kept when it exists for the same URL and key source, else made
  // anew (with its feed). `key_name` names the key's Secret in errors.
  std::shared_ptr<slurm::Client> ensure(const std::string& key, const std::string& url,
                                        slurm::KeyLoader jwt_key, const std::string& key_name);
  // Drops the connection, if any, and records why there is none (reach's reason and message).
  void disconnect(const std::string& key, const std::string& reason, const std::string& message);
  // Drops the connection and what was recorded of it: its Controller is gone.
  void erase(const std::string& key);
  // Stops every feed (before the listener's target goes away).
  void stop();
  // Drops every connection and its series, telling no one: the operator stands by, and the
  // leader alone reads Slurm and reports it (two reporting would count every job twice).
  void release_all();

 private:
  struct Entry {
    std::string url;
    std::string key_name;
    std::shared_ptr<slurm::Client> client;
    std::shared_ptr<slurm::ChangeFeed> feed;
  };
  static void stop_feed(Entry& entry);

  mutable std::mutex mu_;
  ChangeListener listener_;
  ClusterMetrics* metrics_ = nullptr;
  static constexpr std::chrono::milliseconds kFeedPeriod{1000};
  std::chrono::milliseconds hinted_period_{0};
  std::map<std::string, Entry> clients_;
  std::map<std::string, std::pair<std::string, std::string>> absent_;  // key -> (reason, message)
};

}  // namespace tightrope::op
