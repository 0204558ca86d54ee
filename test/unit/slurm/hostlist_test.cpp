#include "slurm/hostlist.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tightrope::slurm
