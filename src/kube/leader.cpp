#include "kube/leader.hpp"

#include <random>

#include "base/log.hpp"
#include "kube/time.hpp"

namespace tightrope::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

int64_t seconds_of(milliseconds d) {
  return std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

LeaderElector::LeaderElector(Client& client, LeaderElectionOptions options,
                             LeaderCallbacks callbacks)
    : client_(client), options_(std::move(options)), callbacks_(std::move(callbacks)) {
  if (options_.metrics != nullptr) {
    status_ = &options_.metrics->gauge("leader_election_master_status",
                                       "1 while this process holds the lease, else 0", {"name"});
    status_->with({{"name", options_.lease_name}}).set(0);
  }
}

LeaderElector::~LeaderElector() {
  stop();
}

void LeaderElector::start() {
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool LeaderElector::is_leader() const {
  std::lock_guard lock(mu_);
  return leading_ && steady_clock::now() - last_renew_ < options_.renew_deadline;
}

bool LeaderElector::sleep_for(milliseconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stopping_.load(); });
  return !stopping_;
}

void LeaderElector::set_leading(bool leading, bool stepping_down) {
  {
    std::lock_guard lock(mu_);
    if (leading_ == leading) {
      return;
    }
    leading_ = leading;
  }
  if (status_ != nullptr) {
    status_->with({{"name", options_.lease_name}}).set(leading ? 1 : 0);
  }
  if (leading) {
    log::info("leader.acquired", {{"lease", options_.lease_namespace + "/" + options_.lease_name},
                                  {"identity", options_.identity}});
    if (callbacks_.started_leading) {
      callbacks_.started_leading();
    }
  } else {
    const log::Fields fields = {{"lease", options_.lease_namespace + "/" + options_.lease_name},
                                {"identity", options_.identity}};
    // A stop steps down on purpose; only a failed renewal loses the lease.
    if (stepping_down) {
      log::info("leader.stepped_down", fields);
    } else {
      log::warn("leader.lost", fields);
    }
    if (callbacks_.stopped_leading) {
      callbacks_.stopped_leading();
    }
  }
}

void LeaderElector::run() {
  std::mt19937 rng(std::random_device{}());
  // Jitter keeps candidates from asking in lock step (client-go's JitterFactor 1.2).
  const auto jittered = [&](milliseconds d) {
    return milliseconds(
        std::uniform_int_distribution<int64_t>(d.count(), d.count() * 12 / 10)(rng));
  };
  while (!stopping_) {
    // Campaign until we hold the lease.
    while (!stopping_ && !try_acquire_or_renew()) {
      // Ask again at the retry period, or just after the holder's lease runs out if that is
      // sooner: a successor should not lose a whole period to the polling.
      milliseconds wait = jittered(options_.retry_period);
      {
        std::lock_guard lock(mu_);
        if (observed_at_ != steady_clock::time_point{}) {
          const auto expiry = observed_at_ + observed_duration_ + milliseconds(20);
          const auto until = std::chrono::duration_cast<milliseconds>(expiry - steady_clock::now());
          if (until.count() > 0 && until < wait) {
            wait = until;
          }
        }
      }
      if (!sleep_for(wait)) {
        break;
      }
    }
    if (stopping_) {
      break;
    }
    set_leading(true);
    // Renew until stopped or the deadline passes without a success.
    while (!stopping_) {
      if (!sleep_for(options_.retry_period)) {
        break;
      }
      bool renewed = false;
      while (!stopping_) {
        renewed = try_acquire_or_renew();
        if (renewed) {
          break;
        }
        {
          std::lock_guard lock(mu_);
          if (steady_clock::now() - last_renew_ >= options_.renew_deadline) {
            break;
          }
        }
        if (!sleep_for(milliseconds(std::max<int64_t>(options_.retry_period.count() / 4, 50)))) {
          break;
        }
      }
      if (!renewed && !stopping_) {
        set_leading(false);
        break;
      }
    }
  }
  const bool was_leading = [this] {
    std::lock_guard lock(mu_);
    return leading_;
  }();
  if (was_leading) {
    set_leading(false, /*stepping_down=*/true);
    if (options_.release_on_stop) {
      release();
    }
  }
}

bool LeaderElector::try_acquire_or_renew() {
  const auto now_wall = std::chrono::system_clock::now();
  const auto now = steady_clock::now();
  // A holder renews the lease as its last write left it, without reading it first: the
  // resourceVersion makes the update fail (409) if anyone else wrote it since, and only then is
  // it read again. Half the requests of a read-then-write renewal.
  if (!held_.is_null()) {
    nlohmann::json lease = held_;
    lease["spec"]["renewTime"] = format_micro_time(now_wall);
    auto renewed = client_.update(resources::leases(), options_.lease_namespace, lease);
    if (renewed) {
      std::lock_guard lock(mu_);
      held_ = std::move(*renewed);
      observed_renew_time_ = lease["spec"]["renewTime"].get<std::string>();
      observed_at_ = now;
      last_renew_ = now;
      return true;
    }
    held_ = nullptr;
    if (renewed.error().kind != ErrorKind::kConflict) {
      log::debug("leader.update_failed", {{"error", renewed.error().message}});
      return false;
    }
  }
  auto current = client_.get(resources::leases(), options_.lease_namespace, options_.lease_name);
  if (!current && current.error().kind == ErrorKind::kNotFound) {
    nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.lease_name}, {"namespace", options_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", options_.identity},
          {"leaseDurationSeconds", seconds_of(options_.lease_duration)},
          {"acquireTime", format_micro_time(now_wall)},
          {"renewTime", format_micro_time(now_wall)},
          {"leaseTransitions", 0}}}};
    auto created = client_.create(resources::leases(), options_.lease_namespace, lease);
    if (!created) {
      return false;
    }
    std::lock_guard lock(mu_);
    held_ = std::move(*created);
    observed_holder_ = options_.identity;
    observed_at_ = now;
    last_renew_ = now;
    return true;
  }
  if (!current) {
    log::debug("leader.get_failed", {{"error", current.error().message}});
    return false;
  }
  nlohmann::json& lease = *current;
  nlohmann::json& spec = lease["spec"];
  if (!spec.is_object()) {
    spec = nlohmann::json::object();  // a Lease someone created bare: ours to fill in
  }
  if (!lease["metadata"].is_object()) {
    return false;
  }
  const std::string holder = spec.value("holderIdentity", "");
  const std::string renew_time = spec.value("renewTime", "");
  const int64_t transitions = spec.value("leaseTransitions", int64_t{0});
  const int64_t duration_s =
      spec.value("leaseDurationSeconds", seconds_of(options_.lease_duration));
  bool new_holder = false;
  {
    std::lock_guard lock(mu_);
    if (holder != observed_holder_ || renew_time != observed_renew_time_ ||
        observed_at_ == steady_clock::time_point{}) {
      new_holder = holder != observed_holder_ && !holder.empty();
      observed_holder_ = holder;
      observed_renew_time_ = renew_time;
      observed_transitions_ = transitions;
      observed_at_ = now;
    }
    observed_resource_version_ = lease["metadata"].value("resourceVersion", "");
    observed_duration_ = std::chrono::seconds(duration_s);
  }
  if (new_holder && callbacks_.new_leader) {
    callbacks_.new_leader(holder);
  }
  // Someone else holds a lease we have not seen expire on our own clock.
  if (!holder.empty() && holder != options_.identity &&
      now - observed_at_ < std::chrono::seconds(duration_s)) {
    return false;
  }
  const bool taking_over = holder != options_.identity;
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = seconds_of(options_.lease_duration);
  spec["renewTime"] = format_micro_time(now_wall);
  if (taking_over) {
    spec["acquireTime"] = format_micro_time(now_wall);
    spec["leaseTransitions"] = holder.empty() && transitions == 0 ? transitions : transitions + 1;
  }
  // The resourceVersion we read makes this conditional: of two candidates, one wins.
  auto updated = client_.update(resources::leases(), options_.lease_namespace, lease);
  if (!updated) {
    log::debug("leader.update_failed", {{"error", updated.error().message}});
    return false;
  }
  std::lock_guard lock(mu_);
  held_ = std::move(*updated);
  observed_holder_ = options_.identity;
  observed_renew_time_ = spec["renewTime"].get<std::string>();
  observed_at_ = now;
  last_renew_ = now;
  return true;
}

void LeaderElector::release() {
  held_ = nullptr;
  auto current = client_.get(resources::leases(), options_.lease_namespace, options_.lease_name);
  if (!current || !(*current)["spec"].is_object()) {
    return;
  }
  nlohmann::json& spec = (*current)["spec"];
  if (spec.value("holderIdentity", "") != options_.identity) {
    return;
  }
  const auto now_wall = std::chrono::system_clock::now();
  // An empty holder with a one-second duration lets a successor take over at once.
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = format_micro_time(now_wall);
  spec["acquireTime"] = format_micro_time(now_wall);
  if (auto updated = client_.update(resources::leases(), options_.lease_namespace, *current);
      !updated) {
    log::warn("leader.release_failed", {{"error", updated.error().message}});
    return;
  }
  log::info("leader.released", {{"lease", options_.lease_namespace + "/" + options_.lease_name}});
}

}  // namespace tightrope::kube
