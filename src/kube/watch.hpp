// The watch stream's framing and events. The API server writes one JSON event a line
// ({"type":"ADDED","object":{...}}); chunks arrive cut anywhere, so a splitter rebuilds lines,
// and each line is parsed into an event whose object a decoder then reads. A garbled or
// oversized line is an error value, never a crash: the watcher reconnects.
#pragma once

#include <simdjson.h>

#include <functional>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "kube/error.hpp"

namespace tightrope::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

const char* to_string(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  simdjson::dom::element object;  // valid until the parser parses again
  Status status;                  // for kError
};

// Rebuilds lines from chunks. Lines longer than max_line are refused (an object is at most
// 1.5 MiB in etcd; the default leaves room for JSON escaping).
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = size_t{16} << 20U) : max_line_(max_line) {}

  // Calls on_line for each complete line (without the newline); stops early and returns false
  // when on_line does. An oversized line sets overflowed() and returns false.
  bool feed(std::string_view chunk, const std::function<bool(std::string_view line)>& on_line);
  bool overflowed() const { return overflowed_; }
  size_t buffered() const { return partial_.size(); }
  void reset() {
    partial_.clear();
    overflowed_ = false;
  }

 private:
  size_t max_line_;
  std::string partial_;
  bool overflowed_ = false;
};

// Parses one line into an event. The object stays valid until `parser` parses again.
tightrope::Result<WatchEvent, std::string> parse_watch_event(simdjson::dom::parser& parser,
                                                             std::string_view line);

}  // namespace tightrope::kube
