// main() of every integration test binary: the cases run against one shared test bed.
#include <gtest/gtest.h>

#include "testbed.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // gtest takes ownership of the environment and deletes it at exit.
  ::testing::AddGlobalTestEnvironment(
      new tightrope::testing::TestBed);  // NOLINT(cppcoreguidelines-owning-memory)
  return RUN_ALL_TESTS();
}
