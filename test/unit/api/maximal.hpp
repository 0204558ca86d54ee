// One object of each kind with every field set to something other than its zero value and its
// default, so that encoding it writes every field the codec knows.
#pragma once

#include "api/types.hpp"

namespace tightrope::api::testing {

Controller maximal_controller();
NodeSet maximal_nodeset();
LoginSet maximal_loginset();
RestApi maximal_restapi();
Accounting maximal_accounting();
Token maximal_token();
HealthCheck maximal_health_check();

}  // namespace tightrope::api::testing
