#include "operator/confinement.hpp"

#include <gtest/gtest.h>

namespace tightrope::op {
namespace {

// What the slurmd entrypoint passes as --extra on a privileged pod of a cgroup v1 host.
constexpr std::string_view kV1Host =
    R"({"tightrope.slurm.net/host":{"cgroup":"v1","writable":true,"memory":true,)"
    R"("oomScoreAdj":-997,"oomProtect":true}})";

ConfinementConfig enforcing() {
  return confinement_config(
      "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n",
      "CgroupPlugin=autodetect\nConstrainRAMSpace=yes\n");
}

HostCgroups host(std::string cgroup, bool writable, bool memory, int64_t adj, bool protect) {
  HostCgroups h;
  h.cgroup = std::move(cgroup);
  h.writable = writable;
  h.memory = memory;
  h.oom_score_adj = adj;
  h.oom_protect = protect;
  return h;
}

TEST(ConfinementConfig, SlurmDefaultsTrackByCgroupWithoutATaskPlugin) {
  const auto c = confinement_config("ClusterName=c\n", std::nullopt);
  EXPECT_EQ(c.proctrack, "proctrack/cgroup");
  EXPECT_EQ(c.cgroup_plugin, "autodetect");
  EXPECT_TRUE(c.proctrack_cgroup());
  EXPECT_FALSE(c.task_cgroup());
  EXPECT_FALSE(c.constrain_ram);
}

TEST(ConfinementConfig, ReadsTheLastSettingWhateverItsCase) {
  // The operator's lines first, the administrator's extraConf after them.
  const auto c = confinement_config(
      "ProctrackType=proctrack/linuxproc\n### EXTRA CONFIG ###\nproctracktype=proctrack/cgroup\n"
      "TaskPlugin=affinity,Cgroup\n",
      "ConstrainRAMSpace=YES\n");
  EXPECT_TRUE(c.proctrack_cgroup());
  EXPECT_TRUE(c.task_cgroup());
  EXPECT_TRUE(c.constrain_ram);
}

TEST(ConfinementConfig, CgroupPluginDisabledTurnsCgroupsOff) {
  const auto c = confinement_config("TaskPlugin=task/cgroup\n", "CgroupPlugin=disabled\n");
  EXPECT_TRUE(c.cgroups_disabled());
  EXPECT_FALSE(c.needs_cgroups());
}

TEST(HostCgroups, ReadsTheEntrypointsFindings) {
  const auto h = host_cgroups(kV1Host);
  ASSERT_TRUE(h);
  EXPECT_EQ(*h, host("v1", true, true, -997, true));
}

TEST(HostCgroups, AnythingElseIsNoReport) {
  for (const char* extra :
       {"", "rack=4", "{", "[]", R"({"site":"x"})", R"({"tightrope.slurm.net/host":"v1"})",
        R"({"tightrope.slurm.net/host":{"writable":true}})"}) {
    EXPECT_FALSE(host_cgroups(extra)) << extra;
  }
}

TEST(JobsConfined, TrueWhenEveryReportingHostCanHoldJobs) {
  const auto c = jobs_confined(enforcing(), {{"n1", host("v1", true, true, -997, true)},
                                             {"n2", host("v2", true, true, 667, false)},
                                             {"n3", std::nullopt}});
  EXPECT_EQ(c.type, "JobsConfined");
  EXPECT_EQ(c.status, "True");
  EXPECT_EQ(c.reason, "CgroupsEnforced");
  EXPECT_EQ(c.message,
            "task/cgroup holds jobs to their CPUs and memory; 1 node: cgroup v1, writable, memory "
            "controller; 1 node: cgroup v2, writable, memory controller (1 node has not reported "
            "its host)")
      << "n2 cannot lower its score, but the kubelet gave it less than 1000";
}

TEST(JobsConfined, AReadOnlyOrMissingCgroupIsAHostThatCannot) {
  const auto c = jobs_confined(enforcing(), {{"n1", host("v2", false, true, 0, true)},
                                             {"n2", host("none", false, false, 0, true)},
                                             {"n3", host("v1", true, false, 0, true)}});
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "HostCannotConfine");
  EXPECT_EQ(c.message.rfind("n1: cgroup v2 is read-only in the container; n2: no cgroup "
                            "filesystem at /sys/fs/cgroup; n3: cgroup v1 has no memory controller "
                            "(ConstrainRAMSpace=yes). ",
                            0),
            0U)
      << c.message;
  EXPECT_NE(c.message.find("ProctrackType=proctrack/linuxproc"), std::string::npos);
}

TEST(JobsConfined, AnUnprotectedSlurmstepdMattersWithoutAMemoryRequestAndWithConstrainRAMSpace) {
  // BestEffort, Burstable without a memory request, Burstable with 8Gi of 24Gi.
  const std::vector<NodeCgroups> nodes = {{"n1", host("v1", true, true, 1000, false)},
                                          {"n0", host("v1", true, true, 999, false)},
                                          {"n2", host("v1", true, true, 667, false)}};
  const auto c = jobs_confined(enforcing(), nodes);
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "OomUnprotected");
  EXPECT_NE(c.message.find("on n1; n0:"), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find("n2"), std::string::npos) << c.message;

  auto cpus_only = enforcing();
  cpus_only.constrain_ram = false;
  EXPECT_EQ(jobs_confined(cpus_only, nodes).reason, "CgroupsEnforced");
}

TEST(JobsConfined, ASlurmstepdThatGoesWhereItsTasksGoIsNotExposed) {
  // The entrypoint's SLURMSTEPD_OOM_ADJ=0: the OOM killer weighs memory alone.
  auto even = host("v1", true, true, 1000, false);
  even.oom_even = true;
  EXPECT_EQ(jobs_confined(enforcing(), {{"n1", even}}).reason, "CgroupsEnforced");
  const auto parsed =
      host_cgroups(R"({"tightrope.slurm.net/host":{"cgroup":"v1","writable":true,"memory":true,)"
                   R"("oomScoreAdj":873,"oomProtect":false,"oomEven":true}})");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->oom_even);
}

TEST(JobsConfined, NotConfiguredSaysWhatTheHostsCouldDo) {
  const auto c =
      jobs_confined(confinement_config("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n",
                                       "CgroupPlugin=disabled\n"),
                    {{"n1", host("v1", true, true, 1000, false)}});
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "NotConfigured");
  EXPECT_EQ(c.message,
            "CgroupPlugin=disabled: Slurm tracks jobs by process tree (proctrack/linuxproc) and "
            "does not hold them to their CPUs and memory; this NodeSet's hosts: 1 node: cgroup "
            "v1, writable, memory controller");
  EXPECT_EQ(jobs_confined(confinement_config("", std::nullopt), {}).reason, "NotConfigured")
      << "Slurm's defaults track by cgroup but confine nothing";
}

TEST(JobsConfined, SaysAnUnprivilegedContainerHadItsCgroupsRemounted) {
  const auto parsed =
      host_cgroups(R"({"tightrope.slurm.net/host":{"cgroup":"v1","writable":true,"remounted":true,)"
                   R"("memory":true,"oomScoreAdj":-997,"oomProtect":true}})");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->remounted);
  const auto c = jobs_confined(enforcing(), {{"n1", parsed}});
  EXPECT_EQ(c.reason, "CgroupsEnforced");
  EXPECT_NE(c.message.find("1 node: cgroup v1, writable (remounted in an unprivileged container), "
                           "memory controller"),
            std::string::npos)
      << c.message;
  EXPECT_FALSE(host_cgroups(kV1Host)->remounted);
}

TEST(JobsConfined, RefusesToClaimDevicesAHostCannotHold) {
  const auto config =
      confinement_config("TaskPlugin=task/cgroup,task/affinity\n",
                         "CgroupPlugin=autodetect\nConstrainRAMSpace=yes\nConstrainDevices=yes\n");
  EXPECT_TRUE(config.constrain_devices);
  const auto v2 =
      host_cgroups(R"({"tightrope.slurm.net/host":{"cgroup":"v2","writable":true,"remounted":true,)"
                   R"("memory":true,"devices":false,"oomScoreAdj":-997,"oomProtect":true}})");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->devices, false);
  const auto c = jobs_confined(config, {{"n1", v2}});
  EXPECT_EQ(c.status, "False");
  EXPECT_EQ(c.reason, "DevicesUnconfined");
  EXPECT_EQ(c.message,
            "ConstrainDevices=yes, but slurmd cannot hold a job to its devices on n1 (cgroup v2: "
            "CAP_BPF and CAP_NET_ADMIN): the slurmd container lacks those capabilities, and a job "
            "may open every device of its pod");
  // A host that can: devices are said to be held. One that does not say is not held against it.
  auto able = *v2;
  able.devices = true;
  const auto held =
      jobs_confined(config, {{"n1", able}, {"n2", host("v1", true, true, -997, true)}});
  EXPECT_EQ(held.reason, "CgroupsEnforced");
  EXPECT_NE(held.message.find("CPUs and memory, and to their devices; 1 node: cgroup v1, writable, "
                              "memory controller; 1 node: cgroup v2, writable (remounted in an "
                              "unprivileged container), memory controller, device control"),
            std::string::npos)
      << held.message;
}

TEST(JobsConfined, UnknownUntilANodeReports) {
  EXPECT_EQ(jobs_confined(enforcing(), {}).status, "Unknown");
  const auto c = jobs_confined(enforcing(), {{"n1", std::nullopt}});
  EXPECT_EQ(c.reason, "NotReported");
  EXPECT_NE(c.message.find("--extra"), std::string::npos);
}

}  // namespace
}  // namespace tightrope::op
