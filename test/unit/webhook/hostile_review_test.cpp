// AdmissionReviews no API server sends: each is answered with a clear refusal (what was wrong,
// where) that can itself be written as JSON, and none takes the webhook down. The body's size is
// bounded by the server (integration_webhook: ABodyOverTheLimitIsRefusedWith413).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "webhook/admission.hpp"
#include "webhook/bridge_pods.hpp"

namespace tightrope::webhook {
namespace {

using nlohmann::json;

const ConfigMapLookup kNoConfigMaps = [](const std::string&, const std::string&) {
  return std::optional<std::map<std::string, std::string>>();
};

std::string nodeset_review(const std::string& template_spec) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{)"
         R"("uid":"u1","operation":"CREATE","name":"gpu","namespace":"slurm",)"
         R"("kind":{"group":"slinky.slurm.net","version":"v1beta1","kind":"NodeSet"},)"
         R"("resource":{"group":"slinky.slurm.net","version":"v1beta1"},)"
         R"("object":{"apiVersion":"slinky.slurm.net/v1beta1","kind":"NodeSet",)"
         R"("metadata":{"name":"gpu","namespace":"slurm"},)"
         R"("spec":{"controllerRef":{"name":"slurm"},"template":{"spec":)" +
         template_spec + "}}}}}";
}

// Nested `levels` deep (arrays), closed.
std::string nested(size_t levels) {
  return std::string(levels, '[') + std::string(levels, ']');
}

// The answer as the server writes it: must not throw.
void expect_writable(const Verdict& verdict) {
  EXPECT_NO_THROW((void)review_response(verdict).dump());
}

TEST(HostileReview, ABodyThatIsNotJsonIsABadRequest) {
  for (const std::string body : {"", "<html>", "{\"request\":", "\xFF\xFE{}"}) {
    const Verdict verdict = admit(std::string_view(body), kNoConfigMaps);
    EXPECT_FALSE(verdict.allowed) << body;
    EXPECT_EQ(verdict.code, 400) << body;
    EXPECT_EQ(verdict.message, "malformed AdmissionReview: the body is not JSON");
    expect_writable(verdict);
  }
}

TEST(HostileReview, DeepNestingIsRefusedBeforeItIsParsed) {
  // A hundred thousand levels inside the pod template: the decoders' recursive copy of it
  // overflowed the stack and took the webhook down.
  const std::string body = nodeset_review(R"({"x":)" + nested(100000) + "}");
  const Verdict verdict = admit(std::string_view(body), kNoConfigMaps);
  EXPECT_FALSE(verdict.allowed);
  EXPECT_EQ(verdict.code, 400);
  EXPECT_EQ(verdict.message,
            "malformed AdmissionReview: the body is nested deeper than 512 levels");
  expect_writable(verdict);
  EXPECT_FALSE(read_binding(body).first.allowed);
  EXPECT_FALSE(admit_bridge(std::string_view(body), bridge::BridgeConfig{}, {}).allowed);
}

TEST(HostileReview, NestingUnderTheLimitIsReadAsUsual) {
  const std::string body = nodeset_review(R"({"x":)" + nested(400) + "}");
  const Verdict verdict = admit(std::string_view(body), kNoConfigMaps);
  EXPECT_NE(verdict.code, 400) << verdict.message;
  expect_writable(verdict);
}

TEST(HostileReview, AFieldOfTheWrongShapeIsRefusedWithItsPath) {
  const std::string body = nodeset_review(nested(100));
  const Verdict verdict = admit(std::string_view(body), kNoConfigMaps);
  EXPECT_FALSE(verdict.allowed);
  EXPECT_NE(verdict.message.find("spec.template.spec"), std::string::npos) << verdict.message;
  expect_writable(verdict);
}

TEST(HostileReview, ControlCharactersInAnObjectLeaveTheAnswerWritable) {
  const std::string body =
      nodeset_review(R"({"containers":[{"name":"\u0000\u001b[31m\n","image":7}]})");
  expect_writable(admit(std::string_view(body), kNoConfigMaps));
}

}  // namespace
}  // namespace tightrope::webhook
