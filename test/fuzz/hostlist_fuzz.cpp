// libFuzzer: any text as a Slurm hostlist expression (slurmctld's job and reservation node
// lists). Expansion must return names or nullopt within its limit, never crash or run away.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "slurm/hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's
  const auto names = tightrope::slurm::expand_hostlist(text, 10000);
  if (names && names->size() > 10000) {
    __builtin_trap();  // the limit is what keeps a hostile expression from exhausting memory
  }
  return 0;
}
