// Kubernetes Events from controllers, the way `kubectl describe` shows them. Repeats of one
// event (same object, type, reason and message) within ten minutes update the first one's
// count and lastTimestamp instead of creating another object. Events are sent by a thread of
// their own from a bounded queue: recording never blocks a reconcile, and when the API server
// is gone events are dropped (counted), not piled up. Knows nothing of Slurm.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.hpp"

namespace tightrope::kube {

struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_name;
  std::string name;
  std::string uid;
};

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string component;  // source.component and reportingComponent, e.g. "slurm-operator"
  std::string instance;   // reportingInstance, e.g. the pod name
  size_t queue_limit = 1000;
  std::chrono::minutes aggregation_window{10};
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions options);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `reason` is UpperCamelCase ("Drained"); `message` a sentence for a human.
  void record(const ObjectReference& object, EventType type, const std::string& reason,
              const std::string& message);
  void normal(const ObjectReference& o, const std::string& reason, const std::string& message) {
    record(o, EventType::kNormal, reason, message);
  }
  void warning(const ObjectReference& o, const std::string& reason, const std::string& message) {
    record(o, EventType::kWarning, reason, message);
  }

  // Waits (bounded) until every recorded event was sent or dropped.
  bool flush(std::chrono::milliseconds timeout);
  uint64_t dropped() const;

 private:
  struct Pending {
    ObjectReference object;
    EventType type;
    std::string reason;
    std::string message;
    std::chrono::system_clock::time_point at;
  };
  struct Sent {
    std::string namespace_name;
    std::string name;
    int64_t count = 1;
    std::chrono::system_clock::time_point last;
  };
  void run();
  void send(const Pending& event);

  Client& client_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Pending> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  uint64_t dropped_ = 0;
  std::map<std::string, Sent> sent_;  // by aggregation key
  std::thread thread_;
};

}  // namespace tightrope::kube
