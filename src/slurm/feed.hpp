// The Slurm change feed: polls slurmrestd about once a second for node (and job) changes, keeps
// the latest lists as one immutable snapshot and tells subscribers what was added, changed or
// removed. Cheap when nothing changes: each poll is one `GET /nodes?update_time=T`, which
// slurmctld answers with 304 and no body unless a node changed at or after second T. Nodes and
// jobs of one poll are published together: a reader never sees a node ALLOCATED without the job
// that the same poll read. Knows nothing of Kubernetes; subscribers decide what a change means.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
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

struct JobEvent {
  using Type = NodeEvent::Type;
  Type type = Type::kChanged;
  Job job;
  std::optional<Job> previous;
};

const char* to_string(NodeEvent::Type type);

// Differences between two snapshots, in name order.
std::vector<NodeEvent> diff_nodes(const std::map<std::string, Node>& before,
                                  const std::map<std::string, Node>& after);
std::vector<JobEvent> diff_jobs(const std::map<int64_t, Job>& before,
                                const std::map<int64_t, Job>& after);

struct FeedOptions {
  std::chrono::milliseconds period{1000};
  // Also follow nodes created but not yet registered (state FUTURE).
  bool include_future = true;
  // How far slurmctld's clock may be behind ours, for an answer without its time (UpdateCursor).
  std::chrono::milliseconds clock_allowance{500};
  // After failures, polls slow down exponentially up to this period.
  std::chrono::milliseconds max_backoff{30000};
  // Also follow jobs: a second request per period (GET /jobs?update_time=T, answered with an
  // empty list when nothing changed). Jobs leave the list, and the feed, MinJobAge after they end.
  bool follow_jobs = false;
  // 0: jobs are read in every poll. Otherwise a feed at rest reads them only this often: a job
  // that starts or ends changes its nodes, and every poll that reads a node change reads the jobs
  // too, so what waits is only what touches no node (a job submitted, held, re-prioritised).
  // Jobs are read in every poll again for `busy_for` after a change, and after poll_soon.
  std::chrono::milliseconds jobs_at_rest{0};
  std::chrono::milliseconds busy_for{10000};
  // While a live hint source (ChangeFeed::hints_live) tells of Slurm's changes as they happen,
  // a feed that saw no change for busy_for polls only this often: the hints bring the polls
  // that matter. 0: always `period`.
  std::chrono::milliseconds hinted_period{0};
  // A hint's poll starts this long after the hint, and no sooner than `period` after the
  // previous poll started: a burst of hints is one poll a period, as without hints.
  std::chrono::milliseconds hint_delay{20};
};

// The pause after a poll, hints considered (FeedOptions::hinted_period): `period` unless hints
// are live, Slurm is `settled` and the last change seen (nullopt: none yet) is busy_for or more
// ago.
std::chrono::milliseconds feed_period(const FeedOptions& options, bool hints_live, bool settled,
                                      std::chrono::steady_clock::time_point now,
                                      std::optional<std::chrono::steady_clock::time_point> changed);

// When the poll a hint at `now` asks for starts, the previous poll having started at `started`
// (nullopt: none yet).
std::chrono::steady_clock::time_point hinted_poll_at(
    const FeedOptions& options, std::chrono::steady_clock::time_point now,
    std::optional<std::chrono::steady_clock::time_point> started);

// When the feed reads the job list (FeedOptions::jobs_at_rest): pure, so that tests give it
// the time.
class JobPace {
 public:
  using Clock = std::chrono::steady_clock;
  JobPace(std::chrono::milliseconds at_rest, std::chrono::milliseconds busy_for)
      : at_rest_(at_rest), busy_for_(busy_for) {}
  // After the node list was read: `nodes_changed` when it came back (not "nothing changed"),
  // `asked` when a caller wants Slurm's answer soon (poll_soon).
  bool due(Clock::time_point now, bool nodes_changed, bool asked) const;
  // A read of the jobs (`changed`: a list came back with a change in it).
  void read(Clock::time_point now, bool changed);
  // Something changed (nodes or jobs): busy until `busy_for` from now.
  void changed(Clock::time_point now) { busy_until_ = now + busy_for_; }

 private:
  std::chrono::milliseconds at_rest_;
  std::chrono::milliseconds busy_for_;
  std::optional<Clock::time_point> last_read_;
  Clock::time_point busy_until_{};
};

// When the poll after one that ran from `started` to `finished` begins: a period after the start,
// and, when the poll took long (a large cluster's full list, a busy slurmrestd), no sooner than
// as long again after its end, so that the feed never keeps slurmrestd busy more than half its
// time. At 10,000 nodes a changed list is 27 MB and took slurmrestd 2.5 s at rest.
std::chrono::steady_clock::time_point next_poll_at(std::chrono::steady_clock::time_point started,
                                                   std::chrono::steady_clock::time_point finished,
                                                   std::chrono::milliseconds period);

// How long a list read may take, given how long the last list took: four times as long (a busy
// slurmrestd writes it slower), at most two minutes. The client's own timeout applies when it is
// longer. A feed with a fixed 5 s timeout at 10,000 nodes (27 MB, 2.5 s at rest) failed each
// read while slurmrestd was busy, read the whole list again, and saw no change for minutes.
std::chrono::milliseconds list_timeout(std::chrono::milliseconds last_list);

struct FeedHealth {
  bool synced = false;  // a full list has been read since the last failure
  int consecutive_failures = 0;
  std::optional<Error> last_error;
};

// Where a conditional list (nodes or jobs) resumes: the `update_time` to ask with next.
// slurmctld answers "nothing changed" when no change happened at or after that second, and a
// list carries `last_update`: the second of the answer on slurmctld's own clock (measured on
// 26.05: not the second of the last change). Resuming from that second loses nothing and needs
// no allowance for skew between clocks; what comes back again is only a change made in the same
// second as the answer, so a change is listed at most twice. "Nothing changed" keeps the cursor
// where it was. An answer without a time (none seen) falls back to our clock: the second in which
// the read started, less the clock allowance.
class UpdateCursor {
 public:
  explicit UpdateCursor(std::chrono::milliseconds allowance) : allowance_(allowance) {}
  // nullopt: ask for everything.
  std::optional<Time> since() const { return since_; }
  // After a successful read that started at `read_started`: `listed` when a list came back,
  // with slurmctld's `answered` time when it gave one.
  void read(Time read_started, bool listed, std::optional<Time> answered) {
    if (listed && answered) {
      since_ = std::chrono::floor<std::chrono::seconds>(*answered);
    } else if (listed || !since_) {
      since_ = std::chrono::floor<std::chrono::seconds>(read_started - allowance_);
    }
  }

 private:
  std::chrono::milliseconds allowance_;
  std::optional<Time> since_;
};

// Slurm as one poll read it. Never changed once published: readers share it without copying,
// and the feed swaps in a new one.
struct SlurmSnapshot {
  std::shared_ptr<const std::map<std::string, Node>> nodes;
  std::shared_ptr<const std::map<int64_t, Job>> jobs;  // empty without FeedOptions::follow_jobs
};

// Whether nothing in Slurm may change on its own without a line in slurmctld's log: no job
// waiting or starting (the backfill scheduler starts jobs without one), no node powering up or
// down, rebooting or completing a job. Only then may hints stand in for polling.
bool settled(const SlurmSnapshot& snapshot);

struct PollOutcome {
  bool listed = false;  // a list came back (false: 304, nothing changed)
  bool resync = false;  // it was an unconditional full list
  size_t events = 0;
};

class ChangeFeed {
 public:
  using Subscriber = std::function<void(const std::vector<NodeEvent>&)>;
  using HealthSubscriber = std::function<void(const FeedHealth&)>;
  // One poll's changes, nodes and jobs together, with the snapshot they lead to.
  struct Changes {
    const std::vector<NodeEvent>& nodes;
    const std::vector<JobEvent>& jobs;
    const SlurmSnapshot& snapshot;
  };
  using ChangeSubscriber = std::function<void(const Changes&)>;

  ChangeFeed(Client& client, FeedOptions options = {});
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // Subscribers run on the feed's thread: they should only note or enqueue. Node and job
  // subscribers of one poll run after its snapshot is published.
  void subscribe(Subscriber subscriber);
  // Called when health changes (synced, or the first failure after success, or recovery).
  void subscribe_health(HealthSubscriber subscriber);
  // Once per poll that changed anything: what a consumer of nodes and jobs should act on at once
  // (jobs need FeedOptions::follow_jobs).
  void subscribe_changes(ChangeSubscriber subscriber);

  // One poll. The thread calls it; tests and benchmarks may call it directly instead.
  Result<PollOutcome> poll_once();
  // The next poll lists everything unconditionally (after a slurmctld restart, say).
  void force_resync();
  // The next poll comes within `delay` rather than at the end of the period: a caller that just
  // changed something (submitted a job) learns Slurm's answer sooner. Calls before that poll
  // are one poll; the period goes on from it.
  void poll_soon(std::chrono::milliseconds delay);
  // Slurm may have changed (a line of slurmctld's log): a poll within hint_delay, at most one
  // a period.
  void hint();
  // Whether a hint source follows Slurm now. Live, the feed may poll only each hinted_period
  // at rest; no longer live, it polls at once (a hint may have been lost) and each period again.
  void hints_live(bool live);
  bool hints_live() const { return hints_live_.load(); }
  uint64_t hints() const { return hints_.load(); }

  void start();
  void stop();  // returns after the thread has ended; idempotent

  // Never null maps: empty ones until the first poll.
  SlurmSnapshot snapshot() const;
  FeedHealth health() const;
  uint64_t requests() const { return requests_.load(); }

 private:
  void run();
  void publish_health(const FeedHealth& health);
  // Records a failed poll (health, resync next time) and returns the error.
  const Error& failed(const Error& error);

  Client& client_;
  FeedOptions options_;
  mutable std::mutex mu_;
  std::vector<Subscriber> subscribers_;
  std::vector<HealthSubscriber> health_subscribers_;
  std::vector<ChangeSubscriber> change_subscribers_;
  SlurmSnapshot snapshot_;
  UpdateCursor node_cursor_;
  UpdateCursor job_cursor_;
  bool resync_ = true;
  FeedHealth health_;
  std::atomic<uint64_t> requests_{0};
  JobPace job_pace_;                             // under mu_
  std::chrono::milliseconds node_list_took_{0};  // the last node list that came back; under mu_
  std::chrono::milliseconds job_list_took_{0};   // the same of jobs
  std::atomic<bool> asked_{false};               // poll_soon since the last poll
  std::atomic<bool> hints_live_{false};
  std::atomic<uint64_t> hints_{0};
  // The last node or job change a poll read: the feed is busy for busy_for after it.
  std::optional<std::chrono::steady_clock::time_point> changed_at_;  // under mu_

  std::mutex run_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<std::chrono::steady_clock::time_point> soon_;     // under run_mu_
  std::optional<std::chrono::steady_clock::time_point> started_;  // the last poll's; run_mu_
  std::thread thread_;
};

}  // namespace tightrope::slurm
