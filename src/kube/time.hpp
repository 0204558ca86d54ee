// Kubernetes timestamps: metav1.Time ("2026-12-02T15:45:16Z") and metav1.MicroTime
// ("2026-12-02T15:45:16.123456Z"), written in UTC; read as any RFC 3339 time, so an offset
// ("2026-12-02T16:45:16+01:00") that a person wrote in a spec is understood too.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tightrope::kube {

std::string format_time(std::chrono::system_clock::time_point t);
std::string format_micro_time(std::chrono::system_clock::time_point t);
// Either form, "Z" or an offset; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_time(std::string_view text);

}  // namespace tightrope::kube
