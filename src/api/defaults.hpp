// Slinky's defaults, applied to a decoded resource before anything reads it. The CRD schemas
// carry the same defaults, so the API server usually applies them first; these cover objects
// written before a default existed and keep the builders free of "if unset" branches.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "api/types.hpp"

namespace tightrope::api {

void apply_defaults(Controller& object);
void apply_defaults(NodeSet& object);
void apply_defaults(LoginSet& object);
void apply_defaults(RestApi& object);
void apply_defaults(Accounting& object);
void apply_defaults(Token& object);
void apply_defaults(HealthCheck& object);

inline constexpr std::string_view kDefaultTokenLifetime = "15m";
inline constexpr std::string_view kTokenSecretKey = "SLURM_JWT";
inline constexpr int64_t kDefaultHealthInterval = 60;     // seconds
inline constexpr int64_t kDefaultHealthTimeout = 30;      // seconds
inline constexpr int64_t kDefaultQuarantineAfter = 2;     // failures on one Kubernetes Node
inline constexpr int64_t kDefaultHealthWindow = 86400;    // seconds a failure counts
inline constexpr int64_t kDefaultActiveInterval = 86400;  // seconds between active checks of a node
inline constexpr int64_t kDefaultActiveTimeout = 120;     // seconds an active check job may take
inline constexpr std::string_view kDefaultNcclTests = "/usr/local/bin/all_reduce_perf";

// A Go duration ("90s", "15m", "1h30m", "2.5h"): the whole seconds it spans, or nothing when the
// text is not one. Units ns, us, ms, s, m, h, as time.ParseDuration reads them.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

}  // namespace tightrope::api
