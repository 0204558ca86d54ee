#include "slurm/conf.hpp"

#include <gtest/gtest.h>

namespace tightrope::slurm {
namespace {

constexpr const char* kConf = R"(# Generated for cluster test
ClusterName=test
SlurmctldHost=slurm-controller-0
SlurmctldParameters=enable_configless,reconfig_on_restart # configless slurmd

NodeSet=gpu Feature=gpu
PartitionName=gpu Nodes=gpu Default=YES State=UP MaxTime=INFINITE
Include /etc/slurm/extra.conf
)";

SlurmConf parse(std::string_view text) {
  auto conf = parse_slurm_conf(text, "slurm.conf");
  EXPECT_TRUE(conf.ok()) << (conf.ok() ? "" : conf.error().to_string());
  return conf.ok() ? *conf : SlurmConf{};
}

TEST(SlurmConf, ParsesParametersRecordsIncludesAndComments) {
  const SlurmConf conf = parse(kConf);
  ASSERT_EQ(conf.lines().size(), 8U);
  EXPECT_EQ(conf.lines()[0].kind, ConfLine::Kind::kComment);
  EXPECT_EQ(conf.get("ClusterName"), "test");
  EXPECT_EQ(conf.get("clustername"), "test") << "keys are case-insensitive";
  EXPECT_EQ(conf.lines()[3].comment, "# configless slurmd");
  EXPECT_EQ(conf.lines()[4].kind, ConfLine::Kind::kBlank);
  const auto nodesets = conf.records("NodeSet");
  ASSERT_EQ(nodesets.size(), 1U);
  EXPECT_EQ(nodesets[0]->name(), "gpu");
  EXPECT_EQ(nodesets[0]->get("feature"), "gpu");
  const auto partitions = conf.records("PartitionName");
  ASSERT_EQ(partitions.size(), 1U);
  EXPECT_EQ(partitions[0]->get("MaxTime"), "INFINITE");
  EXPECT_EQ(conf.lines()[7].kind, ConfLine::Kind::kInclude);
  EXPECT_EQ(conf.lines()[7].text, "/etc/slurm/extra.conf");
}

TEST(SlurmConf, RendersWhatItParsedLineForLine) {
  EXPECT_EQ(parse(kConf).render(), kConf);
}

TEST(SlurmConf, RendersAnyParsedFileInANormalFormThatParsesToTheSameModel) {
  const SlurmConf messy = parse("  ClusterName=a   # x\n\tNodeName=n1\tCPUs=2 \nInclude   /x\n");
  const std::string normal = messy.render();
  EXPECT_EQ(normal, "ClusterName=a # x\nNodeName=n1 CPUs=2\nInclude /x\n");
  EXPECT_EQ(parse(normal).render(), normal);
}

TEST(SlurmConf, QuotesValuesWithBlanksOrHashesAndReadsThemBack) {
  SlurmConf conf;
  conf.append_setting({{"NodeName", "n1"}, {"Features", "a b"}, {"Comment", "x#y"}, {"Extra", ""}});
  const std::string text = conf.render();
  EXPECT_EQ(text, "NodeName=n1 Features=\"a b\" Comment=\"x#y\" Extra=\"\"\n");
  const SlurmConf back = parse(text);
  EXPECT_EQ(back.lines()[0].get("Features"), "a b");
  EXPECT_EQ(back.lines()[0].get("Comment"), "x#y");
  EXPECT_EQ(back.lines()[0].get("Extra"), "");
}

TEST(SlurmConf, ReadsAnEscapedHashAsPartOfTheValue) {
  EXPECT_EQ(parse("Prolog=/bin/a\\#b # comment\n").get("Prolog"), "/bin/a#b");
}

TEST(SlurmConf, QuotesATrailingBackslashSoItDoesNotContinueTheLine) {
  SlurmConf conf;
  conf.append_setting({{"Prolog", "C:\\dir\\"}});
  conf.append_setting({{"ClusterName", "a"}});
  const SlurmConf back = parse(conf.render());
  ASSERT_EQ(back.lines().size(), 2U);
  EXPECT_EQ(back.get("Prolog"), "C:\\dir\\");
}

TEST(SlurmConf, ACommentEndingInABackslashDoesNotSwallowTheNextLine) {
  SlurmConf conf;
  conf.append_comment("# ends with \\");
  conf.append_setting({{"ClusterName", "a"}});
  EXPECT_EQ(parse(conf.render()).get("ClusterName"), "a");
}

TEST(SlurmConf, JoinsContinuedLines) {
  const SlurmConf conf = parse("NodeName=n1 \\\n  CPUs=2\nClusterName=c\n");
  EXPECT_EQ(conf.lines()[0].get("CPUs"), "2");
  EXPECT_EQ(conf.lines()[1].line, 3);
}

TEST(SlurmConf, SetReplacesTheExistingValueInPlace) {
  SlurmConf conf = parse("ClusterName=a\nSlurmUser=slurm\n");
  conf.set("clustername", "b");
  conf.set("MaxNodeCount", "64");
  EXPECT_EQ(conf.render(), "ClusterName=b\nSlurmUser=slurm\nMaxNodeCount=64\n");
}

TEST(SlurmConf, AnUnterminatedQuoteIsAnErrorNamingTheLine) {
  const auto conf = parse_slurm_conf("ClusterName=a\nFeatures=\"open\n", "extraConf");
  ASSERT_FALSE(conf.ok());
  EXPECT_EQ(conf.error().to_string(),
            "extraConf line 2: unterminated quote in the value of Features");
}

TEST(SlurmConf, AKeyWithCharactersSlurmDoesNotUseIsAnError) {
  const auto conf = parse_slurm_conf(",,\",,= x=1\n", "extraConf");
  ASSERT_FALSE(conf.ok());
  EXPECT_EQ(conf.error().message, "',,\",,' is not a slurm.conf key");
}

TEST(SlurmConf, AWordWithoutAValueIsAnError) {
  const auto conf = parse_slurm_conf("ClusterName=a bogus\n", "extraConf");
  ASSERT_FALSE(conf.ok());
  EXPECT_EQ(conf.error().line, 1);
  EXPECT_EQ(conf.error().message, "expected Key=Value, got 'bogus'");
}

OwnedConf operator_owned() {
  return OwnedConf{{"ClusterName", "SlurmctldHost", "AuthType", "SlurmctldParameters"},
                   {"NodeSet=gpu", "PartitionName=gpu"},
                   "the operator"};
}

TEST(ValidateExtraConf, AcceptsLinesTheOperatorDoesNotOwn) {
  const SlurmConf extra = parse("SchedulerParameters=bf_continue\nPartitionName=debug Nodes=ALL\n");
  EXPECT_TRUE(validate_extra_conf(extra, operator_owned()).empty());
}

TEST(ValidateExtraConf, RejectsOwnedKeysNamingEachLine) {
  const SlurmConf extra =
      parse("# mine\nMaxJobCount=1000\nclustername=other\nAuthType=auth/munge\n");
  const auto errors = validate_extra_conf(extra, operator_owned());
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].to_string(),
            "extraConf line 3: clustername is set by the operator and cannot be set in extraConf");
  EXPECT_EQ(errors[1].line, 4);
}

TEST(ValidateExtraConf, RejectsARedefinitionOfAnOwnedRecord) {
  const auto errors =
      validate_extra_conf(parse("PartitionName=gpu MaxTime=60\n"), operator_owned());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("PartitionName=gpu is defined by the operator"),
            std::string::npos);
}

TEST(ValidateExtraConf, RejectsRepeatedOwnedRecordKeysSuchAsAnotherController) {
  const auto errors = validate_extra_conf(parse("SlurmctldHost=other\n"), operator_owned());
  ASSERT_EQ(errors.size(), 1U);
}

TEST(ValidateExtraConf, RejectsIncludes) {
  const auto errors = validate_extra_conf(parse("Include /etc/slurm/x.conf\n"), operator_owned());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("Include /etc/slurm/x.conf is not allowed"), std::string::npos);
}

}  // namespace
}  // namespace tightrope::slurm
