#include "golden.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/validation.hpp"

namespace tightrope::op::testing {
namespace {

using nlohmann::json;

// Plain text that some YAML reader types as something other than a string: YAML 1.2 core
// (null, booleans, numbers, 0x/0o) and YAML 1.1 (yes/no/on/off, sexagesimal, timestamps).
bool typed_by_some_reader(const std::string& s) {
  static const std::vector<std::regex> patterns = {
      std::regex("^(~|null|Null|NULL)$"),
      std::regex("^(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|"
                 "Off|OFF)$"),
      std::regex("^[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9_]*)?)([eE][-+]?[0-9]+)?$"),
      std::regex("^[-+]?0[xob][0-9a-fA-F_]+$"),
      std::regex("^[-+]?\\.(inf|Inf|INF|nan|NaN|NAN)$"),
      std::regex("^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\\.[0-9_]*)?$"),
      std::regex("^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")};
  for (const auto& p : patterns) {
    if (std::regex_search(s, p)) {
      return true;
    }
  }
  return false;
}

bool plain_safe(const std::string& s) {
  static const std::regex kShape("^[A-Za-z0-9_./][A-Za-z0-9_./:=,()@+ -]*$");
  return !s.empty() && std::regex_match(s, kShape) && s.find(": ") == std::string::npos &&
         s.back() != ':' && s.back() != ' ' && !typed_by_some_reader(s);
}

// A literal block keeps the text exactly when no line starts the block with a blank (which
// would need an indentation indicator) and nothing is a control character but '\n'.
bool literal_safe(const std::string& s) {
  if (s.find('\n') == std::string::npos || s.front() == ' ' || s.front() == '\t' ||
      s.front() == '\n') {
    return false;
  }
  for (const unsigned char ch : s) {
    if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) {
      return false;
    }
  }
  return true;
}

std::string pad(int indent) {
  std::string blanks(static_cast<size_t>(indent), ' ');
  return blanks;
}

// A scalar after "key:" or "-" (with the separating blank); literal lines at `indent`.
std::string scalar(const json& v, int indent) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (plain_safe(s)) {
      return " " + s + "\n";
    }
    if (!literal_safe(s)) {
      return " " + v.dump() + "\n";  // a JSON string is a YAML double-quoted scalar
    }
    size_t trailing = 0;
    while (trailing < s.size() && s[s.size() - 1 - trailing] == '\n') {
      ++trailing;
    }
    std::string out = trailing == 0 ? " |-\n" : trailing == 1 ? " |\n" : " |+\n";
    const std::string body = s.substr(0, s.size() - trailing);
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
      out += line.empty() ? "\n" : pad(indent) + line + "\n";
    }
    for (size_t i = 1; i < trailing; ++i) {
      out += "\n";
    }
    return out;
  }
  if (v.is_object()) {
    return " {}\n";
  }
  if (v.is_array()) {
    return " []\n";
  }
  return " " + v.dump() + "\n";  // null, booleans and numbers read back as written
}

bool block(const json& v) {
  return (v.is_object() || v.is_array()) && !v.empty();
}

std::string key_text(const std::string& key) {
  return plain_safe(key) ? key : json(key).dump();
}

void emit(const json& v, int indent, std::string& out);

void emit_object(const json& v, int indent, std::string& out) {
  for (const auto& [key, value] : v.items()) {
    out += pad(indent) + key_text(key) + ":";
    if (!block(value)) {
      out += scalar(value, indent + 2);
    } else {
      out += "\n";
      emit(value, indent + 2, out);
    }
  }
}

void emit_array(const json& v, int indent, std::string& out) {
  for (const auto& item : v) {
    if (!block(item)) {
      out += pad(indent) + "-" + scalar(item, indent + 2);
      continue;
    }
    // The item's first line shares the dash's line.
    std::string nested;
    emit(item, indent + 2, nested);
    out += pad(indent) + "- " + nested.substr(static_cast<size_t>(indent) + 2);
  }
}

void emit(const json& v, int indent, std::string& out) {
  if (v.is_object()) {
    emit_object(v, indent, out);
  } else {
    emit_array(v, indent, out);
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string());
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename T>
std::vector<T> decode_all(const std::vector<json>& docs, api::Decoded<T> (*decode)(const json&)) {
  std::vector<T> out;
  for (const json& doc : docs) {
    auto decoded = decode(doc);
    if (!decoded) {
      throw std::runtime_error("input.yaml: " + api::join(decoded.error()));
    }
    api::apply_defaults(*decoded);
    if (const auto errors = api::validate(*decoded); !errors.empty()) {
      throw std::runtime_error("input.yaml: " + api::join(errors));
    }
    out.push_back(std::move(*decoded));
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// "line N" with the golden's and the new text's lines there and a little context.
std::string first_difference(const std::string& expected, const std::string& actual) {
  const auto want = lines_of(expected);
  const auto got = lines_of(actual);
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) {
    ++i;
  }
  std::ostringstream out;
  out << "line " << i + 1 << " (golden has " << want.size() << " lines, new text " << got.size()
      << "):\n";
  const size_t from = i >= 2 ? i - 2 : 0;
  for (size_t k = from; k < i; ++k) {
    out << "    " << want[k] << "\n";
  }
  for (size_t k = i; k < want.size() && k < i + 3; ++k) {
    out << "  - " << want[k] << "\n";
  }
  for (size_t k = i; k < got.size() && k < i + 3; ++k) {
    out << "  + " << got[k] << "\n";
  }
  return out.str();
}

}  // namespace

std::string to_yaml_stream(const std::vector<json>& objects, const std::string& header_comment) {
  std::string out;
  std::istringstream header(header_comment);
  for (std::string line; std::getline(header, line);) {
    out += line.empty() ? "#\n" : "# " + line + "\n";
  }
  for (const json& object : objects) {
    out += "---\n";
    if (block(object)) {
      emit(object, 0, out);
    } else {
      out += object.is_object() ? "{}\n" : object.dump() + "\n";
    }
  }
  return out;
}

std::filesystem::path case_dir(const std::string& name) {
  return api::testing::source_dir() / "test" / "unit" / "operator" / "testdata" / name;
}

CaseInput::CaseInput(const std::string& name) {
  for (json& doc : api::testing::load_yaml_file(case_dir(name) / "input.yaml")) {
    if (doc.value("kind", "") == "GoldenInputs") {
      fixed_ = doc;
    } else {
      docs_.push_back(std::move(doc));
    }
  }
}

std::vector<json> CaseInput::docs_of(const std::string& kind) const {
  std::vector<json> out;
  for (const json& doc : docs_) {
    if (doc.value("kind", "") == kind) {
      out.push_back(doc);
    }
  }
  return out;
}

std::vector<api::Controller> CaseInput::controllers() const {
  return decode_all(docs_of("Controller"), &api::decode_controller);
}
std::vector<api::NodeSet> CaseInput::nodesets() const {
  return decode_all(docs_of("NodeSet"), &api::decode_nodeset);
}
std::vector<api::Accounting> CaseInput::accountings() const {
  return decode_all(docs_of("Accounting"), &api::decode_accounting);
}
std::vector<api::RestApi> CaseInput::restapis() const {
  return decode_all(docs_of("RestApi"), &api::decode_restapi);
}
std::vector<api::LoginSet> CaseInput::loginsets() const {
  return decode_all(docs_of("LoginSet"), &api::decode_loginset);
}
std::vector<api::Token> CaseInput::tokens() const {
  return decode_all(docs_of("Token"), &api::decode_token);
}

std::map<std::string, std::map<std::string, std::string>> CaseInput::config_maps() const {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const json& doc : docs_of("ConfigMap")) {
    auto& data = out[doc.at("metadata").at("name").get<std::string>()];
    const json data_doc = doc.value("data", json::object());
    for (const auto& [key, value] : data_doc.items()) {
      data[key] = value.get<std::string>();
    }
  }
  return out;
}

const json& CaseInput::fixed(const std::string& field) const {
  static const json kNull;
  const auto it = fixed_.find(field);
  return it == fixed_.end() ? kNull : *it;
}

void expect_golden(const std::filesystem::path& file, const std::string& actual) {
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << actual;
    ASSERT_TRUE(out.good()) << "cannot write " << file;
    return;
  }
  if (!std::filesystem::exists(file)) {
    FAIL() << file << " does not exist: run the test with UPDATE_GOLDEN=1 to create it";
  }
  const std::string expected = read_file(file);
  if (expected == actual) {
    return;
  }
  ADD_FAILURE() << file << " differs from what the builders make now, first at\n"
                << first_difference(expected, actual)
                << "If the change is intended, rerun with UPDATE_GOLDEN=1 and review the diff "
                   "of the golden file.";
}

}  // namespace tightrope::op::testing
