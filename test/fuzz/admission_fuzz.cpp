// libFuzzer: any bytes as the body of an AdmissionReview POSTed to the webhook (validation of
// the six kinds) and of a binding request. Whatever comes must be a verdict, never a crash; a
// body that is not a review is denied.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "webhook/admission.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tightrope::webhook;  // NOLINT(google-build-using-namespace): a fuzz entry point
  const std::string_view body(reinterpret_cast<const char*>(data), size);  // NOLINT: libFuzzer's
  // A ConfigMap that exists for every name, so a Controller's configuration checks run too.
  const ConfigMapLookup config_maps = [](const std::string&, const std::string&) {
    return std::optional<std::map<std::string, std::string>>(
        std::map<std::string, std::string>{{"slurm.conf", "SchedulerType=sched/backfill\n"}});
  };
  const Verdict verdict = admit(body, config_maps);
  (void)review_response(verdict);
  (void)read_binding(body);
  return 0;
}
