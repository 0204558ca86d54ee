// Memory freed after a burst goes back to the system when asked, not only when it is at the
// heap's top.
#include "base/memory.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tightrope {
namespace {

// The process's resident anonymous memory, in KiB (Linux).
long resident_anonymous_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) == 0) {
      return std::stol(line.substr(8));
    }
  }
  return -1;
}

TEST(ReturnFreeMemory, GivesBackWhatWasFreedBelowALiveAllocation) {
  // 64 MiB in blocks under the mmap threshold (so from the heap), then one that stays: the
  // freed blocks lie below it, where freeing alone never returns them.
  constexpr size_t kBlock = 32 * 1024;
  constexpr size_t kBlocks = 2048;
  std::vector<void*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    void* block = std::malloc(kBlock);
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, kBlock);
    blocks.push_back(block);
  }
  void* live = std::malloc(kBlock);
  std::memset(live, 1, kBlock);
  for (void* block : blocks) {
    std::free(block);
  }
  const long freed = resident_anonymous_kib();
  return_free_memory();
  const long returned = resident_anonymous_kib();
  std::free(live);
  ASSERT_GT(freed, 0);
  EXPECT_GT(freed - returned, 32 * 1024) << "KiB resident: " << freed << " -> " << returned;
}

}  // namespace
}  // namespace tightrope
