#include "base/log.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace tightrope::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};
std::atomic<Format> g_format{Format::kLogfmt};

std::mutex& sink_mutex() {
  static std::mutex mu;
  return mu;
}

Sink& sink() {
  static Sink s = [](Level, const std::string& line) {
    // Nowhere to report a failed log write.
    (void)std::fprintf(stderr, "%s\n", line.c_str());
  };
  return s;
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr std::string_view kHex = "0123456789abcdef";
          const auto u = static_cast<unsigned char>(c);
          out += "\\u00";
          out.push_back(kHex[u >> 4U]);
          out.push_back(kHex[u & 0xFU]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// logfmt values are bare unless they hold a space, a quote, '=' or a control character.
void append_logfmt_value(std::string& out, std::string_view v) {
  bool bare = !v.empty();
  for (const char c : v) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) {
      bare = false;
      break;
    }
  }
  if (bare) {
    out += v;
  } else {
    append_json_string(out, v);
  }
}

std::string now_rfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 40> buf{};
  const size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  (void)std::snprintf(buf.data() + n, buf.size() - n, ".%03dZ", static_cast<int>(millis));
  return buf.data();
}

}  // namespace

void configure(Level min_level, Format format) {
  g_level = min_level;
  g_format = format;
}

Sink set_sink(Sink s) {
  std::lock_guard lock(sink_mutex());
  Sink old = std::move(sink());
  sink() = std::move(s);
  return old;
}

bool enabled(Level level) {
  return level >= g_level.load();
}

std::string format_line(Format format, Level level, std::string_view timestamp,
                        std::string_view event, const Fields& fields) {
  std::string out;
  out.reserve(96);
  if (format == Format::kJson) {
    out += R"({"ts":)";
    append_json_string(out, timestamp);
    out += R"(,"level":)";
    append_json_string(out, level_name(level));
    out += R"(,"event":)";
    append_json_string(out, event);
    for (const auto& [key, value] : fields) {
      out.push_back(',');
      append_json_string(out, key);
      out.push_back(':');
      append_json_string(out, value);
    }
    out.push_back('}');
    return out;
  }
  out += "ts=";
  out += timestamp;
  out += " level=";
  out += level_name(level);
  out += " event=";
  append_logfmt_value(out, event);
  for (const auto& [key, value] : fields) {
    out.push_back(' ');
    out += key;
    out.push_back('=');
    append_logfmt_value(out, value);
  }
  return out;
}

void write(Level level, std::string_view event, const Fields& fields) {
  if (!enabled(level)) {
    return;
  }
  const std::string line = format_line(g_format.load(), level, now_rfc3339(), event, fields);
  std::lock_guard lock(sink_mutex());
  sink()(level, line);
}

bool parse_level(std::string_view name, Level* out) {
  if (name == "debug") {
    *out = Level::kDebug;
  } else if (name == "info") {
    *out = Level::kInfo;
  } else if (name == "warn" || name == "warning") {
    *out = Level::kWarn;
  } else if (name == "error") {
    *out = Level::kError;
  } else {
    return false;
  }
  return true;
}

}  // namespace tightrope::log
