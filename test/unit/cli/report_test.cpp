#include "cli/report.hpp"

#include <gtest/gtest.h>

#include "../doctor/view_fixture.hpp"

namespace tightrope::cli {
namespace {

using doctor::testing::Fixture;

TEST(Status, JoinsEachWorkerPodWithItsSlurmNodeAndJobs) {
  Fixture f;
  f.worker("w-0");
  f.worker("w-1");
  f.slurm_node("w-1").state = {"MIXED", "DRAIN"};
  f.slurm_node("w-1").reason = "bad fan";
  f.job(5, "RUNNING", "w-1").time_limit = std::chrono::minutes(10);
  const json report = status_report(f.view);
  const json& workers = report["nodesets"][0]["workers"];
  ASSERT_EQ(workers.size(), 2U);
  EXPECT_EQ(workers[1]["slurmNode"], "w-1");
  EXPECT_EQ(workers[1]["state"], "MIXED+DRAIN");
  EXPECT_EQ(workers[1]["jobs"], 1);
  ASSERT_EQ(report["draining"].size(), 1U);
  EXPECT_EQ(report["draining"][0]["reason"], "bad fan");
  EXPECT_EQ(report["slurm"]["jobsRunning"], 1);
}

TEST(Status, TextHasNoColourWhenNotAskedAndNamesWhatIsWrong) {
  Fixture f;
  f.worker("w-0");
  f.view.slurm.nodes.clear();
  const std::string text = render_status(status_report(f.view), Style{false});
  EXPECT_EQ(text.find('\033'), std::string::npos);
  EXPECT_NE(text.find("not registered"), std::string::npos);
  EXPECT_NE(text.find("worker-not-registered"), std::string::npos);
  EXPECT_NE(render_status(status_report(f.view), Style{true}).find('\033'), std::string::npos);
}

TEST(Explain, APodShowsItsSlurmNodeItsKubernetesNodeAndItsNodeSet) {
  Fixture f;
  f.worker("w-0");
  f.view.kube_nodes[0]["spec"]["unschedulable"] = true;
  auto report = explain(f.view, ExplainKind::kPod, "workers-w-0");
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ((*report)["pod"]["slurmNode"]["state"], "IDLE");
  EXPECT_EQ((*report)["pod"]["kubeNode"]["cordoned"], true);
  EXPECT_EQ((*report)["pod"]["nodeSet"]["name"], "workers");
  // The cordon without a drain is a finding about this pod's node.
  ASSERT_FALSE((*report)["findings"].empty());
  EXPECT_NE((*report)["findings"][0].get<std::string>().find("cordon-drain-mismatch"),
            std::string::npos);
}

TEST(Explain, APodPendingForWantOfANodeSaysWhyAndABusyOneItsAutoscalerMarks) {
  Fixture f;
  json& pending = f.worker("w-0");
  pending["spec"].erase("nodeName");
  pending["status"]["phase"] = "Pending";
  pending["status"]["conditions"] =
      json::array({{{"type", "PodScheduled"},
                    {"status", "False"},
                    {"reason", "Unschedulable"},
                    {"message", "0/3 nodes are available: 3 Insufficient cpu."}}});
  json& busy = f.worker("w-1");
  busy["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true";
  auto report = explain(f.view, ExplainKind::kPod, "workers-w-0");
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ((*report)["pod"]["unschedulable"], "0/3 nodes are available: 3 Insufficient cpu.");
  report = explain(f.view, ExplainKind::kPod, "workers-w-1");
  ASSERT_TRUE(report) << report.error();
  EXPECT_FALSE((*report)["pod"].contains("unschedulable"));
  EXPECT_EQ((*report)["pod"]["annotations"]["karpenter.sh/do-not-disrupt"], "true");
}

TEST(Explain, AKubernetesNodeListsEverySlurmNodeOnIt) {
  Fixture f;
  f.worker("w-0");
  f.worker("w-1");
  auto report = explain(f.view, ExplainKind::kNode, "k8s-0");
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ((*report)["workers"].size(), 2U);
  // A Slurm node's name finds its pod too.
  report = explain(f.view, ExplainKind::kNode, "w-1");
  ASSERT_TRUE(report);
  EXPECT_EQ((*report)["pod"]["name"], "workers-w-1");
}

TEST(Explain, AWorkerShowsItsHealthChecksAndItsNodeTheFailuresItKeeps) {
  Fixture f;
  f.worker("w-0");
  f.slurm_node("w-0").extra =
      R"({"tightrope.slurm.net/health":{"ok":false,"at":1,"failed":[{"check":"gpus",)"
      R"("message":"3 GPUs present, Slurm registered 4"}]}})";
  f.slurm_node("w-0").state = {"ALLOCATED", "DRAIN"};
  f.slurm_node("w-0").reason =
      "slurm-operator: Pod (slurm/workers-w-0) is pending termination for healthcheck: gpus: x";
  f.view.kube_nodes[0]["metadata"]["annotations"]["tightrope.slurm.net/health-failures"] =
      R"([{"pod":"slurm/workers-w-0","uid":"u","check":"gpus","at":1}])";
  auto report = explain(f.view, ExplainKind::kNode, "k8s-0");
  ASSERT_TRUE(report) << report.error();
  const json& checks = (*report)["workers"][0]["slurmNode"]["healthChecks"];
  EXPECT_EQ(checks["ok"], false);
  EXPECT_EQ(checks["failed"][0], "gpus: 3 GPUs present, Slurm registered 4");
  EXPECT_EQ(checks["remediation"], "drained; its pod is replaced once no job runs on it");
  ASSERT_EQ((*report)["kubeNode"]["healthFailures"].size(), 1U);
  EXPECT_EQ((*report)["kubeNode"]["healthFailures"][0].get<std::string>().rfind(
                "pod slurm/workers-w-0 failed gpus at ", 0),
            0U);
}

TEST(Explain, AWorkerShowsItsActiveChecksFiguresAndWhetherOneIsUnderWay) {
  Fixture f;
  f.worker("w-0");
  f.slurm_node("w-0").extra =
      R"({"tightrope.slurm.net/health-active":{"ok":true,"at":1,"failed":[],)"
      R"("measured":{"cpuGflops":7.5},"skipped":[{"check":"active:nccl","message":"no GPU"}]}})";
  f.slurm_node("w-0").reservation = "tightrope-check-w-0";
  auto report = explain(f.view, ExplainKind::kNode, "k8s-0");
  ASSERT_TRUE(report) << report.error();
  const json& active = (*report)["workers"][0]["slurmNode"]["activeChecks"];
  EXPECT_EQ(active["ok"], true);
  EXPECT_EQ(active["measured"]["cpuGflops"], 7.5);
  EXPECT_EQ(active["skipped"][0], "active:nccl: no GPU");
  EXPECT_EQ(active["underWay"], "in reservation tightrope-check-w-0");
}

TEST(Explain, AJobShowsItsReasonInWordsAndItsNodesPods) {
  Fixture f;
  f.worker("w-0");
  f.job(3, "RUNNING", "w-0");
  f.job(4, "PENDING").state_reason = "ReqNodeNotAvail";
  auto running = explain(f.view, ExplainKind::kJob, "3");
  ASSERT_TRUE(running);
  EXPECT_EQ((*running)["nodes"][0]["name"], "workers-w-0");
  auto pending = explain(f.view, ExplainKind::kJob, "4");
  ASSERT_TRUE(pending);
  EXPECT_NE((*pending)["job"]["reasonMeans"].get<std::string>().find("DOWN, DRAINED or reserved"),
            std::string::npos);
  EXPECT_FALSE(explain(f.view, ExplainKind::kJob, "99"));
}

TEST(Explain, TextIsAnIndentedTree) {
  Fixture f;
  f.worker("w-0");
  auto report = explain(f.view, ExplainKind::kPod, "workers-w-0");
  ASSERT_TRUE(report);
  const std::string text = render_explain(*report, Style{false});
  EXPECT_NE(text.find("pod:\n  name: workers-w-0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  slurmNode:\n    name: w-0\n"), std::string::npos) << text;
}

TEST(Output, YamlOfAReport) {
  EXPECT_EQ(to_yaml({{"a", 1}, {"b", json::array({"x"})}}), "a: 1\nb:\n  - x\n");
}

}  // namespace
}  // namespace tightrope::cli
