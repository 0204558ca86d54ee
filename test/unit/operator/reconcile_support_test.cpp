// What the reconcilers share that has logic of its own: the memory of recent applies.
#include "operator/reconcile_support.hpp"

#include <gtest/gtest.h>

namespace tightrope::op {
namespace {

using nlohmann::json;

json service(const std::string& name, int port) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", name}, {"namespace", "hpc"}}},
          {"spec", {{"ports", json::array({{{"port", port}}})}}}};
}

TEST(AppliedRecently, TheSameObjectIsFreshUntilItChangesOrTheRefreshComes) {
  AppliedRecently recent(std::chrono::minutes(5));
  EXPECT_FALSE(recent.fresh(service("workers", 6818)));
  recent.remember(service("workers", 6818));
  EXPECT_TRUE(recent.fresh(service("workers", 6818)));
  EXPECT_FALSE(recent.fresh(service("workers", 6819)));
  EXPECT_FALSE(recent.fresh(service("other", 6818)));

  AppliedRecently always(std::chrono::seconds(0));
  always.remember(service("workers", 6818));
  EXPECT_FALSE(always.fresh(service("workers", 6818)));
}

}  // namespace
}  // namespace tightrope::op
