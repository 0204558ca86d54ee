#include "base/log.hpp"

#include <gtest/gtest.h>

namespace tightrope::log {
namespace {

TEST(Log, WritesLogfmtWithQuotedValuesOnlyWhereNeeded) {
  EXPECT_EQ(
      format_line(Format::kLogfmt, Level::kWarn, "2026-12-02T00:00:00.000Z", "kube.watch.failing",
                  {{"resource", "pods"}, {"error", "connection refused"}, {"empty", ""}}),
      R"(ts=2026-12-02T00:00:00.000Z level=warn event=kube.watch.failing resource=pods error="connection refused" empty="")");
}

TEST(Log, WritesJsonWithEscapes) {
  EXPECT_EQ(format_line(Format::kJson, Level::kInfo, "t", "e", {{"msg", "a \"b\"\n"}}),
            R"({"ts":"t","level":"info","event":"e","msg":"a \"b\"\n"})");
}

TEST(Log, DropsLinesBelowTheLevelAndSendsTheRestToTheSink) {
  std::vector<std::string> lines;
  auto previous = set_sink([&](Level, const std::string& line) { lines.push_back(line); });
  configure(Level::kWarn, Format::kLogfmt);
  info("quiet");
  warn("loud", {{"k", "v"}});
  configure(Level::kInfo, Format::kLogfmt);
  set_sink(previous);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("event=loud k=v"), std::string::npos);
}

TEST(Log, ParsesLevelNames) {
  Level level = Level::kInfo;
  EXPECT_TRUE(parse_level("debug", &level));
  EXPECT_EQ(level, Level::kDebug);
  EXPECT_FALSE(parse_level("loud", &level));
  EXPECT_EQ(level, Level::kDebug);
}

}  // namespace
}  // namespace tightrope::log
