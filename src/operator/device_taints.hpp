// DRA device taints, as a HealthCheck's signal (docs/health.md, "Signals from outside"): a DRA
// driver taints a device it finds faulty in its ResourceSlice, or an admin's or a health tool's
// DeviceTaintRule selects devices; either way the device's Node has a fault.
#pragma once

#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/object.hpp"

namespace tightrope::op {

struct DeviceTaint {
  std::string driver, pool, device;
  std::string key, value, effect;
  std::string time_added;  // RFC 3339; "" when the API left it out
  std::string rule;        // the DeviceTaintRule that put it there; "" for the driver's own
};

// A ResourceSlice as the operator keeps it: what tells a device's taints and its Node, nothing
// of the devices' attributes and capacities (most of a slice, of no use here):
//   {"spec": {"nodeName", "driver", "pool": <pool name>, "devices": [{"name", "taints"}]}}
// Slices of no single Node (network-attached devices) keep no devices.
kube::DecodeResult decode_slice_taints(simdjson::dom::element object, kube::Document* out);

// The cache's index of slices by spec.nodeName.
std::vector<std::string> slice_node(const kube::Document& slice);

// The taints on the devices of `slices` (as decode_slice_taints keeps them): each device's own,
// and those of each DeviceTaintRule (whole documents) whose selector picks the device.
std::vector<DeviceTaint> device_taints(const std::vector<const nlohmann::json*>& slices,
                                       const std::vector<const nlohmann::json*>& rules);

// Whether `key` is one of `wanted` (a HealthCheck's signals.deviceTaints; "*" is any).
bool taint_wanted(const std::string& key, const std::vector<std::string>& wanted);

}  // namespace tightrope::op
