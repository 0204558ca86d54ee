// Standard base64, as Kubernetes carries bytes in JSON (Secret data, kubeconfig `*-data`).
#pragma once

#include <string>
#include <string_view>

#include "base/result.hpp"

namespace tightrope::kube {

// The bytes, or what is wrong with the text ("is not valid base64: ..."). Blanks and line breaks
// are skipped.
tightrope::Result<std::string, std::string> decode_base64(std::string_view text);
std::string encode_base64(std::string_view data);

}  // namespace tightrope::kube
