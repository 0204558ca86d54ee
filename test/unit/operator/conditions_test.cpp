// set_condition keeps a condition's lastTransitionTime while its status stays, so that
// `kubectl describe` shows since when something has been true or wrong.
#include "operator/conditions.hpp"

#include <gtest/gtest.h>

namespace tightrope::op {
namespace {

api::Condition ready(const std::string& status, const std::string& reason) {
  api::Condition c;
  c.type = "Ready";
  c.status = status;
  c.reason = reason;
  c.message = reason + " message";
  return c;
}

TEST(SetCondition, ANewConditionTransitionsNow) {
  std::vector<api::Condition> conditions;
  set_condition(conditions, ready("True", "Up"), "2026-01-01T00:00:00Z");
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].last_transition_time, "2026-01-01T00:00:00Z");
}

TEST(SetCondition, KeepsLastTransitionTimeWhileTheStatusIsUnchanged) {
  std::vector<api::Condition> conditions;
  set_condition(conditions, ready("False", "Starting"), "2026-01-01T00:00:00Z");
  set_condition(conditions, ready("False", "Waiting"), "2026-01-01T00:05:00Z");
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].reason, "Waiting");  // reason and message follow the latest
  EXPECT_EQ(conditions[0].message, "Waiting message");
  EXPECT_EQ(conditions[0].last_transition_time, "2026-01-01T00:00:00Z");
}

TEST(SetCondition, UpdatesLastTransitionTimeWhenTheStatusChanges) {
  std::vector<api::Condition> conditions;
  set_condition(conditions, ready("False", "Starting"), "2026-01-01T00:00:00Z");
  set_condition(conditions, ready("True", "Up"), "2026-01-01T00:05:00Z");
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].status, "True");
  EXPECT_EQ(conditions[0].last_transition_time, "2026-01-01T00:05:00Z");
}

TEST(SetCondition, LeavesConditionsOfOtherTypesAlone) {
  std::vector<api::Condition> conditions;
  api::Condition degraded = ready("True", "Slow");
  degraded.type = "Degraded";
  set_condition(conditions, degraded, "2026-01-01T00:00:00Z");
  set_condition(conditions, ready("True", "Up"), "2026-01-01T00:05:00Z");
  ASSERT_EQ(conditions.size(), 2u);
  ASSERT_NE(find_condition(conditions, "Degraded"), nullptr);
  EXPECT_EQ(find_condition(conditions, "Degraded")->last_transition_time, "2026-01-01T00:00:00Z");
  EXPECT_EQ(find_condition(conditions, "Missing"), nullptr);
}

}  // namespace
}  // namespace tightrope::op
