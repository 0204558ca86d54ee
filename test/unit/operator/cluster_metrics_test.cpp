#include "operator/cluster_metrics.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tightrope::op {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

slurm::Job job(int64_t id, std::string state, std::string partition, std::string account,
               std::string reason) {
  slurm::Job j;
  j.id = id;
  j.state = {std::move(state)};
  j.partition = std::move(partition);
  j.account = std::move(account);
  j.state_reason = std::move(reason);
  return j;
}

slurm::Node gpu_node(std::string name, std::string gres, std::string used) {
  slurm::Node n;
  n.name = std::move(name);
  n.gres = std::move(gres);
  n.gres_used = std::move(used);
  return n;
}

TEST(CountJobs, GroupsActiveJobsAndKeepsTheReasonOnlyForPendingOnes) {
  std::map<int64_t, slurm::Job> jobs;
  jobs[1] = job(1, "PENDING", "gpu", "physics", "Resources");
  jobs[2] = job(2, "PENDING", "gpu", "physics", "Resources");
  jobs[3] = job(3, "PENDING", "gpu", "physics", "Priority");
  jobs[4] = job(4, "RUNNING", "gpu", "physics", "None");
  jobs[5] = job(5, "COMPLETED", "gpu", "physics", "None");
  const auto counts = count_jobs(jobs);
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.at({"gpu", "physics", "pending", "Resources"}), 2);
  EXPECT_EQ(counts.at({"gpu", "physics", "pending", "Priority"}), 1);
  EXPECT_EQ(counts.at({"gpu", "physics", "running", ""}), 1);
}

TEST(ClusterMetrics, ShowJobsGpusAndHealthAndDropAGroupThatEmpties) {
  metrics::Registry registry;
  ClusterMetrics m(registry);
  std::map<int64_t, slurm::Job> jobs = {{1, job(1, "PENDING", "gpu", "physics", "Resources")},
                                        {2, job(2, "RUNNING", "gpu", "physics", "None")}};
  std::map<std::string, slurm::Node> nodes = {
      {"gpu-0", gpu_node("gpu-0", "gpu:h100:4(S:0-1)", "gpu:h100:1(IDX:0)")},
      {"gpu-1", gpu_node("gpu-1", "gpu:h100:4(S:0-1)", "gpu:h100:0(IDX:N/A)")},
      {"gpu-2", gpu_node("gpu-2", "", "")},
      {"cpu-0", gpu_node("cpu-0", "", "")}};
  nodes["gpu-2"].state = {"IDLE", "NOT_RESPONDING"};
  const auto nodeset_of = [](const std::string& node) { return node.substr(0, 3); };
  m.report("slurm", "slurm", jobs, nodes, nodeset_of);
  m.up("slurm", "slurm", true);
  std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("tightrope_slurm_jobs{namespace=\"slurm\",controller=\"slurm\","
                              "partition=\"gpu\",account=\"physics\",state=\"pending\","
                              "reason=\"Resources\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("state=\"running\",reason=\"\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_slurm_gpus{namespace=\"slurm\",controller=\"slurm\","
                              "nodeset=\"gpu\",state=\"configured\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("nodeset=\"gpu\",state=\"allocated\"} 1\n"));
  // A NodeSet without GPUs shows 0 of them, so a dashboard's panel has a series for it.
  EXPECT_THAT(text, HasSubstr("nodeset=\"cpu\",state=\"configured\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_slurm_nodes_not_responding{namespace=\"slurm\","
                              "controller=\"slurm\",nodeset=\"gpu\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tightrope_slurm_up{namespace=\"slurm\",controller=\"slurm\"} 1\n"));

  jobs.erase(1);
  m.report("slurm", "slurm", jobs, {}, nodeset_of);
  text = registry.render();
  EXPECT_THAT(text, Not(HasSubstr("reason=\"Resources\"")));
  EXPECT_THAT(text, HasSubstr("state=\"running\""));
  EXPECT_THAT(text, Not(HasSubstr("tightrope_slurm_gpus{")));
}

TEST(ClusterMetrics, CountAttemptsByOutcomeAndForgetAGoneController) {
  metrics::Registry registry;
  ClusterMetrics m(registry);
  const auto count = m.attempts("slurm", "slurm");
  slurm::Error refused{slurm::ErrorKind::kNotFound, 404, "GET /node/x: 404", {}};
  count("GET", nullptr);
  count("GET", nullptr);
  count("GET", &refused);
  std::string text = registry.render();
  EXPECT_THAT(text, HasSubstr("tightrope_slurm_requests_total{namespace=\"slurm\",controller="
                              "\"slurm\",method=\"GET\",outcome=\"ok\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("method=\"GET\",outcome=\"not_found\"} 1\n"));
  m.up("slurm", "slurm", false);
  m.forget("slurm", "slurm");
  EXPECT_THAT(registry.render(), Not(HasSubstr("controller=\"slurm\"")));
}

}  // namespace
}  // namespace tightrope::op
