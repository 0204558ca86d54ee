#include "kube/watch.hpp"

#include "base/text.hpp"

namespace tightrope::kube {

const char* to_string(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "?";
}

bool LineSplitter::feed(std::string_view chunk,
                        const std::function<bool(std::string_view line)>& on_line) {
  while (!chunk.empty()) {
    const size_t newline = chunk.find('\n');
    if (newline == std::string_view::npos) {
      if (partial_.size() + chunk.size() > max_line_) {
        overflowed_ = true;
        return false;
      }
      partial_.append(chunk);
      return true;
    }
    std::string_view line = chunk.substr(0, newline);
    chunk.remove_prefix(newline + 1);
    bool go_on = true;
    if (partial_.empty()) {
      // The common case: a whole line inside one chunk, handed over without a copy.
      if (!line.empty()) {
        go_on = on_line(line);
      }
    } else {
      if (partial_.size() + line.size() > max_line_) {
        overflowed_ = true;
        return false;
      }
      partial_.append(line);
      go_on = on_line(partial_);
      partial_.clear();
    }
    if (!go_on) {
      return false;
    }
  }
  return true;
}

tightrope::Result<WatchEvent, std::string> parse_watch_event(simdjson::dom::parser& parser,
                                                             std::string_view line) {
  simdjson::dom::element doc;
  if (auto error = parser.parse(line.data(), line.size()).get(doc); error != simdjson::SUCCESS) {
    return fail(std::string("a watch event that is not JSON: ") + simdjson::error_message(error));
  }
  std::string_view type;
  if (doc["type"].get_string().get(type) != simdjson::SUCCESS) {
    return fail(std::string("a watch event without a type"));
  }
  WatchEvent event;
  if (type == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    event.type = WatchEventType::kError;
  } else {
    return fail("a watch event of unknown type " + printable_text(type, 32));
  }
  simdjson::dom::element object;
  if (doc["object"].get(object) != simdjson::SUCCESS ||
      object.type() != simdjson::dom::element_type::OBJECT) {
    return fail(std::string("a watch event without an object"));
  }
  event.object = object;
  if (event.type == WatchEventType::kError) {
    Status& s = event.status;
    int64_t code = 0;
    if (object["code"].get_int64().get(code) == simdjson::SUCCESS) {
      s.code = static_cast<int>(code);
    }
    std::string_view text;
    if (object["reason"].get_string().get(text) == simdjson::SUCCESS) {
      s.reason = text;
    }
    if (object["message"].get_string().get(text) == simdjson::SUCCESS) {
      s.message = text;
    }
  }
  return event;
}

}  // namespace tightrope::kube
