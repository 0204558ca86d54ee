// BENCHMARK ONLY: what a process under test costs, measured from outside it: its RSS and CPU
// (and its children's) from /proc, and its requests to the API server from the bed's audit log
// (its own audited identity). Shared by bench/run scale and bench/run bridge.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ios>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tightrope::bench {

struct Usage {
  double rss_mib = 0;
  double cpu_s = 0;
  double hwm_mib = 0;  // peak RSS the kernel saw (the main process)
};

// What /proc/<pid>/stat says of a process.
struct ProcStat {
  pid_t pid = 0;
  std::string comm;
  pid_t ppid = 0;
  double cpu_s = 0;  // utime + stime
};

std::vector<ProcStat> all_processes();
// RSS and CPU of pid and its descendants.
Usage usage_of(pid_t root);

struct AuditCount {
  int64_t requests = 0;  // Lease requests not included
  int64_t lease_requests = 0;
  std::map<std::string, int64_t> by_kind;  // "verb resource[/subresource]"
  // Requests the API server refused (4xx: a pod already gone, one that already exists): writes
  // the process should not have sent. "verb resource[/subresource] code".
  int64_t refused = 0;
  std::map<std::string, int64_t> refused_by_kind;
};

std::streamoff file_size(const std::string& path);
// The audit log's events between two offsets of the file.
AuditCount audit_between(const std::string& path, std::streamoff from, std::streamoff to);
// The n largest counts, as a JSON object.
nlohmann::json top(const std::map<std::string, int64_t>& counts, size_t n);

}  // namespace tightrope::bench
