// The list-then-watch loop behind an informer: lists a resource (paged), then watches from the
// list's resourceVersion with bookmarks, resumes from the last version it saw when a watch ends
// or breaks, and lists again when the server says that version is gone (410). Failures back off
// (capped) and are logged once per change of state. Objects go to a ReflectorSink as simdjson
// elements; the sink (the typed informer) decodes and caches them. Knows nothing of Slurm.
#pragma once

#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "base/metrics.hpp"
#include "kube/client.hpp"
#include "kube/watch.hpp"

namespace tightrope::kube {

class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A full list replaces what the sink holds: begin, one upsert per object, then end, after
  // which objects not upserted are gone.
  virtual void begin_list() = 0;
  virtual void list_item(simdjson::dom::element object) = 0;
  virtual void end_list() = 0;
  virtual void watch_event(WatchEventType type, simdjson::dom::element object) = 0;
};

struct ReflectorOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  // The server ends each watch after this many seconds (plus up to as much again, at random,
  // so that many watches do not reconnect together).
  int watch_timeout_seconds = 300;
  // A watch that hears nothing, not even the API server's minutely bookmark, for this long is
  // resumed on a new connection (WatchOptions::silence_limit).
  std::chrono::milliseconds watch_silence_limit = std::chrono::minutes(3);
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  metrics::Registry* metrics = nullptr;
};

struct ReflectorStats {
  uint64_t lists = 0;           // full lists, the first one included
  uint64_t relists_gone = 0;    // lists because a version was gone (410)
  uint64_t watches = 0;         // watch requests made
  uint64_t watch_failures = 0;  // watches or lists that failed (transport, HTTP, garbled stream)
  uint64_t events = 0;
  uint64_t garbled_lines = 0;
};

class Reflector {
 public:
  Reflector(Client& client, ResourceType type, std::string namespace_name, ReflectorOptions options,
            ReflectorSink& sink);

  // Runs until stop(); call on a thread of its own.
  void run();
  void stop();

  bool synced() const { return synced_.load(); }
  std::string last_resource_version() const;
  ReflectorStats stats() const;
  const ResourceType& type() const { return type_; }

 private:
  enum class State { kStarting, kListing, kWatching, kFailing };
  bool list();
  // Returns true when the watch ended normally (server timeout), false after a failure.
  bool watch();
  void set_state(State state, const std::string& reason);
  // Sleeps for the next backoff step unless stopped; returns false when stopped.
  bool back_off();
  std::string describe() const;

  Client& client_;
  ResourceType type_;
  std::string namespace_;
  ReflectorOptions options_;
  ReflectorSink& sink_;
  simdjson::dom::parser parser_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> synced_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::string resource_version_;
  bool need_list_ = true;
  State state_ = State::kStarting;
  std::chrono::steady_clock::time_point failing_since_{};
  std::chrono::milliseconds backoff_{0};
  ReflectorStats stats_;
  metrics::CounterFamily* restarts_ = nullptr;
};

}  // namespace tightrope::kube
