#include "operator/conditions.hpp"

namespace tightrope::op {

void set_condition(std::vector<api::Condition>& conditions, api::Condition condition,
                   const std::string& now) {
  for (auto& existing : conditions) {
    if (existing.type == condition.type) {
      condition.last_transition_time =
          existing.status == condition.status && !existing.last_transition_time.empty()
              ? existing.last_transition_time
              : now;
      existing = std::move(condition);
      return;
    }
  }
  condition.last_transition_time = now;
  conditions.push_back(std::move(condition));
}

const api::Condition* find_condition(const std::vector<api::Condition>& conditions,
                                     const std::string& type) {
  for (const auto& c : conditions) {
    if (c.type == type) {
      return &c;
    }
  }
  return nullptr;
}

}  // namespace tightrope::op
