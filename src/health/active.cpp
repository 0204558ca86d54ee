#include "health/active.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

namespace tightrope::health {
namespace {

bool wanted(const ActiveConfig& config, std::string_view check) {
  return std::find(config.checks.begin(), config.checks.end(), check) != config.checks.end();
}

std::string figure(double value) {
  std::array<char, 32> text{};
  (void)std::snprintf(text.data(), text.size(), "%.1f", value);
  return text.data();
}

// One measured check: a finding when it went wrong or fell below its floor (0: none).
void judge_one(std::string_view check, const Measurement& m, int64_t floor, std::string_view unit,
               std::string_view key, ActiveVerdict& out) {
  const std::string name = "active:" + std::string(check);
  if (!m.rate) {
    out.failed.push_back({name, m.error.empty() ? "did not run" : m.error});
    return;
  }
  out.measured[std::string(key)] = *m.rate;
  if (!m.correct) {
    out.failed.push_back({name, m.error.empty() ? "computed a wrong result" : m.error});
  } else if (floor > 0 && *m.rate < static_cast<double>(floor)) {
    out.failed.push_back(
        {name, figure(*m.rate) + " " + std::string(unit) + ", below " + std::to_string(floor)});
  }
}

}  // namespace

NcclResult parse_all_reduce_perf(std::string_view output) {
  NcclResult out;
  std::istringstream lines{std::string(output)};
  std::string line;
  const auto after_colon = [](const std::string& l) { return l.substr(l.find(':') + 1); };
  while (std::getline(lines, line)) {
    if (line.find("Avg bus bandwidth") != std::string::npos &&
        line.find(':') != std::string::npos) {
      try {
        out.bus_bandwidth_gbps = std::stod(after_colon(line));
      } catch (const std::exception&) {
        out.bus_bandwidth_gbps.reset();
      }
    } else if (line.find("Out of bounds values") != std::string::npos &&
               line.find(':') != std::string::npos) {
      try {
        out.wrong_values = std::stoll(after_colon(line));
      } catch (const std::exception&) {
        out.wrong_values = 0;
      }
    }
  }
  return out;
}

ActiveVerdict judge_active(const ActiveConfig& config, const ActiveReadings& readings) {
  ActiveVerdict out;
  if (wanted(config, "cpu")) {
    judge_one("cpu", readings.cpu, config.min_cpu_gflops, "GFLOP/s", "cpuGflops", out);
  }
  if (wanted(config, "memory-bandwidth")) {
    judge_one("memory-bandwidth", readings.memory_bandwidth, config.min_memory_bandwidth_mbps,
              "MB/s", "memoryBandwidthMBps", out);
  }
  if (wanted(config, "nccl")) {
    if (readings.gpus == 0) {
      out.skipped.push_back({"active:nccl", "no GPU on this node"});
    } else if (!readings.nccl_tests_present) {
      // The image's doing, not the node's: no drain for it, but said in the report.
      out.skipped.push_back({"active:nccl", config.nccl_tests + " is not in the image"});
    } else {
      judge_one("nccl", readings.nccl, config.min_nccl_bus_bandwidth_gbps, "GB/s",
                "ncclBusBandwidthGBps", out);
    }
  }
  return out;
}

std::string check_reservation(std::string_view node) {
  return "tightrope-check-" + std::string(node);
}

}  // namespace tightrope::health
