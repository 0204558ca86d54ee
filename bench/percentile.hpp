// The p-th percentile (0..1) of samples, nearest rank; -1 when there are none.
#pragma once

#include <algorithm>
#include <vector>

namespace tightrope::bench {

inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty()) {
    return -1;
  }
  std::sort(xs.begin(), xs.end());
  const size_t i = std::min(xs.size() - 1, static_cast<size_t>(p * static_cast<double>(xs.size())));
  return xs[i];
}

}  // namespace tightrope::bench
