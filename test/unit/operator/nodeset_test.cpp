// The NodeSet's pure parts: pod names and ordinals, the slurmd arguments, revisions, the pod
// built for an ordinal, the shared Service and budget, the scale-in order, maxUnavailable, the
// pod conditions that mirror a Slurm node, the reasons the operator gives Slurm, and the
// ScheduledUpdate maintenance reservation.
#include "operator/build/nodeset.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "operator/nodeset.hpp"
#include "operator/slurm_clients.hpp"
#include "samples.hpp"
#include "slurm/codec.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

using api::testing::decoded;

using testing::controller;

api::NodeSet nodeset(const std::string& extra_yaml = "") {
  return decoded(api::decode_nodeset(api::testing::yaml_to_json(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata: {name: cpu, namespace: hpc, uid: n-uid}
spec:
  controllerRef: {name: slurm}
  replicas: 2
)" + extra_yaml)
                                         .front()));
}

TEST(NodeSetNames, PaddedOrdinalsAndHostnames) {
  api::NodeSet n = nodeset("  ordinalPadding: 3\n");
  EXPECT_EQ(build::nodeset_pod_name(n, 7), "cpu-007");
  EXPECT_EQ(build::nodeset_pod_hostname(n, 7), "cpu-007");
  EXPECT_EQ(build::nodeset_pod_ordinal(n, "cpu-007"), 7);
  EXPECT_EQ(build::nodeset_pod_ordinal(n, "cpu-x"), -1);
  EXPECT_EQ(build::nodeset_pod_ordinal(n, "cpux-1"), -1);
  EXPECT_EQ(build::nodeset_pod_ordinal(n, "cpu-"), -1);

  api::NodeSet named = nodeset("  template:\n    spec: {hostname: node-}\n");
  EXPECT_EQ(build::nodeset_pod_hostname(named, 12), "node-12");
  EXPECT_EQ(build::nodeset_pod_name(named, 12), "cpu-12");
}

TEST(NodeSetSlurmd, ConfMergesFeaturesAndSortsKeys) {
  api::NodeSet n = nodeset("  extraConf: \"Weight=10 Features=gpu,fast CPUs=4\"\n");
  auto conf = build::slurmd_conf(n);
  ASSERT_TRUE(conf) << conf.error();
  EXPECT_EQ(*conf, "CPUs=4 Features=cpu,gpu,fast Weight=10");
}

TEST(NodeSetSlurmd, ConfRefusesEmptyValuesAndBareWords) {
  auto empty = build::slurmd_conf(nodeset("  extraConf: \"Topology= Weight=1\"\n"));
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("Topology= has no value"), std::string::npos);
  auto bare = build::slurmd_conf(nodeset("  extraConf: \"Weight\"\n"));
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.error().find("\"Weight\" is not Key=Value"), std::string::npos);
}

TEST(NodeSetPod, CarriesIdentityArgsAndSafety) {
  const api::Controller c = controller();
  const api::NodeSet n = nodeset();
  auto built = build::build_nodeset_pod(n, {c}, 1);
  ASSERT_TRUE(built) << built.error();
  const json& pod = *built;
  EXPECT_EQ(pod["metadata"]["name"], "cpu-1");
  const json& labels = pod["metadata"]["labels"];
  EXPECT_EQ(labels[std::string(api::kLabelNodeSetPodIndex)], "1");
  EXPECT_EQ(labels[std::string(api::kLabelNodeSetPodHostname)], "cpu-1");
  EXPECT_EQ(labels[std::string(api::kLabelCluster)], "slurm");
  EXPECT_EQ(labels["controller-revision-hash"], build::nodeset_revision_name(n, {c}));
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "n-uid");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(pod["spec"]["hostname"], "cpu-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "slurm-workers-slurm");
  const json& slurmd = pod["spec"]["containers"][0];
  EXPECT_EQ(slurmd["args"],
            json({"-Z", "--conf-server", "slurm-controller.hpc:6817", "--conf", "Features=cpu"}));
  // Never an empty Topology= in the arguments.
  EXPECT_EQ(slurmd["args"].dump().find("Topology"), std::string::npos);
  EXPECT_EQ(slurmd["lifecycle"]["preStop"]["exec"]["command"][0], "/bin/sh");
  // slurmd's log file reaches `kubectl logs -c logfile` through a native sidecar.
  const json& sidecar = pod["spec"]["initContainers"][0];
  EXPECT_EQ(sidecar["name"], "logfile");
  EXPECT_EQ(sidecar["restartPolicy"], "Always");
  EXPECT_NE(sidecar["command"][2].get<std::string>().find("/var/log/slurm/slurmd.log"),
            std::string::npos);
  EXPECT_EQ(slurmd["volumeMounts"][1],
            json({{"name", "logfile"}, {"mountPath", "/var/log/slurm"}}));
  EXPECT_EQ(pod["spec"]["volumes"][1]["emptyDir"]["medium"], "Memory");
  // One slurmd per Kubernetes node unless oversubscribed.
  EXPECT_TRUE(pod["spec"].contains("affinity"));
  auto over = build::build_nodeset_pod(nodeset("  oversubscribeNode: true\n"), {c}, 0);
  ASSERT_TRUE(over);
  EXPECT_FALSE((*over)["spec"].contains("affinity"));
}

// The preStop hook, run by a shell against an scontrol that shows `reason` and records the
// update it is asked for.
std::string pre_stop_update(const std::string& reason) {
  const auto built = build::build_nodeset_pod(nodeset(), {controller()}, 1);
  EXPECT_TRUE(built);
  const std::string hook =
      (*built)["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][2];
  const std::string dir = ::testing::TempDir() + "prestop";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/updated");
  std::ofstream(dir + "/scontrol") << "#!/bin/sh\n"
                                      "if [ \"$1\" = show ]; then\n"
                                      "  printf '   State=IDLE+DRAIN ThreadsPerCore=1\\n   "
                                      "Reason=%s [slurm@2026-12-07T13:04:13]\\n' "
                                      "\"$REASON\"\n"
                                      "else printf '%s|' \"$@\" > \"$UPDATED\"; fi\n";
  std::filesystem::permissions(dir + "/scontrol", std::filesystem::perms::owner_all);
  std::ofstream(dir + "/hook") << hook;
  const std::string command = "PATH=" + dir + ":/usr/bin:/bin REASON='" + reason +
                              "' UPDATED=" + dir + "/updated /bin/sh " + dir + "/hook";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir + "/updated");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NodeSetPod, ThePreStopHookMarksTheNodeDownAndKeepsAHealthChecksReason) {
  EXPECT_EQ(pre_stop_update("slurm-operator: Pod (hpc/cpu-1) was cordoned"),
            "update|nodename=cpu-1|state=down|reason=slurm-operator: Pod is terminating|");
  EXPECT_EQ(pre_stop_update("slurm-operator: Pod (hpc/cpu-1) is pending termination for "
                            "healthcheck: device-taint:gpu.example.com/xid: gpu-1 [3] (None)"),
            "update|nodename=cpu-1|state=down|reason=slurm-operator: Pod (hpc/cpu-1) is pending "
            "termination for healthcheck: device-taint:gpu.example.com/xid: gpu-1 [3] (None)|");
  EXPECT_EQ(pre_stop_update("an admin: healthcheck: x"),
            "update|nodename=cpu-1|state=down|reason=slurm-operator: Pod is terminating|")
      << "only the operator's own drain is kept";
}

TEST(NodeSetPod, AStuckContainerSaysWhyAndProgressIsNoFailure) {
  const json pulling =
      json::parse(R"({"metadata": {"name": "cpu-0"}, "status": {"containerStatuses": [
      {"name": "slurmd", "state": {"waiting": {"reason": "ContainerCreating"}}}]}})");
  EXPECT_EQ(container_start_failure(testing::cached_pod(pulling)), "");
  const json bad_image = json::parse(R"({"metadata": {"name": "cpu-0"}, "status": {
      "initContainerStatuses": [{"name": "logfile", "state": {"running": {}}}],
      "containerStatuses": [{"name": "slurmd", "state": {"waiting": {"reason": "ErrImageNeverPull",
          "message": "image \"x/slurmd:none\" is not present"}}}]}})");
  EXPECT_EQ(container_start_failure(testing::cached_pod(bad_image)),
            "container slurmd: ErrImageNeverPull: image \"x/slurmd:none\" is not present");
  const json crash =
      json::parse(R"({"metadata": {"name": "cpu-0"}, "status": {"initContainerStatuses": [
      {"name": "logfile", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}})");
  EXPECT_EQ(container_start_failure(testing::cached_pod(crash)),
            "container logfile: CrashLoopBackOff");
  EXPECT_EQ(container_start_failure(testing::cached_pod(json::object())), "");
}

TEST(NodeSetPod, ACrashLoopSaysHowTheContainerLastEnded) {
  // The kubelet's FallbackToLogsOnError message: the end of slurmd's log.
  const json crash = json::parse(
      R"({"metadata": {"name": "cpu-0"}, "status": {"containerStatuses": [{"name": "slurmd",
      "state": {"waiting": {"reason": "CrashLoopBackOff",
                            "message": "back-off 40s restarting failed container=slurmd"}},
      "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message":
          "[2026-12-04T15:48:39.775] error: unable to build slurm cgroup for ns freezer: Read-only file system\n[2026-12-04T15:48:39.775] error: cannot create proctrack context for proctrack/cgroup\n\n[2026-12-04T15:48:39.775] error: slurmd initialization failed\n"}}}]}})");
  EXPECT_EQ(container_start_failure(testing::cached_pod(crash)),
            "container slurmd: CrashLoopBackOff: exit code 1: error: unable to build slurm cgroup "
            "for ns freezer: Read-only file system | error: cannot create proctrack context for "
            "proctrack/cgroup | error: slurmd initialization failed");
  json long_line = crash;
  long_line["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] =
      std::string(500, 'x');
  EXPECT_EQ(container_start_failure(testing::cached_pod(long_line)),
            "container slurmd: CrashLoopBackOff: exit code 1: ..." + std::string(400, 'x'));
}

TEST(NodeSetPod, APinnedPodMayRunOnItsNodeOnly) {
  auto pod = build::build_nodeset_pod(nodeset(), {controller()}, 0, "kube-7");
  ASSERT_TRUE(pod);
  const json& terms = (*pod)["spec"]["affinity"]["nodeAffinity"]
                            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1U);
  EXPECT_EQ(terms[0]["matchFields"][0]["values"], json({"kube-7"}));
  auto free = build::build_nodeset_pod(nodeset(), {controller()}, 0);
  ASSERT_TRUE(free);
  EXPECT_FALSE((*free)["spec"]["affinity"].contains("nodeAffinity"));
}

TEST(NodeSetPod, WithSshRunsSshdWithTheNodeSetsKeysAndTheSitesSssd) {
  const api::NodeSet plain = nodeset();
  auto without = build::build_nodeset_pod(plain, {controller()}, 0);
  ASSERT_TRUE(without) << without.error();
  EXPECT_EQ((*without)["spec"]["containers"][0]["ports"].size(), 1u);  // slurmd only

  const api::NodeSet n = nodeset(R"(  ssh:
    enabled: true
    extraSshdConfig: "MaxSessions 4"
    sssdConfRef: {name: site-sssd, key: sssd.conf}
)");
  auto pod = build::build_nodeset_pod(n, {controller()}, 0);
  ASSERT_TRUE(pod) << pod.error();
  const json& c = (*pod)["spec"]["containers"][0];
  EXPECT_EQ(c["ports"][1], json::parse(R"({"name":"ssh","containerPort":22,"protocol":"TCP"})"));
  std::map<std::string, json> mounts;
  for (const auto& m : c["volumeMounts"]) {
    mounts[m["mountPath"]] = m;
  }
  EXPECT_EQ(mounts.at("/etc/ssh/sshd_config")["name"], "ssh-config");
  EXPECT_EQ(mounts.at("/etc/sssd/sssd.conf")["name"], "sssd-conf");
  // The entrypoint starts sshd when this key is there.
  EXPECT_EQ(mounts.at("/etc/ssh/ssh_host_ed25519_key")["subPath"], "ssh_host_ed25519_key");
  std::map<std::string, json> volumes;
  for (const auto& v : (*pod)["spec"]["volumes"]) {
    volumes[v["name"]] = v;
  }
  EXPECT_EQ(volumes.at("ssh-host-keys")["secret"]["secretName"], "cpu-ssh-host-keys");
  EXPECT_EQ(volumes.at("ssh-config")["configMap"]["name"], "cpu-ssh-config");
  EXPECT_EQ(volumes.at("sssd-conf")["secret"]["secretName"], "site-sssd");
  EXPECT_EQ(volumes.at("sssd-conf")["secret"]["defaultMode"], 0600);  // sssd refuses others

  const json config = build::build_nodeset_ssh_config_map(n);
  const std::string sshd = config["data"]["sshd_config"];
  EXPECT_NE(sshd.find("from NodeSet hpc/cpu."), std::string::npos) << sshd;
  EXPECT_NE(sshd.find("UsePAM yes\n"), std::string::npos) << sshd;  // pam_slurm_adopt
  EXPECT_NE(sshd.find("AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys\n"),
            std::string::npos);
  EXPECT_TRUE(sshd.ends_with("# extraSshdConfig\nMaxSessions 4\n")) << sshd;
  const json secret = build::build_nodeset_host_keys_secret(n, {{"ssh_host_rsa_key", "k"}});
  EXPECT_EQ(secret["metadata"]["name"], "cpu-ssh-host-keys");
  EXPECT_TRUE(secret["immutable"].get<bool>());
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["uid"], "n-uid");
  // Turning ssh on is a new revision: the workers roll, each after its jobs.
  EXPECT_NE(build::nodeset_revision_name(n, {controller()}),
            build::nodeset_revision_name(plain, {controller()}));
}

TEST(NodeSetPod, UsersTemplateMergesButIdentityWins) {
  const api::Controller c = controller();
  const api::NodeSet n = nodeset(R"(  template:
    metadata:
      labels: {team: a, "nodeset.slinky.slurm.net/pod-index": "99"}
    spec:
      priorityClassName: hpc
  slurmd:
    image: registry.local/slurmd:1
)");
  auto pod = build::build_nodeset_pod(n, {c}, 0);
  ASSERT_TRUE(pod);
  EXPECT_EQ((*pod)["metadata"]["labels"]["team"], "a");
  EXPECT_EQ((*pod)["metadata"]["labels"][std::string(api::kLabelNodeSetPodIndex)], "0");
  EXPECT_EQ((*pod)["spec"]["priorityClassName"], "hpc");
  EXPECT_EQ((*pod)["spec"]["containers"][0]["image"], "registry.local/slurmd:1");
}

json kube_node(const std::string& name, const json& labels, const json& taints = json::array()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}}, {"spec", {{"taints", taints}}}};
}

TEST(DaemonMode, NodeSelectorAffinityAndTaintsDecide) {
  const json spec = {
      {"nodeSelector", {{"pool", "hpc"}}},
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             json::array(
                 {{{"matchExpressions",
                    json::array({{{"key", "gpus"}, {"operator", "Gt"}, {"values", {"3"}}}})}},
                  {{"matchFields", json::array({{{"key", "metadata.name"},
                                                 {"operator", "In"},
                                                 {"values", {"special"}}}})}}})}}}}}}},
      {"tolerations", json::array({{{"key", "hpc"}, {"operator", "Exists"}}})}};
  EXPECT_TRUE(build::daemon_node_eligible(spec, kube_node("a", {{"pool", "hpc"}, {"gpus", "8"}})));
  EXPECT_FALSE(build::daemon_node_eligible(spec, kube_node("a", {{"pool", "web"}, {"gpus", "8"}})));
  EXPECT_FALSE(build::daemon_node_eligible(spec, kube_node("a", {{"pool", "hpc"}, {"gpus", "2"}})));
  EXPECT_TRUE(build::daemon_node_eligible(spec, kube_node("special", {{"pool", "hpc"}})));
  const json hpc = {{"pool", "hpc"}, {"gpus", "8"}};
  EXPECT_TRUE(build::daemon_node_eligible(
      spec, kube_node("a", hpc, json::array({{{"key", "hpc"}, {"effect", "NoSchedule"}}}))));
  EXPECT_FALSE(build::daemon_node_eligible(
      spec, kube_node("a", hpc, json::array({{{"key", "gpu-broken"}, {"effect", "NoExecute"}}}))));
  // A node's own conditions and a cordon do not take its pod away; PreferNoSchedule never does.
  EXPECT_TRUE(build::daemon_node_eligible(
      spec, kube_node("a", hpc,
                      json::array(
                          {{{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}},
                           {{"key", "x"}, {"effect", "PreferNoSchedule"}}}))));
}

TEST(DaemonMode, HostnameFromTheNodeOrItsOverride) {
  EXPECT_EQ(build::daemon_pod_hostname(kube_node("gpu-7.rack2.example", json::object())), "gpu-7");
  json node = kube_node("gpu-7.rack2.example", json::object());
  node["metadata"]["annotations"]["nodeset.slinky.slurm.net/hostname-override"] = "g7";
  EXPECT_EQ(build::daemon_pod_hostname(node), "g7");
  EXPECT_EQ(build::daemon_pod_name(nodeset(), "g7"), "cpu-g7");
}

TEST(NodeSetClaims, OneClaimPerTemplateOwnedByTheNodeSetOnlyWhenDeletedWithIt) {
  api::NodeSet n = nodeset(R"(  ordinalPadding: 2
  volumeClaimTemplates:
  - metadata: {name: scratch, labels: {tier: fast}}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
)");
  auto claims = build::build_nodeset_claims(n, "03");
  ASSERT_EQ(claims.size(), 1U);
  EXPECT_EQ(claims[0]["metadata"]["name"], "scratch-cpu-03");
  EXPECT_EQ(claims[0]["metadata"]["labels"]["tier"], "fast");
  EXPECT_EQ(claims[0]["spec"]["resources"]["requests"]["storage"], "1Gi");
  EXPECT_FALSE(claims[0]["metadata"].contains("ownerReferences"));
  auto pod = build::build_nodeset_pod(n, {controller()}, 3);
  ASSERT_TRUE(pod);
  EXPECT_NE((*pod)["spec"]["volumes"].dump().find("\"claimName\":\"scratch-cpu-03\""),
            std::string::npos);
  n.spec.persistent_volume_claim_retention_policy.when_deleted = "Delete";
  claims = build::build_nodeset_claims(n, "03");
  EXPECT_EQ(claims[0]["metadata"]["ownerReferences"][0]["uid"], "n-uid");
}

TEST(NodeSetRevision, ChangesWithTheTemplateNotTheReplicas) {
  const api::Controller c = controller();
  const std::string base = build::nodeset_revision_name(nodeset(), {c});
  EXPECT_TRUE(base.starts_with("cpu-"));
  EXPECT_EQ(base.size(), std::string("cpu-").size() + 10);
  api::NodeSet scaled = nodeset();
  scaled.spec.replicas = 9;
  EXPECT_EQ(build::nodeset_revision_name(scaled, {c}), base);
  EXPECT_NE(build::nodeset_revision_name(nodeset("  slurmd: {image: other:2}\n"), {c}), base);
  const json revision = build::build_controller_revision(nodeset(), {c}, 3);
  EXPECT_EQ(revision["kind"], "ControllerRevision");
  EXPECT_EQ(revision["revision"], 3);
  EXPECT_EQ(revision["metadata"]["name"], base);
}

TEST(NodeSetShared, ServiceAndBudgetOwnedByEveryNodeSet) {
  const api::Controller c = controller();
  api::NodeSet b = nodeset();
  b.metadata.name = "b";
  b.metadata.uid = "b-uid";
  const api::NodeSet a = nodeset();
  const json service = build::build_worker_service(c, {b, a});
  EXPECT_EQ(service["metadata"]["name"], "slurm-workers-slurm");
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  ASSERT_EQ(service["metadata"]["ownerReferences"].size(), 2U);
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["name"], "b");
  EXPECT_EQ(service["metadata"]["ownerReferences"][1]["name"], "cpu");
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["controller"], false);
  const json pdb = build::build_worker_pdb(c, {a});
  EXPECT_EQ(pdb["spec"]["maxUnavailable"], 0);
  EXPECT_EQ(pdb["spec"]["selector"]["matchLabels"][std::string(api::kLabelNodeSetPodProtect)],
            "true");
}

WorkerPod running(const std::string& name, int64_t ordinal) {
  WorkerPod w;
  w.name = name;
  w.ordinal = ordinal;
  w.phase = "Running";
  w.kube_node = "node-a";
  w.ready = true;
  return w;
}

std::vector<std::string> order(std::vector<WorkerPod> pods) {
  std::sort(pods.begin(), pods.end(), condemn_before);
  std::vector<std::string> names;
  names.reserve(pods.size());
  for (const auto& p : pods) {
    names.push_back(p.name);
  }
  return names;
}

TEST(ScaleInOrder, FollowsSlinkysOrder) {
  WorkerPod unscheduled = running("unscheduled", 0);
  unscheduled.kube_node = "";
  unscheduled.phase = "Pending";
  WorkerPod pending = running("pending", 1);
  pending.phase = "Pending";
  WorkerPod not_ready = running("not-ready", 2);
  not_ready.ready = false;
  WorkerPod cheap = running("cheap", 3);
  cheap.deletion_cost = -5;
  WorkerPod busy = running("busy", 9);
  busy.deadline = slurm::Time::max();
  WorkerPod idle_low = running("idle-low", 4);
  WorkerPod idle_high = running("idle-high", 8);
  EXPECT_EQ(order({busy, idle_low, idle_high, cheap, not_ready, pending, unscheduled}),
            std::vector<std::string>(
                {"unscheduled", "pending", "not-ready", "cheap", "idle-high", "idle-low", "busy"}));
}

TEST(ScaleInOrder, EarlierDeadlineAndCordonedGoFirst) {
  WorkerPod soon = running("soon", 1);
  soon.deadline = slurm::Time() + std::chrono::hours(1);
  WorkerPod late = running("late", 2);
  late.deadline = slurm::Time() + std::chrono::hours(5);
  EXPECT_EQ(order({late, soon}), std::vector<std::string>({"soon", "late"}));
  WorkerPod cordoned = running("cordoned", 1);
  cordoned.cordoned = true;
  EXPECT_EQ(order({running("other", 2), cordoned}),
            std::vector<std::string>({"cordoned", "other"}));
}

// What slurmrestd 26.05 answered on the test bed with two jobs running: job 1 on n2 with
// --time=10 (submitted first), job 2 on n1 with --time=2 (testdata/scale-in).
json slurm_answer(const std::string& name) {
  std::ifstream in(api::testing::source_dir() / "test/unit/operator/testdata/scale-in" / name);
  return json::parse(in);
}

std::map<int64_t, slurm::Job> captured_jobs() {
  auto list = slurm::decode_jobs(slurm_answer("jobs.json"), slurm::kV0044);
  if (!list) {
    throw std::runtime_error(list.error().message);
  }
  std::map<int64_t, slurm::Job> jobs;
  for (auto& job : list->jobs) {
    jobs.emplace(job.id, std::move(job));
  }
  return jobs;
}

std::map<std::string, slurm::Node> captured_nodes() {
  auto list = slurm::decode_nodes(slurm_answer("nodes.json"), slurm::kV0044);
  if (!list) {
    throw std::runtime_error(list.error().message);
  }
  std::map<std::string, slurm::Node> nodes;
  for (auto& node : list->nodes) {
    nodes.emplace(node.name, std::move(node));
  }
  return nodes;
}

std::vector<WorkerPod> pods_with_deadlines(const std::map<std::string, slurm::Time>& deadlines) {
  std::vector<WorkerPod> pods;
  for (const auto& [host, ordinal] : {std::pair{"n1", 0}, std::pair{"n2", 1}}) {
    WorkerPod w = running(host, ordinal);
    w.hostname = host;
    if (const auto it = deadlines.find(host); it != deadlines.end()) {
      w.deadline = it->second;
    }
    pods.push_back(w);
  }
  return pods;
}

TEST(NodeDeadlines, AreTheEndsSlurmReportsForItsRunningJobs) {
  const auto deadlines = node_deadlines(captured_jobs(), captured_nodes());
  ASSERT_EQ(deadlines.size(), 2U);
  EXPECT_EQ(deadlines.at("n1"), slurm::Time(std::chrono::seconds(1796321014)));
  EXPECT_EQ(deadlines.at("n2"), slurm::Time(std::chrono::seconds(1796321491)));
}

TEST(ScaleInOrder, ThePodWhoseJobEndsFirstGoesFirstThoughItsOrdinalIsLower) {
  const auto pods = pods_with_deadlines(node_deadlines(captured_jobs(), captured_nodes()));
  // Without deadlines the higher ordinal, n2, would go first.
  EXPECT_EQ(order(pods), std::vector<std::string>({"n1", "n2"}));
}

TEST(ScaleInOrder, ABusyNodeWhoseJobsAreUnseenIsNeverTakenForIdle) {
  auto jobs = captured_jobs();
  jobs.erase(2);  // n1's job, not yet in the job list though n1 already shows MIXED
  const auto deadlines = node_deadlines(jobs, captured_nodes());
  EXPECT_EQ(deadlines.at("n1"), slurm::Time::max());
  EXPECT_EQ(order(pods_with_deadlines(deadlines)), std::vector<std::string>({"n2", "n1"}));
}

TEST(NodeDeadlines, AJobWithoutATimeLimitNeverEndsAndEndedJobsDoNotCount) {
  auto jobs = captured_jobs();
  jobs.at(1).time_limit.reset();  // --time=UNLIMITED
  jobs.at(2).state = {"COMPLETED"};
  auto nodes = captured_nodes();
  nodes.at("n1").state = {"IDLE"};
  nodes.at("n1").alloc_cpus = 0;
  const auto deadlines = node_deadlines(jobs, nodes);
  EXPECT_EQ(deadlines.count("n1"), 0U);
  EXPECT_EQ(deadlines.at("n2"), slurm::Time::max());
  EXPECT_EQ(order(pods_with_deadlines(deadlines)), std::vector<std::string>({"n1", "n2"}));
}

// A NodeSet with defaults, as the reconcile sees it.
api::NodeSet defaulted(const std::string& extra_yaml = "") {
  api::NodeSet n = nodeset(extra_yaml);
  api::apply_defaults(n);
  return n;
}

// A running, ready pod of `nodeset` at `revision`, its Slurm node named as the pod.
WorkerPod member(const std::string& name, int64_t ordinal, const std::string& revision = "r1") {
  WorkerPod w = running(name, ordinal);
  w.hostname = name;
  w.revision = revision;
  w.mode = "StatefulSet";
  return w;
}

slurm::Node slurm_node(const std::string& name, std::vector<std::string> state = {"IDLE"},
                       const std::string& reason = "") {
  slurm::Node node;
  node.name = name;
  node.state = std::move(state);
  node.reason = reason;
  return node;
}

std::vector<std::string> condemned_names(const Victims& v) {
  std::vector<std::string> names;
  for (const auto& w : v.order) {
    if (v.condemned.count(w.name) != 0) {
      names.push_back(w.name + ": " + v.condemned.at(w.name));
    }
  }
  return names;
}

TEST(ChooseVictims, TheExcessGoesInScaleInOrderAndNoMore) {
  const auto deadlines = node_deadlines(captured_jobs(), captured_nodes());
  std::vector<WorkerPod> pods = {member("n1", 0), member("n2", 1), member("idle", 2)};
  pods[0].deadline = deadlines.at("n1");
  pods[1].deadline = deadlines.at("n2");
  const auto nodes = captured_nodes();
  EXPECT_EQ(condemned_names(choose_victims(defaulted(), pods, nodes, 1, "r1", {})),
            (std::vector<std::string>{"idle: scale-in", "n1: scale-in"}));
  EXPECT_TRUE(condemned_names(choose_victims(defaulted(), pods, nodes, 3, "r1", {})).empty());
}

TEST(ChooseVictims, APodAlreadyDrainedForDeletionKeepsItsPlace) {
  // slinky-1 was chosen before (its node carries the operator's pending-termination drain);
  // slinky-0 now looks the better victim, but draining it too would take two nodes for one.
  std::vector<WorkerPod> pods = {member("slinky-0", 0), member("slinky-1", 1)};
  pods[1].deadline = slurm::Time::max();
  const std::map<std::string, slurm::Node> nodes = {
      {"slinky-0", slurm_node("slinky-0")},
      {"slinky-1", slurm_node("slinky-1", {"MIXED", "DRAIN"},
                              "slurm-operator: Pod (hpc/slinky-1) is pending termination for "
                              "scale-in")}};
  EXPECT_EQ(condemned_names(choose_victims(defaulted(), pods, nodes, 1, "r1", {})),
            std::vector<std::string>{"slinky-1: scale-in"});
}

TEST(ChooseVictims, PodsOfTheOtherScalingModeAlwaysGo) {
  std::vector<WorkerPod> pods = {member("a", 0), member("b", 1)};
  pods[1].mode = "DaemonSet";
  EXPECT_EQ(condemned_names(choose_victims(defaulted(), pods, {}, 2, "r1", {})),
            std::vector<std::string>{"b: the scaling mode changed"});
}

TEST(ChooseVictims, ARollingUpdateReplacesWithinMaxUnavailable) {
  const std::vector<WorkerPod> pods = {member("a", 0, "old"), member("b", 1, "old"),
                                       member("c", 2, "old"), member("d", 3)};
  const api::NodeSet n = defaulted("  updateStrategy: {rollingUpdate: {maxUnavailable: 2}}\n");
  EXPECT_EQ(condemned_names(choose_victims(n, pods, {}, 4, "r1", {})),
            (std::vector<std::string>{"c: update", "b: update"}));
}

TEST(ChooseVictims, AnOldPodThatIsNotReadyIsReplacedOutsideTheBudget) {
  std::vector<WorkerPod> pods = {member("a", 0, "old"), member("b", 1, "old")};
  pods[0].ready = false;
  const api::NodeSet n = defaulted("  updateStrategy: {rollingUpdate: {maxUnavailable: 1}}\n");
  EXPECT_EQ(condemned_names(choose_victims(n, pods, {}, 2, "r1", {})),
            std::vector<std::string>{"a: update"});
}

TEST(ChooseVictims, AScheduledUpdateLeavesReadyOldPodsForTheWindow) {
  std::vector<WorkerPod> pods = {member("a", 0, "old"), member("b", 1, "old"), member("c", 2)};
  pods[1].ready = false;
  const api::NodeSet n = defaulted(
      "  updateStrategy: {type: ScheduledUpdate, scheduledUpdate: {startTime: "
      "\"2026-12-05T02:00:00Z\", duration: 2h}}\n");
  const Victims v = choose_victims(n, pods, {}, 3, "r1", {});
  EXPECT_EQ(condemned_names(v), std::vector<std::string>{"b: update"});
  EXPECT_EQ(v.outdated, std::set<std::string>{"a"});
}

TEST(ChooseVictims, DaemonSetModeKeepsOnePodPerEligibleNode) {
  const api::NodeSet n = defaulted("  scalingMode: DaemonSet\n");
  std::vector<WorkerPod> pods = {member("on-a", -1), member("on-b", -1), member("also-on-a", -1)};
  for (auto& w : pods) {
    w.mode = "DaemonSet";
  }
  pods[0].target_node = "node-a";
  pods[0].created = "2026-01-01T00:00:00Z";
  pods[1].target_node = "node-b";
  pods[2].target_node = "node-a";
  pods[2].created = "2026-01-02T00:00:00Z";
  const std::map<std::string, std::string> eligible = {{"node-a", "a"}};
  EXPECT_EQ(condemned_names(choose_victims(n, pods, {}, 1, "r1", eligible)),
            (std::vector<std::string>{"also-on-a: scale-in: a second pod on node-a",
                                      "on-b: scale-in: Node node-b is no longer eligible"}));
}

TEST(ProgressMessage, SaysWhereTheNodeSetIsGoing) {
  EXPECT_EQ(progress_message(20, 0, 20, 20, 5, "r1"),
            "scaling in to 0 pods: 20 left, 20 ready, all at revision r1, 5 terminating");
  EXPECT_EQ(progress_message(3, 10, 1, 3, 0, "r1"),
            "scaling out to 10 pods: 3 made, 1 ready, all at revision r1");
  EXPECT_EQ(progress_message(2, 2, 1, 1, 0, "r2"), "1 of 2 pods ready, 1 of 2 at revision r2");
  EXPECT_EQ(progress_message(0, 0, 0, 0, 1, "r1"), "0 of 0 pods ready, 1 terminating");
}

TEST(WritesInFlight, ADrainIsPendingUntilTheSnapshotShowsIt) {
  WritesInFlight d = drains_in_flight();
  const WritesInFlight::Clock::time_point t0{};
  slurm::Node busy;
  busy.name = "cpu-1";
  busy.state = {"ALLOCATED"};
  std::map<std::string, slurm::Node> nodes{{"cpu-1", busy}};
  EXPECT_TRUE(d.pending("hpc/cpu", nodes, t0).empty());
  const std::string reason = "slurm-operator: Pod (hpc/cpu-1) is pending termination for scale-in";
  d.written("hpc/cpu", "cpu-1", reason, t0);
  EXPECT_EQ(d.pending("hpc/cpu", nodes, t0 + std::chrono::seconds(1)),
            (std::map<std::string, std::string>{{"cpu-1", reason}}));
  EXPECT_TRUE(d.pending("hpc/gpu", nodes, t0).empty()) << "per NodeSet";
  // The snapshot shows it: forgotten.
  nodes["cpu-1"].state = {"ALLOCATED", "DRAIN"};
  nodes["cpu-1"].reason = reason;
  EXPECT_TRUE(d.pending("hpc/cpu", nodes, t0 + std::chrono::seconds(2)).empty());
  nodes["cpu-1"] = busy;
  EXPECT_TRUE(d.pending("hpc/cpu", nodes, t0 + std::chrono::seconds(3)).empty());
  // One the snapshot never shows lapses; an undrain written since ends it at once.
  d.written("hpc/cpu", "cpu-1", reason, t0);
  EXPECT_TRUE(d.pending("hpc/cpu", nodes, t0 + d.seen_within() * 2).empty());
  d.written("hpc/cpu", "cpu-1", reason, t0);
  d.undone("hpc/cpu", "cpu-1");
  EXPECT_TRUE(d.pending("hpc/cpu", nodes, t0).empty());
}

TEST(WritesInFlight, AnActiveCheckIsPendingUntilTheSnapshotShowsItsReservation) {
  WritesInFlight c = checks_in_flight();
  const WritesInFlight::Clock::time_point t0{};
  slurm::Node idle;
  idle.name = "cpu-1";
  idle.state = {"IDLE"};
  std::map<std::string, slurm::Node> nodes{{"cpu-1", idle}};
  c.written("hpc/cpu", "cpu-1", "tightrope-check-cpu-1", t0);
  EXPECT_EQ(c.pending("hpc/cpu", nodes, t0 + std::chrono::seconds(5)).count("cpu-1"), 1U);
  nodes["cpu-1"].reservation = "tightrope-check-cpu-1";
  EXPECT_TRUE(c.pending("hpc/cpu", nodes, t0 + std::chrono::seconds(6)).empty());
}

TEST(PodExpectations, ACreatedPodIsPendingUntilTheCacheShowsIt) {
  PodExpectations e(std::chrono::seconds(60));
  const PodExpectations::Clock::time_point t0{};
  e.created("hpc/cpu", "cpu-2", t0);
  EXPECT_EQ(e.pending("hpc/cpu", {member("cpu-0", 0)}, t0).creations,
            std::set<std::string>{"cpu-2"});
  EXPECT_TRUE(e.pending("hpc/gpu", {}, t0).creations.empty()) << "per NodeSet";
  EXPECT_TRUE(e.pending("hpc/cpu", {member("cpu-2", 2)}, t0).creations.empty());
  EXPECT_TRUE(e.pending("hpc/cpu", {}, t0).creations.empty()) << "once seen, it is forgotten";
}

TEST(PodExpectations, ADeletedPodIsPendingWhileTheCacheShowsItAlive) {
  PodExpectations e(std::chrono::seconds(60));
  const PodExpectations::Clock::time_point t0{};
  WorkerPod pod = member("cpu-1", 1);
  pod.uid = "u1";
  e.deleted("hpc/cpu", "u1", t0);
  EXPECT_EQ(e.pending("hpc/cpu", {pod}, t0).deletions, std::set<std::string>{"u1"});
  pod.terminating = true;
  EXPECT_TRUE(e.pending("hpc/cpu", {pod}, t0).deletions.empty());
}

TEST(PodExpectations, APatchedPodIsPendingUntilTheCacheShowsAnotherVersion) {
  PodExpectations e(std::chrono::seconds(60));
  const PodExpectations::Clock::time_point t0{};
  WorkerPod pod = member("cpu-1", 1);
  pod.uid = "u1";
  pod.resource_version = "41";
  e.patched("hpc/cpu", "u1", "41", t0);
  EXPECT_EQ(e.pending("hpc/cpu", {pod}, t0).patches, std::set<std::string>{"u1"});
  pod.resource_version = "42";
  EXPECT_TRUE(e.pending("hpc/cpu", {pod}, t0).patches.empty());
}

TEST(PodExpectations, WhatTheCacheNeverConfirmsLapses) {
  PodExpectations e(std::chrono::seconds(60));
  const PodExpectations::Clock::time_point t0{};
  e.created("hpc/cpu", "cpu-2", t0);
  EXPECT_FALSE(e.pending("hpc/cpu", {}, t0 + std::chrono::seconds(59)).creations.empty());
  EXPECT_TRUE(e.pending("hpc/cpu", {}, t0 + std::chrono::seconds(61)).creations.empty());
}

TEST(PodExpectations, ANewTermExpectsNothingOfTheLastOnesWrites) {
  PodExpectations e(std::chrono::seconds(60));
  const PodExpectations::Clock::time_point t0{};
  e.created("hpc/cpu", "cpu-2", t0);
  e.deleted("hpc/gpu", "u1", t0);
  e.forget_all();
  EXPECT_TRUE(e.pending("hpc/cpu", {}, t0).creations.empty());
  WorkerPod pod = member("gpu-0", 0);
  pod.uid = "u1";
  EXPECT_TRUE(e.pending("hpc/gpu", {pod}, t0).deletions.empty());
}

TEST(NodeSetsTouched, ANodesChangeConcernsItsOwnNodeSetOnly) {
  const std::vector<NodeSetFeature> nodesets = {{"slurm-worker-cpu", "cpu"},
                                                {"slurm-worker-gpu", "gpu"}};
  slurm::Node by_feature = slurm_node("cpu-0");
  by_feature.features = {"cpu", "k8s/zone-a"};
  slurm::Node by_link = slurm_node("renamed");
  by_link.comment = R"({"namespace":"hpc","podName":"x","nodeSetName":"slurm-worker-gpu"})";
  EXPECT_EQ(nodesets_touched(nodesets, {by_feature}), std::set<std::string>{"slurm-worker-cpu"});
  EXPECT_EQ(nodesets_touched(nodesets, {by_feature, by_link}),
            (std::set<std::string>{"slurm-worker-cpu", "slurm-worker-gpu"}));
  EXPECT_EQ(nodesets_touched(nodesets, {slurm_node("stranger")}), std::nullopt)
      << "a node of no known NodeSet wakes them all";
}

// One poll's changes as the feed hands them over.
NodeSetIndex::Touched feed_changes(NodeSetIndex& index, const std::vector<slurm::NodeEvent>& nodes,
                                   const std::vector<slurm::JobEvent>& jobs,
                                   const std::vector<slurm::Node>& now) {
  std::map<std::string, slurm::Node> by_name;
  for (const auto& n : now) {
    by_name[n.name] = n;
  }
  const slurm::SlurmSnapshot snapshot{
      std::make_shared<const std::map<std::string, slurm::Node>>(by_name),
      std::make_shared<const std::map<int64_t, slurm::Job>>()};
  return index.update(slurm::ChangeFeed::Changes{nodes, jobs, snapshot});
}

TEST(NodeSetIndex, ALinkedNodesChangeAndItsJobsWakeItsNodeSetOnly) {
  NodeSetIndex index;
  slurm::Node linked = slurm_node("cpu-0");
  linked.comment = R"({"namespace":"hpc","podName":"cpu-0","nodeSetName":"cpu"})";
  slurm::Node fresh = slurm_node("gpu-0");
  auto touched = feed_changes(index,
                              {{slurm::NodeEvent::Type::kAdded, linked, std::nullopt},
                               {slurm::NodeEvent::Type::kAdded, fresh, std::nullopt}},
                              {}, {linked, fresh});
  EXPECT_EQ(touched.nodesets, std::set<std::string>{"cpu"});
  ASSERT_EQ(touched.unlinked.size(), 1U);
  EXPECT_EQ(touched.unlinked[0].name, "gpu-0");
  EXPECT_EQ(index.nodeset_of("cpu-0"), "cpu");

  // A job on cpu-0 ends: its node's NodeSet, known from the index, without a node event.
  slurm::Job job;
  job.id = 7;
  job.nodes = "cpu-0";
  touched = feed_changes(index, {}, {{slurm::JobEvent::Type::kRemoved, job, std::nullopt}},
                         {linked, fresh});
  EXPECT_EQ(touched.nodesets, std::set<std::string>{"cpu"});
  EXPECT_TRUE(touched.unlinked.empty());

  // Gone: its NodeSet hears of it once more, and the index forgets it.
  touched =
      feed_changes(index, {{slurm::NodeEvent::Type::kRemoved, linked, std::nullopt}}, {}, {fresh});
  EXPECT_EQ(touched.nodesets, std::set<std::string>{"cpu"});
  EXPECT_EQ(index.nodeset_of("cpu-0"), "");
}

TEST(NodeSetIndex, AJobNodeListThatDoesNotParseWakesEveryNodeSet) {
  NodeSetIndex index;
  slurm::Job job;
  job.nodes = "cpu-[0";
  EXPECT_TRUE(
      feed_changes(index, {}, {{slurm::JobEvent::Type::kAdded, job, std::nullopt}}, {}).everything);
}

TEST(MaxUnavailable, IntegersAndPercentagesRoundUp) {
  EXPECT_EQ(max_unavailable(json(2), 10), 2);
  EXPECT_EQ(max_unavailable(json("25%"), 10), 3);
  EXPECT_EQ(max_unavailable(json("1%"), 10), 1);
  EXPECT_EQ(max_unavailable(json("100%"), 4), 4);
  EXPECT_EQ(max_unavailable(json(), 4), 1);
}

TEST(SlurmConditions, OneBaseStateAndEachFlag) {
  slurm::Node node;
  node.state = {"IDLE", "DRAIN", "DYNAMIC_NORM", "NOT_RESPONDING"};
  EXPECT_EQ(slurm_condition_types(node),
            std::vector<std::string>(
                {"SlurmNodeStateIdle", "SlurmNodeStateDrain", "SlurmNodeStateNotResponding"}));
  node.state = {"MIXED"};
  EXPECT_EQ(slurm_condition_types(node), std::vector<std::string>({"SlurmNodeStateMixed"}));
}

TEST(SlurmConditions, DrainedMeansDrainAndNoWork) {
  slurm::Node node;
  node.state = {"IDLE", "DRAIN"};
  EXPECT_TRUE(slurm_drained(node));
  node.state = {"MIXED", "DRAIN"};
  EXPECT_FALSE(slurm_drained(node));
  node.state = {"IDLE", "DRAIN", "COMPLETING"};
  EXPECT_FALSE(slurm_drained(node));
  node.state = {"IDLE"};
  EXPECT_FALSE(slurm_drained(node));
}

TEST(NodeFeatures, AnnotationBecomesK8sFeaturesAndOthersStay) {
  EXPECT_EQ(node_features("fast, nvme", {"cpu", "k8s/old", "tb"}),
            std::vector<std::string>({"cpu", "tb", "k8s/fast", "k8s/nvme"}));
  EXPECT_EQ(node_features("", {"cpu", "k8s/old"}), std::vector<std::string>({"cpu"}));
  EXPECT_EQ(node_features("a,a,", {}), std::vector<std::string>({"k8s/a"}));
}

TEST(Reasons, CordonReasonFromAnnotationOrDefault) {
  json node = {{"metadata", {{"name", "k1"}}}};
  EXPECT_EQ(cordon_reason(node, "hpc/cpu-0"),
            "slurm-operator: Node (k1) was cordoned, Pod (hpc/cpu-0) must be cordoned");
  node["metadata"]["annotations"][std::string(api::kAnnotationNodeCordonReason)] =
      "disk\tfailing\n" + std::string(300, 'x');
  const std::string reason = cordon_reason(node, "hpc/cpu-0");
  EXPECT_TRUE(reason.starts_with("slurm-operator: diskfailing"));
  EXPECT_EQ(reason.size(), std::string("slurm-operator: ").size() + 256);
  EXPECT_TRUE(operator_reason(reason));
  EXPECT_FALSE(operator_reason("admin: bad DIMM"));
}

TEST(Reasons, OnlyAnotherReasonSinceTheSnapshotStopsAWrite) {
  slurm::Node now;
  now.state = {"IDLE", "DRAIN"};
  now.reason = "admin maintenance";
  EXPECT_TRUE(reason_changed_by_another(now, ""));  // drained after the snapshot
  EXPECT_TRUE(reason_changed_by_another(now, "slurm-operator: Node (k1) was cordoned"));
  // The snapshot saw it: the plan decided knowing it.
  EXPECT_FALSE(reason_changed_by_another(now, "admin maintenance"));
  now.reason = "slurm-operator: Pod (hpc/cpu-0) is pending termination for scale-in";
  EXPECT_FALSE(reason_changed_by_another(now, ""));  // the operator's own, from an earlier write
  now.state = {"IDLE"};
  now.reason.clear();
  EXPECT_FALSE(reason_changed_by_another(now, "slurm-operator: Node (k1) was cordoned"));
}

// A NodeSet with ScheduledUpdate and these scheduledUpdate parameters (YAML flow style).
api::NodeSet scheduled(const std::string& parameters) {
  return nodeset(
      "  updateStrategy:\n    type: ScheduledUpdate\n    scheduledUpdate: " + parameters + "\n");
}

TEST(MaintenanceReservation, AWindowAheadIsKeptAsWritten) {
  const api::NodeSet n =
      scheduled(R"({startTime: "2026-12-05T03:00:00+01:00", duration: 45m, flags: [FLEX]})");
  const auto now = *kube::parse_time("2026-12-04T12:00:00Z");
  const auto r = maintenance_reservation(n, {"cpu-1", "cpu-0"}, now);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->name, "SlurmOperatorMaint-cpu");
  EXPECT_EQ(r->nodes, "cpu-0,cpu-1");
  EXPECT_EQ(r->flags, std::vector<std::string>({"MAINT", "IGNORE_JOBS", "FLEX"}));
  EXPECT_EQ(r->users, std::vector<std::string>({"slurm"}));
  EXPECT_EQ(r->start_time, kube::parse_time("2026-12-05T02:00:00Z"));
  EXPECT_EQ(r->end_time, kube::parse_time("2026-12-05T02:45:00Z"));
}

TEST(MaintenanceReservation, AOneTimeWindowThatBeganStartsNowAndOneThatEndedIsRefused) {
  const api::NodeSet n = scheduled(R"({startTime: "2026-12-05T02:00:00Z", duration: 1h})");
  const auto during = *kube::parse_time("2026-12-05T02:20:00.5Z");
  const auto r = maintenance_reservation(n, {"cpu-0"}, during);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->start_time, kube::parse_time("2026-12-05T02:20:00Z"));
  EXPECT_EQ(r->end_time, kube::parse_time("2026-12-05T03:00:00Z"));
  const auto after =
      maintenance_reservation(n, {"cpu-0"}, *kube::parse_time("2026-12-05T03:00:00Z"));
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.error().find("has ended"), std::string::npos) << after.error();
}

TEST(MaintenanceReservation, ARecurringWindowKeepsItsStartWithForceStart) {
  const api::NodeSet n = scheduled(R"({startTime: "2026-11-01T02:00:00Z", flags: [DAILY]})");
  const auto r = maintenance_reservation(n, {"cpu-0"}, *kube::parse_time("2026-12-05T12:00:00Z"));
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->flags, std::vector<std::string>({"MAINT", "IGNORE_JOBS", "DAILY", "FORCE_START"}));
  EXPECT_EQ(r->start_time, kube::parse_time("2026-11-01T02:00:00Z"));
  EXPECT_EQ(r->end_time, kube::parse_time("2026-11-01T02:30:00Z"));
}

TEST(MaintenanceReservation, AnUnreadableStartNamesTheField) {
  const api::NodeSet n = scheduled(R"({startTime: "tomorrow at two"})");
  const auto r = maintenance_reservation(n, {"cpu-0"}, std::chrono::system_clock::now());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().starts_with("spec.updateStrategy.scheduledUpdate.startTime")) << r.error();
}

}  // namespace
}  // namespace tightrope::op
