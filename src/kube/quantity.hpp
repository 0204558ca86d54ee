// Kubernetes resource quantities ("500m", "2", "1.5Gi", "1e3", "128974848"), as the API server
// writes them in requests, limits and allocatable. Knows nothing of Slurm.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tightrope::kube {

// The quantity in thousandths of its unit, rounded up (CPU "250m" is 250, memory "1Ki" is
// 1,024,000); nullopt when the text is not a quantity or does not fit.
std::optional<int64_t> parse_quantity_milli(std::string_view text);
// The quantity in whole units, rounded up ("1500m" is 2).
std::optional<int64_t> parse_quantity(std::string_view text);

}  // namespace tightrope::kube
