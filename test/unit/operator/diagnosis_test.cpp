#include "operator/diagnosis.hpp"

#include <gtest/gtest.h>

#include "kube/time.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

DiagnosisInputs cluster() {
  DiagnosisInputs in;
  in.now = *kube::parse_time("2026-12-04T12:00:00Z");
  in.namespace_name = "slurm";
  in.controller = {{"metadata", {{"name", "slurm"}, {"namespace", "slurm"}}}};
  in.nodesets = {{{"metadata", {{"name", "workers"}, {"namespace", "slurm"}}},
                  {"status", {{"nodeSetHash", "workers-1"}}}}};
  in.pods = {{{"metadata",
               {{"name", "workers-0"},
                {"namespace", "slurm"},
                {"labels",
                 {{"app.kubernetes.io/name", "slurmd"},
                  {"app.kubernetes.io/instance", "workers"},
                  {"controller-revision-hash", "workers-1"},
                  {"nodeset.slinky.slurm.net/pod-hostname", "w-0"}}}}},
              {"spec", {{"nodeName", "k8s-0"}}},
              {"status",
               {{"phase", "Running"},
                {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}}};
  in.kube_nodes = {{{"metadata", {{"name", "k8s-0"}}}}};
  auto nodes = std::make_shared<std::map<std::string, slurm::Node>>();
  (*nodes)["w-0"].name = "w-0";
  (*nodes)["w-0"].state = {"IDLE"};
  in.snapshot.nodes = nodes;
  in.snapshot.jobs = std::make_shared<std::map<int64_t, slurm::Job>>();
  return in;
}

std::vector<doctor::Finding> run(const DiagnosisInputs& in) {
  return problems(doctor::diagnose(diagnosis_view(in), operator_checks()));
}

TEST(Diagnosis, AHealthyClusterIsHealthy) {
  const auto found = run(cluster());
  EXPECT_TRUE(found.empty());
  const api::Condition c = healthy_condition(found, 3);
  EXPECT_EQ(c.type, "Healthy");
  EXPECT_EQ(c.status, "True");
  EXPECT_EQ(c.observed_generation, 3);
}

TEST(Diagnosis, ADrainHeldByAnEndlessJobMakesTheControllerUnhealthy) {
  auto in = cluster();
  auto nodes = std::make_shared<std::map<std::string, slurm::Node>>(*in.snapshot.nodes);
  (*nodes)["w-0"].state = {"MIXED", "DRAIN"};
  (*nodes)["w-0"].alloc_cpus = 1;
  (*nodes)["w-0"].reason = "bad fan";
  in.snapshot.nodes = nodes;
  auto jobs = std::make_shared<std::map<int64_t, slurm::Job>>();
  (*jobs)[7] = {7,      "sim", {"RUNNING"},  "w-0", "alice", "", "p",
                "None", {},    std::nullopt, {},    {},      "", 0};
  in.snapshot.jobs = jobs;
  const auto found = run(in);
  ASSERT_EQ(found.size(), 1U);
  const api::Condition c = healthy_condition(found, 1);
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "DrainStuck");
  EXPECT_NE(c.message.find("drain-stuck: Slurm node w-0"), std::string::npos);
}

TEST(Diagnosis, OnlyTheChecksWhoseInputsTheOperatorHoldsRun) {
  // No slurmctld pod is in the operator's cache: slurmctld-unreachable must not run.
  const auto& checks = operator_checks();
  EXPECT_EQ(std::count(checks.begin(), checks.end(), "slurmctld-unreachable"), 0);
  for (const auto& id : checks) {
    bool known = false;
    for (const auto& check : doctor::catalog()) {
      known = known || check.id == id;
    }
    EXPECT_TRUE(known) << id;
  }
}

TEST(Diagnosis, ReasonsAreTheCheckInCamelCase) {
  EXPECT_EQ(reason_of("slurm-node-not-responding"), "SlurmNodeNotResponding");
  EXPECT_EQ(reason_of("gres-missing"), "GresMissing");
}

}  // namespace
}  // namespace tightrope::op
