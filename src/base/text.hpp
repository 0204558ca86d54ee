// Small text helpers every module may use.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tightrope {

// `text` with each byte that does not belong to a well-formed UTF-8 character replaced by
// U+FFFD. Text from other programs may hold any bytes, and nlohmann::json's dump() throws on
// invalid UTF-8 (type_error 316): what the operator writes to the API server must be UTF-8.
std::string valid_utf8(std::string_view text);

// Where the first byte that does not belong to a well-formed UTF-8 character is, or npos.
size_t utf8_error_at(std::string_view text);

// The longest prefix of `text` of at most `limit` bytes that ends between two characters, so
// that cutting valid UTF-8 leaves valid UTF-8.
std::string_view utf8_prefix(std::string_view text, size_t limit);

// Text from another program made fit to show a person in a condition, an Event or a log: valid
// UTF-8 (above), each control character (C0 and DEL) a space so that no line breaks or terminal
// escapes come with it, at most `limit` bytes.
std::string printable_text(std::string_view text, size_t limit = std::string_view::npos);

// `text` as valid UTF-8 with its control characters (C0 and DEL) dropped, at most `limit` bytes
// cut between characters: a reason Slurm keeps on one line, and JSON that can be written.
std::string without_controls(std::string_view text, size_t limit);

// Whether arrays and objects in the JSON `text` nest deeper than `limit`, read without parsing
// (brackets inside strings do not count). nlohmann::json builds every level it parses and copies
// and writes documents recursively: a depth checked first bounds both memory and stack.
bool json_nested_deeper_than(std::string_view text, size_t limit);

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
