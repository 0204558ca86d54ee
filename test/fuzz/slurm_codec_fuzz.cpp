// libFuzzer: any bytes as slurmrestd's answer. The decoders must return a value or a kProtocol
// error, never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "slurm/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return 0;
  }
  using namespace tightrope::slurm;
  (void)decode_nodes(doc, kV0044);
  (void)decode_jobs(doc, kV0044);
  (void)decode_partitions(doc, kV0044);
  (void)decode_reservations(doc, kV0044);
  (void)decode_ping(doc, kV0044);
  (void)decode_diag(doc, kV0044);
  (void)decode_errors(doc);
  return 0;
}
