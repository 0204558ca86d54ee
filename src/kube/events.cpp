#include "kube/events.hpp"

#include <array>
#include <cstdio>

#include "base/log.hpp"
#include "kube/time.hpp"

namespace tightrope::kube {
namespace {

std::string aggregation_key(const ObjectReference& o, EventType type, const std::string& reason,
                            const std::string& message) {
  return o.uid + "|" + o.kind + "|" + o.namespace_name + "|" + o.name + "|" +
         (type == EventType::kWarning ? "W" : "N") + "|" + reason + "|" + message;
}

// Event names must be unique: the object's name and the time in hex, as kubectl's are.
std::string event_name(const std::string& object_name, std::chrono::system_clock::time_point at) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  std::array<char, 24> suffix{};
  (void)std::snprintf(suffix.data(), suffix.size(), ".%llx", static_cast<unsigned long long>(ns));
  return object_name + suffix.data();
}

}  // namespace

EventRecorder::EventRecorder(Client& client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)), thread_([this] { run(); }) {}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    wake_.notify_all();
  }
  thread_.join();
}

void EventRecorder::record(const ObjectReference& object, EventType type, const std::string& reason,
                           const std::string& message) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= options_.queue_limit) {
    ++dropped_;
    return;
  }
  queue_.push_back({object, type, reason, message, std::chrono::system_clock::now()});
  wake_.notify_one();
}

bool EventRecorder::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void EventRecorder::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      break;  // stopping, and nothing left to send
    }
    Pending event = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    send(event);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) {
      idle_.notify_all();
    }
    if (stopping_) {
      // Shutdown does not wait on an API server that may be gone.
      dropped_ += queue_.size();
      queue_.clear();
      idle_.notify_all();
      break;
    }
  }
}

void EventRecorder::send(const Pending& event) {
  const std::string key = aggregation_key(event.object, event.type, event.reason, event.message);
  const std::string ns =
      event.object.namespace_name.empty() ? "default" : event.object.namespace_name;
  std::optional<Sent> previous;
  {
    std::lock_guard lock(mu_);
    if (auto it = sent_.find(key);
        it != sent_.end() && event.at - it->second.last < options_.aggregation_window) {
      previous = it->second;
    }
  }
  if (previous) {
    const nlohmann::json patch = {{"count", previous->count + 1},
                                  {"lastTimestamp", format_time(event.at)}};
    if (auto patched = client_.patch(resources::events(), previous->namespace_name, previous->name,
                                     PatchType::kMerge, patch)) {
      std::lock_guard lock(mu_);
      sent_[key] = {previous->namespace_name, previous->name, previous->count + 1, event.at};
      return;
    }
    // The event expired or was deleted: create a new one below.
  }
  const nlohmann::json body = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", event_name(event.object.name, event.at)}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", event.object.api_version},
        {"kind", event.object.kind},
        {"namespace", event.object.namespace_name},
        {"name", event.object.name},
        {"uid", event.object.uid}}},
      {"type", event.type == EventType::kWarning ? "Warning" : "Normal"},
      {"reason", event.reason},
      {"message", event.message},
      {"count", 1},
      {"firstTimestamp", format_time(event.at)},
      {"lastTimestamp", format_time(event.at)},
      {"source", {{"component", options_.component}}},
      {"reportingComponent", options_.component},
      {"reportingInstance", options_.instance}};
  auto created = client_.create(resources::events(), ns, body);
  std::lock_guard lock(mu_);
  if (!created) {
    ++dropped_;
    log::debug("kube.event.dropped",
               {{"reason", event.reason}, {"error", created.error().message}});
    return;
  }
  const nlohmann::json& meta = (*created)["metadata"];
  sent_[key] = {ns, meta.is_object() ? meta.value("name", "") : "", 1, event.at};
  // Bounded memory: forget aggregation state that can no longer match.
  for (auto it = sent_.begin(); it != sent_.end();) {
    it = event.at - it->second.last > options_.aggregation_window ? sent_.erase(it) : std::next(it);
  }
}

}  // namespace tightrope::kube
