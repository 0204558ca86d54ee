#include "api/codec.hpp"

#include <gtest/gtest.h>

#include "maximal.hpp"
#include "support.hpp"

namespace tightrope::api {
namespace {

using nlohmann::json;

json nodeset_doc(json spec) {
  return {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "NodeSet"},
          {"metadata", {{"name", "gpu"}, {"namespace", "slurm"}}},
          {"spec", std::move(spec)}};
}

json controller_doc(json spec) {
  return {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "Controller"},
          {"metadata", {{"name", "slurm"}, {"namespace", "slurm"}}},
          {"spec", std::move(spec)}};
}

TEST(Decode, AWrongTypeNamesTheField) {
  const auto out =
      decode_nodeset(nodeset_doc({{"controllerRef", {{"name", "slurm"}}}, {"replicas", "3"}}));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), (FieldErrors{{"spec.replicas", "must be an integer"}}));
  EXPECT_EQ(join(out.error()), "spec.replicas: must be an integer");
}

TEST(Decode, AWrongTypeInAListNamesTheItemsIndex) {
  const auto out = decode_controller(
      controller_doc({{"configFileRefs", json::array({{{"name", "a"}}, {{"name", 7}}})}}));
  ASSERT_FALSE(out);
  EXPECT_EQ(join(out.error()), "spec.configFileRefs[1].name: must be a string");
}

TEST(Decode, EveryWrongFieldIsReportedNotJustTheFirst) {
  const auto out =
      decode_nodeset(nodeset_doc({{"controllerRef", {{"name", "slurm"}}},
                                  {"replicas", 1.5},
                                  {"pinToNode", "yes"},
                                  {"ssh", {{"sssdConfRef", "sssd"}}},
                                  {"volumeClaimTemplates", {{"a", 1}}},
                                  {"template", {{"metadata", {{"labels", {{"a", 1}}}}}}}}));
  ASSERT_FALSE(out);
  EXPECT_EQ(join(out.error()),
            "spec.replicas: must be an integer; spec.ssh.sssdConfRef: must be an object; "
            "spec.template.metadata.labels.a: must be a string; "
            "spec.volumeClaimTemplates: must be a list; spec.pinToNode: must be a boolean");
}

TEST(Decode, AWrongTypeIsReportedOnce) {
  const auto out = decode_controller(controller_doc({{"persistence", "yes"}}));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), (FieldErrors{{"spec.persistence", "must be an object"}}));
}

TEST(Decode, ASpecThatIsNotAnObjectIsAnError) {
  const auto out = decode_token({{"metadata", {{"name", "t"}}}, {"spec", json::array()}});
  ASSERT_FALSE(out);
  EXPECT_EQ(join(out.error()), "spec: must be an object");
}

TEST(Decode, ADocumentThatIsNotAnObjectIsAnError) {
  const auto out = decode_restapi(json::array());
  ASSERT_FALSE(out);
  EXPECT_EQ(join(out.error()), "must be a JSON object");
}

TEST(Decode, UnknownFieldsAreIgnored) {
  const auto out = decode_nodeset(nodeset_doc(
      {{"controllerRef", {{"name", "slurm"}}}, {"futureField", {{"x", 1}}}, {"replicas", 2}}));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec.replicas, 2);
  EXPECT_FALSE(encode(*out).at("spec").contains("futureField"));
}

TEST(Decode, NullMeansAbsent) {
  const auto out = decode_nodeset(nodeset_doc(
      {{"controllerRef", {{"name", "slurm"}}}, {"replicas", nullptr}, {"extraConf", nullptr}}));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_FALSE(out->spec.replicas);
  EXPECT_EQ(out->spec.extra_conf, "");
}

TEST(Decode, ReadsTheObjectMetadataTheOperatorNeeds) {
  json doc = nodeset_doc({{"controllerRef", {{"name", "slurm"}}}});
  doc["metadata"] = {{"name", "gpu"},
                     {"namespace", "slurm"},
                     {"uid", "u-1"},
                     {"resourceVersion", "42"},
                     {"generation", 3},
                     {"creationTimestamp", "2026-12-02T10:00:00Z"},
                     {"deletionTimestamp", "2026-12-02T11:00:00Z"},
                     {"labels", {{"pool", "gpu"}}},
                     {"annotations", {{"note", "x"}}}};
  const auto out = decode_nodeset(doc);
  ASSERT_TRUE(out) << join(out.error());
  const ObjectMeta& m = out->metadata;
  EXPECT_EQ(m.name, "gpu");
  EXPECT_EQ(m.namespace_name, "slurm");
  EXPECT_EQ(m.uid, "u-1");
  EXPECT_EQ(m.resource_version, "42");
  EXPECT_EQ(m.generation, 3);
  EXPECT_EQ(m.creation_timestamp, "2026-12-02T10:00:00Z");
  EXPECT_TRUE(m.deleting);
  EXPECT_EQ(m.labels, (StringMap{{"pool", "gpu"}}));
  EXPECT_EQ(m.annotations, (StringMap{{"note", "x"}}));
}

TEST(Decode, MaxUnavailableKeepsItsIntegerOrPercentage) {
  for (const json& value : {json(2), json("30%")}) {
    const auto out = decode_nodeset(
        nodeset_doc({{"controllerRef", {{"name", "slurm"}}},
                     {"updateStrategy", {{"rollingUpdate", {{"maxUnavailable", value}}}}}}));
    ASSERT_TRUE(out) << join(out.error());
    EXPECT_EQ(out->spec.update_strategy.max_unavailable, value);
    EXPECT_EQ(encode(*out)["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], value);
  }
}

TEST(Decode, PersistenceKeepsTheInlineClaimSpecApartFromItsOwnFields) {
  const auto out =
      decode_controller(controller_doc({{"persistence",
                                         {{"enabled", true},
                                          {"existingClaim", ""},
                                          {"storageClassName", "fast"},
                                          {"resources", {{"requests", {{"storage", "4Gi"}}}}}}}}));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec.persistence.enabled, true);
  EXPECT_EQ(
      out->spec.persistence.claim_spec,
      json({{"storageClassName", "fast"}, {"resources", {{"requests", {{"storage", "4Gi"}}}}}}));
}

TEST(Encode, LeavesOutWhatIsEmptyOrZero) {
  NodeSet n;
  n.metadata.name = "gpu";
  n.metadata.namespace_name = "slurm";
  n.spec.controller_ref.name = "slurm";
  EXPECT_EQ(encode(n), json({{"apiVersion", "slinky.slurm.net/v1beta1"},
                             {"kind", "NodeSet"},
                             {"metadata", {{"name", "gpu"}, {"namespace", "slurm"}}},
                             {"spec", {{"controllerRef", {{"name", "slurm"}}}}}}));
}

TEST(Encode, KeepsAnExplicitFalseWhereTheDefaultIsTrue) {
  Token t;
  t.spec.refresh = false;
  EXPECT_EQ(encode(t)["spec"]["refresh"], false);
  NodeSet n;
  n.spec.workload_disruption_protection = false;
  EXPECT_EQ(encode(n)["spec"]["workloadDisruptionProtection"], false);
  Controller c;
  c.spec.persistence.enabled = false;
  EXPECT_EQ(encode(c)["spec"]["persistence"], json({{"enabled", false}}));
}

TEST(Encode, WritesHaOnlyWhenItDiffersFromTheDefault) {
  Controller c;
  EXPECT_FALSE(encode(c)["spec"].contains("ha"));
  c.spec.ha.backups = 2;
  EXPECT_EQ(encode(c)["spec"]["ha"], json({{"enabled", false}, {"backups", 2}}));
}

// decode(encode(x)) == x for objects with every field set.
TEST(RoundTrip, ControllerKeepsEveryField) {
  const Controller in = testing::maximal_controller();
  const auto out = decode_controller(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
  EXPECT_EQ(out->metadata, in.metadata);
}

TEST(RoundTrip, NodeSetKeepsEveryField) {
  const NodeSet in = testing::maximal_nodeset();
  const auto out = decode_nodeset(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
  EXPECT_EQ(out->metadata, in.metadata);
}

TEST(RoundTrip, LoginSetKeepsEveryField) {
  const LoginSet in = testing::maximal_loginset();
  const auto out = decode_loginset(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
}

TEST(RoundTrip, RestApiKeepsEveryField) {
  const RestApi in = testing::maximal_restapi();
  const auto out = decode_restapi(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
}

TEST(RoundTrip, AccountingKeepsEveryField) {
  const Accounting in = testing::maximal_accounting();
  const auto out = decode_accounting(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
}

TEST(RoundTrip, TokenKeepsEveryField) {
  const Token in = testing::maximal_token();
  const auto out = decode_token(encode(in));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->status, in.status);
}

TEST(RoundTrip, AUsersManifestIsWrittenBackAsWritten) {
  const json spec = {
      {"controllerRef", {{"name", "slurm"}}},
      {"replicas", 0},
      {"slurmd", {{"image", "slurmd:1"}, {"env", {{{"name", "A"}, {"value", "1"}}}}}},
      {"partition", {{"enabled", true}, {"config", "MaxTime=1:00:00"}}},
      {"updateStrategy", {{"type", "OnDelete"}}}};
  const auto out = decode_nodeset(nodeset_doc(spec));
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(encode(*out)["spec"], spec);
}

TEST(Conditions, RoundTripThroughJson) {
  const std::vector<Condition> in = {
      {"Ready", "False", "SlurmctldDown", "slurmctld is not responding", 5, "2026-12-02T10:00:00Z"},
      {"Progressing", "True", "Rolling", "", 0, "2026-12-02T09:00:00Z"}};
  const json out = encode_conditions(in);
  EXPECT_EQ(out[0]["observedGeneration"], 5);
  EXPECT_FALSE(out[1].contains("observedGeneration"));
  EXPECT_EQ(out[1]["message"], "");
  EXPECT_EQ(decode_conditions(out), in);
}

TEST(Conditions, MalformedEntriesDecodeAsFarAsTheyGo) {
  const json in = json::array({{{"type", "Ready"}, {"status", 1}}, "garbage"});
  const auto out = decode_conditions(in);
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].type, "Ready");
  EXPECT_EQ(out[0].status, "");
  EXPECT_EQ(out[1], Condition{});
  EXPECT_TRUE(decode_conditions(json("not a list")).empty());
}

TEST(Conditions, InAStatusRoundTripThroughTheResource) {
  RestApi r;
  r.spec.controller_ref.name = "slurm";
  r.status.conditions = {
      {"Ready", "True", "Available", "1/1 pods ready", 2, "2026-12-02T10:00:00Z"}};
  const json doc = encode(r);
  EXPECT_EQ(doc["status"]["conditions"][0]["reason"], "Available");
  const auto out = decode_restapi(doc);
  ASSERT_TRUE(out) << join(out.error());
  EXPECT_EQ(out->status.conditions, r.status.conditions);
}

}  // namespace
}  // namespace tightrope::api
