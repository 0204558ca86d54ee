#include "kube/error.hpp"

#include <gtest/gtest.h>

#include "kube/client.hpp"
#include "kube/resource.hpp"
#include "kube/time.hpp"

namespace tightrope::kube {
namespace {

TEST(KubeError, AStatusBodyGivesKindReasonAndMessage) {
  const Error e = error_from_response(
      "PUT /api/v1/namespaces/a/configmaps/b", 409,
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409})");
  EXPECT_EQ(e.kind, ErrorKind::kConflict);
  EXPECT_EQ(e.status.reason, "Conflict");
  EXPECT_EQ(e.message,
            "PUT /api/v1/namespaces/a/configmaps/b: 409 Conflict: the object has been modified");
  EXPECT_FALSE(e.is_apply_conflict());
}

TEST(KubeError, AFieldManagerConflictIsAnApplyConflict) {
  const Error e = error_from_response(
      "PATCH x", 409,
      R"({"kind":"Status","reason":"Conflict","code":409,"details":{"causes":[{"reason":"FieldManagerConflict","field":".data.owner","message":"conflict with \"alpha\""}]}})");
  EXPECT_TRUE(e.is_apply_conflict());
  ASSERT_EQ(e.status.causes.size(), 1U);
  EXPECT_EQ(e.status.causes[0].field, ".data.owner");
}

TEST(KubeError, HttpCodesMapToKinds) {
  EXPECT_EQ(kind_for(404, ""), ErrorKind::kNotFound);
  EXPECT_EQ(kind_for(409, "AlreadyExists"), ErrorKind::kAlreadyExists);
  EXPECT_EQ(kind_for(410, "Expired"), ErrorKind::kGone);
  EXPECT_EQ(kind_for(422, "Invalid"), ErrorKind::kInvalid);
  EXPECT_EQ(kind_for(429, ""), ErrorKind::kTooManyRequests);
  EXPECT_EQ(kind_for(503, ""), ErrorKind::kUnavailable);
  EXPECT_EQ(kind_for(504, ""), ErrorKind::kTimeout);
  EXPECT_EQ(kind_for(403, ""), ErrorKind::kForbidden);
}

TEST(KubeError, ABodyThatIsNotAStatusIsKeptShort) {
  const Error e = error_from_response("GET /x", 502, std::string(1000, 'x'));
  EXPECT_EQ(e.kind, ErrorKind::kUnavailable);
  EXPECT_LE(e.message.size(), 230U);
  EXPECT_TRUE(e.transient());
}

TEST(KubeError, AProxysPageIsCutBetweenCharactersAndWithoutLineBreaks) {
  const Error e = error_from_response(
      "GET /x", 502, "<h1>Bad\r\nGateway</h1>" + std::string(176, 'x') + "\xC3\xBC\xC3\xBC\xFF");
  EXPECT_EQ(e.message, "GET /x: 502: <h1>Bad  Gateway</h1>" + std::string(176, 'x') + "\xC3\xBC");
  EXPECT_NO_THROW((void)nlohmann::json(e.message).dump());
}

TEST(ResourcePath, BuildsCorePathsAndGroupPaths) {
  EXPECT_EQ(resource_path(resources::pods(), "slurm", "gpu-0", "status"),
            "/api/v1/namespaces/slurm/pods/gpu-0/status");
  EXPECT_EQ(resource_path(resources::pods(), ""), "/api/v1/pods");
  EXPECT_EQ(resource_path(resources::nodes(), "ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(resource_path(resources::leases(), "kube-system", "op"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/op");
}

TEST(ListQuery, EscapesSelectors) {
  ListOptions o;
  o.label_selector = "app in (a,b),tier!=x";
  o.limit = 500;
  EXPECT_EQ(list_query(o), "?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx&limit=500");
  EXPECT_EQ(list_query({}), "");
}

TEST(KubeTime, FormatsAndParsesBothForms) {
  const auto t =
      std::chrono::system_clock::from_time_t(1796169600) + std::chrono::microseconds(123456);
  EXPECT_EQ(format_time(t), "2026-12-02T00:00:00Z");
  EXPECT_EQ(format_micro_time(t), "2026-12-02T00:00:00.123456Z");
  EXPECT_EQ(parse_time("2026-12-02T00:00:00.123456Z"), t);
  EXPECT_EQ(parse_time("2026-12-02T00:00:00Z"), std::chrono::system_clock::from_time_t(1796169600));
  EXPECT_FALSE(parse_time("2026-12-02 00:00:00"));
  EXPECT_FALSE(parse_time("0000-01-01T00:00:00Z")) << "before what a time point holds";
  EXPECT_FALSE(parse_time("2026-13-02T00:00:00Z"));
  EXPECT_EQ(parse_time("2026-12-02T01:30:00+01:30"), parse_time("2026-12-02T00:00:00Z"));
  EXPECT_EQ(parse_time("2026-12-01T19:00:00-05:00"), parse_time("2026-12-02T00:00:00Z"));
  EXPECT_FALSE(parse_time("2026-12-02T00:00:00+1:00"));
  EXPECT_FALSE(parse_time("2026-12-02T00:00:00+24:00"));
}

}  // namespace
}  // namespace tightrope::kube
