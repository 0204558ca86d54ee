// Small text helpers every module may use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tightrope {

// "a, b,,c" -> {"a", "b", "c"}: the items of a comma-separated list, blanks dropped.
inline std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  std::string item;
  for (const char c : text) {
    if (c == ',') {
      if (!item.empty()) {
        out.push_back(std::move(item));
      }
      item.clear();
    } else if (c != ' ') {
      item.push_back(c);
    }
  }
  if (!item.empty()) {
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace tightrope
