// libFuzzer: any bytes as slurm.conf. Parsing never crashes; what parses renders to a normal
// form that parses again to the same text (the round trip the operator relies on).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "slurm/conf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto conf = tightrope::slurm::parse_slurm_conf(text, "fuzz");
  if (!conf.ok()) {
    return 0;
  }
  const std::string once = conf->render();
  auto again = tightrope::slurm::parse_slurm_conf(once, "fuzz");
  if (!again.ok() || again->render() != once) {
    __builtin_trap();
  }
  (void)tightrope::slurm::validate_extra_conf(*conf, {{"ClusterName"}, {"NodeSet=a"}, "x"});
  return 0;
}
