#include "kube/quantity.hpp"

#include <gtest/gtest.h>

namespace tightrope::kube {
namespace {

TEST(Quantity, ReadsCpuInMilliAndRoundsUp) {
  EXPECT_EQ(parse_quantity_milli("250m"), 250);
  EXPECT_EQ(parse_quantity_milli("2"), 2000);
  EXPECT_EQ(parse_quantity_milli("0.5"), 500);
  EXPECT_EQ(parse_quantity_milli("100u"), 1);
  EXPECT_EQ(parse_quantity("1500m"), 2);
  EXPECT_EQ(parse_quantity("2"), 2);
}

TEST(Quantity, ReadsBinaryAndDecimalSuffixesAndExponents) {
  EXPECT_EQ(parse_quantity("1Ki"), 1024);
  EXPECT_EQ(parse_quantity("512Mi"), 536870912);
  EXPECT_EQ(parse_quantity("1.5Gi"), 1610612736);
  EXPECT_EQ(parse_quantity("1M"), 1000000);
  EXPECT_EQ(parse_quantity("1e3"), 1000);
  EXPECT_EQ(parse_quantity("128974848"), 128974848);
  EXPECT_EQ(parse_quantity("16Ei"), std::nullopt);  // does not fit
}

TEST(Quantity, RefusesWhatIsNotAQuantity) {
  for (const char* text : {"", "m", "abc", "1.2.3", "1x", "Gi", "1e", "1e+x", "--1"}) {
    EXPECT_EQ(parse_quantity_milli(text), std::nullopt) << text;
  }
}

}  // namespace
}  // namespace tightrope::kube
