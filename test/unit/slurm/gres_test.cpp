#include "slurm/gres.hpp"

#include <gtest/gtest.h>

namespace tightrope::slurm {
namespace {

TEST(GpuCount, SumsEveryGpuEntryWhateverItsTypeAndTail) {
  EXPECT_EQ(gpu_count("gpu:h100:4(S:0-1)"), 4);
  EXPECT_EQ(gpu_count("gpu:4"), 4);
  EXPECT_EQ(gpu_count("gpu:h100:2(IDX:0-1),gpu:a100:1(IDX:2)"), 3);
  EXPECT_EQ(gpu_count("gpu:h100:4(S:0,1),shard:8"), 4);  // a comma inside the tail
  EXPECT_EQ(gpu_count("gpu:h100:0(IDX:N/A)"), 0);
}

TEST(GpuCount, CountsNothingForOtherGresOrUnreadableEntries) {
  EXPECT_EQ(gpu_count(""), 0);
  EXPECT_EQ(gpu_count("(null)"), 0);
  EXPECT_EQ(gpu_count("shard:8,mps:100"), 0);
  EXPECT_EQ(gpu_count("gpu"), 0);
  EXPECT_EQ(gpu_count("gpu:h100:four"), 0);
}

}  // namespace
}  // namespace tightrope::slurm
