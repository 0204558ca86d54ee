// libFuzzer: what slurm-bridge reads from users: a pod (its JSON, then the job options of its
// slurmjob.slinky.slurm.net/* annotations) and, when the first byte says so, the bridge's
// configuration file as the chart writes it. Each gives a value or an error naming the field.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "bridge/config.hpp"
#include "bridge/objects.hpp"
#include "bridge/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tightrope::bridge;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) {
    return 0;
  }
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);  // NOLINT: libFuzzer's
  if (data[0] % 4 == 0) {
    (void)parse_bridge_config(text);
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element element;
  if (parser.parse(text).get(element) != simdjson::SUCCESS) {
    return 0;
  }
  Pod pod;
  if (decode_pod(element, &pod)) {
    JobOptions options;
    (void)parse_job_options(pod.annotations, &options);
  }
  return 0;
}
