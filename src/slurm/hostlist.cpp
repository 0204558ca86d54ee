#include "slurm/hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <utility>

namespace tightrope::slurm {

namespace {

// Splits at commas outside brackets.
std::optional<std::vector<std::string_view>> split_top(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      ++depth;
    } else if (text[i] == ']') {
      if (--depth < 0) {
        return std::nullopt;
      }
    } else if (text[i] == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) {
    return std::nullopt;
  }
  parts.push_back(text.substr(start));
  return parts;
}

bool parse_number(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 18) {
    return false;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// One bracket's ranges ("1-3,07") as zero-padded strings.
std::optional<std::vector<std::string>> expand_ranges(std::string_view ranges, size_t limit) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string_view::npos) {
      comma = ranges.size();
    }
    const std::string_view range = ranges.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string_view low = range.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : range.substr(dash + 1);
    uint64_t lo = 0;
    uint64_t hi = 0;
    if (!parse_number(low, &lo) || !parse_number(high, &hi) || hi < lo ||
        hi - lo >= limit - std::min(limit, out.size())) {
      return std::nullopt;
    }
    for (uint64_t v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < low.size()) {
        digits.insert(0, low.size() - digits.size(), '0');
      }
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return out;
}

// One host expression with any number of brackets ("rack[1-2]-n[01-04]").
bool expand_one(std::string_view part, size_t limit, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  size_t at = 0;
  while (at < part.size()) {
    const size_t open = part.find('[', at);
    const std::string_view literal =
        part.substr(at, open == std::string_view::npos ? std::string_view::npos : open - at);
    for (auto& name : names) {
      name += literal;
    }
    if (open == std::string_view::npos) {
      break;
    }
    const size_t close = part.find(']', open);
    if (close == std::string_view::npos) {
      return false;
    }
    auto values = expand_ranges(part.substr(open + 1, close - open - 1), limit);
    if (!values || names.size() * values->size() + out.size() > limit) {
      return false;
    }
    std::vector<std::string> next;
    next.reserve(names.size() * values->size());
    for (const auto& name : names) {
      for (const auto& value : *values) {
        next.push_back(name + value);
      }
    }
    names = std::move(next);
    at = close + 1;
  }
  // Plain names count too: a bracket's worth of hosts, then more names after it, would pass
  // every bracket's check and still end over the limit.
  if (out.size() + names.size() > limit) {
    return false;
  }
  for (auto& name : names) {
    if (!name.empty()) {
      out.push_back(std::move(name));
    }
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::string>> expand_hostlist(std::string_view expression, size_t limit) {
  std::vector<std::string> out;
  const auto parts = split_top(expression);
  if (!parts) {
    return std::nullopt;
  }
  for (const auto part : *parts) {
    if (!expand_one(part, limit, out)) {
      return std::nullopt;
    }
  }
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& names) {
  // Prefix and the width of a zero-padded number (0: not padded) -> the numbers.
  std::vector<std::pair<std::string, size_t>> order;
  std::map<std::pair<std::string, size_t>, std::set<uint64_t>> numbers;
  std::vector<std::string> plain;
  for (const auto& name : names) {
    size_t digits = name.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1])) != 0) {
      --digits;
    }
    const size_t width = name.size() - digits;
    uint64_t number = 0;
    if (width == 0 || width > 18 ||
        std::from_chars(name.data() + digits, name.data() + name.size(), number).ec !=
            std::errc()) {
      if (std::find(plain.begin(), plain.end(), name) == plain.end()) {
        plain.push_back(name);
      }
      continue;
    }
    const bool padded = width > 1 && name[digits] == '0';
    const auto key = std::make_pair(name.substr(0, digits), padded ? width : 0);
    if (numbers.count(key) == 0) {
      order.push_back(key);
    }
    numbers[key].insert(number);
  }
  const auto pad = [](uint64_t number, size_t width) {
    std::string text = std::to_string(number);
    return std::string(width > text.size() ? width - text.size() : 0, '0') + text;
  };
  std::string out;
  const auto append = [&out](const std::string& part) {
    out += out.empty() ? "" : ",";
    out += part;
  };
  for (const auto& key : order) {
    const auto& [prefix, width] = key;
    const std::set<uint64_t>& set = numbers[key];
    if (set.size() == 1) {
      append(prefix + pad(*set.begin(), width));
      continue;
    }
    std::string ranges;
    for (auto it = set.begin(); it != set.end();) {
      const uint64_t first = *it;
      uint64_t last = first;
      while (++it != set.end() && *it == last + 1) {
        last = *it;
      }
      ranges += ranges.empty() ? "" : ",";
      ranges += pad(first, width);
      if (last != first) {
        ranges += "-" + pad(last, width);
      }
    }
    std::string bracket = prefix;
    bracket += '[';
    bracket += ranges;
    bracket += ']';
    append(bracket);
  }
  for (const auto& name : plain) {
    append(name);
  }
  return out;
}

}  // namespace tightrope::slurm
