// What the operator makes of HealthChecks (docs/health.md): which HealthCheck a NodeSet's
// workers follow, the checks.json and scripts its pods mount, and the interval slurm.conf runs
// the program at. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/types.hpp"

namespace tightrope::op::build {

// The HealthCheck a NodeSet follows: of those of its namespace whose selector matches its
// labels, the first by name (a second one is a conflict its status names); none when none does.
const api::HealthCheck* selecting_health_check(const std::vector<api::HealthCheck>& checks,
                                               const api::NodeSet& n);

// The HealthCheckProgram a Controller's extraConf brings (a site's own, LBNL NHC), "" when none:
// it wins over Tightrope's, and the cluster's HealthChecks then check nothing.
std::string site_health_check_program(const api::Controller& c);

// slurm.conf's HealthCheckTimeout for a HealthCheckInterval: Slurm wants it below the interval
// (it complains in every daemon's log otherwise) and kills the program after it; at most its
// default, 60 s.
int64_t health_check_timeout(int64_t interval);

// checks.json for the program: the HealthCheck's spec.passive, defaulted, and the deadline by
// which it must have finished, a little inside the cluster's HealthCheckTimeout.
std::string health_checks_json(const api::HealthCheck& h, int64_t cluster_interval);
// checks.json's "active" section, from a defaulted spec.active: what the check job runs.
nlohmann::json active_checks_json(const api::ActiveChecks& active);

// ConfigMap <nodeset>-health, owned by the HealthCheck: checks.json and, for each key of the
// site's scripts ConfigMap, script.<key>. `cluster_interval`: health_check_interval() of the
// NodeSet's cluster.
nlohmann::json build_health_config_map(const api::NodeSet& n, const api::HealthCheck& h,
                                       const std::map<std::string, std::string>& scripts,
                                       int64_t cluster_interval);

// slurm.conf's HealthCheckInterval for a cluster: the shortest interval of the HealthChecks its
// NodeSets follow; none when they follow none.
std::optional<int64_t> health_check_interval(const std::vector<api::HealthCheck>& checks,
                                             const std::vector<api::NodeSet>& nodesets);

}  // namespace tightrope::op::build
