#include "operator/nodeset_metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace tightrope::op {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

api::Condition condition(std::string type, std::string status) {
  return {std::move(type), std::move(status), "", "", 0, ""};
}

NodeSetMetrics::Clock::time_point now() {
  return NodeSetMetrics::Clock::now();
}

const nlohmann::json kStatus = {{"desired", 3},    {"readyReplicas", 2},     {"updatedReplicas", 1},
                                {"slurmIdle", 1},  {"slurmAllocated", 1},    {"slurmDown", 1},
                                {"slurmDrain", 1}, {"nodeSetHash", "ns-abc"}};

TEST(NodeSetMetrics, ShowTheStatusCountsAndEachConditionsStatus) {
  metrics::Registry registry;
  NodeSetMetrics m(registry);
  m.report("slurm", "gpu", kStatus,
           {condition("Ready", "False"), condition("JobsConfined", "Unknown")}, now());
  const std::string text = registry.render();
  EXPECT_THAT(
      text,
      HasSubstr("tightrope_nodeset_desired_replicas{namespace=\"slurm\",nodeset=\"gpu\"} 3\n"));
  EXPECT_THAT(
      text, HasSubstr("tightrope_nodeset_ready_replicas{namespace=\"slurm\",nodeset=\"gpu\"} 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr("tightrope_nodeset_updated_replicas{namespace=\"slurm\",nodeset=\"gpu\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_slurm_nodes{namespace=\"slurm\",nodeset=\"gpu\","
                              "state=\"down\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_condition{namespace=\"slurm\",nodeset=\"gpu\","
                              "type=\"Ready\",status=\"False\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_condition{namespace=\"slurm\",nodeset=\"gpu\","
                              "type=\"Ready\",status=\"True\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("type=\"JobsConfined\",status=\"Unknown\"} 1\n"));
}

TEST(NodeSetMetrics, AConditionThatGoesTakesItsSeries) {
  metrics::Registry registry;
  NodeSetMetrics m(registry);
  m.report("slurm", "cpu", kStatus,
           {condition("Ready", "True"), condition("ReservationCreated", "True")}, now());
  m.report("slurm", "cpu", kStatus, {condition("Ready", "True")}, now());
  EXPECT_THAT(registry.render(), Not(HasSubstr("ReservationCreated")));
  EXPECT_THAT(registry.render(), HasSubstr("type=\"Ready\",status=\"True\"} 1\n"));
}

TEST(NodeSetMetrics, HealthStepsAreKeptWhileUnknownAndGoWithTheHealthCheck) {
  metrics::Registry registry;
  NodeSetMetrics m(registry);
  const std::map<std::string, int64_t> steps{{"drained", 0}, {"replacing", 1}, {"waiting", 2}};
  m.report("slurm", "gpu", kStatus, {condition("Ready", "True")}, now(), &steps);
  EXPECT_THAT(registry.render(), HasSubstr("tightrope_nodeset_health_nodes{namespace=\"slurm\","
                                           "nodeset=\"gpu\",step=\"waiting\"} 2\n"));
  m.report("slurm", "gpu", kStatus, {condition("Ready", "False")}, now(), nullptr);
  EXPECT_THAT(registry.render(), HasSubstr("step=\"replacing\"} 1\n")) << "Slurm away: kept";
  const std::map<std::string, int64_t> none;
  m.report("slurm", "gpu", kStatus, {condition("Ready", "True")}, now(), &none);
  EXPECT_THAT(registry.render(), Not(HasSubstr("tightrope_nodeset_health_nodes{")));
}

TEST(NodeSetMetrics, AGoneNodeSetLeavesNoSeriesAndTheOthersStay) {
  metrics::Registry registry;
  NodeSetMetrics m(registry);
  m.report("slurm", "cpu", kStatus, {condition("Ready", "True")}, now());
  m.report("slurm", "gpu", kStatus, {condition("Ready", "True")}, now());
  m.forget("slurm", "cpu");
  const std::string text = registry.render();
  EXPECT_THAT(text, Not(HasSubstr("nodeset=\"cpu\"")));
  EXPECT_THAT(text, HasSubstr("nodeset=\"gpu\""));
}

TEST(NodeSetMetrics, AChangeWaitsForTheReconcileThatBeganAfterItWasSeen) {
  metrics::Registry registry;
  NodeSetMetrics m(registry);
  const auto began = now();
  m.seen("slurm", "cpu", "slurm", began - std::chrono::seconds(2));
  m.seen("slurm", "cpu", "slurm", began - std::chrono::seconds(1));  // the first one counts
  m.seen("slurm", "cpu", "node", began + std::chrono::seconds(1));   // too late for this one
  m.report("slurm", "cpu", kStatus, {condition("Ready", "True")}, began);
  std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_sync_seconds_count{namespace=\"slurm\","
                              "nodeset=\"cpu\",source=\"slurm\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_sync_seconds_bucket{namespace=\"slurm\","
                              "nodeset=\"cpu\",source=\"slurm\",le=\"2.56\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_sync_seconds_bucket{namespace=\"slurm\","
                              "nodeset=\"cpu\",source=\"slurm\",le=\"1.28\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("source=\"node\"")));
  m.report("slurm", "cpu", kStatus, {condition("Ready", "True")}, began + std::chrono::seconds(2));
  text = registry.render();
  EXPECT_THAT(text, HasSubstr("tightrope_nodeset_sync_seconds_count{namespace=\"slurm\","
                              "nodeset=\"cpu\",source=\"node\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("source=\"slurm\"} 1\n"));  // observed once only
}

}  // namespace
}  // namespace tightrope::op
