// libFuzzer: any JSON as an object of each kind (Slinky's six and HealthCheck), through what the
// webhook and the operator do with one: decode, validate, validate as an update of itself, and
// encode. An object that decodes must encode to one that decodes again.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "api/codec.hpp"
#include "api/validation.hpp"

namespace {

template <typename T>
void exercise(const nlohmann::json& doc,
              tightrope::api::Decoded<T> (*decode)(const nlohmann::json&)) {
  auto object = decode(doc);
  if (!object) {
    return;
  }
  (void)tightrope::api::validate(*object);
  (void)tightrope::api::validate_update(*object, *object);
  if (!decode(tightrope::api::encode(*object))) {
    __builtin_trap();  // what the operator writes must read back
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tightrope::api;  // NOLINT(google-build-using-namespace): a fuzz entry point
  const auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return 0;
  }
  exercise(doc, decode_controller);
  exercise(doc, decode_nodeset);
  exercise(doc, decode_loginset);
  exercise(doc, decode_restapi);
  exercise(doc, decode_accounting);
  exercise(doc, decode_token);
  exercise(doc, decode_health_check);
  if (doc.is_array()) {
    (void)decode_conditions(doc);
  }
  return 0;
}
