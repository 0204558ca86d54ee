// libFuzzer: any bytes as a kubeconfig. Parsing never crashes, never throws and never leaks; an
// error always names its source, and a config that parses always has a server.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kube/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A base directory that does not exist keeps relative paths in the input from reading files.
  auto config = tightrope::kube::parse_kubeconfig(text, "fuzz", "/nonexistent/tightrope-fuzz");
  if (!config.ok()) {
    if (config.error().file != "fuzz" || config.error().message.empty()) {
      __builtin_trap();
    }
    return 0;
  }
  if (config->server.empty() || config->server.back() == '/' || config->namespace_name.empty()) {
    __builtin_trap();
  }
  return 0;
}
