// A rate-limited work queue of controller keys ("namespace/name"), shaped like client-go's: one
// worker per key at a time, no add lost while a key is being worked on, failed keys retried with
// backoff. Knows nothing of Kubernetes objects or of what a key means.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tightrope::metrics {
class Registry;
}

namespace tightrope::kube {

// Where the queue reads the time, so that tests can move it by hand.
class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Blocks on `cv` (guarded by `lock`) until it is notified or this clock reaches `deadline`.
  // May return early; callers look again.
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline) const = 0;
  // A clock that jumps runs `wake` after each jump so that waiters look at the time again; real
  // time never jumps. `wake` may lock the subscriber's mutex, so the subscriber must not call
  // subscribe or unsubscribe while holding it.
  virtual void subscribe(const void* subscriber, std::function<void()> wake) = 0;
  virtual void unsubscribe(const void* subscriber) = 0;
};

// std::chrono::steady_clock; lives for the whole program.
Clock& real_clock();

// A clock for tests: it stands still until advance() moves it.
class FakeClock final : public Clock {
 public:
  TimePoint now() const override;
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  TimePoint deadline) const override;
  void subscribe(const void* subscriber, std::function<void()> wake) override;
  void unsubscribe(const void* subscriber) override;

  void advance(std::chrono::nanoseconds by);
  // Threads inside wait_until now: a test waits for this before it acts on a blocked thread.
  int waiters() const { return waiters_.load(); }

 private:
  std::atomic<int64_t> now_ns_{0};
  mutable std::atomic<int> waiters_{0};
  std::mutex mu_;
  std::vector<std::pair<const void*, std::function<void()>>> subscribers_;
};

// Per-key exponential backoff: the n-th failure in a row waits base * 2^(n-1), at most `cap`.
// Not thread-safe on its own.
class ItemBackoff {
 public:
  // Throws std::invalid_argument unless 0 <= base <= cap.
  ItemBackoff(std::chrono::nanoseconds base, std::chrono::nanoseconds cap);
  // Counts a failure of `key`; returns how long it should wait.
  std::chrono::nanoseconds next(const std::string& key);
  void forget(const std::string& key) { failures_.erase(key); }
  int failures(const std::string& key) const;

 private:
  std::chrono::nanoseconds base_;
  std::chrono::nanoseconds cap_;
  std::map<std::string, int> failures_;
};

// An overall rate limit: `burst` tokens, refilled at `per_second`; starts full. Not thread-safe
// on its own.
class TokenBucket {
 public:
  // Throws std::invalid_argument unless per_second > 0 and burst >= 1.
  TokenBucket(double per_second, int burst);
  // Takes a token, one that may not be there yet: returns how long until it is (zero: now). Later
  // callers queue behind it, so the rate holds however many ask.
  std::chrono::nanoseconds reserve(Clock::TimePoint now);

 private:
  double per_second_;
  double burst_;
  double tokens_;  // below zero: tokens promised ahead of the refill
  std::optional<Clock::TimePoint> last_;
};

struct WorkQueueOptions {
  std::string name = "default";  // the `name` label on the queue's metrics
  std::chrono::nanoseconds base_delay = std::chrono::milliseconds(5);
  std::chrono::nanoseconds max_delay = std::chrono::seconds(1000);
  double per_second = 10;
  int burst = 100;
  Clock* clock = nullptr;                // nullptr: real_clock(); must outlive the queue
  metrics::Registry* metrics = nullptr;  // nullptr: none; must outlive the queue
};

// Thread-safe. A key is at any time idle, queued (ready for get), processing (between get and
// done) or both processing and dirty (added again meanwhile: it is queued at done, not before),
// and separately may be waiting for a delay. With metrics, the queue registers workqueue_depth,
// workqueue_adds_total, workqueue_queue_duration_seconds, workqueue_work_duration_seconds and
// workqueue_retries_total, labelled name=<options.name>, as client-go does.
class WorkQueue {
 public:
  // Throws std::invalid_argument for options out of range.
  explicit WorkQueue(WorkQueueOptions options = {});
  // Shuts down. Workers must have returned from get() before.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless it is queued already; if it is processing, queues it at done().
  void add(const std::string& key);
  // add() once `delay` has passed. A key waiting twice keeps the earlier time.
  void add_after(const std::string& key, std::chrono::nanoseconds delay);
  // add_after() by the longer of the key's backoff and the overall rate limit; counts a failure.
  void add_rate_limited(const std::string& key);
  // After a success: the key's next failure waits the base delay again. The failure counts of
  // keys never forgotten are kept for good.
  void forget(const std::string& key);
  int failures(const std::string& key) const;

  // Blocks until a key is ready and hands it out, processing; nullopt once shut down.
  std::optional<std::string> get();
  // Ends processing of a key from get(); other keys are ignored.
  void done(const std::string& key);

  // get() returns nullopt until resume(), waiting getters included, while keys are still added,
  // delayed and kept: the workers of a controller that stops leading leave, and those of its
  // next term find what happened meanwhile.
  void pause();
  void resume();

  // get() returns nullopt from now on, waiting getters included; delayed keys are dropped and
  // adds ignored.
  void shut_down();
  bool shutting_down() const;
  // Keys ready for get(), delayed ones whose time has come included.
  size_t len();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tightrope::kube
