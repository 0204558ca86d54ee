// What slurmrestd may answer besides what it should: each answer read through read_answer (the
// client's one reading of every answer) gives a clear error naming the request, or, where one
// bad field need not cost the whole answer, the answer with that field made readable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "slurm/client.hpp"
#include "slurm/codec.hpp"

namespace tightrope::slurm {
namespace {

using nlohmann::json;

const std::string kWhat = "GET /slurm/v0.0.44/nodes";

Result<Answer> read_nodes(long status, std::string_view body) {
  const std::vector<std::string> fields = node_fields(kV0044);
  return read_answer(kWhat, status, body, &fields);
}

// One node with this reason, as slurmrestd writes it (reason spliced in raw).
std::string node_answer(std::string_view raw_reason) {
  return R"({"nodes":[{"name":"n1","state":["IDLE","DRAIN"],"reason":")" + std::string(raw_reason) +
         R"("}],"errors":[],"warnings":[]})";
}

TEST(HostileAnswer, ADeeplyNestedAnswerIsRefusedBeforeItIsParsed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto answer = read_nodes(200, deep);
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kProtocol);
  EXPECT_EQ(answer.error().message, kWhat + ": an answer nested deeper than 64 levels");
  // Unclosed, and inside a node's field: the same.
  EXPECT_FALSE(read_nodes(200, std::string(100000, '[')));
  EXPECT_FALSE(read_nodes(200, R"({"nodes":[{"name":"n1","reason":)" + deep + "}]}"));
}

TEST(HostileAnswer, BracketsInsideStringsAreNotNesting) {
  const auto answer = read_nodes(200, node_answer(std::string(1000, '[')));
  ASSERT_TRUE(answer) << answer.error().message;
  const auto list = decode_nodes(answer->doc, kV0044);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->nodes.at(0).reason, std::string(1000, '['));
}

TEST(HostileAnswer, BytesThatAreNotUtf8CostOnlyThemselves) {
  // A reason typed in Latin-1 ("Lüfter"): the rest of the list stays readable.
  const auto answer = read_nodes(200, node_answer("L\xFC"
                                                  "fter"));
  ASSERT_TRUE(answer) << answer.error().message;
  const auto list = decode_nodes(answer->doc, kV0044);
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->nodes.size(), 1U);
  EXPECT_EQ(list->nodes[0].reason,
            "L\xEF\xBF\xBD"
            "fter");
  EXPECT_TRUE(list->nodes[0].drain());
  EXPECT_NO_THROW((void)json::object({{"message", list->nodes[0].reason}}).dump());
}

TEST(HostileAnswer, ControlCharactersInAReasonBecomeSpaces) {
  const auto answer = read_nodes(200, node_answer(R"(\u001b[31mfan\nfailed\u0000\t!)"));
  ASSERT_TRUE(answer) << answer.error().message;
  const auto list = decode_nodes(answer->doc, kV0044);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->nodes.at(0).reason, " [31mfan failed  !");
}

TEST(HostileAnswer, AnAnswerThatIsNotJsonIsAProtocolErrorNamingTheRequest) {
  const auto answer = read_nodes(200, "Segmentation fault (core dumped)");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kProtocol);
  EXPECT_EQ(answer.error().message, kWhat + ": answer is not JSON");
}

TEST(HostileAnswer, ATruncatedAnswerIsNotHalfRead) {
  const std::string whole = node_answer("maintenance");
  const auto answer = read_nodes(200, whole.substr(0, whole.size() / 2));
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kProtocol);
}

TEST(HostileAnswer, FieldsOfTheWrongTypeNameTheField) {
  const auto answer = read_nodes(200, R"({"nodes":[{"name":"n1","reason":42}]})");
  ASSERT_TRUE(answer);
  const auto list = decode_nodes(answer->doc, kV0044);
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().kind, ErrorKind::kProtocol);
  EXPECT_EQ(list.error().message,
            "unexpected answer: nodes[0].reason: expected a string, got number");
  EXPECT_FALSE(decode_nodes(json::parse(R"({"nodes":{"name":"n1"}})"), kV0044));
  EXPECT_FALSE(decode_nodes(json::parse(R"([1,2,3])"), kV0044));
}

TEST(HostileAnswer, AProxysHtmlErrorPageIsUnavailableWithItsStartAsText) {
  // A 502 from whatever stands in front of slurmrestd, in Latin-1 and with line breaks.
  const std::string page =
      "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
      "<body>Verbindung zur\xFC"
      "ck\xE2"
      "</body></html>";
  const auto answer = read_nodes(502, page);
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kUnavailable);
  EXPECT_EQ(answer.error().http_status, 502);
  const std::string& message = answer.error().message;
  EXPECT_TRUE(message.starts_with(kWhat + ": 502 <html>  <head><title>502 Bad Gateway")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NO_THROW((void)json::object({{"message", message}}).dump());
}

TEST(HostileAnswer, AnErrorPageIsCutToTwoHundredBytesBetweenCharacters) {
  const auto answer = read_nodes(503, std::string(199, 'x') + "\xC3\xBC\xC3\xBC");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().message, kWhat + ": 503 " + std::string(199, 'x'));
}

}  // namespace
}  // namespace tightrope::slurm
