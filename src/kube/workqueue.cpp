#include "kube/workqueue.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "base/metrics.hpp"

namespace tightrope::kube {

namespace {

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  TimePoint deadline) const override {
    cv.wait_until(lock, deadline);
  }
  void subscribe(const void* /*subscriber*/, std::function<void()> /*wake*/) override {}
  void unsubscribe(const void* /*subscriber*/) override {}
};

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Clock& real_clock() {
  static SteadyClock clock;
  return clock;
}

Clock::TimePoint FakeClock::now() const {
  return TimePoint(
      std::chrono::duration_cast<TimePoint::duration>(std::chrono::nanoseconds(now_ns_.load())));
}

void FakeClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                           TimePoint deadline) const {
  if (now() >= deadline) {
    return;
  }
  // No timeout: only advance() moves this clock, and it wakes the subscribers, whose mutex it
  // takes first, so the wake cannot fall between the caller's look at the time and this wait.
  ++waiters_;
  cv.wait(lock);
  --waiters_;
}

void FakeClock::subscribe(const void* subscriber, std::function<void()> wake) {
  std::lock_guard lock(mu_);
  subscribers_.emplace_back(subscriber, std::move(wake));
}

void FakeClock::unsubscribe(const void* subscriber) {
  std::lock_guard lock(mu_);
  std::erase_if(subscribers_, [subscriber](const auto& s) { return s.first == subscriber; });
}

void FakeClock::advance(std::chrono::nanoseconds by) {
  // Held while waking, so that unsubscribe (and the subscriber's end) waits for a wake under way.
  std::lock_guard lock(mu_);
  now_ns_ += by.count();
  for (const auto& [subscriber, wake] : subscribers_) {
    wake();
  }
}

ItemBackoff::ItemBackoff(std::chrono::nanoseconds base, std::chrono::nanoseconds cap)
    : base_(base), cap_(cap) {
  if (base < std::chrono::nanoseconds::zero() || cap < base) {
    throw std::invalid_argument("item backoff: need 0 <= base delay <= max delay");
  }
}

std::chrono::nanoseconds ItemBackoff::next(const std::string& key) {
  int& failures = failures_[key];
  // In floating point so that a long run of failures saturates at the cap instead of overflowing;
  // the exponent stops short of infinity, which a zero base would turn into NaN.
  const double delay =
      static_cast<double>(base_.count()) * std::ldexp(1.0, std::min(failures, 1000));
  if (failures < std::numeric_limits<int>::max()) {
    ++failures;
  }
  if (!(delay < static_cast<double>(cap_.count()))) {
    return cap_;
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(delay));
}

int ItemBackoff::failures(const std::string& key) const {
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucket::TokenBucket(double per_second, int burst)
    : per_second_(per_second), burst_(burst), tokens_(burst) {
  if (!(per_second > 0) || burst < 1) {
    throw std::invalid_argument("token bucket: need per_second > 0 and burst >= 1");
  }
}

std::chrono::nanoseconds TokenBucket::reserve(Clock::TimePoint now) {
  // A clock that went backwards refills nothing and keeps the later mark.
  if (last_ && now > *last_) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - *last_);
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(elapsed.count()) * per_second_ / 1e9);
  }
  if (!last_ || now > *last_) {
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) {
    return std::chrono::nanoseconds::zero();
  }
  // Rounded up: a caller woken on time must find its token there.
  return std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(-tokens_ * 1e9 / per_second_)));
}

struct WorkQueue::State {
  struct Delayed {
    Clock::TimePoint at;
    uint64_t seq = 0;  // equal times come out in the order they went in
    std::string key;
  };
  // A min-heap through std::push_heap, which keeps the largest first.
  static bool later(const Delayed& a, const Delayed& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }

  explicit State(const WorkQueueOptions& options)
      : clock(options.clock != nullptr ? *options.clock : real_clock()),
        backoff(options.base_delay, options.max_delay),
        bucket(options.per_second, options.burst) {}

  // All below with `mu` held.
  void add(const std::string& key);
  void add_at(const std::string& key, Clock::TimePoint at);
  void promote_due();
  void update_depth() const {
    if (depth != nullptr) {
      depth->set(static_cast<double>(queue.size()));
    }
  }

  Clock& clock;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool shutting_down = false;
  bool paused = false;

  std::deque<std::string> queue;
  std::set<std::string> dirty;       // queued, or processing and to be queued at done
  std::set<std::string> processing;  // between get and done
  std::vector<Delayed> delayed;      // heap; entries that no longer match `waiting` are stale
  std::unordered_map<std::string, Clock::TimePoint> waiting;  // key -> earliest time
  uint64_t next_seq = 0;

  ItemBackoff backoff;
  TokenBucket bucket;

  std::unordered_map<std::string, Clock::TimePoint> added_at;
  std::unordered_map<std::string, Clock::TimePoint> started_at;
  metrics::Gauge* depth = nullptr;
  metrics::Counter* adds = nullptr;
  metrics::Counter* retries = nullptr;
  metrics::Histogram* queue_duration = nullptr;
  metrics::Histogram* work_duration = nullptr;
};

void WorkQueue::State::add(const std::string& key) {
  if (shutting_down || !dirty.insert(key).second) {
    return;
  }
  if (adds != nullptr) {
    adds->inc();
  }
  added_at.try_emplace(key, clock.now());
  if (processing.contains(key)) {
    return;
  }
  queue.push_back(key);
  update_depth();
  cv.notify_one();
}

void WorkQueue::State::add_at(const std::string& key, Clock::TimePoint at) {
  if (shutting_down) {
    return;
  }
  if (at <= clock.now()) {
    add(key);
    return;
  }
  const auto [it, inserted] = waiting.try_emplace(key, at);
  if (!inserted) {
    if (at >= it->second) {
      return;
    }
    it->second = at;  // the older heap entry is stale now
  }
  const bool earliest = delayed.empty() || at < delayed.front().at;
  delayed.push_back({at, next_seq++, key});
  std::push_heap(delayed.begin(), delayed.end(), later);
  // Getters wait for the earliest time they know; a new earliest one must be seen.
  if (earliest) {
    cv.notify_all();
  }
}

void WorkQueue::State::promote_due() {
  const Clock::TimePoint now = clock.now();
  while (!delayed.empty() && delayed.front().at <= now) {
    std::pop_heap(delayed.begin(), delayed.end(), later);
    Delayed entry = std::move(delayed.back());
    delayed.pop_back();
    const auto it = waiting.find(entry.key);
    if (it == waiting.end() || it->second != entry.at) {
      continue;
    }
    waiting.erase(it);
    add(entry.key);
  }
}

WorkQueue::WorkQueue(WorkQueueOptions options) : state_(std::make_unique<State>(options)) {
  if (options.metrics != nullptr) {
    metrics::Registry& registry = *options.metrics;
    const metrics::Labels labels = {{"name", options.name}};
    // 10 ns to 10 s, a bucket per factor of ten.
    const std::vector<double> buckets = metrics::exponential_buckets(1e-8, 10, 10);
    const auto counter = [&](const char* name, const char* help) {
      return &registry.counter(name, help, {"name"}).with(labels);
    };
    const auto histogram = [&](const char* name, const char* help) {
      return &registry.histogram(name, help, {"name"}, buckets).with(labels);
    };
    state_->depth =
        &registry.gauge("workqueue_depth", "Keys ready in the work queue.", {"name"}).with(labels);
    state_->adds = counter("workqueue_adds_total", "Keys added to the work queue.");
    state_->retries =
        counter("workqueue_retries_total", "Keys added again after a failure, with backoff.");
    state_->queue_duration =
        histogram("workqueue_queue_duration_seconds",
                  "Seconds a key waits in the work queue before a worker takes it.");
    state_->work_duration =
        histogram("workqueue_work_duration_seconds", "Seconds a worker spends on a key.");
  }
  State* state = state_.get();
  state->clock.subscribe(this, [state] {
    std::lock_guard lock(state->mu);
    state->cv.notify_all();
  });
}

WorkQueue::~WorkQueue() {
  state_->clock.unsubscribe(this);
  shut_down();
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(state_->mu);
  state_->add(key);
}

void WorkQueue::add_after(const std::string& key, std::chrono::nanoseconds delay) {
  std::lock_guard lock(state_->mu);
  state_->add_at(key, state_->clock.now() + delay);
}

void WorkQueue::add_rate_limited(const std::string& key) {
  std::lock_guard lock(state_->mu);
  if (state_->shutting_down) {
    return;
  }
  if (state_->retries != nullptr) {
    state_->retries->inc();
  }
  const Clock::TimePoint now = state_->clock.now();
  const auto delay = std::max(state_->backoff.next(key), state_->bucket.reserve(now));
  state_->add_at(key, now + delay);
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(state_->mu);
  state_->backoff.forget(key);
}

int WorkQueue::failures(const std::string& key) const {
  std::lock_guard lock(state_->mu);
  return state_->backoff.failures(key);
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(state_->mu);
  State& s = *state_;
  for (;;) {
    if (s.shutting_down || s.paused) {
      return std::nullopt;
    }
    s.promote_due();
    if (!s.queue.empty()) {
      break;
    }
    if (s.delayed.empty()) {
      s.cv.wait(lock);
    } else {
      s.clock.wait_until(s.cv, lock, s.delayed.front().at);
    }
  }
  std::string key = std::move(s.queue.front());
  s.queue.pop_front();
  s.update_depth();
  s.dirty.erase(key);
  s.processing.insert(key);
  const Clock::TimePoint now = s.clock.now();
  if (const auto it = s.added_at.find(key); it != s.added_at.end()) {
    if (s.queue_duration != nullptr) {
      s.queue_duration->observe(seconds(now - it->second));
    }
    s.added_at.erase(it);
  }
  s.started_at[key] = now;
  return key;
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(state_->mu);
  State& s = *state_;
  if (s.processing.erase(key) == 0) {
    return;
  }
  if (const auto it = s.started_at.find(key); it != s.started_at.end()) {
    if (s.work_duration != nullptr) {
      s.work_duration->observe(seconds(s.clock.now() - it->second));
    }
    s.started_at.erase(it);
  }
  if (s.dirty.contains(key)) {
    s.queue.push_back(key);
    s.update_depth();
    s.cv.notify_one();
  }
}

void WorkQueue::pause() {
  std::lock_guard lock(state_->mu);
  state_->paused = true;
  state_->cv.notify_all();
}

void WorkQueue::resume() {
  std::lock_guard lock(state_->mu);
  state_->paused = false;
}

void WorkQueue::shut_down() {
  std::lock_guard lock(state_->mu);
  state_->shutting_down = true;
  state_->delayed.clear();
  state_->waiting.clear();
  state_->cv.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(state_->mu);
  return state_->shutting_down;
}

size_t WorkQueue::len() {
  std::lock_guard lock(state_->mu);
  state_->promote_due();
  return state_->queue.size();
}

}  // namespace tightrope::kube
