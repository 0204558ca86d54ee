// The Slurm change feed: polls slurmrestd about once a second for node changes and tells
// subscribers what was added, changed or removed. Cheap when nothing changes: each poll is one
// `GET /nodes?update_time=T`, which slurmctld answers with 304 and no body unless a node changed
// at or after second T. Knows nothing of Kubernetes; subscribers decide what a change means.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "slurm/client.hpp"

namespace tightrope::slurm {

struct NodeEvent {
  enum class Type { kAdded, kChanged, kRemoved };
  Type type = Type::kChanged;
  Node node;                     // the node now (for kRemoved: as last seen)
  std::optional<Node> previous;  // for kChanged: as last seen
};

const char* to_string(NodeEvent::Type type);

// Differences between two snapshots, in name order.
std::vector<NodeEvent> diff_nodes(const std::map<std::string, Node>& before,
                                  const std::map<std::string, Node>& after);

struct FeedOptions {
  std::chrono::milliseconds period{1000};
  // Also follow nodes created but not yet registered (state FUTURE).
  bool include_future = true;
  // Slurm's update times have a resolution of one second and come from slurmctld's clock; a
  // list read less than this long after its last_update is read once more, so that a change
  // in the same second is not missed.
  std::chrono::milliseconds clock_allowance{500};
  // After failures, polls slow down exponentially up to this period.
  std::chrono::milliseconds max_backoff{30000};
};

struct FeedHealth {
  bool synced = false;  // a full list has been read since the last failure
  int consecutive_failures = 0;
  std::optional<Error> last_error;
};

struct PollOutcome {
  bool listed = false;  // a list came back (false: 304, nothing changed)
  bool resync = false;  // it was an unconditional full list
  size_t events = 0;
};

class ChangeFeed {
 public:
  using Subscriber = std::function<void(const std::vector<NodeEvent>&)>;
  using HealthSubscriber = std::function<void(const FeedHealth&)>;

  ChangeFeed(Client& client, FeedOptions options = {});
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // Subscribers run on the feed's thread: they should only note or enqueue.
  void subscribe(Subscriber subscriber);
  // Called when health changes (synced, or the first failure after success, or recovery).
  void subscribe_health(HealthSubscriber subscriber);

  // One poll. The thread calls it; tests and benchmarks may call it directly instead.
  Result<PollOutcome> poll_once();
  // The next poll lists everything unconditionally (after a slurmctld restart, say).
  void force_resync();

  void start();
  void stop();  // returns after the thread has ended; idempotent

  std::map<std::string, Node> snapshot() const;
  FeedHealth health() const;
  uint64_t requests() const { return requests_.load(); }

 private:
  void run();
  void publish_health(const FeedHealth& health);

  Client& client_;
  FeedOptions options_;
  mutable std::mutex mu_;
  std::vector<Subscriber> subscribers_;
  std::vector<HealthSubscriber> health_subscribers_;
  std::map<std::string, Node> nodes_;
  std::optional<Time> last_update_;  // of the last list read
  bool confirm_ = false;             // read the list at last_update_ once more
  bool resync_ = true;
  FeedHealth health_;
  std::atomic<uint64_t> requests_{0};

  std::mutex run_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tightrope::slurm
