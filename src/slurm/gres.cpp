#include "slurm/gres.hpp"

#include <charconv>
#include <string_view>

namespace tightrope::slurm {
namespace {

// One entry of a gres string without its "(...)" tail, split at ':'.
int64_t entry_gpus(std::string_view entry) {
  entry = entry.substr(0, entry.find('('));
  if (entry.substr(0, entry.find(':')) != "gpu") {
    return 0;
  }
  const size_t last = entry.rfind(':');
  if (last == std::string_view::npos) {
    return 0;
  }
  const std::string_view count = entry.substr(last + 1);
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
  return ec == std::errc() && end == count.data() + count.size() ? n : 0;
}

}  // namespace

int64_t gpu_count(std::string_view gres) {
  int64_t total = 0;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= gres.size(); ++i) {
    const char c = i < gres.size() ? gres[i] : ',';
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (c == ',' && depth <= 0) {
      total += entry_gpus(gres.substr(start, i - start));
      start = i + 1;
      depth = 0;
    }
  }
  return total;
}

}  // namespace tightrope::slurm
