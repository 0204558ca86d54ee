// The active checks' judgement: measured figures against the HealthCheck's floors, and what
// nccl-tests' all_reduce_perf prints.
#include "health/active.hpp"

#include <gtest/gtest.h>

#include "health/kernels.hpp"

namespace tightrope::health {
namespace {

ActiveConfig all_checks() {
  ActiveConfig a;
  a.checks = {"cpu", "memory-bandwidth", "nccl"};
  a.nccl_tests = "/usr/local/bin/all_reduce_perf";
  return a;
}

ActiveReadings good_cpu_node() {
  ActiveReadings r;
  r.cpu.rate = 42.5;
  r.memory_bandwidth.rate = 12000;
  return r;
}

TEST(ActiveChecks, WithoutFloorsTheFiguresAreReportedAndNothingFails) {
  const auto v = judge_active(all_checks(), good_cpu_node());
  EXPECT_TRUE(v.failed.empty());
  EXPECT_EQ(v.measured.at("cpuGflops"), 42.5);
  EXPECT_EQ(v.measured.at("memoryBandwidthMBps"), 12000);
  ASSERT_EQ(v.skipped.size(), 1U);
  EXPECT_EQ(v.skipped[0].message, "no GPU on this node");
}

TEST(ActiveChecks, AFigureBelowItsFloorFailsWithBoth) {
  ActiveConfig a = all_checks();
  a.min_memory_bandwidth_mbps = 20000;
  const auto v = judge_active(a, good_cpu_node());
  ASSERT_EQ(v.failed.size(), 1U);
  EXPECT_EQ(v.failed[0].check, "active:memory-bandwidth");
  EXPECT_EQ(v.failed[0].message, "12000.0 MB/s, below 20000");
}

TEST(ActiveChecks, AWrongResultFailsWhateverTheSpeed) {
  ActiveReadings r = good_cpu_node();
  r.cpu.correct = false;
  r.cpu.error = "thread 3 computed 1.25e+07, expected 1.5e+07";
  const auto v = judge_active(all_checks(), r);
  ASSERT_EQ(v.failed.size(), 1U);
  EXPECT_EQ(v.failed[0].check, "active:cpu");
  EXPECT_EQ(v.failed[0].message, r.cpu.error);
}

TEST(ActiveChecks, NcclRunsOnlyWithGpusAndItsBinaryElseItIsSkippedNotFailed) {
  ActiveReadings r = good_cpu_node();
  r.gpus = 8;
  auto v = judge_active(all_checks(), r);
  ASSERT_EQ(v.skipped.size(), 1U);
  EXPECT_EQ(v.skipped[0].message, "/usr/local/bin/all_reduce_perf is not in the image");
  EXPECT_TRUE(v.failed.empty());

  r.nccl_tests_present = true;
  r.nccl.error = "all_reduce_perf printed no average bus bandwidth (exit code 1)";
  v = judge_active(all_checks(), r);
  ASSERT_EQ(v.failed.size(), 1U);
  EXPECT_EQ(v.failed[0].check, "active:nccl");

  r.nccl = {180.2, true, ""};
  ActiveConfig a = all_checks();
  a.min_nccl_bus_bandwidth_gbps = 300;
  v = judge_active(a, r);
  ASSERT_EQ(v.failed.size(), 1U);
  EXPECT_EQ(v.failed[0].message, "180.2 GB/s, below 300");
  EXPECT_EQ(v.measured.at("ncclBusBandwidthGBps"), 180.2);
}

TEST(ActiveChecks, OnlyTheChecksAskedForRun) {
  ActiveConfig a;
  a.checks = {"cpu"};
  const auto v = judge_active(a, ActiveReadings{});
  ASSERT_EQ(v.failed.size(), 1U);
  EXPECT_EQ(v.failed[0].check, "active:cpu");
  EXPECT_EQ(v.failed[0].message, "did not run");
}

TEST(ActiveChecks, AllReducePerfsSummaryIsRead) {
  const std::string out =
      "# nThread 1 nGpus 8 minBytes 8388608 maxBytes 134217728 step: 2(factor) warmup iters: 5\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "     8388608       2097152     float     sum      -1    98.12   85.49  149.61      0\n"
      "   134217728      33554432     float     sum      -1   712.4  188.40  329.70      0\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 239.655 \n";
  const auto r = parse_all_reduce_perf(out);
  ASSERT_TRUE(r.bus_bandwidth_gbps);
  EXPECT_DOUBLE_EQ(*r.bus_bandwidth_gbps, 239.655);
  EXPECT_EQ(r.wrong_values, 0);
  EXPECT_FALSE(parse_all_reduce_perf("NCCL failure common.cu:900 'unhandled cuda error'\n")
                   .bus_bandwidth_gbps);
  EXPECT_EQ(parse_all_reduce_perf("# Out of bounds values : 12 FAILED\n").wrong_values, 12);
}

TEST(ActiveChecks, TheReportKeepsFiguresAndSkippedChecksBesideThePassiveOne) {
  Report passive = report_of({}, 100, "uid-1");
  Report active = report_of({{"active:cpu", "slow"}}, 200, "uid-1");
  active.measured = {{"cpuGflops", 3.5}};
  active.skipped = {{"active:nccl", "no GPU on this node"}};
  const std::string extra = with_report(
      with_report("{\"tightrope.slurm.net/host\":\"k8s-1\"}", passive), active, kActiveExtraKey);
  EXPECT_EQ(read_report(extra), passive);
  EXPECT_EQ(read_report(extra, kActiveExtraKey), active);
  EXPECT_NE(extra.find("tightrope.slurm.net/host"), std::string::npos);
}

TEST(ActiveChecks, ChecksJsonCarriesTheActiveSection) {
  const auto c = parse_config(
      R"({"checks":[],"active":{"checks":["cpu"],"timeoutSeconds":90,"minCpuGflops":5,)"
      R"("ncclTests":"/opt/nccl/all_reduce_perf"}})");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->active);
  EXPECT_EQ(c->active->checks, std::vector<std::string>{"cpu"});
  EXPECT_EQ(c->active->timeout_seconds, 90);
  EXPECT_EQ(c->active->min_cpu_gflops, 5);
  EXPECT_EQ(c->active->nccl_tests, "/opt/nccl/all_reduce_perf");
  EXPECT_FALSE(parse_config("{}")->active);
}

TEST(ActiveChecks, TheKernelsMeasureSomethingAndFindTheirResultsRight) {
  const Measurement cpu = measure_cpu(2, std::chrono::milliseconds(50));
  ASSERT_TRUE(cpu.rate);
  EXPECT_GT(*cpu.rate, 0);
  EXPECT_TRUE(cpu.correct) << cpu.error;
  const Measurement memory = measure_memory_bandwidth(2, size_t{1} << 20, 2);
  ASSERT_TRUE(memory.rate);
  EXPECT_GT(*memory.rate, 0);
  EXPECT_TRUE(memory.correct) << memory.error;
}

}  // namespace
}  // namespace tightrope::health
