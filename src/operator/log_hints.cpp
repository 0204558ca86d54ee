#include "operator/log_hints.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "kube/controller.hpp"

namespace tightrope::op {

namespace {

// A follow is ended after this long and made again: no stream is trusted forever.
constexpr std::chrono::minutes kFollowLimit{10};
constexpr std::chrono::minutes kLastedLongEnough{1};

}  // namespace

std::chrono::milliseconds follow_backoff(int failures_in_a_row) {
  if (failures_in_a_row <= 0) {
    return std::chrono::milliseconds(0);
  }
  const int doublings = std::min(failures_in_a_row - 1, 5);
  return std::min(std::chrono::milliseconds(1000) * (1 << doublings),
                  std::chrono::milliseconds(30000));
}

LogHints::~LogHints() {
  stop_all();
}

void LogHints::follow(const std::string& key, const std::vector<std::string>& pods) {
  Followed gone;
  {
    std::lock_guard lock(mu_);
    auto it = followed_.find(key);
    std::vector<std::string> now;
    if (it != followed_.end()) {
      for (const auto& f : it->second.followers) {
        now.push_back(f->pod);
      }
    }
    if (now == pods) {
      return;
    }
    if (it != followed_.end()) {
      gone = std::move(it->second);
      followed_.erase(it);
    }
    if (!pods.empty()) {
      Followed& fresh = followed_[key];
      for (const auto& pod : pods) {
        auto f = std::make_unique<Follower>();
        f->pod = pod;
        fresh.followers.push_back(std::move(f));
      }
      for (auto& f : fresh.followers) {
        Follower* follower = f.get();
        f->thread = std::thread([this, key, follower] { run(key, *follower); });
      }
      log::info("operator.slurm_log_following",
                {{"controller", key}, {"pods", std::to_string(pods.size())}});
    }
  }
  halt(gone);
  tell_feed(key);
}

void LogHints::stop_all() {
  std::map<std::string, Followed> all;
  {
    std::lock_guard lock(mu_);
    all.swap(followed_);
  }
  for (auto& [key, followed] : all) {
    halt(followed);
    tell_feed(key);
  }
}

bool LogHints::live(const std::string& key) const {
  std::lock_guard lock(mu_);
  return live_locked(key);
}

bool LogHints::live_locked(const std::string& key) const {
  const auto it = followed_.find(key);
  if (it == followed_.end() || it->second.followers.empty()) {
    return false;
  }
  return std::all_of(it->second.followers.begin(), it->second.followers.end(),
                     [](const auto& f) { return f->live.load(); });
}

void LogHints::tell_feed(const std::string& key) {
  bool followed = false;
  bool is_live = false;
  {
    std::lock_guard lock(mu_);
    followed = followed_.count(key) != 0;
    is_live = live_locked(key);
  }
  if (auto feed = slurm_.feed(key)) {
    feed->hints_live(is_live);
  }
  if (metrics_ != nullptr) {
    const kube::Request controller = kube::Request::from_key(key);
    metrics_->hints_live(controller.namespace_name, controller.name,
                         followed ? std::optional<bool>(is_live) : std::nullopt);
  }
}

void LogHints::halt(Followed& followed) {
  for (auto& f : followed.followers) {
    f->stopping = true;
  }
  for (auto& f : followed.followers) {
    if (f->thread.joinable()) {
      f->thread.join();
    }
  }
}

void LogHints::run(const std::string& key, Follower& f) {
  const kube::Request controller = kube::Request::from_key(key);
  int failures = 0;
  const auto pause = [&f](std::chrono::milliseconds how_long) {
    const auto until = std::chrono::steady_clock::now() + how_long;
    while (!f.stopping && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  while (!f.stopping) {
    const auto feed = slurm_.feed(key);
    if (!feed) {
      pause(std::chrono::seconds(1));  // no connection yet: nothing to hint
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    // The last line comes at once: the follow is live from it, and its hint reads what the
    // feed may have missed while it was not.
    auto followed = kube_.follow_log(
        controller.namespace_name, f.pod, kHintContainer, 1,
        [&](std::string_view) {
          if (!f.live.exchange(true)) {
            tell_feed(key);
            log::info("operator.slurm_log_followed", {{"controller", key}, {"pod", f.pod}});
          }
          feed->hint();
          return !f.stopping.load();
        },
        &f.stopping, std::chrono::duration_cast<std::chrono::seconds>(kFollowLimit));
    if (f.live.exchange(false)) {
      tell_feed(key);
    }
    if (f.stopping) {
      break;
    }
    if (std::chrono::steady_clock::now() - started >= kLastedLongEnough) {
      failures = 0;
    } else {
      if (failures == 0) {
        log::warn("operator.slurm_log_unfollowed",
                  {{"controller", key},
                   {"pod", f.pod},
                   {"error", followed ? std::string("the log ended") : followed.error().message},
                   {"then", "Slurm is polled every second until the log is followed again"}});
      }
      ++failures;
    }
    pause(follow_backoff(failures));
  }
}

}  // namespace tightrope::op
