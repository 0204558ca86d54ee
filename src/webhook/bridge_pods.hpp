// slurm-bridge's admission: pods (and batch Jobs) of the namespaces the bridge manages. A pod of
// a managed namespace that names no scheduler gets the bridge's; every pod that names the bridge
// gets the toleration of the bridge's Node taint, loses a spec.nodeName that would skip Slurm,
// and is refused, field by field, for job options that do not parse, for the labels and
// annotations only the bridge sets, and for what the bridge cannot place (resource claims). A
// Job whose pods name the bridge is checked the same way, since its annotations are the pods'
// job options. Pure: namespaces' labels come through a callback.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "bridge/config.hpp"
#include "webhook/admission.hpp"

namespace tightrope::webhook {

// The labels of namespace `name`, or nothing when it cannot be read.
using NamespaceLabels =
    std::function<std::optional<std::map<std::string, std::string>>(const std::string& name)>;

// The path the mutating webhook configuration names (controller-runtime's name for core/v1 Pod).
inline constexpr std::string_view kBridgePodsPath = "/mutate--v1-pod";

Verdict admit_bridge(const nlohmann::json& review, const bridge::BridgeConfig& config,
                     const NamespaceLabels& namespaces);
Verdict admit_bridge(std::string_view body, const bridge::BridgeConfig& config,
                     const NamespaceLabels& namespaces);

}  // namespace tightrope::webhook
