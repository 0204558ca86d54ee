#include "base/text.hpp"

namespace tightrope {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed character at the start of `text` (RFC 3629: no overlong forms,
// no surrogates, nothing past U+10FFFF), or 0 when it is not one.
size_t character_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80U) {
    return 1;
  }
  size_t length = 0;
  unsigned char low = 0x80U;
  unsigned char high = 0xBFU;
  if (lead >= 0xC2U && lead <= 0xDFU) {
    length = 2;
  } else if (lead >= 0xE0U && lead <= 0xEFU) {
    length = 3;
    low = lead == 0xE0U ? 0xA0U : 0x80U;
    high = lead == 0xEDU ? 0x9FU : 0xBFU;
  } else if (lead >= 0xF0U && lead <= 0xF4U) {
    length = 4;
    low = lead == 0xF0U ? 0x90U : 0x80U;
    high = lead == 0xF4U ? 0x8FU : 0xBFU;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80U || byte(i) > 0xBFU) {
      return 0;
    }
  }
  return length;
}

}  // namespace

size_t utf8_error_at(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    if (static_cast<unsigned char>(text[at]) < 0x80U) {
      ++at;
      continue;
    }
    const size_t length = character_length(text.substr(at));
    if (length == 0) {
      return at;
    }
    at += length;
  }
  return std::string_view::npos;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t length = character_length(text);
    if (length == 0) {
      out.append(kReplacement);
      text.remove_prefix(1);
    } else {
      out.append(text.substr(0, length));
      text.remove_prefix(length);
    }
  }
  return out;
}

std::string_view utf8_prefix(std::string_view text, size_t limit) {
  if (text.size() <= limit) {
    return text;
  }
  size_t end = limit;
  // Back up over continuation bytes (10xxxxxx) to the start of the character that was cut.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) {
    --end;
  }
  return text.substr(0, end);
}

std::string printable_text(std::string_view text, size_t limit) {
  std::string out = valid_utf8(text);
  for (char& ch : out) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20U || u == 0x7FU) {
      ch = ' ';
    }
  }
  out.resize(utf8_prefix(out, limit).size());
  return out;
}

bool json_nested_deeper_than(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > limit) {
        return true;
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

std::string without_controls(std::string_view text, size_t limit) {
  std::string out;
  for (const char ch : valid_utf8(text)) {
    if (static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f) {
      out.push_back(ch);
    }
  }
  out.resize(utf8_prefix(out, limit).size());
  return out;
}

}  // namespace tightrope
