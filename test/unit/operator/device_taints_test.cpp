// DRA device taints as a HealthCheck's signal reads them: a ResourceSlice kept as its devices'
// names and taints, and the taints DeviceTaintRules put on those devices.
#include "operator/device_taints.hpp"

#include <gtest/gtest.h>

namespace tightrope::op {
namespace {

using nlohmann::json;

// A GPU driver's slice of one Node as the API server serves it, device attributes and all.
json gpu_slice(const std::string& node, const json& gpu1_taints) {
  json gpu1 = {{"name", "gpu-1"},
               {"attributes", {{"uuid", {{"string", "GPU-2"}}}}},
               {"capacity", {{"memory", {{"value", "80Gi"}}}}}};
  if (!gpu1_taints.is_null()) {
    gpu1["taints"] = gpu1_taints;
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.example.com-x7"}, {"resourceVersion", "5"}}},
          {"spec",
           {{"driver", "gpu.example.com"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices",
             json::array({{{"name", "gpu-0"}, {"attributes", {{"uuid", {{"string", "GPU-1"}}}}}},
                          gpu1})}}}};
}

kube::Document kept(const json& slice) {
  simdjson::dom::parser parser;
  const std::string text = slice.dump();
  simdjson::dom::element element;
  kube::Document out;
  EXPECT_EQ(parser.parse(text).get(element), simdjson::SUCCESS);
  EXPECT_TRUE(decode_slice_taints(element, &out));
  return out;
}

const json kXid = json::array({{{"key", "gpu.example.com/xid"},
                                {"value", "79"},
                                {"effect", "NoSchedule"},
                                {"timeAdded", "2026-12-07T10:00:00Z"}}});

TEST(DeviceTaints, ASliceIsKeptAsItsNodeAndItsDevicesNamesAndTaints) {
  const kube::Document slice = kept(gpu_slice("k8s-1", kXid));
  EXPECT_EQ(slice.meta.name, "k8s-1-gpu.example.com-x7");
  EXPECT_EQ(slice_node(slice), std::vector<std::string>{"k8s-1"});
  EXPECT_EQ(slice.doc.dump(),
            json({{"spec",
                   {{"nodeName", "k8s-1"},
                    {"driver", "gpu.example.com"},
                    {"pool", "k8s-1"},
                    {"devices", json::array({{{"name", "gpu-0"}, {"taints", json::array()}},
                                             {{"name", "gpu-1"}, {"taints", kXid}}})}}}})
                .dump())
      << "no attributes or capacities";
  json network = gpu_slice("", kXid);
  network["spec"]["allNodes"] = true;
  EXPECT_TRUE(kept(network).doc["spec"]["devices"].empty()) << "no single Node's devices";
  EXPECT_TRUE(slice_node(kept(network)).empty());
}

TEST(DeviceTaints, TheDriversOwnTaintsAreFoundOnTheirDevice) {
  const kube::Document slice = kept(gpu_slice("k8s-1", kXid));
  const auto taints = device_taints({&slice.doc}, {});
  ASSERT_EQ(taints.size(), 1U);
  EXPECT_EQ(taints[0].driver, "gpu.example.com");
  EXPECT_EQ(taints[0].pool, "k8s-1");
  EXPECT_EQ(taints[0].device, "gpu-1");
  EXPECT_EQ(taints[0].key, "gpu.example.com/xid");
  EXPECT_EQ(taints[0].value, "79");
  EXPECT_EQ(taints[0].effect, "NoSchedule");
  EXPECT_EQ(taints[0].time_added, "2026-12-07T10:00:00Z");
  EXPECT_EQ(taints[0].rule, "");
  const kube::Document healthy = kept(gpu_slice("k8s-1", json()));
  EXPECT_TRUE(device_taints({&healthy.doc}, {}).empty());
}

TEST(DeviceTaints, ARuleTaintsTheDevicesItsSelectorPicksAndNoneWithoutASelector) {
  const kube::Document slice = kept(gpu_slice("k8s-1", json()));
  const auto rule = [](const std::string& name, const json& selector) {
    json r = {
        {"metadata", {{"name", name}}},
        {"spec",
         {{"taint", {{"key", "example.com/maintenance"}, {"value", "hbm"}, {"effect", "None"}}}}}};
    if (!selector.is_null()) {
      r["spec"]["deviceSelector"] = selector;
    }
    return r;
  };
  const json one = rule("gpu-1-hbm", {{"driver", "gpu.example.com"}, {"device", "gpu-1"}});
  const json other_pool = rule("elsewhere", {{"pool", "k8s-2"}});
  const json everything = rule("all", json::object());
  const json nothing = rule("none", json());
  auto taints = device_taints({&slice.doc}, {&one, &other_pool, &nothing});
  ASSERT_EQ(taints.size(), 1U);
  EXPECT_EQ(taints[0].device, "gpu-1");
  EXPECT_EQ(taints[0].rule, "gpu-1-hbm");
  EXPECT_EQ(taints[0].key, "example.com/maintenance");
  EXPECT_EQ(taints[0].effect, "None");
  EXPECT_EQ(device_taints({&slice.doc}, {&everything}).size(), 2U) << "an empty selector: all";
}

TEST(DeviceTaints, AKeyIsWantedWhenNamedOrUnderAStar) {
  EXPECT_TRUE(taint_wanted("gpu.example.com/xid", {"gpu.example.com/xid"}));
  EXPECT_TRUE(taint_wanted("anything", {"other", "*"}));
  EXPECT_FALSE(taint_wanted("gpu.example.com/xid", {"gpu.example.com/ecc"}));
  EXPECT_FALSE(taint_wanted("gpu.example.com/xid", {}));
}

}  // namespace
}  // namespace tightrope::op
