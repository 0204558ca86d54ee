// libFuzzer: any bytes as slurmrestd's answer to any status, through the client's own reading
// (read_answer, with the field filters the client parses lists with) and then its decoders. It
// must come back as a value or an error, never a crash, a hang or an out-of-bounds read.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "slurm/client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tightrope::slurm;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size < 2) {
    return 0;
  }
  static constexpr std::array<long, 10> kStatuses = {200, 304, 400, 401, 403,
                                                     404, 429, 500, 502, 503};
  static const std::vector<std::string> kNodeFields = node_fields(kV0044);
  static const std::vector<std::string> kJobFields = job_fields(kV0044);
  const long status = kStatuses[data[0] % kStatuses.size()];
  const std::string_view body(reinterpret_cast<const char*>(data + 2),  // NOLINT: libFuzzer's bytes
                              size - 2);
  switch (data[1] % 3) {
    case 0: {
      auto answer = read_answer("GET /nodes", status, body, &kNodeFields);
      if (answer && !answer->doc.is_null()) {
        (void)decode_nodes(answer->doc, kV0044);
      }
      break;
    }
    case 1: {
      auto answer = read_answer("GET /jobs", status, body, &kJobFields);
      if (answer && !answer->doc.is_null()) {
        (void)decode_jobs(answer->doc, kV0044);
      }
      break;
    }
    default: {
      auto answer = read_answer("GET /diag", status, body, nullptr);
      if (answer && !answer->doc.is_null()) {
        (void)decode_ping(answer->doc, kV0044);
        (void)decode_diag(answer->doc, kV0044);
        (void)decode_partitions(answer->doc, kV0044);
        (void)decode_reservations(answer->doc, kV0044);
      }
      break;
    }
  }
  return 0;
}
