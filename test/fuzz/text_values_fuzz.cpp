// libFuzzer: any text as each small value the operator reads from objects and flags: Go
// durations, RFC 3339 times, Kubernetes quantities, host:port addresses, log levels. Each must
// give a value or nothing, never a crash or an overflow the sanitizers see.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/defaults.hpp"
#include "base/log.hpp"
#include "kube/endpoints.hpp"
#include "kube/quantity.hpp"
#include "kube/time.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's
  (void)tightrope::api::parse_duration(text);
  if (auto t = tightrope::kube::parse_time(text)) {
    (void)tightrope::kube::format_time(*t);
  }
  (void)tightrope::kube::parse_quantity(text);
  (void)tightrope::kube::parse_quantity_milli(text);
  tightrope::log::Level level{};
  (void)tightrope::log::parse_level(text, &level);
  (void)tightrope::kube::parse_address(std::string(text));
  return 0;
}
