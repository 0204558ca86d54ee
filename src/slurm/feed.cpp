#include "slurm/feed.hpp"

#include <algorithm>
#include <type_traits>

#include "base/memory.hpp"

namespace tightrope::slurm {

const char* to_string(NodeEvent::Type type) {
  switch (type) {
    case NodeEvent::Type::kAdded:
      return "added";
    case NodeEvent::Type::kChanged:
      return "changed";
    case NodeEvent::Type::kRemoved:
      return "removed";
  }
  return "unknown";
}

namespace {

// Both maps are ordered by key: one merge pass, events in key order.
template <typename Event, typename Key, typename Value>
std::vector<Event> diff_maps(const std::map<Key, Value>& before,
                             const std::map<Key, Value>& after) {
  std::vector<Event> events;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      events.push_back({NodeEvent::Type::kRemoved, b->second, std::nullopt});
      ++b;
    } else if (b == before.end() || a->first < b->first) {
      events.push_back({NodeEvent::Type::kAdded, a->second, std::nullopt});
      ++a;
    } else {
      if (!(a->second == b->second)) {
        events.push_back({NodeEvent::Type::kChanged, a->second, b->second});
      }
      ++a;
      ++b;
    }
  }
  return events;
}

// A list as a map by `key_of`, to be shared read-only.
template <typename Value, typename KeyOf>
auto keyed(std::vector<Value> list, KeyOf key_of) {
  using Key = std::invoke_result_t<KeyOf, const Value&>;
  auto out = std::make_shared<std::map<Key, Value>>();
  for (auto& item : list) {
    Key key = key_of(item);
    out->emplace(std::move(key), std::move(item));
  }
  return std::shared_ptr<const std::map<Key, Value>>(std::move(out));
}

std::chrono::milliseconds took(Time from, Time to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from);
}

}  // namespace

std::vector<NodeEvent> diff_nodes(const std::map<std::string, Node>& before,
                                  const std::map<std::string, Node>& after) {
  return diff_maps<NodeEvent>(before, after);
}

std::vector<JobEvent> diff_jobs(const std::map<int64_t, Job>& before,
                                const std::map<int64_t, Job>& after) {
  return diff_maps<JobEvent>(before, after);
}

bool JobPace::due(Clock::time_point now, bool nodes_changed, bool asked) const {
  if (at_rest_.count() == 0 || nodes_changed || asked || !last_read_ || now < busy_until_) {
    return true;
  }
  return now - *last_read_ >= at_rest_;
}

void JobPace::read(Clock::time_point now, bool changed) {
  last_read_ = now;
  if (changed) {
    busy_until_ = now + busy_for_;
  }
}

std::chrono::steady_clock::time_point next_poll_at(std::chrono::steady_clock::time_point started,
                                                   std::chrono::steady_clock::time_point finished,
                                                   std::chrono::milliseconds period) {
  return std::max(started + period, finished + (finished - started));
}

bool settled(const SlurmSnapshot& snapshot) {
  if (snapshot.jobs) {
    for (const auto& [id, job] : *snapshot.jobs) {
      if (job.has("PENDING") || job.has("CONFIGURING") || job.has("REQUEUED") ||
          job.has("RESIZING") || job.has("SIGNALING") || job.has("STAGE_OUT")) {
        return false;
      }
    }
  }
  if (snapshot.nodes) {
    for (const auto& [name, node] : *snapshot.nodes) {
      for (const char* moving : {"POWERING_UP", "POWERING_DOWN", "POWER_DOWN", "COMPLETING",
                                 "REBOOT_REQUESTED", "REBOOT_ISSUED"}) {
        if (node.has(moving)) {
          return false;
        }
      }
    }
  }
  return true;
}

std::chrono::milliseconds feed_period(
    const FeedOptions& options, bool hints_live, bool settled,
    std::chrono::steady_clock::time_point now,
    std::optional<std::chrono::steady_clock::time_point> changed) {
  if (!hints_live || !settled || options.hinted_period <= options.period ||
      (changed && now < *changed + options.busy_for)) {
    return options.period;
  }
  return options.hinted_period;
}

std::chrono::steady_clock::time_point hinted_poll_at(
    const FeedOptions& options, std::chrono::steady_clock::time_point now,
    std::optional<std::chrono::steady_clock::time_point> started) {
  const auto soon = now + options.hint_delay;
  return started ? std::max(soon, *started + options.period) : soon;
}

std::chrono::milliseconds list_timeout(std::chrono::milliseconds last_list) {
  return std::min(last_list * 4, std::chrono::milliseconds(120000));
}

ChangeFeed::ChangeFeed(Client& client, FeedOptions options)
    : client_(client),
      options_(options),
      snapshot_{std::make_shared<const std::map<std::string, Node>>(),
                std::make_shared<const std::map<int64_t, Job>>()},
      node_cursor_(options.clock_allowance),
      job_cursor_(options.clock_allowance),
      job_pace_(options.jobs_at_rest, options.busy_for) {}

ChangeFeed::~ChangeFeed() {
  stop();
}

void ChangeFeed::subscribe(Subscriber subscriber) {
  std::lock_guard lock(mu_);
  subscribers_.push_back(std::move(subscriber));
}

void ChangeFeed::subscribe_health(HealthSubscriber subscriber) {
  std::lock_guard lock(mu_);
  health_subscribers_.push_back(std::move(subscriber));
}

void ChangeFeed::subscribe_changes(ChangeSubscriber subscriber) {
  std::lock_guard lock(mu_);
  change_subscribers_.push_back(std::move(subscriber));
}

void ChangeFeed::force_resync() {
  std::lock_guard lock(mu_);
  resync_ = true;
}

SlurmSnapshot ChangeFeed::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

FeedHealth ChangeFeed::health() const {
  std::lock_guard lock(mu_);
  return health_;
}

void ChangeFeed::publish_health(const FeedHealth& health) {
  std::vector<HealthSubscriber> subscribers;
  {
    std::lock_guard lock(mu_);
    const bool changed = health.synced != health_.synced ||
                         (health.consecutive_failures > 0) != (health_.consecutive_failures > 0);
    health_ = health;
    if (!changed) {
      return;
    }
    subscribers = health_subscribers_;
  }
  for (const auto& s : subscribers) {
    s(health);
  }
}

const Error& ChangeFeed::failed(const Error& error) {
  FeedHealth h = health();
  h.synced = false;
  ++h.consecutive_failures;
  h.last_error = error;
  {
    // Whatever happened meanwhile (a slurmctld restart, nodes deleted) is read in full.
    std::lock_guard lock(mu_);
    resync_ = true;
  }
  publish_health(h);
  return error;
}

Result<PollOutcome> ChangeFeed::poll_once() {
  NodeQuery query;
  query.include_future = options_.include_future;
  bool resync = false;
  std::optional<Time> jobs_since;
  std::chrono::milliseconds jobs_timeout{0};
  {
    std::lock_guard lock(mu_);
    // Nothing changed at or after second T: 304 (UpdateCursor says which T).
    query.changed_since = node_cursor_.since();
    query.timeout = list_timeout(node_list_took_);
    jobs_timeout = list_timeout(job_list_took_);
    resync = resync_ || !query.changed_since;
    if (resync) {
      query.changed_since.reset();
    } else {
      jobs_since = job_cursor_.since();
    }
  }
  // Both lists are read before either is published, so that one snapshot holds a node's state
  // and the jobs that explain it; nothing is kept of a poll that fails half-way.
  const auto nodes_read = Time::clock::now();
  ++requests_;
  auto node_answer = client_.list_nodes(query);
  if (!node_answer) {
    return fail(failed(node_answer.error()));
  }
  std::optional<Result<Conditional<JobList>>> job_answer;
  const auto jobs_read = Time::clock::now();
  const auto paced_at = JobPace::Clock::now();
  bool read_jobs = false;
  if (options_.follow_jobs) {
    // A node change is always read with its jobs: one snapshot holds both.
    std::lock_guard lock(mu_);
    read_jobs = resync || job_pace_.due(paced_at, node_answer->changed, asked_.exchange(false));
  }
  if (read_jobs) {
    ++requests_;
    job_answer = client_.list_jobs(jobs_since, jobs_timeout);
    if (!*job_answer) {
      return fail(failed(job_answer->error()));
    }
  }

  const auto jobs_done = Time::clock::now();
  PollOutcome outcome;
  outcome.resync = resync;
  outcome.listed = node_answer->changed;
  std::vector<NodeEvent> node_events;
  std::vector<JobEvent> job_events;
  std::vector<Subscriber> subscribers;
  std::vector<ChangeSubscriber> change_subscribers;
  SlurmSnapshot published;
  std::shared_ptr<const std::map<std::string, Node>> nodes;
  std::shared_ptr<const std::map<int64_t, Job>> jobs;
  if (node_answer->changed) {
    nodes = keyed(std::move(node_answer->list.nodes), [](const Node& n) { return n.name; });
  }
  if (job_answer && (*job_answer)->changed) {
    jobs = keyed(std::move((*job_answer)->list.jobs), [](const Job& j) { return j.id; });
  }
  {
    std::lock_guard lock(mu_);
    if (nodes) {
      node_events = diff_nodes(*snapshot_.nodes, *nodes);
      snapshot_.nodes = std::move(nodes);
      resync_ = false;
    }
    if (jobs) {
      job_events = diff_jobs(*snapshot_.jobs, *jobs);
      snapshot_.jobs = std::move(jobs);
    }
    node_cursor_.read(nodes_read, outcome.listed, node_answer->list.last_update);
    if (outcome.listed) {
      node_list_took_ = took(nodes_read, jobs_read);
    }
    if (job_answer && (*job_answer)->changed) {
      job_list_took_ = took(jobs_read, jobs_done);
    }
    if (read_jobs) {
      job_cursor_.read(jobs_read, (*job_answer)->changed, (*job_answer)->list.last_update);
      job_pace_.read(paced_at, !job_events.empty());
    }
    if (!node_events.empty()) {
      job_pace_.changed(paced_at);
    }
    if (!node_events.empty() || !job_events.empty()) {
      changed_at_ = paced_at;
    }
    subscribers = subscribers_;
    change_subscribers = change_subscribers_;
    published = snapshot_;
  }
  outcome.events = node_events.size() + job_events.size();
  if (!node_events.empty()) {
    for (const auto& s : subscribers) {
      s(node_events);
    }
  }
  if (!node_events.empty() || !job_events.empty()) {
    for (const auto& s : change_subscribers) {
      s(Changes{node_events, job_events, published});
    }
  }
  publish_health(FeedHealth{true, 0, std::nullopt});
  return outcome;
}

void ChangeFeed::start() {
  std::lock_guard lock(run_mu_);
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void ChangeFeed::stop() {
  {
    std::lock_guard lock(run_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

void ChangeFeed::run() {
  auto wait = options_.period;
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(run_mu_);
      started_ = started;
    }
    auto outcome = poll_once();
    if (outcome && outcome->listed) {
      // A node list is 2.7 KB a node, and its parse several times that: freed, but kept by the
      // allocator unless given back.
      return_free_memory();
    }
    if (outcome) {
      std::optional<std::chrono::steady_clock::time_point> changed;
      SlurmSnapshot now;
      {
        std::lock_guard lock(mu_);
        changed = changed_at_;
        now = snapshot_;
      }
      const bool live = hints_live_.load();
      wait = feed_period(options_, live, live && settled(now), std::chrono::steady_clock::now(),
                         changed);
    } else {
      wait = std::min(std::max(wait * 2, options_.period), options_.max_backoff);
    }
    // Polls start one period apart unless a poll took long (next_poll_at) or a caller asks
    // for one sooner.
    const auto finished = std::chrono::steady_clock::now();
    std::unique_lock lock(run_mu_);
    const auto next = outcome ? next_poll_at(started, finished, wait) : finished + wait;
    for (;;) {
      if (stopping_) {
        return;
      }
      const auto until = soon_ && outcome ? std::min(next, *soon_) : next;
      if (std::chrono::steady_clock::now() >= until) {
        break;
      }
      wake_.wait_until(lock, until);
    }
    soon_.reset();
  }
}

void ChangeFeed::hint() {
  ++hints_;
  {
    std::lock_guard lock(run_mu_);
    const auto at = hinted_poll_at(options_, std::chrono::steady_clock::now(), started_);
    if (!soon_ || at < *soon_) {
      soon_ = at;
    }
  }
  wake_.notify_all();
}

void ChangeFeed::hints_live(bool live) {
  if (hints_live_.exchange(live) == live || live) {
    return;
  }
  // The source went quiet for good: what it may have missed is read now.
  poll_soon(std::chrono::milliseconds(0));
}

void ChangeFeed::poll_soon(std::chrono::milliseconds delay) {
  asked_ = true;
  {
    std::lock_guard lock(run_mu_);
    const auto at = std::chrono::steady_clock::now() + delay;
    if (!soon_ || at < *soon_) {
      soon_ = at;
    }
  }
  wake_.notify_all();
}

}  // namespace tightrope::slurm
