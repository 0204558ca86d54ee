#include "health/checks.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tightrope::health {

void PrintTo(const DcgmIncident& i, std::ostream* os);
void PrintTo(const DcgmIncident& i, std::ostream* os) {
  *os << i.entity << " " << i.system << " " << i.health << ": " << i.message;
}

// How GoogleTest prints a Finding in a failed comparison.
void PrintTo(const Finding& f, std::ostream* os);
void PrintTo(const Finding& f, std::ostream* os) {
  *os << f.check << ": " << f.message;
}

namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Config all_checks() {
  Config c;
  c.checks = {"mounts", "memory", "cpus", "gpus", "dcgm"};
  c.mounts = {"/home"};
  return c;
}

Registered gpu_node() {
  Registered r;
  r.known = true;
  r.cpus = 16;
  r.real_memory_mib = 64000;
  r.gpus = 4;
  return r;
}

Readings healthy() {
  Readings r;
  r.cpus = 16;
  r.memory_mib = 64000;
  r.gpus = 4;
  r.mounts = {{"/home", true, true, ""}};
  return r;
}

TEST(HealthConfig, ReadsWhatTheOperatorWritesAndRefusesWrongTypes) {
  const auto c = parse_config(
      R"({"intervalSeconds":120,"timeoutSeconds":10,"deadlineSeconds":40,"checks":["gpus"],)"
      R"("mounts":["/home"],"source":"hc-uid","dcgmHost":"nvidia-dcgm.gpu-operator:5555"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dcgm_host, "nvidia-dcgm.gpu-operator:5555");
  EXPECT_EQ(c->source, "hc-uid");
  EXPECT_EQ(c->interval_seconds, 120);
  EXPECT_EQ(c->deadline_seconds, 40);
  EXPECT_EQ(c->timeout_seconds, 10);
  EXPECT_THAT(c->checks, ElementsAre("gpus"));
  EXPECT_THAT(c->mounts, ElementsAre("/home"));
  EXPECT_EQ(parse_config("{}")->interval_seconds, 60);
  EXPECT_EQ(parse_config(R"({"intervalSeconds":"60"})").error(),
            "intervalSeconds: must be a positive integer");
  EXPECT_EQ(parse_config(R"({"mounts":"/home"})").error(), "mounts: must be a list of strings");
  EXPECT_EQ(parse_config(R"({"source":1})").error(), "source: must be a string");
  EXPECT_EQ(parse_config("not json").error(), "not a JSON object");
}

TEST(RegisteredNode, ComesFromScontrolsJson) {
  const auto r = parse_node_json(
      R"({"nodes":[{"name":"gpu-0","cpus":16,"real_memory":64000,)"
      R"j("gres":"gpu:nvidia_h100_80gb_hbm3:4(S:0)","extra":"{\"a\":1}"}],"errors":[]})j");
  EXPECT_TRUE(r.known);
  EXPECT_EQ(r.cpus, 16);
  EXPECT_EQ(r.real_memory_mib, 64000);
  EXPECT_EQ(r.gpus, 4);
  EXPECT_EQ(r.extra, R"({"a":1})");
  EXPECT_FALSE(parse_node_json(R"({"nodes":[],"errors":[{"error":"Invalid node name"}]})").known);
  EXPECT_FALSE(parse_node_json("slurm_load_node error: Unable to contact slurm controller").known);
}

TEST(Judge, AHealthyWorkerHasNoFindings) {
  EXPECT_THAT(judge(all_checks(), gpu_node(), healthy()), IsEmpty());
}

TEST(Judge, EachLossIsNamedWithWhatSlurmRegistered) {
  Readings r = healthy();
  r.cpus = 15;
  r.memory_mib = 48000;
  r.gpus = 3;
  r.mounts = {{"/home", false, false, ""}};
  EXPECT_THAT(judge(all_checks(), gpu_node(), r),
              ElementsAre(Finding{"mounts", "/home is not mounted"},
                          Finding{"memory", "48000 MiB of memory, Slurm registered 64000 MiB"},
                          Finding{"cpus", "15 CPUs usable, Slurm registered 16"},
                          Finding{"gpus", "3 GPUs present, Slurm registered 4"}));
}

TEST(Judge, AHungMountAndAnErrorAreFindingsOfTheirOwn) {
  Readings r = healthy();
  r.mounts = {{"/home", true, false, ""}, {"/scratch", true, true, "statfs: Stale file handle"}};
  Config c = all_checks();
  c.timeout_seconds = 5;
  EXPECT_THAT(judge(c, gpu_node(), r),
              ElementsAre(Finding{"mounts", "/home does not answer statfs within 5 s"},
                          Finding{"mounts", "/scratch: statfs: Stale file handle"}));
}

TEST(Judge, OnlyTheChecksAskedForAreJudged) {
  Readings r = healthy();
  r.gpus = std::nullopt;  // the driver has gone: no GPU at all
  r.memory_mib = 1;
  Config c;
  c.checks = {"gpus"};
  EXPECT_THAT(judge(c, gpu_node(), r),
              ElementsAre(Finding{"gpus", "0 GPUs present, Slurm registered 4"}));
}

TEST(Judge, WhatSlurmDidNotRegisterIsNotComparedAndMemoryHasARoundingMargin) {
  Registered r;
  r.known = true;
  Readings bare;
  bare.mounts = {{"/home", false, false, ""}};
  EXPECT_THAT(judge(all_checks(), r, bare), ElementsAre(Finding{"mounts", "/home is not mounted"}));
  Readings close = healthy();
  close.memory_mib = 63400;  // within 1% of 64000
  EXPECT_THAT(judge(all_checks(), gpu_node(), close), IsEmpty());
}

TEST(Judge, AScriptFailsWithItsFirstLineOrItsExitCodeOrItsTimeout) {
  Readings r = healthy();
  r.scripts = {{"ib-ports", 1, false, "\n  mlx5_0 port 1 is Down\nmore detail\n"},
               {"quiet", 3, false, ""},
               {"slow", -1, true, "partial"},
               {"fine", 0, false, "all good"}};
  EXPECT_THAT(judge(all_checks(), gpu_node(), r),
              ElementsAre(Finding{"script:ib-ports", "mlx5_0 port 1 is Down"},
                          Finding{"script:quiet", "exit code 3"},
                          Finding{"script:slow", "did not finish within 30 s"}));
}

// `dcgmi health --check --json` as dcgmi lays it out: one GPU failing its memory watch (DCGM
// splits a long message into parts), another warning of its temperature.
constexpr const char* kDcgmFailure = R"({
  "header": ["Health Monitor Report"],
  "body": {
    "Overall Health": {"value": "Failure"},
    "GPU": {"children": {
      "3": {"value": "Failure", "children": {"Errors": {"children": {
        "Memory": {"value": "Failure",
                   "overflow": ["A volatile double-bit ECC error has occurred on GPU 3.",
                                "Drain the GPU and reset it or reboot the node."]}}}}},
      "5": {"value": "Warning", "children": {"Errors": {"children": {
        "Thermal": {"value": "Warning", "overflow": ["GPU 5 reached 91 C."]}}}}}}}
  }
})";

TEST(Dcgm, ItsHealthReportIsReadEntityBySystem) {
  const auto h = parse_dcgm_health(kDcgmFailure);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->overall, "Failure");
  EXPECT_THAT(h->incidents,
              ElementsAre(DcgmIncident{"GPU 3", "Memory", "Failure",
                                       "A volatile double-bit ECC error has occurred on GPU 3. "
                                       "Drain the GPU and reset it or reboot the node."},
                          DcgmIncident{"GPU 5", "Thermal", "Warning", "GPU 5 reached 91 C."}));
  const auto healthy =
      parse_dcgm_health(R"({"header":["Health Monitor Report"],"body":{"Overall Health":)"
                        R"({"value":"Healthy"}}})");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->overall, "Healthy");
  EXPECT_THAT(healthy->incidents, IsEmpty());
  EXPECT_FALSE(parse_dcgm_health("Error: Health watches not enabled. Please enable watches."));
}

TEST(Dcgm, AFailureFailsTheCheckAWarningOrASilentDcgmDoesNot) {
  Readings r = healthy();
  r.dcgm = DcgmReading{parse_dcgm_health(kDcgmFailure), ""};
  EXPECT_THAT(judge(all_checks(), gpu_node(), r),
              ElementsAre(Finding{"dcgm",
                                  "GPU 3 Memory: A volatile double-bit ECC error has occurred on "
                                  "GPU 3. Drain the GPU and reset it or reboot the node."}));
  r.dcgm->health->overall = "Warning";
  EXPECT_THAT(judge(all_checks(), gpu_node(), r), IsEmpty());
  r.dcgm = DcgmReading{std::nullopt, "Error: unable to establish a connection"};
  EXPECT_THAT(judge(all_checks(), gpu_node(), r), IsEmpty()) << "DCGM away: nothing known";
  r.dcgm = DcgmReading{parse_dcgm_health(kDcgmFailure), ""};
  Config without = all_checks();
  without.checks = {"gpus"};
  EXPECT_THAT(judge(without, gpu_node(), r), IsEmpty());
}

TEST(Report, GoesUnderItsKeyAndKeepsTheRestOfExtra) {
  const Report report =
      report_of({{"gpus", "3 GPUs present, Slurm registered 4"}}, 1765076400, "hc-uid");
  EXPECT_FALSE(report.ok);
  const std::string host = R"({"tightrope.slurm.net/host":{"cgroup":"v1"}})";
  const std::string extra = with_report(host, report);
  const auto doc = nlohmann::json::parse(extra);
  EXPECT_EQ(doc["tightrope.slurm.net/host"]["cgroup"], "v1");
  EXPECT_EQ(doc["tightrope.slurm.net/health"]["ok"], false);
  EXPECT_EQ(doc["tightrope.slurm.net/health"]["source"], "hc-uid");
  EXPECT_EQ(read_report(extra), report);
  // A site's own text is kept, not thrown away.
  EXPECT_EQ(nlohmann::json::parse(with_report("rack 4", report))["text"], "rack 4");
  EXPECT_FALSE(nlohmann::json::parse(with_report("", report)).contains("text"));
  EXPECT_EQ(read_report(host), std::nullopt);
  EXPECT_EQ(read_report("rack 4"), std::nullopt);
}

TEST(Report, TheSameResultFoundLaterIsTheSame) {
  const Report a = report_of({{"gpus", "x"}}, 100, "hc");
  EXPECT_TRUE(same_result(a, report_of({{"gpus", "x"}}, 200, "hc")));
  EXPECT_FALSE(same_result(a, report_of({{"gpus", "y"}}, 100, "hc")));
  EXPECT_FALSE(same_result(a, report_of({}, 100, "hc")));
  EXPECT_FALSE(same_result(a, report_of({{"gpus", "x"}}, 100, "another HealthCheck")));
}

}  // namespace
}  // namespace tightrope::health
