#include "kube/controller.hpp"

#include <exception>

#include "base/log.hpp"

namespace tightrope::kube {
namespace {

WorkQueueOptions queue_options(const ControllerOptions& options) {
  WorkQueueOptions q = options.queue;
  if (q.name.empty() || q.name == "default") {
    q.name = options.name;
  }
  if (q.metrics == nullptr) {
    q.metrics = options.metrics;
  }
  return q;
}

}  // namespace

Request Request::from_key(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    return {"", key};
  }
  return {key.substr(0, slash), key.substr(slash + 1)};
}

Controller::Controller(ControllerOptions options, Reconciler& reconciler)
    : options_(std::move(options)), reconciler_(reconciler), queue_(queue_options(options_)) {
  if (options_.metrics != nullptr) {
    reconciles_ =
        &options_.metrics->counter("controller_runtime_reconcile_total",
                                   "Reconciles by controller and result", {"controller", "result"});
    errors_ = &options_.metrics->counter("controller_runtime_reconcile_errors_total",
                                         "Reconciles that failed or threw, by controller",
                                         {"controller"});
    // At zero from the start, as controller-runtime does: a healthy controller has an error
    // rate of 0 to show and alert on, not no series.
    errors_->with({{"controller", options_.name}});
    duration_ = &options_.metrics->histogram("controller_runtime_reconcile_time_seconds",
                                             "Time a reconcile took, by controller", {"controller"},
                                             metrics::exponential_buckets(0.001, 2, 16));
  }
}

Controller::~Controller() {
  stop();
}

void Controller::enqueue_all(const std::vector<Request>& requests) {
  for (const auto& r : requests) {
    queue_.add(r.key());
  }
}

void Controller::start() {
  if (!workers_.empty()) {
    return;
  }
  queue_.resume();
  for (const auto& enqueue_primaries : primaries_) {
    enqueue_primaries();
  }
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { work(); });
  }
}

void Controller::stop() {
  queue_.pause();
  for (auto& t : workers_) {
    if (t.joinable()) {
      t.join();
    }
  }
  workers_.clear();
}

void Controller::work() {
  while (auto key = queue_.get()) {
    process(*key);
    queue_.done(*key);
  }
}

void Controller::process(const std::string& key) {
  const auto started = std::chrono::steady_clock::now();
  std::string result;
  try {
    auto outcome = reconciler_.reconcile(Request::from_key(key));
    if (!outcome) {
      result = "error";
      log::warn("controller.reconcile_failed",
                {{"controller", options_.name},
                 {"key", key},
                 {"error", outcome.error()},
                 {"failures", std::to_string(queue_.failures(key) + 1)}});
      queue_.add_rate_limited(key);
    } else if (outcome->requeue_after.count() > 0) {
      result = "requeue_after";
      queue_.forget(key);
      queue_.add_after(key, outcome->requeue_after);
    } else if (outcome->requeue) {
      result = "requeue";
      queue_.add_rate_limited(key);
    } else {
      result = "success";
      queue_.forget(key);
    }
  } catch (const std::exception& e) {
    // A bug in one reconcile must not take the process (and every other key) down with it.
    result = "error";
    log::error("controller.reconcile_threw",
               {{"controller", options_.name}, {"key", key}, {"error", e.what()}});
    queue_.add_rate_limited(key);
  } catch (...) {
    result = "error";
    log::error("controller.reconcile_threw",
               {{"controller", options_.name}, {"key", key}, {"error", "unknown"}});
    queue_.add_rate_limited(key);
  }
  if (reconciles_ != nullptr) {
    reconciles_->with({{"controller", options_.name}, {"result", result}}).inc();
    if (result == "error") {
      errors_->with({{"controller", options_.name}}).inc();
    }
    duration_->with({{"controller", options_.name}})
        .observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
}

}  // namespace tightrope::kube
