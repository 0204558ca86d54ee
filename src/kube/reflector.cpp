#include "kube/reflector.hpp"

#include <random>

#include "base/log.hpp"
#include "base/memory.hpp"
#include "base/metrics.hpp"
#include "kube/object.hpp"

namespace tightrope::kube {
namespace {

std::string resource_version_of(simdjson::dom::element object) {
  simdjson::dom::element meta;
  if (object["metadata"].get(meta) != simdjson::SUCCESS) {
    return {};
  }
  return std::string(string_at(meta, "resourceVersion"));
}

}  // namespace

Reflector::Reflector(Client& client, ResourceType type, std::string namespace_name,
                     ReflectorOptions options, ReflectorSink& sink)
    : client_(client),
      type_(std::move(type)),
      namespace_(std::move(namespace_name)),
      options_(std::move(options)),
      sink_(sink),
      backoff_(options_.backoff_initial) {
  if (options_.metrics != nullptr) {
    restarts_ = &options_.metrics->counter(
        "kube_watch_restarts_total",
        "Watches that ended and were started again, by resource and reason",
        {"resource", "reason"});
  }
}

std::string Reflector::describe() const {
  return namespace_.empty() ? type_.resource : type_.resource + " in " + namespace_;
}

std::string Reflector::last_resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::stop() {
  stopping_ = true;
  std::lock_guard lock(mu_);
  wake_.notify_all();
}

void Reflector::set_state(State state, const std::string& reason) {
  const State before = state_;
  state_ = state;
  if (state == State::kFailing) {
    if (before != State::kFailing) {
      failing_since_ = std::chrono::steady_clock::now();
      log::warn("kube.watch.failing",
                {{"resource", type_.resource}, {"namespace", namespace_}, {"error", reason}});
    }
    return;
  }
  backoff_ = options_.backoff_initial;
  if (before == State::kFailing) {
    const auto down = std::chrono::steady_clock::now() - failing_since_;
    log::info("kube.watch.recovered",
              {{"resource", type_.resource},
               {"namespace", namespace_},
               {"after_s",
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(down).count())}});
  }
}

bool Reflector::back_off() {
  static thread_local std::mt19937 jitter(std::random_device{}());
  std::uniform_int_distribution<int64_t> spread(backoff_.count() / 2, backoff_.count());
  const std::chrono::milliseconds wait(spread(jitter));
  backoff_ = std::min(backoff_ * 2, options_.backoff_max);
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, wait, [this] { return stopping_.load(); });
  return !stopping_;
}

void Reflector::run() {
  while (!stopping_) {
    if (need_list_ && !list()) {
      if (!back_off()) {
        break;
      }
      continue;
    }
    const bool ended_normally = watch();
    if (stopping_) {
      break;
    }
    if (!ended_normally && !need_list_ && !back_off()) {
      break;
    }
  }
}

bool Reflector::list() {
  if (state_ == State::kStarting) {
    state_ = State::kListing;
  }
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.limit = options_.page_size;
  std::string list_version;
  bool began = false;
  size_t objects = 0;
  for (;;) {
    auto body = client_.list_raw(type_, namespace_, options);
    if (!body) {
      // An expired continue token (410) means the snapshot is gone: start the list again.
      if (body.error().kind == ErrorKind::kGone && !options.continue_token.empty()) {
        options.continue_token.clear();
        continue;
      }
      if (body.error().kind == ErrorKind::kCancelled) {
        return false;
      }
      std::lock_guard lock(mu_);
      ++stats_.watch_failures;
      set_state(State::kFailing, "list: " + body.error().message);
      return false;
    }
    simdjson::dom::element doc;
    if (parser_.parse(body->data(), body->size()).get(doc) != simdjson::SUCCESS ||
        doc.type() != simdjson::dom::element_type::OBJECT) {
      std::lock_guard lock(mu_);
      ++stats_.watch_failures;
      set_state(State::kFailing, "list: an answer that is not a list");
      return false;
    }
    simdjson::dom::element meta;
    std::string continue_token;
    if (doc["metadata"].get(meta) == simdjson::SUCCESS) {
      if (list_version.empty()) {
        list_version = string_at(meta, "resourceVersion");
      }
      continue_token = string_at(meta, "continue");
    }
    if (!began) {
      sink_.begin_list();
      began = true;
    }
    // An empty list may come with "items": null.
    simdjson::dom::array items;
    if (doc["items"].get_array().get(items) == simdjson::SUCCESS) {
      for (const auto item : items) {
        sink_.list_item(item);
        ++objects;
      }
    }
    if (continue_token.empty()) {
      break;
    }
    options.continue_token = std::move(continue_token);
  }
  sink_.end_list();
  // The parser keeps the capacity of the largest document it read, a page of hundreds of
  // objects; a watch event is one. Both it and the pages' freed memory go back now.
  parser_ = simdjson::dom::parser();
  return_free_memory();
  std::lock_guard lock(mu_);
  ++stats_.lists;
  resource_version_ = list_version;
  need_list_ = false;
  if (!synced_) {
    log::info("kube.watch.synced", {{"resource", type_.resource},
                                    {"namespace", namespace_},
                                    {"objects", std::to_string(objects)},
                                    {"resource_version", list_version}});
  }
  synced_ = true;
  set_state(State::kListing, "");
  return true;
}

bool Reflector::watch() {
  static thread_local std::mt19937 jitter(std::random_device{}());
  WatchOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.resource_version = last_resource_version();
  options.allow_bookmarks = true;
  options.silence_limit = options_.watch_silence_limit;
  options.timeout_seconds =
      options_.watch_timeout_seconds +
      std::uniform_int_distribution<int>(0, options_.watch_timeout_seconds)(jitter);
  LineSplitter splitter;
  bool gone = false;
  std::string failure;
  const auto on_line = [&](std::string_view line) {
    auto event = parse_watch_event(parser_, line);
    if (!event) {
      failure = "garbled watch stream: " + event.error();
      std::lock_guard lock(mu_);
      ++stats_.garbled_lines;
      return false;
    }
    if (event->type == WatchEventType::kError) {
      if (event->status.code == 410) {
        gone = true;
      } else {
        failure = "watch error " + std::to_string(event->status.code) + " " + event->status.reason +
                  ": " + event->status.message;
      }
      return false;
    }
    std::string version = resource_version_of(event->object);
    if (event->type != WatchEventType::kBookmark) {
      sink_.watch_event(event->type, event->object);
    }
    std::lock_guard lock(mu_);
    if (!version.empty()) {
      resource_version_ = std::move(version);
    }
    if (event->type != WatchEventType::kBookmark) {
      ++stats_.events;
    }
    if (state_ != State::kWatching) {
      set_state(State::kWatching, "");
    }
    return !stopping_.load();
  };
  auto result = client_.watch(
      type_, namespace_, options,
      [&](std::string_view chunk) { return splitter.feed(chunk, on_line); }, &stopping_);
  if (splitter.overflowed()) {
    failure = "a watch event longer than the line limit";
  }
  std::lock_guard lock(mu_);
  ++stats_.watches;
  if (gone || (!result && result.error().kind == ErrorKind::kGone)) {
    // The version we resume from was compacted away: only a new list can say what is there now.
    ++stats_.relists_gone;
    need_list_ = true;
    if (restarts_ != nullptr) {
      restarts_->with({{"resource", type_.resource}, {"reason", "gone"}}).inc();
    }
    log::info("kube.watch.relist", {{"resource", type_.resource},
                                    {"namespace", namespace_},
                                    {"reason", "resource version gone (410)"},
                                    {"resource_version", resource_version_}});
    return true;
  }
  if (stopping_) {
    return true;
  }
  if (result && failure.empty()) {
    if (restarts_ != nullptr) {
      restarts_->with({{"resource", type_.resource}, {"reason", "timeout"}}).inc();
    }
    if (state_ != State::kWatching) {
      set_state(State::kWatching, "");
    }
    return true;
  }
  if (failure.empty()) {
    failure = result.error().message;
  }
  ++stats_.watch_failures;
  if (restarts_ != nullptr) {
    restarts_->with({{"resource", type_.resource}, {"reason", "error"}}).inc();
  }
  set_state(State::kFailing, failure);
  return false;
}

}  // namespace tightrope::kube
