#include "slurm/conf.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace tightrope::slurm {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool same_key(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && blank(s[b])) {
    ++b;
  }
  while (e > b && blank(s[e - 1])) {
    --e;
  }
  return std::string(s.substr(b, e - b));
}

// Splits a logical line into its content and a trailing comment. A '#' inside quotes or
// escaped as "\#" is part of the content.
std::pair<std::string, std::string> split_comment(std::string_view line) {
  std::string content;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\\' && i + 1 < line.size() && line[i + 1] == '#') {
      content += "\\#";
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
      content += c;
    } else if (c == '#' && !quoted) {
      return {content, std::string(line.substr(i))};
    } else {
      content += c;
    }
  }
  return {content, {}};
}

struct Tokenized {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::optional<std::string> error;
};

Tokenized tokenize(std::string_view s) {
  Tokenized out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && blank(s[i])) {
      ++i;
    }
    if (i >= s.size()) {
      break;
    }
    const size_t key_start = i;
    while (i < s.size() && s[i] != '=' && !blank(s[i])) {
      ++i;
    }
    const std::string key(s.substr(key_start, i - key_start));
    if (i >= s.size() || s[i] != '=') {
      out.error = "expected Key=Value, got '" + key + "'";
      return out;
    }
    if (key.empty()) {
      out.error = "a value without a key";
      return out;
    }
    if (!std::all_of(key.begin(), key.end(), [](unsigned char c) {
          return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.' || c == ':';
        })) {
      out.error = "'" + key + "' is not a slurm.conf key";
      return out;
    }
    ++i;  // '='
    std::string value;
    while (i < s.size() && !blank(s[i])) {
      if (s[i] == '"') {
        const size_t end = s.find('"', i + 1);
        if (end == std::string_view::npos) {
          out.error = "unterminated quote in the value of " + key;
          return out;
        }
        value.append(s.substr(i + 1, end - i - 1));
        i = end + 1;
      } else if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '#') {
        value += '#';
        i += 2;
      } else {
        value += s[i++];
      }
    }
    out.pairs.emplace_back(key, std::move(value));
  }
  return out;
}

// Lowercased record keys of slurm.conf (slurm.conf(5): "NODE CONFIGURATION" and after).
constexpr std::array<std::string_view, 6> kRecordKeys = {
    "nodename", "nodeset", "partitionname", "downnodes", "frontendname", "slurmctldhost"};

}  // namespace

std::string ConfError::to_string() const {
  return line > 0 ? source + " line " + std::to_string(line) + ": " + message
                  : source + ": " + message;
}

bool is_record_key(std::string_view key) {
  const std::string k = lower(key);
  return std::find(kRecordKeys.begin(), kRecordKeys.end(), k) != kRecordKeys.end();
}

std::optional<std::string> ConfLine::get(std::string_view key) const {
  for (const auto& [k, v] : pairs) {
    if (same_key(k, key)) {
      return v;
    }
  }
  return std::nullopt;
}

std::optional<std::string> SlurmConf::get(std::string_view key) const {
  for (size_t i = lines_.size(); i-- > 0;) {  // the last setting wins, as in Slurm
    const ConfLine& line = lines_[i];
    if (line.kind == ConfLine::Kind::kSetting) {
      if (auto v = line.get(key)) {
        return v;
      }
    }
  }
  return std::nullopt;
}

void SlurmConf::set(std::string_view key, std::string value) {
  for (size_t i = lines_.size(); i-- > 0;) {
    ConfLine& line = lines_[i];
    if (line.kind != ConfLine::Kind::kSetting) {
      continue;
    }
    for (auto& [k, v] : line.pairs) {
      if (same_key(k, key)) {
        v = std::move(value);
        return;
      }
    }
  }
  append_setting({{std::string(key), std::move(value)}});
}

void SlurmConf::append(ConfLine line) {
  lines_.push_back(std::move(line));
}

void SlurmConf::append_setting(std::vector<std::pair<std::string, std::string>> pairs) {
  ConfLine line;
  line.kind = ConfLine::Kind::kSetting;
  line.pairs = std::move(pairs);
  lines_.push_back(std::move(line));
}

void SlurmConf::append_comment(std::string text) {
  ConfLine line;
  line.kind = ConfLine::Kind::kComment;
  line.text = text.rfind('#', 0) == 0 ? std::move(text) : "# " + text;
  lines_.push_back(std::move(line));
}

void SlurmConf::append_blank() {
  lines_.push_back(ConfLine{});
}

std::vector<const ConfLine*> SlurmConf::records(std::string_view key) const {
  std::vector<const ConfLine*> out;
  for (const auto& line : lines_) {
    if (line.kind == ConfLine::Kind::kSetting && same_key(line.key(), key)) {
      out.push_back(&line);
    }
  }
  return out;
}

std::string quote_conf_value(std::string_view value) {
  const bool needs_quotes =
      // A backslash ending a line would continue it; inside quotes it is literal.
      value.empty() || value.find_first_of(" \t\r#=\\") != std::string_view::npos;
  return needs_quotes ? "\"" + std::string(value) + "\"" : std::string(value);
}

std::string SlurmConf::render() const {
  std::string out;
  for (const auto& line : lines_) {
    switch (line.kind) {
      case ConfLine::Kind::kBlank:
        break;
      case ConfLine::Kind::kComment:
        out += line.text;
        break;
      case ConfLine::Kind::kInclude:
        out += "Include " + line.text;
        break;
      case ConfLine::Kind::kSetting:
        for (size_t i = 0; i < line.pairs.size(); ++i) {
          out += (i == 0 ? "" : " ") + line.pairs[i].first + "=" +
                 quote_conf_value(line.pairs[i].second);
        }
        if (!line.comment.empty()) {
          out += " " + line.comment;
        }
        break;
    }
    // A line ending in a backslash would continue onto the next one when read back.
    if (!out.empty() && out.back() == '\\') {
      out += ' ';
    }
    out += '\n';
  }
  return out;
}

tightrope::Result<SlurmConf, ConfError> parse_slurm_conf(std::string_view text,
                                                         const std::string& source) {
  SlurmConf conf;
  int line_no = 0;
  while (!text.empty()) {
    // A logical line: physical lines joined while one ends with a backslash.
    std::string logical;
    const int first_line = line_no + 1;
    for (;;) {
      const size_t nl = text.find('\n');
      std::string_view physical = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      ++line_no;
      if (!physical.empty() && physical.back() == '\r') {
        physical.remove_suffix(1);
      }
      if (!physical.empty() && physical.back() == '\\' && !text.empty()) {
        logical.append(physical.substr(0, physical.size() - 1));
        logical += ' ';
        continue;
      }
      logical.append(physical);
      break;
    }
    if (logical.find('\0') != std::string::npos) {
      return fail(ConfError{source, first_line, "contains a NUL byte"});
    }
    ConfLine line;
    line.line = first_line;
    const std::string stripped = trim(logical);
    if (stripped.empty()) {
      conf.append(std::move(line));
      continue;
    }
    if (stripped.front() == '#') {
      line.kind = ConfLine::Kind::kComment;
      line.text = stripped;
      conf.append(std::move(line));
      continue;
    }
    auto [content, comment] = split_comment(stripped);
    content = trim(content);
    if (content.size() > 8 && same_key(std::string_view(content).substr(0, 8), "include ")) {
      line.kind = ConfLine::Kind::kInclude;
      line.text = trim(std::string_view(content).substr(8));
      conf.append(std::move(line));
      continue;
    }
    Tokenized t = tokenize(content);
    if (t.error) {
      return fail(ConfError{source, first_line, *t.error});
    }
    line.kind = ConfLine::Kind::kSetting;
    line.pairs = std::move(t.pairs);
    line.comment = trim(comment);
    conf.append(std::move(line));
  }
  return conf;
}

std::vector<ConfError> validate_extra_conf(const SlurmConf& extra, const OwnedConf& owned) {
  std::set<std::string> owned_keys;
  for (const auto& k : owned.keys) {
    owned_keys.insert(lower(k));
  }
  std::set<std::string> owned_records;
  for (const auto& r : owned.records) {
    const size_t eq = r.find('=');
    owned_records.insert(lower(r.substr(0, eq)) + "=" +
                         (eq == std::string::npos ? "" : r.substr(eq + 1)));
  }
  std::vector<ConfError> errors;
  for (const auto& line : extra.lines()) {
    if (line.kind == ConfLine::Kind::kInclude) {
      errors.push_back({"extraConf", line.line,
                        "Include " + line.text +
                            " is not allowed: an included file could override what " + owned.owner +
                            " sets; put its lines in extraConf"});
      continue;
    }
    if (line.kind != ConfLine::Kind::kSetting) {
      continue;
    }
    if (is_record_key(line.key())) {
      const std::string record = lower(line.key()) + "=" + line.name();
      if (owned_records.count(record) != 0 || owned_keys.count(lower(line.key())) != 0) {
        errors.push_back({"extraConf", line.line,
                          line.key() + "=" + line.name() + " is defined by " + owned.owner +
                              "; change it through the resource that owns it"});
      }
      continue;
    }
    for (const auto& [key, value] : line.pairs) {
      if (owned_keys.count(lower(key)) != 0) {
        errors.push_back({"extraConf", line.line,
                          key + " is set by " + owned.owner + " and cannot be set in extraConf"});
      }
    }
  }
  return errors;
}

}  // namespace tightrope::slurm
