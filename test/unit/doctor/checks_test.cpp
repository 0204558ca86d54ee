#include "doctor/checks.hpp"

#include <gtest/gtest.h>

#include <set>

#include "view_fixture.hpp"

namespace tightrope::doctor {
namespace {

using testing::Fixture;

std::vector<Finding> run(const ClusterView& view, const std::string& check) {
  return diagnose(view, {check});
}

TEST(DoctorCatalog, HasAtLeastTwentyChecksWithUniqueIdsSymptomsAndFixes) {
  std::set<std::string_view> ids;
  for (const auto& check : catalog()) {
    EXPECT_TRUE(ids.insert(check.id).second) << check.id;
    EXPECT_FALSE(check.symptom.empty()) << check.id;
    EXPECT_FALSE(check.fix.empty()) << check.id;
  }
  EXPECT_GE(ids.size(), 20U);
}

TEST(Doctor, AHealthyClusterHasNothingButNotes) {
  Fixture f;
  f.worker("w-0");
  const auto findings = diagnose(f.view);
  for (const auto& finding : findings) {
    EXPECT_EQ(finding.severity, Severity::kInfo) << finding.check << ": " << finding.message;
  }
}

TEST(Doctor, NamesAnOperatorScaledToZero) {
  Fixture f;
  f.view.op.deployments = {{{"metadata", {{"name", "slurm-operator"}, {"namespace", "slinky"}}},
                            {"spec", {{"replicas", 0}}},
                            {"status", json::object()}}};
  const auto findings = run(f.view, "operator-absent");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_NE(findings[0].fix.find("--replicas=1"), std::string::npos);
}

TEST(Doctor, NamesAnExpiredLeaderLease) {
  Fixture f;
  f.view.op.leases = {{{"metadata", {{"name", "slurm-operator"}, {"namespace", "slinky"}}},
                       {"spec",
                        {{"holderIdentity", "slurm-operator-abc_1"},
                         {"renewTime", "2026-12-04T11:58:00.000000Z"},
                         {"leaseDurationSeconds", 15}}}}};
  const auto findings = run(f.view, "operator-not-leading");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].message.find("expired"), std::string::npos);
  EXPECT_NE(findings[0].evidence[0].find("2m ago"), std::string::npos);
}

TEST(Doctor, NamesAMissingCrd) {
  Fixture f;
  f.view.op.crds.pop_back();
  const auto findings = run(f.view, "crd-version-mismatch");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].subject, "CRD tokens.slinky.slurm.net");
}

TEST(Doctor, NamesACertificateThatExpiresWithinThirtyDays) {
  Fixture f;
  f.view.op.certificates = {{"slinky/webhook-tls", testing::at("2026-12-10T00:00:00Z"), ""}};
  const auto findings = run(f.view, "webhook-certificate-expiring");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
}

TEST(Doctor, TellsSlurmrestdDownFromSlurmctldDown) {
  Fixture f;
  f.view.slurm.have_nodes = false;
  f.view.slurm.error = slurm::Error{slurm::ErrorKind::kUnavailable,
                                    503,
                                    "GET /slurm/v0.0.44/nodes: 503: no endpoints available for "
                                    "service \"slurm-restapi:6820\"",
                                    {}};
  EXPECT_EQ(run(f.view, "slurmrestd-unreachable").size(), 1U);
  EXPECT_TRUE(run(f.view, "slurmctld-unreachable").empty());

  f.view.slurm.error->message = "GET /slurm/v0.0.44/nodes: 500: Unable to contact slurm controller";
  EXPECT_TRUE(run(f.view, "slurmrestd-unreachable").empty());
  EXPECT_EQ(run(f.view, "slurmctld-unreachable").size(), 1U);
}

TEST(Doctor, NamesARejectedTokenAndTheOperatorsRefusal) {
  Fixture f;
  f.view.slurm.have_nodes = false;
  f.view.slurm.error = slurm::Error{slurm::ErrorKind::kUnauthorized, 401, "401 Unauthorized", {}};
  f.view.controller["status"]["conditions"] = json::array({{{"type", "SlurmReachable"},
                                                            {"status", "False"},
                                                            {"reason", "Unauthorized"},
                                                            {"message", "x"}}});
  const auto findings = run(f.view, "slurm-token-rejected");
  EXPECT_EQ(findings.size(), 2U);
  EXPECT_TRUE(run(f.view, "slurmrestd-unreachable").empty());
}

TEST(Doctor, NamesSlurmctldWhosePodCannotBeScheduled) {
  Fixture f;
  f.view.pods[0] = testing::pod("slurm-controller-0", "slurmctld", "", false, "Pending");
  f.view.pods[0]["status"]["conditions"].push_back(
      {{"type", "PodScheduled"},
       {"status", "False"},
       {"reason", "Unschedulable"},
       {"message",
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}});
  const auto findings = run(f.view, "slurmctld-unreachable");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence.back().find("node affinity"), std::string::npos);
  EXPECT_EQ(run(f.view, "pod-unschedulable").size(), 1U);
}

TEST(Doctor, NamesAccountingDisabledAsANoteAndSlurmdbdDownAsAWarning) {
  Fixture f;
  f.view.slurm.accounting_asked = true;
  f.view.slurm.accounting_error =
      slurm::Error{slurm::ErrorKind::kUnavailable, 500, "slurmdbd down", {}};
  auto findings = run(f.view, "accounting-unavailable");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);

  f.view.controller["spec"].erase("accountingRef");
  findings = run(f.view, "accounting-unavailable");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
}

TEST(Doctor, NamesSilentWorkersStartedBeforeTheSlurmKeyChanged) {
  Fixture f;
  f.view.slurm_key_hash = std::string(64, 'b');
  f.view.slurm_key_changed_at = testing::at("2026-12-04T11:00:00Z");
  f.view.pods[0]["metadata"]["annotations"]["slinky.slurm.net/slurm-key-hash"] =
      std::string(64, 'b');
  f.worker("w-0");  // started 10:00
  f.slurm_node("w-0").state = {"IDLE", "NOT_RESPONDING"};
  auto findings = run(f.view, "slurm-key-mismatch");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_NE(findings[0].evidence.back().find("NOT_RESPONDING"), std::string::npos);

  // One that slurmctld hears from has read the new key (the kubelet refreshes the volume).
  f.slurm_node("w-0").state = {"IDLE"};
  EXPECT_TRUE(run(f.view, "slurm-key-mismatch").empty());
  // A worker started after the change runs the new key.
  f.slurm_node("w-0").state = {"IDLE", "NOT_RESPONDING"};
  f.view.pods.back()["status"]["startTime"] = "2026-12-04T11:30:00Z";
  EXPECT_TRUE(run(f.view, "slurm-key-mismatch").empty());
}

TEST(Doctor, NamesAPodWhoseKeyHashIsNotTheSecrets) {
  Fixture f;
  f.view.slurm_key_hash = std::string(64, 'b');
  f.view.pods[1]["metadata"]["annotations"]["slinky.slurm.net/slurm-key-hash"] =
      std::string(64, 'a');
  const auto findings = run(f.view, "slurm-key-mismatch");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
}

TEST(Doctor, NamesATokenSignedWithAnotherKeyOrExpired) {
  Fixture f;
  f.view.token_states = {
      {"ci", "slurm/ci-jwt-ci key SLURM_JWT", true, false, std::nullopt},
      {"old", "slurm/old key SLURM_JWT", true, true, testing::at("2026-12-04T11:00:00Z")},
      {"fine", "slurm/fine key SLURM_JWT", true, true, testing::at("2026-12-04T13:00:00Z")}};
  const auto findings = run(f.view, "jwt-stale");
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_NE(findings[0].message.find("not signed"), std::string::npos);
  EXPECT_NE(findings[1].message.find("expired"), std::string::npos);
}

TEST(Doctor, NamesAPodThatCannotPullItsImageWithTheKubeletsWords) {
  Fixture f;
  f.view.pods[1]["status"]["containerStatuses"] = json::array(
      {{{"name", "slurmrestd"},
        {"restartCount", 0},
        {"state",
         {{"waiting", {{"reason", "ErrImageNeverPull"}, {"message", "image not present"}}}}}}});
  const auto findings = run(f.view, "pod-failing");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence[0].find("ErrImageNeverPull: image not present"),
            std::string::npos);
}

TEST(Doctor, NamesARunningWorkerThatSlurmDoesNotKnowAndARecordWithoutPod) {
  Fixture f;
  f.worker("w-0");
  f.view.slurm.nodes.clear();
  f.slurm_node("ghost").state = {"FUTURE"};
  EXPECT_EQ(run(f.view, "worker-not-registered").size(), 1U);
  const auto orphans = run(f.view, "orphan-slurm-node");
  ASSERT_EQ(orphans.size(), 1U);
  EXPECT_EQ(orphans[0].subject, "Slurm node ghost");
}

TEST(Doctor, NamesACordonedNodeWhoseSlurmNodesStillTakeJobs) {
  Fixture f;
  f.worker("w-0");
  f.view.kube_nodes[0]["spec"]["unschedulable"] = true;
  EXPECT_EQ(run(f.view, "cordon-drain-mismatch").size(), 1U);
  f.slurm_node("w-0").state = {"IDLE", "DRAIN"};
  f.slurm_node("w-0").reason = "slurm-operator: Node (k8s-0) was cordoned";
  EXPECT_TRUE(run(f.view, "cordon-drain-mismatch").empty());
}

TEST(Doctor, NamesADrainThatWaitsOnAJobWithoutTimeLimit) {
  Fixture f;
  f.worker("w-0");
  auto& n = f.slurm_node("w-0");
  n.state = {"MIXED", "DRAIN"};
  n.alloc_cpus = 1;
  n.reason = "slurm-operator: Pod (slurm/workers-w-0) is pending termination for scale-in";
  f.job(7, "RUNNING", "w-0");
  const auto findings = run(f.view, "drain-stuck");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence[1].find("no time limit"), std::string::npos);

  // A job that ends within the hour: the drain finishes by itself.
  f.view.slurm.jobs[0].time_limit = std::chrono::minutes(30);
  f.view.slurm.jobs[0].end_time = testing::at("2026-12-04T12:20:00Z");
  EXPECT_TRUE(run(f.view, "drain-stuck").empty());
}

TEST(Doctor, NamesAScaleInBlockedFailClosed) {
  Fixture f;
  f.view.nodesets[0]["status"]["conditions"] = json::array({{{"type", "DeletionBlocked"},
                                                             {"status", "True"},
                                                             {"reason", "SlurmUnreachable"},
                                                             {"message", "m"}}});
  const auto findings = run(f.view, "scale-in-blocked");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].fix.find("slurmrestd-unreachable"), std::string::npos);
}

TEST(Doctor, NamesABudgetThatHoldsPodsOnACordonedNode) {
  Fixture f;
  json& w = f.worker("w-0");
  w["metadata"]["labels"]["nodeset.slinky.slurm.net/pod-protect"] = "true";
  f.view.kube_nodes[0]["spec"]["unschedulable"] = true;
  f.view.pdbs = {
      {{"metadata", {{"name", "slurm-workers-pdb"}, {"namespace", "slurm"}}},
       {"spec",
        {{"selector", {{"matchLabels", {{"nodeset.slinky.slurm.net/pod-protect", "true"}}}}}}},
       {"status", {{"disruptionsAllowed", 0}}}}};
  f.job(9, "RUNNING", "w-0");
  const auto findings = run(f.view, "pdb-blocks-eviction");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence[1].find("job 9"), std::string::npos);
}

TEST(Doctor, TranslatesPendingReasonsAndWarnsOnlyOnThoseThatDoNotClear) {
  Fixture f;
  f.job(1, "PENDING").state_reason = "Resources";
  f.job(2, "PENDING").state_reason = "PartitionDown";
  f.job(3, "PENDING").state_reason = "PartitionDown";
  const auto findings = run(f.view, "job-pending");
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_EQ(findings[0].subject, "2 pending jobs: PartitionDown");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[1].severity, Severity::kInfo);
  EXPECT_NE(findings[1].message.find("busy"), std::string::npos);
}

TEST(Doctor, NamesAnActiveMaintenanceReservation) {
  Fixture f;
  slurm::Reservation r;
  r.name = "maint";
  r.nodes = "w-[0-1]";
  r.flags = {"MAINT", "SPEC_NODES"};
  r.start_time = testing::at("2026-12-04T11:00:00Z");
  r.end_time = testing::at("2026-12-04T13:00:00Z");
  f.view.slurm.reservations = {r};
  const auto findings = run(f.view, "maintenance-reservation");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
}

TEST(Doctor, NamesAClusterAtItsMaxNodeCount) {
  Fixture f;
  f.worker("w-0");
  f.worker("w-1");
  f.view.slurm_conf = "ClusterName=slurm\nMaxNodeCount=2\n";
  const auto findings = run(f.view, "max-node-count");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  f.view.slurm_conf = "ClusterName=slurm\nMaxNodeCount=1024\n";
  EXPECT_TRUE(run(f.view, "max-node-count").empty());
}

TEST(Doctor, NamesWorkersOnAnOlderRevision) {
  Fixture f;
  f.worker("w-0")["metadata"]["labels"]["controller-revision-hash"] = "workers-old";
  const auto findings = run(f.view, "config-drift");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence[1].find("workers-old"), std::string::npos);
  // A pod adopted from Slinky's operator carries only its hash label.
  auto& labels = f.view.pods.back()["metadata"]["labels"];
  labels.erase("controller-revision-hash");
  labels["controller.kubernetes.io/hash"] = "7df965c445";
  const auto adopted = run(f.view, "config-drift");
  ASSERT_EQ(adopted.size(), 1U);
  EXPECT_NE(adopted[0].evidence[1].find("runs revision 7df965c445"), std::string::npos);
}

TEST(Doctor, NamesGpusTheNodeNoLongerAdvertises) {
  Fixture f;
  f.view.nodesets[0]["spec"]["slurmd"] = {{"resources", {{"limits", {{"nvidia.com/gpu", 4}}}}}};
  f.worker("w-0");
  f.view.kube_nodes[0]["status"]["allocatable"] = {{"nvidia.com/gpu", "0"}};
  f.slurm_node("w-0").state = {"IDLE", "DRAIN"};
  f.slurm_node("w-0").reason = "gres/gpu count reported lower than configured (0 < 4)";
  const auto findings = run(f.view, "gres-missing");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].evidence.size(), 2U);
  // The operator's own drain for the count (GpuCountsMatch) is evidence too.
  f.slurm_node("w-0").reason =
      "slurm-operator: GPU count: Node k8s-0 allocates 0 nvidia.com/gpu, fewer than the 4 Slurm "
      "node w-0 registered and its pod holds";
  const auto drained = run(f.view, "gres-missing");
  ASSERT_EQ(drained.size(), 1U);
  ASSERT_EQ(drained[0].evidence.size(), 2U);
  EXPECT_NE(drained[0].evidence[1].find("GPU count:"), std::string::npos) << drained[0].evidence[1];
}

TEST(Doctor, ReportsEveryResourceThatIsNotReady) {
  Fixture f;
  f.view.nodesets[0]["status"]["conditions"] = json::array(
      {{{"type", "Ready"}, {"status", "False"}, {"reason", "PodsFailing"}, {"message", "m"}}});
  const auto findings = run(f.view, "resource-not-ready");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].subject, "NodeSet slurm/workers");
}

TEST(Doctor, NotesAnAdministratorsDrainButNotTheOperators) {
  Fixture f;
  f.worker("w-0");
  f.worker("w-1");
  f.slurm_node("w-0").state = {"IDLE", "DRAIN"};
  f.slurm_node("w-0").reason = "bad fan";
  f.slurm_node("w-1").state = {"IDLE", "DRAIN"};
  f.slurm_node("w-1").reason = "slurm-operator: x";
  const auto findings = run(f.view, "admin-drain");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
}

TEST(Doctor, WarnsOfANodeWhoseOwnHealthChecksFailWithWhatTheyFound) {
  Fixture f;
  f.worker("w-0");
  f.worker("w-1");
  f.worker("w-2");
  f.slurm_node("w-0").extra =
      R"({"tightrope.slurm.net/host":{"cgroup":"v1"},"tightrope.slurm.net/health":{"ok":false,)"
      R"("at":1,"failed":[{"check":"gpus","message":"3 GPUs present, Slurm registered 4"}]}})";
  f.slurm_node("w-1").extra = R"({"tightrope.slurm.net/health":{"ok":true,"at":1,"failed":[]}})";
  f.slurm_node("w-2").extra = "rack 4";
  const auto findings = run(f.view, "health-check-failed");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].subject, "Slurm node w-0");
  EXPECT_EQ(findings[0].evidence.front(), "gpus: 3 GPUs present, Slurm registered 4");
}

TEST(Doctor, SaysWhereRemediationStandsForAFailingNode) {
  Fixture f;
  f.worker("w-0");
  f.slurm_node("w-0").extra =
      R"({"tightrope.slurm.net/health":{"ok":false,"at":1,"failed":[{"check":"mounts",)"
      R"("message":"/home is not mounted"}]}})";
  auto findings = run(f.view, "health-check-failed");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence.back().find("not drained for it"), std::string::npos);
  f.slurm_node("w-0").state = {"ALLOCATED", "DRAIN"};
  f.slurm_node("w-0").reason =
      "slurm-operator: Pod (slurm/w-0) is pending termination for healthcheck: mounts: x";
  findings = run(f.view, "health-check-failed");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_NE(findings[0].evidence.back().find("replaced once no job runs"), std::string::npos);
}

TEST(Doctor, NamesAQuarantinedNodeWithTheFailuresItKeeps) {
  Fixture f;
  f.view.kube_nodes.push_back(json::parse(R"({"metadata":{"name":"n1","annotations":{
      "tightrope.slurm.net/health-failures":
      "[{\"pod\":\"slurm/w-0\",\"uid\":\"u\",\"check\":\"gpus\",\"at\":1}]"}},
      "spec":{"taints":[{"key":"tightrope.slurm.net/unhealthy","effect":"NoSchedule"}]}})"));
  f.view.kube_nodes.push_back(json::parse(R"({"metadata":{"name":"n2"},"spec":{}})"));
  const auto findings = run(f.view, "node-quarantined");
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].subject, "Node n1");
  ASSERT_EQ(findings[0].evidence.size(), 1U);
  EXPECT_EQ(findings[0].evidence[0].rfind("pod slurm/w-0 failed gpus", 0), 0U);
  EXPECT_NE(findings[0].fix.find("kubectl taint node n1 tightrope.slurm.net/unhealthy-"),
            std::string::npos);
}

}  // namespace
}  // namespace tightrope::doctor
