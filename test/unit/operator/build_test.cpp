// What the builders promise, one behaviour at a time: how a user's extraConf and ConfigMaps
// meet the generated slurm.conf, when pods roll, what HA, persistence, metrics and external
// mode change, how a user's pod template merges over the operator's, and the RestApi,
// Accounting and Token specifics. The whole output for fixed inputs is in build_golden_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "api/defaults.hpp"
#include "api/well_known.hpp"
#include "operator/build/common.hpp"
#include "operator/build/components.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/nodeset.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op::build {
namespace {

using nlohmann::json;

// The first document of a YAML text, as JSON.
json yaml(const std::string& text) {
  auto docs = api::testing::yaml_to_json(text);
  return docs.empty() ? json() : docs.front();
}

using api::testing::decoded;

// A minimal valid Controller "slurm/slurm"; tests change what they are about.
api::Controller controller() {
  return decoded(api::decode_controller(yaml(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata: {name: slurm, namespace: slurm, uid: uid-controller}
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt_hs256.key}
)")));
}

api::NodeSet nodeset(const std::string& name) {
  api::NodeSet n = decoded(api::decode_nodeset(yaml(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata: {namespace: slurm}
spec:
  controllerRef: {name: slurm}
)")));
  n.metadata.name = name;
  return n;
}

api::RestApi restapi() {
  return decoded(api::decode_restapi(yaml(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: RestApi
metadata: {name: slurm, namespace: slurm, uid: uid-restapi}
spec:
  controllerRef: {name: slurm}
)")));
}

api::Accounting accounting() {
  return decoded(api::decode_accounting(yaml(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: Accounting
metadata: {name: acct, namespace: slurm, uid: uid-accounting}
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt_hs256.key}
  storageConfig:
    host: mariadb
    passwordKeyRef: {name: mariadb-password, key: password}
)")));
}

api::Token token(bool refresh) {
  api::Token t = decoded(api::decode_token(yaml(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: Token
metadata: {name: tok, namespace: slurm, uid: uid-token}
spec:
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt_hs256.key}
  username: slurm
)")));
  t.spec.refresh = refresh;
  return t;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

// Every value `key` has in a slurm.conf text, one per line that sets it.
std::vector<std::string> values_of(const std::string& text, const std::string& key) {
  auto conf = slurm::parse_slurm_conf(text, "slurm.conf");
  if (!conf) {
    ADD_FAILURE() << conf.error().to_string();
    return {};
  }
  std::vector<std::string> out;
  for (const auto& line : conf->lines()) {
    if (line.kind != slurm::ConfLine::Kind::kSetting) {
      continue;
    }
    for (const auto& [k, v] : line.pairs) {
      if (lower(k) == lower(key)) {
        out.push_back(v);
      }
    }
  }
  return out;
}

// The entry of a list of named things (containers, volumes, ...) called `name`; null if none.
const json* named(const json& list, const std::string& name) {
  for (const auto& item : list) {
    if (item.value("name", "") == name) {
      return &item;
    }
  }
  return nullptr;
}

const json& pod_spec(const json& workload) {
  return workload["spec"]["template"]["spec"];
}

// ---- slurm.conf and the user's extraConf.

TEST(SlurmConf, ExtraConfListKeysAreMergedIntoTheOperatorsLineNotDuplicated) {
  api::Controller c = controller();
  c.spec.extra_conf =
      "SlurmctldParameters=enable_configless,cloud_dns\n"
      "AuthInfo=cred_expire=70\n"
      "AuthAltParameters=disable_token_creation\n";
  const std::string conf = build_slurm_conf(c, {});
  EXPECT_EQ(values_of(conf, "SlurmctldParameters"),
            std::vector<std::string>{"enable_configless,reconfig_on_restart,cloud_dns"});
  EXPECT_EQ(values_of(conf, "AuthInfo"), std::vector<std::string>{"use_client_ids,cred_expire=70"});
  EXPECT_EQ(values_of(conf, "AuthAltParameters"),
            std::vector<std::string>{"jwt_key=/etc/slurm/jwt.key,disable_token_creation"});
}

TEST(SlurmConf, AWorkerWithSshMakesJobsContainedForPamSlurmAdopt) {
  api::Controller c = controller();
  ControllerInputs in;
  in.nodesets = {nodeset("cpu")};
  EXPECT_TRUE(values_of(build_slurm_conf(c, in), "PrologFlags").empty());
  c.spec.extra_conf = "PrologFlags=X11\n";
  EXPECT_EQ(values_of(build_slurm_conf(c, in), "PrologFlags"), std::vector<std::string>{"X11"});
  in.nodesets[0].spec.ssh.enabled = true;
  EXPECT_EQ(values_of(build_slurm_conf(c, in), "PrologFlags"),
            std::vector<std::string>{"Contain,X11"});
}

TEST(SlurmConf, WorkersRunTightropesHealthChecksOnceAHealthCheckSelectsOne) {
  api::Controller c = controller();
  ControllerInputs in;
  in.nodesets = {nodeset("cpu")};
  EXPECT_TRUE(values_of(build_slurm_conf(c, in), "HealthCheckProgram").empty());
  in.health_check_interval = 30;
  const std::string conf = build_slurm_conf(c, in);
  EXPECT_EQ(values_of(conf, "HealthCheckProgram"),
            std::vector<std::string>{"/usr/local/sbin/tightrope-health"});
  EXPECT_EQ(values_of(conf, "HealthCheckInterval"), std::vector<std::string>{"30"});
  EXPECT_EQ(values_of(conf, "HealthCheckTimeout"), std::vector<std::string>{"22"});
  EXPECT_EQ(values_of(conf, "HealthCheckNodeState"), std::vector<std::string>{"ANY"});
  // A site's own program (LBNL NHC) wins, with its interval.
  c.spec.extra_conf = "HealthCheckProgram=/usr/sbin/nhc\nHealthCheckInterval=300\n";
  const std::string site = build_slurm_conf(c, in);
  EXPECT_EQ(values_of(site, "HealthCheckProgram"), std::vector<std::string>{"/usr/sbin/nhc"});
  EXPECT_EQ(values_of(site, "HealthCheckInterval"), std::vector<std::string>{"300"});
}

TEST(NodeSetPod, MountsItsHealthChecksOptionallySoThatAHealthCheckRollsNoPod) {
  const api::NodeSet n = nodeset("gpu");
  auto pod = build_nodeset_pod(n, {controller()}, 0);
  ASSERT_TRUE(pod) << pod.error();
  const json* volume = named((*pod)["spec"]["volumes"], "health");
  ASSERT_NE(volume, nullptr);
  EXPECT_EQ((*volume)["configMap"]["name"], "gpu-health");
  EXPECT_EQ((*volume)["configMap"]["optional"], true);
  EXPECT_EQ((*volume)["configMap"]["defaultMode"], 0755);
  const json* mount = named((*pod)["spec"]["containers"][0]["volumeMounts"], "health");
  ASSERT_NE(mount, nullptr);
  EXPECT_EQ((*mount)["mountPath"], "/etc/tightrope/health");
}

TEST(SlurmConf, AUserMaxNodeCountReplacesTheOperatorsDefault) {
  api::Controller c = controller();
  EXPECT_EQ(values_of(build_slurm_conf(c, {}), "MaxNodeCount"), std::vector<std::string>{"1024"});
  c.spec.extra_conf = "MaxNodeCount=64\n";
  EXPECT_EQ(values_of(build_slurm_conf(c, {}), "MaxNodeCount"), std::vector<std::string>{"64"});
}

TEST(SlurmConf, MaxNodeCountGrowsWithTheNodeSetsInPowersOfTwo) {
  api::Controller c = controller();
  ControllerInputs in;
  in.nodesets = {nodeset("cpu"), nodeset("gpu")};
  EXPECT_EQ(max_node_count(in), 1024);
  in.nodesets[0].spec.replicas = 600;
  in.nodesets[1].spec.replicas = 400;  // 1,000 nodes want 2,000
  EXPECT_EQ(max_node_count(in), 2048);
  EXPECT_EQ(values_of(build_slurm_conf(c, in), "MaxNodeCount"), std::vector<std::string>{"2048"});
  // A DaemonSet-mode NodeSet counts the pods it has.
  in.nodesets[1].spec.replicas.reset();
  in.nodesets[1].status.replicas = 5000;
  EXPECT_EQ(max_node_count(in), 16384);
  // A NodeSet being deleted no longer counts.
  in.nodesets[1].metadata.deleting = true;
  EXPECT_EQ(max_node_count(in), 2048);
}

TEST(SlurmConf, ExtraConfIsAppendedAfterTheMarker) {
  api::Controller c = controller();
  EXPECT_EQ(build_slurm_conf(c, {}).find("### EXTRA CONFIG ###"), std::string::npos);
  c.spec.extra_conf = "PriorityType=priority/multifactor\n";
  const std::string conf = build_slurm_conf(c, {});
  const size_t marker = conf.find("\n### EXTRA CONFIG ###\n");
  ASSERT_NE(marker, std::string::npos) << conf;
  const size_t line = conf.find("PriorityType=priority/multifactor\n");
  ASSERT_NE(line, std::string::npos) << conf;
  EXPECT_GT(line, marker);
  EXPECT_EQ(conf.back(), '\n');
}

TEST(SlurmConf, MetricsEnabledWritesTheMetricsTypeLine) {
  api::Controller c = controller();
  EXPECT_TRUE(values_of(build_slurm_conf(c, {}), "MetricsType").empty());
  c.spec.metrics.enabled = true;
  EXPECT_EQ(values_of(build_slurm_conf(c, {}), "MetricsType"),
            std::vector<std::string>{"metrics/openmetrics"});
}

TEST(SlurmConf, EachNodeSetGetsANodeSetLineAndAPartitionOnlyWhenEnabled) {
  ControllerInputs in;
  in.nodesets = {nodeset("cpu"), nodeset("gpu-h100")};
  in.nodesets[1].spec.template_.spec["hostname"] = "gpu-";
  in.nodesets[1].spec.partition.enabled = true;
  in.nodesets[1].spec.partition.config = "MaxTime=60";
  const std::string conf = build_slurm_conf(controller(), in);
  EXPECT_EQ(values_of(conf, "NodeSet"), (std::vector<std::string>{"cpu", "gpu"}));
  EXPECT_EQ(values_of(conf, "PartitionName"), std::vector<std::string>{"gpu"});
  EXPECT_NE(conf.find("PartitionName=gpu Nodes=gpu MaxTime=60\n"), std::string::npos) << conf;
}

TEST(SlurmConf, AccountingRefPointsSlurmctldAtTheAccountingService) {
  api::Controller c = controller();
  EXPECT_EQ(values_of(build_slurm_conf(c, {}), "AccountingStorageType"),
            std::vector<std::string>{"accounting_storage/none"});
  c.spec.accounting_ref = api::LocalRef{"acct"};
  const std::string conf = build_slurm_conf(c, {});
  EXPECT_EQ(values_of(conf, "AccountingStorageHost"),
            std::vector<std::string>{"acct-accounting.slurm"});
  EXPECT_EQ(values_of(conf, "AccountingStoragePort"), std::vector<std::string>{"6819"});
}

TEST(SlurmConf, AnExternalAccountingIsReachedAtItsOwnHostAndPort) {
  api::Controller c = controller();
  c.spec.accounting_ref = api::LocalRef{"acct"};
  ControllerInputs in;
  in.accounting = accounting();
  in.accounting->spec.external = true;
  in.accounting->spec.external_config = {"slurmdbd.example.org", 7031};
  const std::string conf = build_slurm_conf(c, in);
  EXPECT_EQ(values_of(conf, "AccountingStorageHost"),
            std::vector<std::string>{"slurmdbd.example.org"});
  EXPECT_EQ(values_of(conf, "AccountingStoragePort"), std::vector<std::string>{"7031"});
}

// ---- check_controller_config.

TEST(CheckControllerConfig, AcceptsExtraConfThatLeavesTheOperatorsKeysAlone) {
  api::Controller c = controller();
  c.spec.extra_conf = "PriorityType=priority/multifactor\nSlurmctldParameters=cloud_dns\n";
  EXPECT_EQ(check_controller_config(c, {}), api::FieldErrors{});
}

TEST(CheckControllerConfig, ReportsAnExtraConfLineSettingClusterNameWithItsLineNumber) {
  api::Controller c = controller();
  c.spec.extra_conf = "PriorityType=priority/multifactor\nClusterName=other\n";
  const auto errors = check_controller_config(c, {});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.extraConf");
  EXPECT_NE(errors[0].message.find("line 2"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].message.find("ClusterName"), std::string::npos) << errors[0].message;
}

TEST(CheckControllerConfig, ReportsANodeSetRecordThatClashesWithANodeSetResource) {
  api::Controller c = controller();
  c.spec.extra_conf = "NodeSet=gpu Feature=fast\n";
  ControllerInputs in;
  in.nodesets = {nodeset("gpu")};
  const auto errors = check_controller_config(c, in);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.extraConf");
  EXPECT_NE(errors[0].message.find("NodeSet=gpu"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].message.find("line 1"), std::string::npos) << errors[0].message;
}

TEST(CheckControllerConfig, ReportsAConfigMapThatHoldsSlurmConf) {
  api::Controller c = controller();
  c.spec.config_file_refs = {{"extra"}};
  ControllerInputs in;
  in.config_maps["extra"] = {{"slurm.conf", "ClusterName=x\n"}};
  const auto errors = check_controller_config(c, in);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.configFileRefs[0]");
  EXPECT_NE(errors[0].message.find("slurm.conf"), std::string::npos) << errors[0].message;
}

TEST(CheckControllerConfig, ReportsTwoConfigMapsProvidingTheSameFile) {
  api::Controller c = controller();
  c.spec.config_file_refs = {{"gres-a"}, {"gres-b"}};
  ControllerInputs in;
  in.config_maps["gres-a"] = {{"gres.conf", "AutoDetect=nvml\n"}};
  in.config_maps["gres-b"] = {{"gres.conf", "AutoDetect=off\n"}};
  const auto errors = check_controller_config(c, in);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.configFileRefs[1]");
  EXPECT_NE(errors[0].message.find("gres.conf"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].message.find("gres-a"), std::string::npos) << errors[0].message;
}

// ---- cgroup.conf and the configuration hash.

TEST(ControllerConfigMap, HoldsTheDefaultCgroupConfUnlessAConfigMapProvidesOne) {
  api::Controller c = controller();
  ControllerInputs in;
  const json data = build_controller_config_map(c, in)["data"];
  ASSERT_TRUE(data.contains("cgroup.conf"));
  EXPECT_NE(data["cgroup.conf"].get<std::string>().find("CgroupPlugin=autodetect"),
            std::string::npos);
  c.spec.config_file_refs = {{"cgroup"}};
  in.config_maps["cgroup"] = {{"cgroup.conf", "CgroupPlugin=disabled\n"}};
  EXPECT_FALSE(build_controller_config_map(c, in)["data"].contains("cgroup.conf"));
  EXPECT_FALSE(build_cgroup_conf(in).has_value());
}

TEST(ControllerConfigHash, ChangesWhenSlurmConfChanges) {
  api::Controller c = controller();
  const std::string before = controller_config_hash(c, {});
  c.spec.extra_conf = "PriorityType=priority/multifactor\n";
  EXPECT_NE(controller_config_hash(c, {}), before);
}

TEST(ControllerConfigHash, ChangesWhenAReferencedConfigMapsDataChanges) {
  api::Controller c = controller();
  c.spec.config_file_refs = {{"gres"}};
  c.spec.prolog_script_refs = {{"prolog"}};
  ControllerInputs in;
  in.config_maps["gres"] = {{"gres.conf", "AutoDetect=nvml\n"}};
  in.config_maps["prolog"] = {{"check.sh", "#!/bin/sh\nexit 0\n"}};
  const std::string before = controller_config_hash(c, in);
  in.config_maps["gres"]["gres.conf"] = "AutoDetect=off\n";
  const std::string after_gres = controller_config_hash(c, in);
  EXPECT_NE(after_gres, before);
  in.config_maps["prolog"]["check.sh"] = "#!/bin/sh\nexit 1\n";
  EXPECT_NE(controller_config_hash(c, in), after_gres);
}

TEST(ControllerConfigHash, StaysWhenUnrelatedFieldsChange) {
  api::Controller c = controller();
  ControllerInputs in;
  in.slurm_key_hash = "a";
  const std::string before = controller_config_hash(c, in);
  c.spec.slurmctld = {{"resources", {{"requests", {{"cpu", "4"}}}}}};
  c.spec.template_.metadata.labels["team"] = "hpc";
  c.spec.template_.spec = {{"priorityClassName", "high"}};
  c.spec.service.spec = {{"type", "NodePort"}};
  c.spec.metrics.service_monitor.enabled = true;
  c.metadata.uid = "another-uid";
  in.slurm_key_hash = "b";
  in.jwt_key_hash = "c";
  EXPECT_EQ(controller_config_hash(c, in), before);
}

// ---- the slurmctld StatefulSet and Services.

TEST(ControllerStatefulSet, CarriesTheConfigHashAndNoReconfigureSidecarByDefault) {
  const api::Controller c = controller();
  const json sts = build_controller_statefulset(c, {});
  const json& annotations = sts["spec"]["template"]["metadata"]["annotations"];
  ASSERT_TRUE(annotations.contains(api::kAnnotationSlurmConfigHash));
  EXPECT_EQ(annotations[std::string(api::kAnnotationSlurmConfigHash)],
            controller_config_hash(c, {}));
  EXPECT_EQ(named(pod_spec(sts)["initContainers"], "reconfigure"), nullptr);
}

TEST(ControllerStatefulSet, InplaceReconfigurePutsNoConfigHashOnThePodsAndAddsTheSidecar) {
  api::Controller c = controller();
  c.spec.inplace_reconfigure = true;
  ControllerInputs in;
  in.slurm_key_hash = "slurm-key-hash";
  const json sts = build_controller_statefulset(c, in);
  const json& annotations = sts["spec"]["template"]["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kAnnotationSlurmConfigHash));
  EXPECT_EQ(annotations[std::string(api::kAnnotationSlurmKeyHash)], "slurm-key-hash");
  const json* sidecar = named(pod_spec(sts)["initContainers"], "reconfigure");
  ASSERT_NE(sidecar, nullptr);
  EXPECT_EQ((*sidecar)["restartPolicy"], "Always");  // a native sidecar, running alongside
  EXPECT_NE(named((*sidecar)["volumeMounts"], "slurm-etc"), nullptr);
}

TEST(ControllerStatefulSet, HighAvailabilityRunsOnePodPerControllerApartFromEachOther) {
  api::Controller c = controller();
  c.spec.ha.enabled = true;
  c.spec.ha.backups = 2;
  c.spec.persistence.existing_claim = "shared-state";
  const json sts = build_controller_statefulset(c, {});
  EXPECT_EQ(sts["spec"]["replicas"], 3);
  const json& rule = pod_spec(
      sts)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(rule["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(rule["labelSelector"]["matchLabels"], sts["spec"]["selector"]["matchLabels"]);
  // A standby answers /livez but not /readyz; it must stay Ready to keep its DNS name.
  EXPECT_EQ(pod_spec(sts)["containers"][0]["readinessProbe"]["httpGet"]["path"], "/livez");
  EXPECT_EQ(values_of(build_slurm_conf(c, {}), "SlurmctldHost"),
            (std::vector<std::string>{
                "slurm-controller-0(slurm-controller-0.slurm-controller-internal.slurm)",
                "slurm-controller-1(slurm-controller-1.slurm-controller-internal.slurm)",
                "slurm-controller-2(slurm-controller-2.slurm-controller-internal.slurm)"}));
}

TEST(ControllerStatefulSet, WithoutHighAvailabilityOnePodIsReadyOnReadyz) {
  const json sts = build_controller_statefulset(controller(), {});
  EXPECT_EQ(sts["spec"]["replicas"], 1);
  EXPECT_FALSE(pod_spec(sts).contains("affinity"));
  EXPECT_EQ(pod_spec(sts)["containers"][0]["readinessProbe"]["httpGet"]["path"], "/readyz");
}

TEST(ControllerService, UnderHighAvailabilitySelectsOnlyTheActiveController) {
  api::Controller c = controller();
  EXPECT_FALSE(
      build_controller_service(c)["spec"]["selector"].contains(api::kLabelControllerActive));
  c.spec.ha.enabled = true;
  const json selector = build_controller_service(c)["spec"]["selector"];
  EXPECT_EQ(selector[std::string(api::kLabelControllerActive)], "true");
  // The headless Service keeps every pod's DNS name, standbys included.
  const json headless = build_controller_headless_service(c)["spec"];
  EXPECT_FALSE(headless["selector"].contains(api::kLabelControllerActive));
  EXPECT_EQ(headless["publishNotReadyAddresses"], true);
}

TEST(ControllerStatefulSet, PersistenceDisabledKeepsStateInAnEmptyDir) {
  api::Controller c = controller();
  c.spec.persistence.enabled = false;
  const json sts = build_controller_statefulset(c, {});
  EXPECT_FALSE(sts["spec"].contains("volumeClaimTemplates"));
  const json* statesave = named(pod_spec(sts)["volumes"], "statesave");
  ASSERT_NE(statesave, nullptr);
  EXPECT_TRUE(statesave->contains("emptyDir"));
}

TEST(ControllerStatefulSet, PersistenceByDefaultClaimsAVolumePerPod) {
  const json sts = build_controller_statefulset(controller(), {});
  EXPECT_EQ(named(pod_spec(sts)["volumes"], "statesave"), nullptr);
  const json& claim = sts["spec"]["volumeClaimTemplates"][0];
  EXPECT_EQ(claim["metadata"]["name"], "statesave");
  EXPECT_EQ(claim["spec"]["resources"]["requests"]["storage"], "4Gi");
  EXPECT_NE(named(pod_spec(sts)["containers"][0]["volumeMounts"], "statesave"), nullptr);
}

TEST(ControllerStatefulSet, AnExistingClaimIsMountedInsteadOfClaimTemplates) {
  api::Controller c = controller();
  c.spec.persistence.existing_claim = "state";
  const json sts = build_controller_statefulset(c, {});
  EXPECT_FALSE(sts["spec"].contains("volumeClaimTemplates"));
  const json* statesave = named(pod_spec(sts)["volumes"], "statesave");
  ASSERT_NE(statesave, nullptr);
  EXPECT_EQ((*statesave)["persistentVolumeClaim"]["claimName"], "state");
}

TEST(ControllerObjects, AnExternalControllerGetsOnlyItsConfigMap) {
  api::Controller c = controller();
  c.spec.external = true;
  c.spec.external_config = {"slurmctld.example.org", 6817};
  c.spec.metrics.enabled = true;
  c.spec.metrics.service_monitor.enabled = true;
  const auto objects = build_controller_objects(c, {}, true);
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0]["kind"], "ConfigMap");
  EXPECT_EQ(values_of(objects[0]["data"]["slurm.conf"].get<std::string>(), "SlurmctldHost"),
            std::vector<std::string>{"slurmctld.example.org"});
  EXPECT_EQ(controller_conf_server(c), "slurmctld.example.org:6817");
}

TEST(ControllerObjects, AServiceMonitorOnlyWithMetricsServiceMonitorAndItsCrd) {
  for (const bool metrics : {false, true}) {
    for (const bool monitor : {false, true}) {
      for (const bool crd : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "metrics=" << metrics << " serviceMonitor=" << monitor << " crd=" << crd);
        api::Controller c = controller();
        c.spec.metrics.enabled = metrics;
        c.spec.metrics.service_monitor.enabled = monitor;
        const auto objects = build_controller_objects(c, {}, crd);
        const bool built = std::any_of(objects.begin(), objects.end(),
                                       [](const json& o) { return o["kind"] == "ServiceMonitor"; });
        EXPECT_EQ(built, metrics && monitor && crd);
      }
    }
  }
}

TEST(ControllerServiceMonitor, ScrapesTheFourSlurmctldEndpointsByDefault) {
  api::Controller c = controller();
  c.spec.metrics.service_monitor.interval = "30s";
  const json endpoints = build_controller_service_monitor(c)["spec"]["endpoints"];
  std::vector<std::string> paths;
  for (const auto& e : endpoints) {
    paths.push_back(e["path"]);
    EXPECT_EQ(e["port"], "slurmctld");
    EXPECT_EQ(e["interval"], "30s");
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"/metrics/jobs", "/metrics/nodes",
                                             "/metrics/partitions", "/metrics/scheduler"}));
}

// ---- merging a user's template over the operator's.

TEST(MergeOver, MergesContainersByNameWithTheUsersFieldsOverTheOperators) {
  const json base = {{"containers", json::array({{{"name", "slurmctld"},
                                                  {"image", "operator:1"},
                                                  {"ports", json::array({{{"name", "p"}}})}}})}};
  const json user = {{"containers", json::array({{{"name", "slurmctld"}, {"image", "user:2"}},
                                                 {{"name", "extra"}, {"image", "x"}}})}};
  const json merged = merge_over(base, user);
  ASSERT_EQ(merged["containers"].size(), 2u);
  EXPECT_EQ(merged["containers"][0]["image"], "user:2");
  EXPECT_EQ(merged["containers"][0]["ports"], base["containers"][0]["ports"]);
  EXPECT_EQ(merged["containers"][1]["name"], "extra");
}

TEST(MergeOver, MergesEnvAndVolumeMountsByName) {
  const json base = {
      {"env", json::array({{{"name", "A"}, {"value", "1"}}, {{"name", "B"}, {"value", "2"}}})},
      {"volumeMounts", json::array({{{"name", "etc"}, {"mountPath", "/etc/slurm"}}})}};
  const json user = {
      {"env", json::array({{{"name", "B"}, {"value", "user"}}, {{"name", "C"}, {"value", "3"}}})},
      {"volumeMounts", json::array({{{"name", "etc"}, {"readOnly", true}},
                                    {{"name", "data"}, {"mountPath", "/data"}}})}};
  const json merged = merge_over(base, user);
  EXPECT_EQ(merged["env"], json::parse(R"([{"name":"A","value":"1"},{"name":"B","value":"user"},
                                             {"name":"C","value":"3"}])"));
  EXPECT_EQ(merged["volumeMounts"],
            json::parse(R"([{"name":"etc","mountPath":"/etc/slurm","readOnly":true},
                            {"name":"data","mountPath":"/data"}])"));
}

TEST(MergeOver, AppendsTolerations) {
  const json base = {{"tolerations", json::array({{{"key", "a"}, {"operator", "Exists"}}})}};
  const json user = {{"tolerations", json::array({{{"key", "b"}, {"operator", "Exists"}}})}};
  EXPECT_EQ(merge_over(base, user)["tolerations"].size(), 2u);
}

TEST(MergeOver, TheUsersScalarsAndUnnamedListsWin) {
  const json base = {{"automountServiceAccountToken", false},
                     {"command", json::array({"a", "b"})},
                     {"securityContext", {{"runAsUser", 401}, {"runAsGroup", 401}}}};
  const json user = {{"automountServiceAccountToken", true},
                     {"command", json::array({"c"})},
                     {"securityContext", {{"runAsUser", 1000}}}};
  const json merged = merge_over(base, user);
  EXPECT_EQ(merged["automountServiceAccountToken"], true);
  EXPECT_EQ(merged["command"], json::array({"c"}));
  EXPECT_EQ(merged["securityContext"], json({{"runAsUser", 1000}, {"runAsGroup", 401}}));
}

TEST(PodTemplate, UserLabelsCannotOverrideTheSelectorLabels) {
  api::Controller c = controller();
  c.spec.template_.metadata.labels = {{std::string(api::kLabelName), "hijack"},
                                      {std::string(api::kLabelInstance), "hijack"},
                                      {"team", "hpc"}};
  const json sts = build_controller_statefulset(c, {});
  const json& labels = sts["spec"]["template"]["metadata"]["labels"];
  for (const auto& [key, value] : sts["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_EQ(labels[key], value) << key;
  }
  EXPECT_EQ(labels["team"], "hpc");
}

// ---- RestApi.

TEST(RestApiDeployment, ServesTheSlurmdbdEndpointsOnlyWithAnAccountingRef) {
  api::Controller c = controller();
  const auto args = [&] {
    return build_restapi_deployment(
        restapi(), {c, "", ""})["spec"]["template"]["spec"]["containers"][0]["args"];
  };
  EXPECT_EQ(args(), json::array({"-s", "openapi/slurmctld", "0.0.0.0:6820"}));
  c.spec.accounting_ref = api::LocalRef{"acct"};
  EXPECT_EQ(args(), json::array({"-s", "openapi/slurmctld,openapi/slurmdbd", "0.0.0.0:6820"}));
}

TEST(RestApiDeployment, RunsAsNobodyWithGroupAccessToItsRootOwnedFiles) {
  // Projected files are root's with the volume's mode (0600); fsGroup makes them readable to the
  // pod's group, as slurmrestd must not run as root nor as SlurmUser.
  const json pod = pod_spec(build_restapi_deployment(restapi(), {controller(), "", ""}));
  EXPECT_EQ(pod["securityContext"]["runAsUser"], kNobodyUid);
  EXPECT_EQ(pod["securityContext"]["fsGroup"], kNobodyUid);
}

TEST(RestApiDeployment, RollsWhenTheControllersSlurmConfChanges) {
  const json annotations = build_restapi_deployment(
      restapi(), {controller(), "conf-hash", ""})["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(annotations[std::string(api::kAnnotationSlurmConfigHash)], "conf-hash");
}

// ---- Accounting.

TEST(SlurmdbdConf, DbdHostIsTheStatefulSetsPodAndStoragePassComesFromTheInput) {
  const api::Accounting a = accounting();
  AccountingInputs in;
  in.storage_password = "s3cret";
  const std::string conf = build_slurmdbd_conf(a, in);
  EXPECT_EQ(values_of(conf, "DbdHost"), std::vector<std::string>{"acct-accounting-0"});
  EXPECT_EQ(values_of(conf, "StoragePass"), std::vector<std::string>{"s3cret"});
  EXPECT_EQ(values_of(conf, "StorageHost"), std::vector<std::string>{"mariadb"});
  EXPECT_EQ(values_of(conf, "StoragePort"), std::vector<std::string>{"3306"});
  EXPECT_EQ(values_of(conf, "StorageLoc"), std::vector<std::string>{"slurm_acct_db"});
}

TEST(SlurmdbdConf, ExtraConfIsAppendedAfterTheMarker) {
  api::Accounting a = accounting();
  EXPECT_EQ(build_slurmdbd_conf(a, {}).find("### EXTRA CONFIG ###"), std::string::npos);
  a.spec.extra_conf = "PurgeJobAfter=12month";
  const std::string conf = build_slurmdbd_conf(a, {});
  const size_t marker = conf.find("\n### EXTRA CONFIG ###\n");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_GT(conf.find("PurgeJobAfter=12month\n"), marker);
}

TEST(AccountingStatefulSet, SlurmdbdReadsAPrivateCopyOfItsConfigurationOwnedBySlurm) {
  // slurmdbd exits unless slurmdbd.conf is 0600 and SlurmUser's; a Secret volume is root's.
  const json sts = build_accounting_statefulset(accounting(), {});
  const json& pod = pod_spec(sts);
  EXPECT_EQ(pod["securityContext"]["runAsUser"], kSlurmUid);
  const json* init = named(pod["initContainers"], "initconf");
  ASSERT_NE(init, nullptr);
  EXPECT_NE((*init)["command"].back().get<std::string>().find("chmod 600"), std::string::npos);
  const json* etc = named(pod["volumes"], "slurm-etc");
  ASSERT_NE(etc, nullptr);
  EXPECT_TRUE(etc->contains("emptyDir"));
  const json* mount = named(pod["containers"][0]["volumeMounts"], "slurm-etc");
  ASSERT_NE(mount, nullptr);
  EXPECT_EQ((*mount)["mountPath"], "/etc/slurm");
}

TEST(AccountingObjects, AnExternalAccountingGetsNothing) {
  api::Accounting a = accounting();
  EXPECT_EQ(build_accounting_objects(a, {}).size(), 3u);
  a.spec.external = true;
  a.spec.external_config = {"slurmdbd.example.org", 6819};
  EXPECT_TRUE(build_accounting_objects(a, {}).empty());
}

// ---- Token.

TEST(TokenSecret, IsImmutableExactlyWhenRefreshIsOff) {
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  const json refreshed = build_token_secret(token(true), "jwt", now, now + std::chrono::hours(1));
  EXPECT_FALSE(refreshed.contains("immutable"));
  const json fixed = build_token_secret(token(false), "jwt", now, now + std::chrono::hours(1));
  EXPECT_EQ(fixed["immutable"], true);
  EXPECT_EQ(fixed["metadata"]["name"], "tok-jwt-slurm");
  EXPECT_EQ(fixed["stringData"]["SLURM_JWT"], "jwt");
}

TEST(TokenRefresh, IsDueAtEightyPercentOfTheLifetime) {
  const auto issued = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  EXPECT_EQ(token_refresh_at(issued, std::chrono::seconds(3600)),
            issued + std::chrono::seconds(2880));
  EXPECT_EQ(token_refresh_at(issued, std::chrono::minutes(15)), issued + std::chrono::minutes(12));
}

}  // namespace
}  // namespace tightrope::op::build
