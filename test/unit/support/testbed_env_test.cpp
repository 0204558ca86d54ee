#include <gtest/gtest.h>

#include <stdexcept>

#include "testbed.hpp"

namespace tightrope::testing {
namespace {

TEST(ParseEnvExports, ReadsPlainAndSingleQuotedValues) {
  const auto vars = parse_env_exports(
      "export KUBECONFIG=/tmp/bed/admin.kubeconfig\n"
      "export SLURM_NODES='n1,n2 n3'\n");
  EXPECT_EQ(vars.at("KUBECONFIG"), "/tmp/bed/admin.kubeconfig");
  EXPECT_EQ(vars.at("SLURM_NODES"), "n1,n2 n3");
}

TEST(ParseEnvExports, ReadsAQuoteEmbeddedTheWayShlexWritesIt) {
  // shlex.quote("it's") == 'it'"'"'s' -- the double-quoted part is outside our subset, so the
  // bed never writes it; a backslash-escaped quote is how such a value must arrive.
  const auto vars = parse_env_exports("export A='it'\\''s'\n");
  EXPECT_EQ(vars.at("A"), "it's");
}

TEST(ParseEnvExports, SkipsBlankLinesAndComments) {
  const auto vars = parse_env_exports("\n# a comment\n  export X=1\n\n");
  ASSERT_EQ(vars.size(), 1U);
  EXPECT_EQ(vars.at("X"), "1");
}

TEST(ParseEnvExports, AnEmptyValueIsKept) {
  EXPECT_EQ(parse_env_exports("export SLURM_JWT=''\n").at("SLURM_JWT"), "");
  EXPECT_EQ(parse_env_exports("export SLURM_JWT=\n").at("SLURM_JWT"), "");
}

TEST(ParseEnvExports, RejectsALineThatIsNotAnExportNamingTheLine) {
  try {
    parse_env_exports("export A=1\nA=2\n");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "env line 2: expected 'export '");
  }
}

TEST(ParseEnvExports, RejectsAnUnterminatedQuote) {
  EXPECT_THROW(parse_env_exports("export A='open\n"), std::invalid_argument);
}

TEST(ParseEnvExports, RejectsShellExpansionsItWouldNotPerform) {
  EXPECT_THROW(parse_env_exports("export A=$HOME\n"), std::invalid_argument);
  EXPECT_THROW(parse_env_exports("export A=\"x\"\n"), std::invalid_argument);
}

TEST(ParseEnvExports, RejectsTrailingWords) {
  EXPECT_THROW(parse_env_exports("export A=1 B=2\n"), std::invalid_argument);
}

}  // namespace
}  // namespace tightrope::testing
