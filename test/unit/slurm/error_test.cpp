#include "slurm/error.hpp"

#include <gtest/gtest.h>

namespace tightrope::slurm {
namespace {

ApiErrorEntry entry(int number, std::string error, std::string description = {}) {
  return ApiErrorEntry{number, std::move(error), std::move(description), "src"};
}

TEST(Classify, AnUnreachableControllerIsUnavailable) {
  const Error e = classify("GET /nodes", 502,
                           {entry(1800, "Unable to contact slurm controller (connect failure)",
                                  "Failure to query nodes")});
  EXPECT_EQ(e.kind, ErrorKind::kUnavailable);
  EXPECT_TRUE(e.transient());
  EXPECT_EQ(e.message,
            "GET /nodes: 502 Unable to contact slurm controller (connect failure) (Failure to "
            "query nodes)");
}

TEST(Classify, ARejectedTokenIsUnauthorized) {
  EXPECT_EQ(classify("GET /nodes", 511, {entry(1007, "Protocol authentication error")}).kind,
            ErrorKind::kUnauthorized);
  EXPECT_EQ(classify("GET /nodes", 401, {}, "Authentication failure").kind,
            ErrorKind::kUnauthorized);
}

TEST(Classify, AUserWithoutPermissionIsUnauthorized) {
  EXPECT_EQ(classify("POST /node/n1", 422, {entry(2010, "Invalid user id")}).kind,
            ErrorKind::kUnauthorized);
}

TEST(Classify, UnknownNamesAreNotFound) {
  EXPECT_EQ(classify("DELETE /node/x", 422, {entry(2018, "Invalid node name specified")}).kind,
            ErrorKind::kNotFound);
  EXPECT_EQ(classify("GET /job/9", 404, {entry(2017, "Invalid job id specified")}).kind,
            ErrorKind::kNotFound);
  EXPECT_EQ(
      classify("DELETE /reservation/x", 422, {entry(2053, "Requested reservation is invalid")})
          .kind,
      ErrorKind::kNotFound);
}

TEST(Classify, AnUnfoundReservationIsNotFound) {
  EXPECT_EQ(classify("GET /reservation/x", 422,
                     {entry(9000, "Query empty or not RFC7320 compliant",
                            "Unable to find reservation x")})
                .kind,
            ErrorKind::kNotFound);
}

TEST(Classify, AnOkAnswerWithANoErrorEntryIsNotFound) {
  // GET /node/nosuch: 200 and {"error_number":0,"error":"No error","description":"Failure to
  // query node nosuch"}.
  EXPECT_EQ(classify("GET /node/x", 200, {entry(0, "No error", "Failure to query node x")}).kind,
            ErrorKind::kNotFound);
}

TEST(Classify, ARefusedStateTransitionIsInvalid) {
  const Error e = classify("POST /node/n1", 500,
                           {entry(9207, "Data parser unable to parse invalid flag"),
                            entry(2180, "Invalid node state transition")});
  EXPECT_EQ(e.kind, ErrorKind::kInvalid);
  EXPECT_FALSE(e.transient());
  EXPECT_EQ(e.entries.size(), 2U);
}

TEST(Classify, AnUnknownEndpointIsAProtocolError) {
  EXPECT_EQ(classify("GET /slurm/v0.0.99/nodes", 404, {}, "Unable to find requested URL").kind,
            ErrorKind::kProtocol);
}

TEST(Classify, APlainTextBodyIsQuotedInTheMessage) {
  EXPECT_EQ(classify("POST /node/n1", 400, {}, "Failure during parsing").message,
            "POST /node/n1: 400 Failure during parsing");
}

}  // namespace
}  // namespace tightrope::slurm
