// Structured logs: one line per decision a human may ask about later, as logfmt
// (`ts=... level=info event=watch.connected resource=pods`) or JSON. Knows no domain; a process
// sets the level, format and sink once at start, tests capture lines with a sink of their own.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tightrope::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kLogfmt, kJson };

using Fields = std::vector<std::pair<std::string_view, std::string>>;

// Where finished lines go (without the newline). The default writes to stderr.
using Sink = std::function<void(Level, const std::string& line)>;

void configure(Level min_level, Format format);
// Replaces the sink; returns the previous one so a test can put it back.
Sink set_sink(Sink sink);
bool enabled(Level level);

void write(Level level, std::string_view event, const Fields& fields = {});
inline void debug(std::string_view event, const Fields& fields = {}) {
  write(Level::kDebug, event, fields);
}
inline void info(std::string_view event, const Fields& fields = {}) {
  write(Level::kInfo, event, fields);
}
inline void warn(std::string_view event, const Fields& fields = {}) {
  write(Level::kWarn, event, fields);
}
inline void error(std::string_view event, const Fields& fields = {}) {
  write(Level::kError, event, fields);
}

// "debug", "info", "warn", "error" -> the level; an unknown name returns false, *out untouched.
bool parse_level(std::string_view name, Level* out);

// The line as written: exposed for tests of the format.
std::string format_line(Format format, Level level, std::string_view timestamp,
                        std::string_view event, const Fields& fields);

}  // namespace tightrope::log
