#include <gtest/gtest.h>

#include "api/defaults.hpp"
#include "operator/build/health.hpp"

namespace tightrope::op::build {
namespace {

using nlohmann::json;

api::NodeSet nodeset(const std::string& name, api::StringMap labels) {
  api::NodeSet n;
  n.metadata.name = name;
  n.metadata.namespace_name = "slurm";
  n.metadata.labels = std::move(labels);
  n.spec.controller_ref.name = "slurm";
  return n;
}

api::HealthCheck health_check(const std::string& name, api::StringMap match_labels,
                              int64_t interval = 0) {
  api::HealthCheck h;
  h.metadata.name = name;
  h.metadata.namespace_name = "slurm";
  h.metadata.uid = "uid-" + name;
  h.spec.node_set_selector.match_labels = std::move(match_labels);
  h.spec.passive.interval_seconds = interval;
  return h;
}

TEST(HealthBuild, ANodeSetFollowsTheFirstMatchingHealthCheckOfItsNamespace) {
  const auto gpu = nodeset("slurm-worker-gpu", {{"tier", "gpu"}});
  std::vector<api::HealthCheck> checks = {health_check("zeta", {}),
                                          health_check("alpha", {{"tier", "gpu"}}),
                                          health_check("beta", {{"tier", "cpu"}})};
  ASSERT_NE(selecting_health_check(checks, gpu), nullptr);
  EXPECT_EQ(selecting_health_check(checks, gpu)->metadata.name, "alpha");
  checks[1].metadata.namespace_name = "other";
  EXPECT_EQ(selecting_health_check(checks, gpu)->metadata.name, "zeta");
  checks[0].metadata.deleting = true;
  EXPECT_EQ(selecting_health_check(checks, gpu), nullptr);
}

TEST(HealthBuild, TheConfigMapHoldsTheDefaultedChecksAndTheSitesScripts) {
  const auto gpu = nodeset("slurm-worker-gpu", {});
  auto h = health_check("gpu-workers", {});
  h.spec.passive.mounts = {"/home"};
  const json cm = build_health_config_map(gpu, h, {{"ib-ports", "#!/bin/sh\nexit 0\n"}}, 60);
  EXPECT_EQ(cm["metadata"]["name"], "slurm-worker-gpu-health");
  EXPECT_EQ(cm["metadata"]["namespace"], "slurm");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "HealthCheck");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["apiVersion"], "tightrope.slurm.net/v1alpha1");
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["uid"], "uid-gpu-workers");
  EXPECT_EQ(json::parse(cm["data"]["checks.json"].get<std::string>()),
            json::parse(R"({"intervalSeconds":60,"timeoutSeconds":30,"deadlineSeconds":42,)"
                        R"("checks":["mounts","memory","cpus","gpus","dcgm"],"mounts":["/home"],)"
                        R"("source":"uid-gpu-workers"})"));
  EXPECT_EQ(cm["data"]["script.ib-ports"], "#!/bin/sh\nexit 0\n");
}

TEST(HealthBuild, SlurmStopsTheProgramBeforeItsNextRunAndTheProgramStopsItselfFirst) {
  EXPECT_EQ(health_check_timeout(60), 45);
  EXPECT_EQ(health_check_timeout(10), 7);
  EXPECT_EQ(health_check_timeout(600), 60);  // Slurm's default, at most
  const auto deadline = [](int64_t cluster_interval) {
    return json::parse(
        health_checks_json(health_check("h", {}), cluster_interval))["deadlineSeconds"];
  };
  EXPECT_EQ(deadline(600), 57);
  EXPECT_EQ(deadline(10), 4);
}

TEST(HealthBuild, ChecksJsonCarriesTheActiveChecksDefaultedOnlyWhenAskedFor) {
  auto h = health_check("h", {});
  EXPECT_FALSE(json::parse(health_checks_json(h, 60)).contains("active"));
  h.spec.active.emplace().min_cpu_gflops = 20;
  EXPECT_EQ(json::parse(health_checks_json(h, 60))["active"],
            json::parse(R"({"checks":["cpu","memory-bandwidth","nccl"],"timeoutSeconds":120,)"
                        R"("minCpuGflops":20,"minMemoryBandwidthMBps":0,)"
                        R"("minNcclBusBandwidthGBps":0,)"
                        R"("ncclTests":"/usr/local/bin/all_reduce_perf"})"));
}

TEST(HealthBuild, ASitesOwnHealthCheckProgramIsFoundInExtraConfWhateverItsCase) {
  api::Controller c;
  EXPECT_EQ(site_health_check_program(c), "");
  c.spec.extra_conf = "SchedulerType=sched/backfill\nhealthcheckprogram=/usr/sbin/nhc\n";
  EXPECT_EQ(site_health_check_program(c), "/usr/sbin/nhc");
  c.spec.extra_conf = "HealthCheckInterval=300\n";
  EXPECT_EQ(site_health_check_program(c), "");
}

TEST(HealthBuild, SlurmRunsTheProgramAtTheShortestIntervalOfTheClustersNodeSets) {
  const std::vector<api::NodeSet> nodesets = {nodeset("a", {{"tier", "gpu"}}),
                                              nodeset("b", {{"tier", "cpu"}})};
  EXPECT_EQ(health_check_interval({}, nodesets), std::nullopt);
  EXPECT_EQ(health_check_interval({health_check("h", {{"tier", "none"}})}, nodesets), std::nullopt);
  EXPECT_EQ(health_check_interval({health_check("g", {{"tier", "gpu"}}, 120)}, nodesets), 120);
  EXPECT_EQ(health_check_interval({health_check("g", {{"tier", "gpu"}}, 120),
                                   health_check("c", {{"tier", "cpu"}}, 30)},
                                  nodesets),
            30);
  EXPECT_EQ(health_check_interval({health_check("g", {{"tier", "gpu"}})}, nodesets),
            api::kDefaultHealthInterval);
}

}  // namespace
}  // namespace tightrope::op::build
