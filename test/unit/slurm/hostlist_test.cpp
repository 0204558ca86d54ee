#include "slurm/hostlist.hpp"

#include <gtest/gtest.h>

#include <set>

namespace tightrope::slurm {
namespace {

using Names = std::vector<std::string>;

TEST(Hostlist, PlainNamesAndRanges) {
  EXPECT_EQ(expand_hostlist("n1"), Names({"n1"}));
  EXPECT_EQ(expand_hostlist("n[1-3]"), Names({"n1", "n2", "n3"}));
  EXPECT_EQ(expand_hostlist("n[1-2,7],gpu-0"), Names({"n1", "n2", "n7", "gpu-0"}));
  EXPECT_EQ(expand_hostlist(""), Names());
}

TEST(Hostlist, KeepsZeroPadding) {
  EXPECT_EQ(expand_hostlist("w-[08-10]"), Names({"w-08", "w-09", "w-10"}));
  EXPECT_EQ(expand_hostlist("w-[001-002]"), Names({"w-001", "w-002"}));
}

TEST(Hostlist, SeveralBracketsMultiply) {
  EXPECT_EQ(expand_hostlist("r[1-2]-n[1-2]"), Names({"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
}

TEST(Hostlist, RefusesWhatDoesNotParse) {
  EXPECT_FALSE(expand_hostlist("n[1-3"));
  EXPECT_FALSE(expand_hostlist("n1-3]"));
  EXPECT_FALSE(expand_hostlist("n[3-1]"));
  EXPECT_FALSE(expand_hostlist("n[a-b]"));
  EXPECT_FALSE(expand_hostlist("n[1-99999999]", 1000));
}

TEST(Hostlist, PlainNamesAfterARangeCountTowardsTheLimit) {
  // Found by fuzz_hostlist: a range just under the limit, then plain names past it.
  EXPECT_FALSE(expand_hostlist("n[1-3],a,b", 4));
  EXPECT_FALSE(expand_hostlist("a,b,n[1-3]", 4));
  EXPECT_FALSE(expand_hostlist("a,b,c,d,e", 4));
  EXPECT_EQ(expand_hostlist("n[1-3],a", 4)->size(), 4U);
}

TEST(Hostlist, CompressesNamesIntoRanges) {
  EXPECT_EQ(compress_hostlist({}), "");
  EXPECT_EQ(compress_hostlist({"slinky-3"}), "slinky-3");
  EXPECT_EQ(compress_hostlist({"slinky-2", "slinky-0", "slinky-1", "slinky-7", "slinky-1"}),
            "slinky-[0-2,7]");
  EXPECT_EQ(compress_hostlist({"gpu-1", "cpu-0", "login", "cpu-1"}), "gpu-1,cpu-[0-1],login");
  EXPECT_EQ(compress_hostlist({"n8", "n9", "n10", "n11"}), "n[8-11]");
  // Zero padding is kept apart: w-08 and w-8 are two nodes.
  EXPECT_EQ(compress_hostlist({"w-08", "w-09", "w-10", "w-8"}), "w-[08-09],w-[8,10]");
}

TEST(Hostlist, CompressedNamesExpandToTheSameNames) {
  std::vector<std::string> names;
  for (int i = 0; i < 1000; i += (i % 7 == 0 ? 2 : 1)) {
    names.push_back("slinky-" + std::to_string(i));
  }
  names.push_back("a-0099");
  const auto back = expand_hostlist(compress_hostlist(names));
  ASSERT_TRUE(back);
  EXPECT_EQ(std::set<std::string>(back->begin(), back->end()),
            std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace tightrope::slurm
