#include "testbed.hpp"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tightrope::testing {
namespace {

// Reads one sh word starting at `pos`: plain characters, '...' and \x, up to unquoted whitespace.
std::string read_word(std::string_view line, size_t& pos, size_t line_no) {
  std::string out;
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') {
    const char c = line[pos];
    if (c == '\'') {
      const size_t end = line.find('\'', pos + 1);
      if (end == std::string_view::npos) {
        throw std::invalid_argument("env line " + std::to_string(line_no) + ": unterminated quote");
      }
      out.append(line.substr(pos + 1, end - pos - 1));
      pos = end + 1;
    } else if (c == '\\' && pos + 1 < line.size()) {
      out.push_back(line[pos + 1]);
      pos += 2;
    } else if (c == '"' || c == '$' || c == '`') {
      throw std::invalid_argument("env line " + std::to_string(line_no) +
                                  ": unsupported shell syntax '" + std::string(1, c) + "'");
    } else {
      out.push_back(c);
      ++pos;
    }
  }
  return out;
}

std::string run_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) {
    throw std::runtime_error("cannot run: " + cmd);
  }
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) {
    out.append(buf.data(), n);
  }
  const int status = pclose(pipe.release());
  if (status != 0) {
    throw std::runtime_error("command failed (status " + std::to_string(status) + "): " + cmd);
  }
  return out;
}

std::string testbed_script() {
  return std::string(TIGHTROPE_SOURCE_DIR) + "/scripts/testbed";
}

}  // namespace

std::map<std::string, std::string> parse_env_exports(std::string_view text) {
  std::map<std::string, std::string> vars;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      line.remove_prefix(1);
    }
    if (line.empty() || line.front() == '#') {
      continue;
    }
    constexpr std::string_view kExport = "export ";
    if (line.substr(0, kExport.size()) != kExport) {
      throw std::invalid_argument("env line " + std::to_string(line_no) + ": expected 'export '");
    }
    line.remove_prefix(kExport.size());
    const size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos) {
      throw std::invalid_argument("env line " + std::to_string(line_no) + ": expected KEY=value");
    }
    const std::string key(line.substr(0, eq));
    size_t pos = eq + 1;
    vars[key] = read_word(line, pos, line_no);
    if (pos != line.size()) {
      throw std::invalid_argument("env line " + std::to_string(line_no) +
                                  ": trailing text after the value of " + key);
    }
  }
  return vars;
}

std::map<std::string, std::string>& TestBed::vars() {
  static std::map<std::string, std::string> v;
  return v;
}

const std::string& TestBed::var(const std::string& key) {
  auto it = vars().find(key);
  if (it == vars().end()) {
    throw std::out_of_range("the test bed exports no " + key);
  }
  return it->second;
}

pid_t TestBed::pid_of(const std::string& process) {
  std::ifstream in(std::filesystem::path(var("TESTBED_DIR")) / "state.json");
  const auto state = nlohmann::json::parse(in);
  return state.at("procs").at(process).at("pid").get<pid_t>();
}

int TestBed::up() {
  return std::system(
      (testbed_script() + " --name " + var("TESTBED_NAME") + " up >/dev/null 2>&1").c_str());
}

int TestBed::slurm_cli(const std::string& args) {
  return std::system(
      (testbed_script() + " --name " + var("TESTBED_NAME") + " slurm " + args + " >/dev/null 2>&1")
          .c_str());
}

bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return true;
  }
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

void TestBed::SetUp() {
  std::string name;
  if (const char* shared = std::getenv("TESTBED_NAME"); shared != nullptr && *shared != '\0') {
    name = shared;
  } else {
    name = "gtest-" + std::to_string(getpid());
    owned_name_ = name;
    run_command(testbed_script() + " --name " + name + " up");
  }
  vars() = parse_env_exports(run_command(testbed_script() + " --name " + name + " env"));
}

void TestBed::TearDown() {
  if (!owned_name_.empty()) {
    run_command(testbed_script() + " --name " + owned_name_ + " destroy");
  }
}

}  // namespace tightrope::testing
