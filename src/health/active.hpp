// What the active checks measured, judged against the HealthCheck's floors (docs/health.md,
// "Active checks"). Pure: tightrope-health --active runs the kernels and nccl-tests; these
// functions read and judge what they gave.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "health/checks.hpp"

namespace tightrope::health {

// What one kernel gave: its rate, and whether every worker thread computed the same, known result
// (a core that computes wrong is as bad as a slow one).
struct Measurement {
  std::optional<double> rate;  // GFLOP/s, MB/s or GB/s; nullopt when it did not run
  bool correct = true;
  std::string error;  // why it did not run or what went wrong
};

struct ActiveReadings {
  Measurement cpu;               // GFLOP/s over every usable CPU
  Measurement memory_bandwidth;  // MB/s, a STREAM triad
  Measurement nccl;              // GB/s, all_reduce_perf's average bus bandwidth
  int64_t gpus = 0;              // GPUs present; nccl runs only where there are some
  bool nccl_tests_present = false;
};

// What all_reduce_perf printed: its "# Avg bus bandwidth" and "# Out of bounds values".
struct NcclResult {
  std::optional<double> bus_bandwidth_gbps;
  int64_t wrong_values = 0;
};
NcclResult parse_all_reduce_perf(std::string_view output);

// Findings (failed checks) and skipped checks, with the measured figures in the report.
struct ActiveVerdict {
  std::vector<Finding> failed;
  std::vector<Finding> skipped;
  std::map<std::string, double> measured;
};
ActiveVerdict judge_active(const ActiveConfig& config, const ActiveReadings& readings);

// The reservation the operator makes for one node's check job, which the job releases at its end.
std::string check_reservation(std::string_view node);

}  // namespace tightrope::health
