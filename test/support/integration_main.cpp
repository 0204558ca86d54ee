// main() of every integration test binary: the cases run against one shared test bed.
#include <gtest/gtest.h>

#include "testbed.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tightrope::testing::TestBed);  // gtest takes ownership
  return RUN_ALL_TESTS();
}
