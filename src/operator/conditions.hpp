// metav1.Condition bookkeeping: a condition keeps its lastTransitionTime while its status stays,
// so `kubectl describe` shows how long something has been wrong.
#pragma once

#include <string>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op {

// Puts `condition` into `conditions` (by type). lastTransitionTime becomes `now` when the status
// changed or the condition is new, else it is kept.
void set_condition(std::vector<api::Condition>& conditions, api::Condition condition,
                   const std::string& now);
const api::Condition* find_condition(const std::vector<api::Condition>& conditions,
                                     const std::string& type);

}  // namespace tightrope::op
