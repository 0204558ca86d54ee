// Kubernetes timestamps: metav1.Time ("2026-12-02T15:45:16Z") and metav1.MicroTime
// ("2026-12-02T15:45:16.123456Z"), always UTC.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tightrope::kube {

std::string format_time(std::chrono::system_clock::time_point t);
std::string format_micro_time(std::chrono::system_clock::time_point t);
// Either form; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_time(std::string_view text);

}  // namespace tightrope::kube
