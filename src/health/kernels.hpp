// The active checks' measurements (docs/health.md, "Active checks"): a floating-point kernel on
// every usable CPU and a STREAM triad over memory, each verified against a known result.
#pragma once

#include <chrono>
#include <cstddef>

#include "health/active.hpp"

namespace tightrope::health {

// Each of `threads` threads multiplies the same matrices for `duration` and checks every result
// against one computed before: GFLOP/s over all of them, and whether each got it right.
Measurement measure_cpu(unsigned threads, std::chrono::milliseconds duration);

// A STREAM triad (a = b + s*c) over three arrays of `bytes_per_array`, split over `threads`:
// the best of `passes` in MB/s (three arrays' bytes a pass), and whether every element is right.
Measurement measure_memory_bandwidth(unsigned threads, size_t bytes_per_array, int passes);

}  // namespace tightrope::health
