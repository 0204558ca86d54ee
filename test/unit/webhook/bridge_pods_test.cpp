#include "webhook/bridge_pods.hpp"

#include <gtest/gtest.h>

#include "kube/base64.hpp"

namespace tightrope::webhook {
namespace {

using nlohmann::json;

json review(const std::string& operation, const json& object, const std::string& group = "",
            const std::string& kind = "Pod") {
  json request = {{"uid", "u1"},
                  {"operation", operation},
                  {"kind", {{"group", group}, {"version", "v1"}, {"kind", kind}}},
                  {"namespace", object["metadata"].value("namespace", "")},
                  {"object", object}};
  if (operation == "UPDATE") {
    request["oldObject"] = object;
  }
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

json pod(const std::string& ns, const json& spec = json::object()) {
  json p = {{"metadata", {{"name", "p"}, {"namespace", ns}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  p["spec"].update(spec);
  return p;
}

bridge::BridgeConfig config() {
  bridge::BridgeConfig c;
  c.managed_namespaces = {"ml"};
  c.managed_namespace_selector = {{"slurm", "yes"}};
  return c;
}

const NamespaceLabels kLabels =
    [](const std::string& ns) -> std::optional<std::map<std::string, std::string>> {
  if (ns == "labelled") {
    return std::map<std::string, std::string>{{"slurm", "yes"}};
  }
  return std::map<std::string, std::string>{};
};

TEST(AdmitBridge, APodOfAManagedNamespaceGetsTheSchedulerAndTheToleration) {
  const Verdict v =
      admit_bridge(review("CREATE", pod("ml", {{"nodeName", "k1"}})), config(), kLabels);
  ASSERT_TRUE(v.allowed) << v.message;
  ASSERT_TRUE(v.patch.is_array());
  EXPECT_EQ(v.patch[0]["path"], "/spec/schedulerName");
  EXPECT_EQ(v.patch[0]["value"], "slurm-bridge-scheduler");
  EXPECT_EQ(v.patch[1], (json{{"op", "remove"}, {"path", "/spec/nodeName"}}));
  EXPECT_EQ(v.patch[2]["path"], "/spec/tolerations");
  EXPECT_EQ(v.patch[2]["value"][0]["key"], "slinky.slurm.net/managed-node");
  const json response = review_response(v)["response"];
  EXPECT_EQ(response["patchType"], "JSONPatch");
  EXPECT_EQ(json::parse(*kube::decode_base64(response["patch"].get<std::string>())), v.patch);
}

TEST(AdmitBridge, ANamespaceMatchedByTheSelectorIsManagedTooOthersAreLeftAlone) {
  EXPECT_TRUE(admit_bridge(review("CREATE", pod("labelled")), config(), kLabels).patch.is_array());
  const Verdict other = admit_bridge(review("CREATE", pod("web")), config(), kLabels);
  EXPECT_TRUE(other.allowed);
  EXPECT_TRUE(other.patch.is_null());
}

TEST(AdmitBridge, BadJobOptionsAndTheBridgesOwnFieldsAreRefusedFieldByField) {
  json p = pod("web", {{"schedulerName", "slurm-bridge-scheduler"}});
  p["metadata"]["annotations"] = {{"slurmjob.slinky.slurm.net/timelimit", "1h"},
                                  {"slinky.slurm.net/slurm-node", "k1"}};
  p["metadata"]["labels"] = {{"scheduler.slinky.slurm.net/slurm-jobid", "7"}};
  p["spec"]["resourceClaims"] = {{{"name", "gpu"}}};
  const Verdict v = admit_bridge(review("CREATE", p), config(), kLabels);
  ASSERT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 422);
  ASSERT_EQ(v.causes.size(), 4U);
  EXPECT_EQ(v.causes[0].field, "metadata.annotations[slurmjob.slinky.slurm.net/timelimit]");
  EXPECT_EQ(v.causes[1].field, "metadata.labels[scheduler.slinky.slurm.net/slurm-jobid]");
  EXPECT_EQ(v.causes[3].field, "spec.resourceClaims");
}

TEST(AdmitBridge, AJobWhosePodsNameTheBridgeHasItsOptionsChecked) {
  json job = {{"metadata",
               {{"name", "train"},
                {"namespace", "ml"},
                {"annotations", {{"slurmjob.slinky.slurm.net/exclusive", "maybe"}}}}},
              {"spec", {{"template", {{"spec", {{"containers", json::array()}}}}}}}};
  Verdict v = admit_bridge(review("CREATE", job, "batch", "Job"), config(), kLabels);
  ASSERT_FALSE(v.allowed);
  EXPECT_EQ(v.causes[0].field, "metadata.annotations[slurmjob.slinky.slurm.net/exclusive]");
  job["metadata"]["namespace"] = "web";  // not the bridge's
  EXPECT_TRUE(admit_bridge(review("CREATE", job, "batch", "Job"), config(), kLabels).allowed);
}

TEST(AdmitBridge, ABodyThatIsNotAReviewIsABadRequest) {
  const Verdict v = admit_bridge(std::string_view("{"), config(), kLabels);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 400);
}

}  // namespace
}  // namespace tightrope::webhook
