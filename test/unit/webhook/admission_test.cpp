#include "webhook/admission.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tightrope::webhook {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

json controller(const std::string& name = "slurm", const std::string& ns = "slurm") {
  return {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "Controller"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"slurmKeyRef", {{"name", "slurm-auth-slurm"}, {"key", "slurm.key"}}},
            {"jwtKeyRef", {{"name", "slurm-auth-jwths256"}, {"key", "jwt_hs256.key"}}}}}};
}

json nodeset(const std::string& name = "gpu", const std::string& ns = "slurm") {
  return {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "NodeSet"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"controllerRef", {{"name", "slurm"}}}}}};
}

// An AdmissionReview as the API server sends it.
json review(const std::string& operation, const json& object, const json& old = nullptr,
            const std::string& uid = "705ab4f5-6393-11e8-b7cc-42010a800002") {
  const std::string kind = object.value("kind", "");
  json request = {{"uid", uid},
                  {"kind", {{"group", "slinky.slurm.net"}, {"version", "v1beta1"}, {"kind", kind}}},
                  {"resource", {{"group", "slinky.slurm.net"}, {"version", "v1beta1"}}},
                  {"name", object["metadata"].value("name", "")},
                  {"namespace", object["metadata"].value("namespace", "")},
                  {"operation", operation},
                  {"userInfo", {{"username", "admin"}}}};
  if (operation != "DELETE") {
    request["object"] = object;
  }
  if (!old.is_null()) {
    request["oldObject"] = old;
  }
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

// No ConfigMap exists.
const ConfigMapLookup kNoConfigMaps = [](const std::string&, const std::string&) {
  return std::optional<std::map<std::string, std::string>>();
};

// ConfigMaps by "<namespace>/<name>".
ConfigMapLookup config_maps(std::map<std::string, std::map<std::string, std::string>> maps) {
  return [maps = std::move(maps)](
             const std::string& ns,
             const std::string& name) -> std::optional<std::map<std::string, std::string>> {
    const auto it = maps.find(ns + "/" + name);
    if (it == maps.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

std::vector<std::string> cause_fields(const Verdict& v) {
  std::vector<std::string> out;
  for (const auto& c : v.causes) {
    out.push_back(c.field);
  }
  return out;
}

TEST(Admission, AValidControllerIsAllowed) {
  const Verdict v = admit(review("CREATE", controller()), kNoConfigMaps);
  EXPECT_TRUE(v.allowed) << v.message;
  EXPECT_THAT(v.warnings, IsEmpty());
}

TEST(Admission, AnInvalidCreateIsDeniedWithTheFieldPathInTheMessage) {
  json c = controller();
  c["spec"]["slurmKeyRef"].erase("name");
  const Verdict v = admit(review("CREATE", c), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 422);
  EXPECT_EQ(v.reason, "Invalid");
  EXPECT_THAT(v.message, HasSubstr("Controller slurm/slurm: spec.slurmKeyRef.name: required"));
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.slurmKeyRef.name"));
}

TEST(Admission, AFieldOfTheWrongTypeIsDeniedNamingTheField) {
  json n = nodeset();
  n["spec"]["replicas"] = "three";
  const Verdict v = admit(review("CREATE", n), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(v.message, HasSubstr("NodeSet slurm/gpu: spec.replicas: "));
}

TEST(Admission, AnUpdateThatChangesClusterNameIsDenied) {
  json old = controller();
  old["spec"]["clusterName"] = "alpha";
  json c = old;
  c["spec"]["clusterName"] = "beta";
  const Verdict v = admit(review("UPDATE", c, old), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(v.message, HasSubstr("spec.clusterName: is immutable once set"));
}

TEST(Admission, SettingClusterNameOnUpdateIsDeniedWhenItChangesTheDerivedName) {
  // Unset, the ClusterName is "<namespace>_<name>": spelling out another one renames the cluster.
  json c = controller();
  c["spec"]["clusterName"] = "other";
  const Verdict v = admit(review("UPDATE", c, controller()), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.clusterName"));
}

TEST(Admission, AnUpdateThatKeepsTheImmutableFieldsIsAllowed) {
  json c = controller();
  c["spec"]["extraConf"] = "MaxJobCount=20000\n";
  const Verdict v = admit(review("UPDATE", c, controller()), kNoConfigMaps);
  EXPECT_TRUE(v.allowed) << v.message;
}

TEST(Admission, AControllerWhoseExtraConfSetsClusterNameIsDeniedNamingTheLine) {
  json c = controller();
  c["spec"]["extraConf"] = "MaxJobCount=20000\nClusterName=x\n";
  const Verdict v = admit(review("CREATE", c), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(v.message,
              AllOf(HasSubstr("spec.extraConf: "), HasSubstr("line 2"), HasSubstr("ClusterName")));
}

TEST(Admission, AControllerWhoseConfigFileRefHoldsSlurmConfIsDenied) {
  json c = controller();
  c["spec"]["configFileRefs"] = json::array({{{"name", "gres"}}, {{"name", "whole"}}});
  const Verdict v = admit(review("CREATE", c),
                          config_maps({{"slurm/gres", {{"gres.conf", "AutoDetect=nvml\n"}}},
                                       {"slurm/whole", {{"slurm.conf", "ClusterName=x\n"}}}}));
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.configFileRefs[1]"));
  EXPECT_THAT(v.message, HasSubstr("ConfigMap \"whole\" holds slurm.conf"));
}

TEST(Admission, ConfigMapsAreLookedUpInTheObjectsNamespace) {
  json c = controller("slurm", "team-a");
  c["spec"]["configFileRefs"] = json::array({{{"name", "whole"}}});
  const auto maps = config_maps({{"team-b/whole", {{"slurm.conf", ""}}}});
  EXPECT_TRUE(admit(review("CREATE", c), maps).allowed);
  c["metadata"]["namespace"] = "team-b";
  EXPECT_FALSE(admit(review("CREATE", c), maps).allowed);
}

TEST(Admission, AMissingConfigMapIsAllowedWithAWarning) {
  json c = controller();
  c["spec"]["prologScriptRefs"] = json::array({{{"name", "prolog"}}});
  const Verdict v = admit(review("CREATE", c), kNoConfigMaps);
  EXPECT_TRUE(v.allowed) << v.message;
  EXPECT_THAT(v.warnings, ElementsAre(HasSubstr("spec.prologScriptRefs[0]: ConfigMap \"prolog\"")));
}

TEST(Admission, ANodeSetWhoseControllerRefNamesAnotherNamespaceIsDenied) {
  json n = nodeset();
  n["spec"]["controllerRef"]["namespace"] = "elsewhere";
  const Verdict v = admit(review("CREATE", n), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.controllerRef.namespace"));
}

TEST(Admission, ANodeSetRegisteringMoreGpusThanItsPodsGetIsDenied) {
  json n = nodeset();
  n["spec"]["slurmd"]["resources"]["limits"]["nvidia.com/gpu"] = 4;
  n["spec"]["extraConf"] = "Gres=gpu:h100:8";
  const Verdict v = admit(review("CREATE", n), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.extraConf"));
  EXPECT_THAT(v.message, HasSubstr("registers 8 GPUs"));
  n["spec"]["extraConf"] = "Gres=gpu:h100:4";
  EXPECT_TRUE(admit(review("CREATE", n), kNoConfigMaps).allowed);
}

TEST(Admission, TheNamespaceComesFromTheRequestWhenTheObjectLeavesItOut) {
  json n = nodeset();
  n["spec"]["controllerRef"]["namespace"] = "slurm";
  json r = review("CREATE", n);
  r["request"]["object"]["metadata"].erase("namespace");
  EXPECT_TRUE(admit(r, kNoConfigMaps).allowed);
}

TEST(Admission, EveryKindIsValidated) {
  for (const char* kind : {"LoginSet", "RestApi", "Accounting", "Token"}) {
    const json empty = {{"apiVersion", "slinky.slurm.net/v1beta1"},
                        {"kind", kind},
                        {"metadata", {{"name", "x"}, {"namespace", "slurm"}}},
                        {"spec", json::object()}};
    const Verdict v = admit(review("CREATE", empty), kNoConfigMaps);
    EXPECT_FALSE(v.allowed) << kind;
    EXPECT_THAT(v.message, HasSubstr(std::string(kind) + " slurm/x: spec.")) << kind;
  }
}

TEST(Admission, AHealthCheckWhoseBudgetIsZeroIsDeniedNamingTheField) {
  json check = {{"apiVersion", "tightrope.slurm.net/v1alpha1"},
                {"kind", "HealthCheck"},
                {"metadata", {{"name", "gpu-workers"}, {"namespace", "slurm"}}},
                {"spec", {{"nodeSetSelector", json::object()}}}};
  EXPECT_TRUE(admit(review("CREATE", check), kNoConfigMaps).allowed);
  check["spec"]["remediation"]["maxUnhealthy"] = "0%";
  const Verdict v = admit(review("CREATE", check), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.remediation.maxUnhealthy"));
  EXPECT_THAT(v.message, HasSubstr("HealthCheck slurm/gpu-workers: spec.remediation.maxUnhealthy"));
}

TEST(Admission, WhatTheStoredObjectAlreadyGotWrongIsAWarningOnUpdate) {
  // Created before the webhook was installed: editing its labels must stay possible.
  json old = controller();
  old["spec"]["slurmKeyRef"].erase("name");
  json c = old;
  c["metadata"]["labels"] = {{"team", "hpc"}};
  const Verdict v = admit(review("UPDATE", c, old), kNoConfigMaps);
  EXPECT_TRUE(v.allowed) << v.message;
  EXPECT_THAT(v.warnings, ElementsAre(HasSubstr("spec.slurmKeyRef.name: required")));
}

TEST(Admission, AnUpdateThatAddsAnErrorIsDeniedEvenIfTheObjectHadOthers) {
  json old = controller();
  old["spec"]["slurmKeyRef"].erase("name");
  json c = old;
  c["spec"]["extraConf"] = "ClusterName=x\n";
  const Verdict v = admit(review("UPDATE", c, old), kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_THAT(cause_fields(v), ElementsAre("spec.extraConf"));
}

TEST(Admission, AnUpdateOfAnObjectBeingDeletedIsAllowed) {
  json old = controller();
  old["spec"]["clusterName"] = "alpha";
  old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  old["metadata"]["finalizers"] = json::array({"slinky.slurm.net/finalizer"});
  json c = old;
  c["metadata"].erase("finalizers");
  c["spec"]["clusterName"] = "beta";
  EXPECT_TRUE(admit(review("UPDATE", c, old), kNoConfigMaps).allowed);
}

TEST(Admission, DeleteIsAllowed) {
  json r = review("DELETE", controller());
  r["request"]["oldObject"] = controller();
  const Verdict v = admit(r, kNoConfigMaps);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
}

TEST(Admission, AStatusUpdateIsNotValidated) {
  json old = controller();
  old["spec"]["clusterName"] = "alpha";
  json c = old;
  c["spec"]["clusterName"] = "beta";
  json r = review("UPDATE", c, old);
  r["request"]["subResource"] = "status";
  EXPECT_TRUE(admit(r, kNoConfigMaps).allowed);
}

// A Scale of NodeSet slurm/gpu, as the HPA or KEDA writes it, from `from` to `to` replicas.
json scale_review(int from, int to) {
  const auto scale = [](int replicas) {
    return json{{"apiVersion", "autoscaling/v1"},
                {"kind", "Scale"},
                {"metadata", {{"name", "gpu"}, {"namespace", "slurm"}}},
                {"spec", {{"replicas", replicas}}}};
  };
  json r = review("UPDATE", scale(to), scale(from));
  r["request"]["kind"] = {{"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}};
  r["request"]["resource"]["resource"] = "nodesets";
  r["request"]["subResource"] = "scale";
  return r;
}

TEST(Admission, AnAutoscalerMayNotDriveAPowerSavedNodeSet) {
  json stored = nodeset();
  const NodeSetLookup plain = [&](const std::string&, const std::string&) {
    return std::optional<json>(stored);
  };
  EXPECT_TRUE(admit(scale_review(1, 3), kNoConfigMaps, plain).allowed);
  stored["metadata"]["annotations"] = {{"tightrope.slurm.net/suspend-time-seconds", "300"}};
  stored["spec"]["slurmd"] = {{"resources", {{"limits", {{"cpu", "2"}, {"memory", "1Gi"}}}}}};
  const Verdict v = admit(scale_review(1, 3), kNoConfigMaps, plain);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 422);
  EXPECT_THAT(v.message, AllOf(HasSubstr("NodeSet slurm/gpu is power-saved"),
                               HasSubstr("an autoscaler (KEDA, an HPA) must not drive")));
  // A write that changes nothing, and a NodeSet that cannot be read, pass.
  EXPECT_TRUE(admit(scale_review(3, 3), kNoConfigMaps, plain).allowed);
  EXPECT_TRUE(admit(scale_review(1, 3), kNoConfigMaps, [](const std::string&, const std::string&) {
                return std::optional<json>();
              }).allowed);
}

TEST(Admission, AnUnknownKindIsAllowedWithAWarning) {
  json r = review("CREATE", controller());
  r["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  const Verdict v = admit(r, kNoConfigMaps);
  EXPECT_TRUE(v.allowed);
  EXPECT_THAT(v.warnings, ElementsAre(HasSubstr("apps/v1 Deployment")));
}

TEST(Admission, AMalformedReviewIsDeniedAndItsUidEchoed) {
  json r = review("CREATE", controller(), nullptr, "uid-42");
  r["request"].erase("object");
  const Verdict v = admit(r, kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 400);
  EXPECT_EQ(v.uid, "uid-42");
  EXPECT_THAT(v.message, HasSubstr("request.object: required"));
  EXPECT_EQ(review_response(v)["response"]["uid"], "uid-42");
}

TEST(Admission, ABodyThatIsNotAReviewIsDenied) {
  for (const std::string_view body :
       {"", "{", "[]", "42", R"({"apiVersion": "v1", "kind": "Pod"})",
        R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})",
        R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": 7})",
        R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": 7, "operation": "CREATE"}})",
        R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "PATCH"}})",
        R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "kind": "Controller"}})"}) {
    const Verdict v = admit(body, kNoConfigMaps);
    EXPECT_FALSE(v.allowed) << body;
    EXPECT_EQ(v.code, 400) << body;
    EXPECT_THAT(v.message, HasSubstr("malformed AdmissionReview")) << body;
  }
}

TEST(Admission, FieldsOfTheWrongTypeInTheReviewDoNotThrow) {
  json r = review("UPDATE", controller(), controller());
  r["request"]["name"] = 5;
  r["request"]["namespace"] = json::array();
  r["request"]["object"]["metadata"] = "x";
  r["request"]["oldObject"]["spec"] = 1;
  const Verdict v = admit(r, kNoConfigMaps);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 422);
  EXPECT_THAT(v.message, HasSubstr("metadata"));
}

TEST(Admission, TheResponseCarriesTheDecisionAsTheApiServerReadsIt) {
  json c = controller();
  c["spec"]["slurmKeyRef"].erase("name");
  const json out = review_response(admit(review("CREATE", c, nullptr, "u-1"), kNoConfigMaps));
  EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(out["kind"], "AdmissionReview");
  const json& response = out["response"];
  EXPECT_EQ(response["uid"], "u-1");
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["code"], 422);
  EXPECT_EQ(response["status"]["reason"], "Invalid");
  EXPECT_EQ(response["status"]["status"], "Failure");
  EXPECT_EQ(response["status"]["details"]["kind"], "Controller");
  EXPECT_EQ(response["status"]["details"]["causes"][0],
            json({{"reason", "FieldValueRequired"},
                  {"field", "spec.slurmKeyRef.name"},
                  {"message", "required: the Secret's name"}}));
  EXPECT_FALSE(response.contains("warnings"));
}

TEST(Admission, AnAllowedResponseHasNoStatus) {
  json c = controller();
  c["spec"]["jwtHs256KeyRef"] = c["spec"]["jwtKeyRef"];
  c["spec"].erase("jwtKeyRef");
  const json out = review_response(admit(review("CREATE", c), kNoConfigMaps));
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_FALSE(out["response"].contains("status"));
  EXPECT_EQ(out["response"]["warnings"],
            json::array({"spec.jwtHs256KeyRef is deprecated: use spec.jwtKeyRef"}));
}

TEST(Admission, AV1beta1ReviewIsAnsweredInV1beta1) {
  json r = review("CREATE", controller());
  r["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(review_response(admit(r, kNoConfigMaps))["apiVersion"], "admission.k8s.io/v1beta1");
}

TEST(Admission, ALookupThatThrowsIsADenialNotACrash) {
  json c = controller();
  c["spec"]["configFileRefs"] = json::array({{{"name", "x"}}});
  const ConfigMapLookup throwing = [](const std::string&, const std::string&)
      -> std::optional<std::map<std::string, std::string>> { throw std::runtime_error("boom"); };
  const Verdict v = admit(review("CREATE", c), throwing);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.code, 500);
  EXPECT_THAT(v.message, HasSubstr("boom"));
}

// ---- pods/binding.

// The review the API server sends for POST pods/<pod>/binding.
json binding_review(const std::string& pod, const std::string& node, bool dry_run = false) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "b-1"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Binding"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"subResource", "binding"},
            {"name", pod},
            {"namespace", "slurm"},
            {"operation", "CREATE"},
            {"dryRun", dry_run},
            {"object",
             {{"apiVersion", "v1"},
              {"kind", "Binding"},
              {"metadata", {{"name", pod}, {"namespace", "slurm"}}},
              {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}}}}}};
}

TEST(PodsBinding, ABindingIsReadAndAlwaysAllowed) {
  auto [verdict, binding] = read_binding(binding_review("slinky-0", "gpu-7").dump());
  EXPECT_TRUE(verdict.allowed);
  EXPECT_EQ(review_response(verdict)["response"]["uid"], "b-1");
  ASSERT_TRUE(binding);
  EXPECT_EQ(binding->namespace_name, "slurm");
  EXPECT_EQ(binding->pod, "slinky-0");
  EXPECT_EQ(binding->node, "gpu-7");
}

TEST(PodsBinding, ADryRunOrAnotherRequestDoesNothing) {
  EXPECT_FALSE(read_binding(binding_review("slinky-0", "gpu-7", true).dump()).second);
  json other = binding_review("slinky-0", "gpu-7");
  other["request"]["subResource"] = "status";
  auto [verdict, binding] = read_binding(other.dump());
  EXPECT_TRUE(verdict.allowed);
  EXPECT_FALSE(binding);
  EXPECT_EQ(read_binding("not json").first.code, 400);
}

TEST(PodsBinding, ASlurmdPodTakesItsNodesTopology) {
  const json node = {
      {"metadata",
       {{"name", "gpu-7"}, {"annotations", {{"topology.slinky.slurm.net/spec", "switch:s1"}}}}}};
  json pod = {
      {"metadata", {{"name", "slinky-0"}, {"labels", {{"app.kubernetes.io/name", "slurmd"}}}}}};
  EXPECT_EQ(topology_for(pod, node), "switch:s1");
  pod["metadata"]["annotations"]["topology.slinky.slurm.net/spec"] = "switch:s1";
  EXPECT_EQ(topology_for(pod, node), std::nullopt) << "already there";
  json login = {{"metadata", {{"labels", {{"app.kubernetes.io/name", "login"}}}}}};
  EXPECT_EQ(topology_for(login, node), std::nullopt) << "not a worker";
  EXPECT_EQ(topology_for(pod, json{{"metadata", {{"name", "cpu-1"}}}}), std::nullopt)
      << "a Node without a topology";
}

}  // namespace
}  // namespace tightrope::webhook
