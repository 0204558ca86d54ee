#include "kube/time.hpp"

#include <array>
#include <cstdio>
#include <ctime>

namespace tightrope::kube {

std::string format_time(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 32> buf{};
  (void)std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

std::string format_micro_time(std::chrono::system_clock::time_point t) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 40> buf{};
  const size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  (void)std::snprintf(buf.data() + n, buf.size() - n, ".%06dZ", static_cast<int>(micros % 1000000));
  return buf.data();
}

std::optional<std::chrono::system_clock::time_point> parse_time(std::string_view text) {
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  const std::string s(text);
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute,
                  &second,  // NOLINT
                  &consumed) != 6) {
    return std::nullopt;
  }
  // Within what a system_clock time point holds (nanoseconds: 1678 to 2262) and a calendar:
  // the year 0000 of a hostile object overflowed it (found by test/fuzz/text_values_fuzz.cpp).
  if (year < 1900 || year > 2200 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 ||
      hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(static_cast<size_t>(consumed));
  int64_t micros = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    int digits = 0;
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
      if (digits < 6) {
        micros = micros * 10 + (rest.front() - '0');
        ++digits;
      }
      rest.remove_prefix(1);
    }
    for (; digits < 6; ++digits) {
      micros *= 10;
    }
  }
  // "Z", or an offset east (+hh:mm) or west (-hh:mm) of UTC that is taken off.
  std::chrono::minutes offset{0};
  if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int off_hours = 0;
    int off_minutes = 0;
    const std::string zone(rest.substr(1));
    int zone_consumed = 0;
    if (std::sscanf(zone.c_str(), "%2d:%2d%n", &off_hours, &off_minutes,  // NOLINT
                    &zone_consumed) != 2 ||
        zone_consumed != 5 || off_hours < 0 || off_hours > 23 || off_minutes < 0 ||
        off_minutes > 59) {
      return std::nullopt;
    }
    offset = std::chrono::minutes(off_hours * 60 + off_minutes);
    if (rest[0] == '-') {
      offset = -offset;
    }
  } else if (rest != "Z") {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t secs = timegm(&tm);
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::microseconds(micros) - offset;
}

}  // namespace tightrope::kube
