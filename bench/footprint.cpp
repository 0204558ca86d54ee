#include "footprint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace tightrope::bench {

using nlohmann::json;

namespace {

std::optional<ProcStat> read_stat(const std::filesystem::path& dir) {
  std::ifstream stat(dir / "stat");
  std::string line;
  std::getline(stat, line);
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) {
    return std::nullopt;
  }
  ProcStat out;
  out.pid = std::stoi(dir.filename().string());
  out.comm = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) {
    fields.push_back(f);
  }
  // After the ")": state(0) ppid(1) ... utime(11) stime(12).
  if (fields.size() <= 12) {
    return std::nullopt;
  }
  out.ppid = std::stoi(fields[1]);
  out.cpu_s =
      (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return out;
}

}  // namespace

std::vector<ProcStat> all_processes() {
  std::vector<ProcStat> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) == 0) {
      continue;
    }
    if (auto stat = read_stat(entry.path())) {
      out.push_back(std::move(*stat));
    }
  }
  return out;
}

Usage usage_of(pid_t root) {
  const std::vector<ProcStat> processes = all_processes();
  std::set<pid_t> tree = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& p : processes) {
      if (tree.count(p.ppid) != 0 && tree.insert(p.pid).second) {
        grew = true;
      }
    }
  }
  Usage u;
  for (const auto& p : processes) {
    if (tree.count(p.pid) == 0) {
      continue;
    }
    u.cpu_s += p.cpu_s;
    std::ifstream status("/proc/" + std::to_string(p.pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("VmRSS:")) {
        u.rss_mib += std::stod(line.substr(6)) / 1024.0;
      } else if (line.starts_with("VmHWM:") && p.pid == root) {
        u.hwm_mib = std::stod(line.substr(6)) / 1024.0;
      }
    }
  }
  return u;
}

std::streamoff file_size(const std::string& path) {
  std::ifstream f(path, std::ios::ate | std::ios::binary);
  return f ? static_cast<std::streamoff>(f.tellg()) : 0;
}

AuditCount audit_between(const std::string& path, std::streamoff from, std::streamoff to) {
  AuditCount c;
  std::ifstream f(path, std::ios::binary);
  f.seekg(from);
  std::string line;
  while (f.tellg() >= 0 && f.tellg() < to && std::getline(f, line)) {
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object()) {
      continue;
    }
    const json ref = e.value("objectRef", json::object());
    const std::string resource = ref.value("resource", "");
    std::string kind = e.value("verb", "") + " " + resource;
    if (ref.contains("subresource")) {
      kind += "/" + ref.value("subresource", "");
    }
    if (resource == "leases") {
      ++c.lease_requests;
    } else {
      ++c.requests;
      const int code = e.value("/responseStatus/code"_json_pointer, 0);
      if (code >= 400 && code < 500) {
        ++c.refused;
        ++c.refused_by_kind[kind + " " + std::to_string(code)];
      }
    }
    ++c.by_kind[kind];
  }
  return c;
}

json top(const std::map<std::string, int64_t>& counts, size_t n) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json out = json::object();
  for (size_t i = 0; i < v.size() && i < n && v[i].second > 0; ++i) {
    out[v[i].first] = v[i].second;
  }
  return out;
}

}  // namespace tightrope::bench
