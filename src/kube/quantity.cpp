#include "kube/quantity.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <utility>

namespace tightrope::kube {

namespace {

// Suffixes longest first, so that "Mi" is not read as "M".
constexpr std::array<std::pair<std::string_view, long double>, 15> kSuffixes = {{
    {"Ki", 1024.0L},
    {"Mi", 1048576.0L},
    {"Gi", 1073741824.0L},
    {"Ti", 1099511627776.0L},
    {"Pi", 1125899906842624.0L},
    {"Ei", 1152921504606846976.0L},
    {"n", 1e-9L},
    {"u", 1e-6L},
    {"m", 1e-3L},
    {"k", 1e3L},
    {"M", 1e6L},
    {"G", 1e9L},
    {"T", 1e12L},
    {"P", 1e15L},
    {"E", 1e18L},
}};

bool all_digits(std::string_view text) {
  for (const char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<int64_t> parse_quantity_milli(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  long double scale = 1.0L;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      scale = factor;
      text.remove_suffix(suffix.size());
      break;
    }
  }
  // A decimal exponent ("1e3") instead of a suffix.
  long double exponent = 0.0L;
  if (const size_t e = text.find_first_of("eE"); e != std::string_view::npos && scale == 1.0L) {
    std::string_view power = text.substr(e + 1);
    const bool negative = power.starts_with('-');
    if (power.starts_with('+') || negative) {
      power.remove_prefix(1);
    }
    if (power.empty() || !all_digits(power) || power.size() > 3) {
      return std::nullopt;
    }
    for (const char c : power) {
      exponent = exponent * 10.0L + static_cast<long double>(c - '0');
    }
    exponent = negative ? -exponent : exponent;
    text = text.substr(0, e);
  }
  bool negative = false;
  if (text.starts_with('+') || text.starts_with('-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if ((whole.empty() && fraction.empty()) || !all_digits(whole) || !all_digits(fraction)) {
    return std::nullopt;
  }
  long double value = 0.0L;
  for (const char c : whole) {
    value = value * 10.0L + static_cast<long double>(c - '0');
  }
  long double place = 0.1L;
  for (const char c : fraction) {
    value += place * static_cast<long double>(c - '0');
    place /= 10.0L;
  }
  const long double milli = value * scale * std::pow(10.0L, exponent) * 1000.0L;
  if (milli > 9.0e18L) {
    return std::nullopt;
  }
  // Rounded up as Kubernetes does, but not past a value that is whole to within rounding error.
  const long double rounded = std::ceil(milli - 1e-6L);
  return static_cast<int64_t>(negative ? -rounded : rounded);
}

std::optional<int64_t> parse_quantity(std::string_view text) {
  const auto milli = parse_quantity_milli(text);
  if (!milli) {
    return std::nullopt;
  }
  return *milli >= 0 ? (*milli + 999) / 1000 : -((-*milli) / 1000);
}

}  // namespace tightrope::kube
