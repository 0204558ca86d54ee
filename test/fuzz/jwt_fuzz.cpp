// libFuzzer: any text as a JWT (what slurmrestd or a Secret hands the operator) and as the
// contents of a token file. Verification must accept only tokens signed with the key; garbage
// gives nothing, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "slurm/token.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's bytes
  static const std::string kKey(32, 'k');
  (void)tightrope::slurm::verify_jwt(kKey, text);
  (void)tightrope::slurm::verify_jwt(kKey, tightrope::slurm::token_from_text(text));
  return 0;
}
