#include "api/validation.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/defaults.hpp"
#include "support.hpp"

namespace tightrope::api {
namespace {

std::vector<std::string> fields(const FieldErrors& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) {
    out.push_back(e.field);
  }
  return out;
}

using Fields = std::vector<std::string>;

// The errors name exactly these fields, in this order.
MATCHER_P(NamesFields, expected, "") {
  *result_listener << "errors: " << join(arg);
  return fields(arg) == Fields(expected);
}

KeyRef ref(const std::string& name, const std::string& key) {
  return {name, key, std::nullopt};
}

Controller valid_controller() {
  Controller c;
  c.metadata.name = "slurm";
  c.metadata.namespace_name = "slurm";
  c.spec.slurm_key_ref = ref("slurm-auth-slurm", "slurm.key");
  c.spec.jwt_key_ref = ref("slurm-auth-jwths256", "jwt_hs256.key");
  apply_defaults(c);
  return c;
}

NodeSet valid_nodeset() {
  NodeSet n;
  n.metadata.name = "gpu";
  n.metadata.namespace_name = "slurm";
  n.spec.controller_ref.name = "slurm";
  apply_defaults(n);
  return n;
}

LoginSet valid_loginset() {
  LoginSet l;
  l.metadata.name = "login";
  l.metadata.namespace_name = "slurm";
  l.spec.controller_ref.name = "slurm";
  l.spec.sssd_conf_ref = ref("sssd", "sssd.conf");
  apply_defaults(l);
  return l;
}

RestApi valid_restapi() {
  RestApi r;
  r.metadata.name = "slurm";
  r.metadata.namespace_name = "slurm";
  r.spec.controller_ref.name = "slurm";
  apply_defaults(r);
  return r;
}

Accounting valid_accounting() {
  Accounting a;
  a.metadata.name = "slurm";
  a.metadata.namespace_name = "slurm";
  a.spec.slurm_key_ref = ref("slurm-auth-slurm", "slurm.key");
  a.spec.jwt_key_ref = ref("slurm-auth-jwths256", "jwt_hs256.key");
  a.spec.storage_config.host = "mariadb";
  a.spec.storage_config.password_key_ref = ref("mariadb", "password");
  apply_defaults(a);
  return a;
}

Token valid_token() {
  Token t;
  t.metadata.name = "token";
  t.metadata.namespace_name = "slurm";
  t.spec.username = "slurm";
  t.spec.jwt_key_ref = ref("slurm-auth-jwths256", "jwt_hs256.key");
  apply_defaults(t);
  return t;
}

TEST(Validate, ValidObjectsHaveNoErrors) {
  EXPECT_THAT(validate(valid_controller()), NamesFields(Fields{}));
  EXPECT_THAT(validate(valid_nodeset()), NamesFields(Fields{}));
  EXPECT_THAT(validate(valid_loginset()), NamesFields(Fields{}));
  EXPECT_THAT(validate(valid_restapi()), NamesFields(Fields{}));
  EXPECT_THAT(validate(valid_accounting()), NamesFields(Fields{}));
  EXPECT_THAT(validate(valid_token()), NamesFields(Fields{}));
}

// ---- Controller.

TEST(ValidateController, ClusterNameIsAtMostFortyCharacters) {
  auto c = valid_controller();
  c.spec.cluster_name = std::string(41, 'a');
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.clusterName"}));
  c.spec.cluster_name = std::string(40, 'a');
  EXPECT_THAT(validate(c), NamesFields(Fields{}));
}

TEST(ValidateController, TheDefaultClusterNameCountsToo) {
  auto c = valid_controller();
  c.metadata.namespace_name = std::string(30, 'n');
  c.metadata.name = std::string(10, 'c');  // "nnn..._ccc..." is 41 characters
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.clusterName"}));
}

TEST(ValidateController, ClusterNameHoldsWhatSlurmConfCanRead) {
  auto c = valid_controller();
  for (const char* bad : {"prod east", "prod#east", "prod=east"}) {
    c.spec.cluster_name = bad;
    EXPECT_THAT(validate(c), NamesFields(Fields{"spec.clusterName"})) << bad;
  }
  for (const char* good : {"Prod_east-2", "prod.east"}) {
    c.spec.cluster_name = good;
    EXPECT_THAT(validate(c), NamesFields(Fields{})) << good;
  }
}

TEST(ValidateController, KeysAreRequiredUnlessExternal) {
  Controller c;
  c.metadata = valid_controller().metadata;
  apply_defaults(c);
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.slurmKeyRef.name", "spec.slurmKeyRef.key",
                                              "spec.jwtKeyRef"}));
}

TEST(ValidateController, TheDeprecatedJwtRefIsCheckedUnderItsOwnName) {
  auto c = valid_controller();
  c.spec.jwt_key_ref.reset();
  c.spec.jwt_hs256_key_ref = ref("slurm-auth-jwths256", "");
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.jwtHs256KeyRef.key"}));
}

TEST(ValidateController, ExternalNeedsAHostAndPortAndNoKeys) {
  Controller c;
  c.metadata = valid_controller().metadata;
  c.spec.external = true;
  apply_defaults(c);
  EXPECT_THAT(validate(c),
              NamesFields(Fields{"spec.externalConfig.host", "spec.externalConfig.port"}));
  c.spec.external_config = {"slurmctld.example.org", 70000};
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.externalConfig.port"}));
  c.spec.external_config.port = 6817;
  EXPECT_THAT(validate(c), NamesFields(Fields{}));
}

TEST(ValidateController, HaNeedsBackupsAndASharedExistingClaim) {
  auto c = valid_controller();
  c.spec.ha.enabled = true;
  c.spec.ha.backups = 0;
  c.spec.persistence.enabled = false;
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.ha.backups", "spec.persistence.enabled",
                                              "spec.persistence.existingClaim"}));
  c.spec.ha.backups = 1;
  c.spec.persistence.enabled = true;
  c.spec.persistence.existing_claim = "slurm-state";
  EXPECT_THAT(validate(c), NamesFields(Fields{}));
}

TEST(ValidateController, ReferencesNeedNames) {
  auto c = valid_controller();
  c.spec.jwks_key_ref = ref("", "jwks.json");
  c.spec.accounting_ref = LocalRef{};
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.jwksKeyRef.name", "spec.accountingRef.name"}));
}

TEST(ValidateController, ServicePortsArePortNumbers) {
  auto c = valid_controller();
  c.spec.service.port = 65536;
  c.spec.service.node_port = -1;
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.service.port", "spec.service.nodePort"}));
}

TEST(ValidateController, MetricsEndpointsAreAbsolutePaths) {
  auto c = valid_controller();
  c.spec.metrics.service_monitor.endpoints = {{"/metrics/nodes", "", ""}, {"metrics", "", ""}};
  EXPECT_THAT(validate(c), NamesFields(Fields{"spec.metrics.serviceMonitor.endpoints[1].path"}));
}

TEST(ValidateControllerUpdate, ClusterNameCannotChange) {
  const auto old = valid_controller();
  auto c = old;
  c.spec.cluster_name = "other";
  EXPECT_THAT(validate_update(old, c), NamesFields(Fields{"spec.clusterName"}));
}

TEST(ValidateControllerUpdate, SpellingOutTheDefaultClusterNameIsNoChange) {
  const auto old = valid_controller();
  auto c = old;
  c.spec.cluster_name = "slurm_slurm";
  EXPECT_THAT(validate_update(old, c), NamesFields(Fields{}));
}

TEST(ValidateControllerUpdate, KeysAndPersistenceCannotChange) {
  auto old = valid_controller();
  old.spec.persistence.existing_claim = "a";
  auto c = old;
  c.spec.slurm_key_ref.key = "other.key";
  c.spec.jwt_key_ref->name = "other";
  c.spec.persistence.enabled = false;
  c.spec.persistence.existing_claim = "b";
  EXPECT_THAT(validate_update(old, c),
              NamesFields(Fields{"spec.slurmKeyRef", "spec.jwtKeyRef", "spec.persistence.enabled",
                                 "spec.persistence.existingClaim"}));
}

TEST(ValidateControllerUpdate, MovingFromTheDeprecatedJwtRefToTheNewOneIsNoChange) {
  auto old = valid_controller();
  old.spec.jwt_hs256_key_ref = old.spec.jwt_key_ref;
  old.spec.jwt_key_ref.reset();
  const auto c = valid_controller();
  EXPECT_THAT(validate_update(old, c), NamesFields(Fields{}));
}

// ---- NodeSet.

TEST(ValidateNodeSet, NeedsAControllerInItsOwnNamespace) {
  auto n = valid_nodeset();
  n.spec.controller_ref = {"", "other"};
  EXPECT_THAT(validate(n),
              NamesFields(Fields{"spec.controllerRef.name", "spec.controllerRef.namespace"}));
  n.spec.controller_ref = {"slurm", "slurm"};
  EXPECT_THAT(validate(n), NamesFields(Fields{}));
}

TEST(ValidateNodeSet, ChecksEnumsAndRanges) {
  auto n = valid_nodeset();
  n.spec.replicas = -1;
  n.spec.scaling_mode = "Deployment";
  n.spec.update_strategy.type = "Recreate";
  n.spec.persistent_volume_claim_retention_policy = {"Keep", "Drop"};
  n.spec.ordinal_padding = 11;
  n.spec.revision_history_limit = -1;
  n.spec.min_ready_seconds = -1;
  n.spec.prune_slurm_node_records = "Always";
  EXPECT_THAT(validate(n),
              NamesFields(Fields{"spec.replicas", "spec.scalingMode", "spec.updateStrategy.type",
                                 "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
                                 "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
                                 "spec.ordinalPadding", "spec.revisionHistoryLimit",
                                 "spec.minReadySeconds", "spec.pruneSlurmNodeRecords"}));
}

TEST(ValidateNodeSet, MaxUnavailableIsAPositiveCountOrPercentage) {
  for (const nlohmann::json& bad :
       {nlohmann::json(0), nlohmann::json(-1), nlohmann::json("0%"), nlohmann::json("25"),
        nlohmann::json("%"), nlohmann::json("x%"), nlohmann::json(true),
        nlohmann::json("99999999999999999999999%")}) {
    auto n = valid_nodeset();
    n.spec.update_strategy.max_unavailable = bad;
    EXPECT_THAT(validate(n),
                NamesFields(Fields{"spec.updateStrategy.rollingUpdate.maxUnavailable"}))
        << bad.dump();
  }
  for (const nlohmann::json& good : {nlohmann::json(1), nlohmann::json("100%")}) {
    auto n = valid_nodeset();
    n.spec.update_strategy.max_unavailable = good;
    EXPECT_THAT(validate(n), NamesFields(Fields{})) << good.dump();
  }
}

TEST(ValidateNodeSet, AScheduledUpdateHasAStartAndLastsAtLeastAMinute) {
  auto n = valid_nodeset();
  n.spec.update_strategy.type = "ScheduledUpdate";
  EXPECT_THAT(validate(n), NamesFields(Fields{"spec.updateStrategy.scheduledUpdate.startTime"}));
  n.spec.update_strategy.scheduled_update.start_time = "2026-12-24T02:00:00Z";
  n.spec.update_strategy.scheduled_update.duration = "30s";
  EXPECT_THAT(validate(n), NamesFields(Fields{"spec.updateStrategy.scheduledUpdate.duration"}));
  n.spec.update_strategy.scheduled_update.duration = "soon";
  EXPECT_THAT(validate(n), NamesFields(Fields{"spec.updateStrategy.scheduledUpdate.duration"}));
  n.spec.update_strategy.scheduled_update.duration = "1m";
  EXPECT_THAT(validate(n), NamesFields(Fields{}));
}

TEST(ValidateNodeSet, PartitionConfigIsOneLine) {
  auto n = valid_nodeset();
  n.spec.partition = {true, "MaxTime=1:00:00\nDefault=YES"};
  EXPECT_THAT(validate(n), NamesFields(Fields{"spec.partition.config"}));
}

TEST(ValidateNodeSet, ExtraConfIsKeyValueWordsWithValues) {
  auto n = valid_nodeset();
  n.spec.extra_conf = "Weight=10 Features=gpu";
  EXPECT_THAT(validate(n), NamesFields(Fields{}));
  for (const char* bad : {"Topology= Weight=1", "Weight", "=5"}) {
    n.spec.extra_conf = bad;
    EXPECT_THAT(validate(n), NamesFields(Fields{"spec.extraConf"})) << bad;
  }
}

TEST(ValidateNodeSet, SshNeedsAnSssdConf) {
  auto n = valid_nodeset();
  n.spec.ssh.enabled = true;
  EXPECT_THAT(validate(n),
              NamesFields(Fields{"spec.ssh.sssdConfRef.name", "spec.ssh.sssdConfRef.key"}));
}

TEST(ValidateNodeSet, TheTemplateHostnameIsADnsLabelWithAnOptionalTrailingDash) {
  auto n = valid_nodeset();
  for (const char* good : {"gpu-", "gpu", "a100-node-"}) {
    n.spec.template_.spec["hostname"] = good;
    EXPECT_THAT(validate(n), NamesFields(Fields{})) << good;
  }
  for (const char* bad : {"GPU-", "gpu_", "-gpu", "-", ""}) {
    n.spec.template_.spec["hostname"] = bad;
    EXPECT_THAT(validate(n), NamesFields(Fields{"spec.template.spec.hostname"})) << bad;
  }
  n.spec.template_.spec["hostname"] = 7;
  EXPECT_THAT(validate(n), NamesFields(Fields{"spec.template.spec.hostname"}));
}

TEST(ValidateNodeSetUpdate, ControllerRefAndVolumeClaimTemplatesCannotChange) {
  const auto old = valid_nodeset();
  auto n = old;
  n.spec.controller_ref.name = "other";
  n.spec.volume_claim_templates = nlohmann::json::array({{{"metadata", {{"name", "x"}}}}});
  EXPECT_THAT(validate_update(old, n),
              NamesFields(Fields{"spec.controllerRef", "spec.volumeClaimTemplates"}));
}

TEST(ValidateNodeSetUpdate, ScalingIsAllowed) {
  const auto old = valid_nodeset();
  auto n = old;
  n.spec.replicas = 10;
  EXPECT_THAT(validate_update(old, n), NamesFields(Fields{}));
}

// ---- LoginSet, RestApi.

TEST(ValidateLoginSet, NeedsAControllerAndAnSssdConf) {
  LoginSet l;
  apply_defaults(l);
  l.spec.replicas = -2;
  l.spec.service.port = 70000;
  EXPECT_THAT(validate(l), NamesFields(Fields{"spec.controllerRef.name", "spec.replicas",
                                              "spec.sssdConfRef.name", "spec.sssdConfRef.key",
                                              "spec.service.port"}));
}

TEST(ValidateLoginSetUpdate, ControllerRefCannotChange) {
  const auto old = valid_loginset();
  auto l = old;
  l.spec.controller_ref.name = "other";
  EXPECT_THAT(validate_update(old, l), NamesFields(Fields{"spec.controllerRef"}));
}

TEST(ValidateRestApi, NeedsAControllerAndSaneNumbers) {
  RestApi r;
  apply_defaults(r);
  r.spec.replicas = -1;
  r.spec.service.node_port = 65536;
  EXPECT_THAT(validate(r), NamesFields(Fields{"spec.controllerRef.name", "spec.replicas",
                                              "spec.service.nodePort"}));
}

TEST(ValidateRestApiUpdate, ControllerRefMayChangeAsSlinkysMay) {
  const auto old = valid_restapi();
  auto r = old;
  r.spec.controller_ref.name = "other";
  EXPECT_THAT(validate_update(old, r), NamesFields(Fields{}));
}

// ---- Accounting.

TEST(ValidateAccounting, NeedsKeysAndADatabase) {
  Accounting a;
  apply_defaults(a);
  a.spec.storage_config.port = 0;
  EXPECT_THAT(validate(a),
              NamesFields(Fields{"spec.slurmKeyRef.name", "spec.slurmKeyRef.key", "spec.jwtKeyRef",
                                 "spec.storageConfig.host", "spec.storageConfig.port",
                                 "spec.storageConfig.passwordKeyRef.name",
                                 "spec.storageConfig.passwordKeyRef.key"}));
}

TEST(ValidateAccounting, ExternalNeedsOnlyWhereSlurmdbdIs) {
  Accounting a;
  a.spec.external = true;
  apply_defaults(a);
  EXPECT_THAT(validate(a),
              NamesFields(Fields{"spec.externalConfig.host", "spec.externalConfig.port"}));
  a.spec.external_config = {"slurmdbd.example.org", 6819};
  EXPECT_THAT(validate(a), NamesFields(Fields{}));
}

TEST(ValidateAccounting, ServicePortsArePortNumbers) {
  auto a = valid_accounting();
  a.spec.service.port = -5;
  EXPECT_THAT(validate(a), NamesFields(Fields{"spec.service.port"}));
}

TEST(ValidateAccountingUpdate, TheJwtKeyCannotChange) {
  const auto old = valid_accounting();
  auto a = old;
  a.spec.jwt_key_ref->key = "other.key";
  EXPECT_THAT(validate_update(old, a), NamesFields(Fields{"spec.jwtKeyRef"}));
}

// ---- Token.

TEST(ValidateToken, NeedsAUserAKeyAndALifetimeAboveZero) {
  Token t;
  apply_defaults(t);
  t.spec.lifetime = "0s";
  EXPECT_THAT(validate(t), NamesFields(Fields{"spec.username", "spec.jwtKeyRef", "spec.lifetime"}));
  auto short_lived = valid_token();
  short_lived.spec.lifetime = "30s";
  EXPECT_THAT(validate(short_lived), NamesFields(Fields{}));
}

TEST(ValidateToken, ALifetimeThatIsNotADurationIsRefused) {
  auto t = valid_token();
  t.spec.lifetime = "one hour";
  EXPECT_THAT(validate(t), NamesFields(Fields{"spec.lifetime"}));
  t.spec.lifetime = "24h";
  EXPECT_THAT(validate(t), NamesFields(Fields{}));
}

TEST(ValidateTokenUpdate, TheJwtKeyCannotChangeButTheLifetimeCan) {
  const auto old = valid_token();
  auto t = old;
  t.spec.lifetime = "1h";
  EXPECT_THAT(validate_update(old, t), NamesFields(Fields{}));
  t.spec.jwt_key_ref->name = "other";
  EXPECT_THAT(validate_update(old, t), NamesFields(Fields{"spec.jwtKeyRef"}));
}

// ---- HealthCheck.

HealthCheck valid_health_check() {
  HealthCheck h;
  h.metadata.name = "gpu-workers";
  h.metadata.namespace_name = "slurm";
  apply_defaults(h);
  return h;
}

TEST(ValidateHealthCheck, TheDefaultsAreValid) {
  EXPECT_THAT(validate(valid_health_check()), NamesFields(Fields{}));
}

TEST(ValidateHealthCheck, SelectorTermsNeedAKeyAKnownOperatorAndValuesWhereTheyTakeThem) {
  auto h = valid_health_check();
  h.spec.node_set_selector.match_expressions = {
      {"", "In", {"a"}}, {"tier", "Near", {}}, {"tier", "NotIn", {}}, {"tier", "Exists", {"x"}}};
  EXPECT_THAT(validate(h), NamesFields(Fields{"spec.nodeSetSelector.matchExpressions[0].key",
                                              "spec.nodeSetSelector.matchExpressions[1].operator",
                                              "spec.nodeSetSelector.matchExpressions[2].values",
                                              "spec.nodeSetSelector.matchExpressions[3].values"}));
}

TEST(ValidateHealthCheck, ATimeoutMustEndBeforeTheNextRunAndChecksMustBeKnown) {
  auto h = valid_health_check();
  h.spec.passive.interval_seconds = 5;
  h.spec.passive.timeout_seconds = 5;
  h.spec.passive.checks = {"gpus", "ecc"};
  h.spec.passive.mounts = {"home", "/scratch"};
  h.spec.passive.scripts = LocalRef{};
  EXPECT_THAT(validate(h),
              NamesFields(Fields{"spec.passive.intervalSeconds", "spec.passive.timeoutSeconds",
                                 "spec.passive.checks[1]", "spec.passive.mounts[0]",
                                 "spec.passive.scripts.configMapRef.name"}));
  h = valid_health_check();
  h.spec.passive.timeout_seconds = h.spec.passive.interval_seconds;
  EXPECT_THAT(validate(h), NamesFields(Fields{"spec.passive.timeoutSeconds"}));
}

TEST(ValidateHealthCheck, TheBudgetIsACountOrAPercentageAboveZero) {
  auto h = valid_health_check();
  for (const nlohmann::json& ok : {nlohmann::json(1), nlohmann::json("10%")}) {
    h.spec.remediation.max_unhealthy = ok;
    EXPECT_THAT(validate(h), NamesFields(Fields{})) << ok;
  }
  for (const nlohmann::json& bad :
       {nlohmann::json(0), nlohmann::json("0%"), nlohmann::json("ten"), nlohmann::json(true)}) {
    h.spec.remediation.max_unhealthy = bad;
    EXPECT_THAT(validate(h), NamesFields(Fields{"spec.remediation.maxUnhealthy"})) << bad;
  }
  h = valid_health_check();
  h.spec.remediation.quarantine_after = -1;
  h.spec.remediation.window_seconds = 30;
  EXPECT_THAT(validate(h), NamesFields(Fields{"spec.remediation.quarantineAfter",
                                              "spec.remediation.windowSeconds"}));
}

TEST(ValidateHealthCheck, ActiveChecksAreKnownWithTimesInRangeAndFloorsNotNegative) {
  auto h = valid_health_check();
  h.spec.active.emplace();
  apply_defaults(h);
  EXPECT_THAT(validate(h), NamesFields(Fields{})) << "the defaults are valid";
  EXPECT_EQ(h.spec.active->checks.size(), 3U);
  h.spec.active->interval_seconds = 60;
  h.spec.active->timeout_seconds = 5;
  h.spec.active->checks = {"cpu", "hpl"};
  h.spec.active->max_concurrent = "0%";
  h.spec.active->min_memory_bandwidth_mbps = -1;
  h.spec.active->nccl_tests = "all_reduce_perf";
  EXPECT_THAT(validate(h),
              NamesFields(Fields{"spec.active.intervalSeconds", "spec.active.timeoutSeconds",
                                 "spec.active.checks[1]", "spec.active.maxConcurrent",
                                 "spec.active.minMemoryBandwidthMBps", "spec.active.ncclTests"}));
}

TEST(ValidateHealthCheck, TheDcgmHostIsAHostAndPortNeverAnOption) {
  auto h = valid_health_check();
  h.spec.passive.dcgm_host = "nvidia-dcgm.gpu-operator.svc:5555";
  EXPECT_THAT(validate(h), NamesFields(Fields{}));
  h.spec.passive.dcgm_host = "[fd00::1]:5555";
  EXPECT_THAT(validate(h), NamesFields(Fields{}));
  for (const char* bad : {"-j", "host; reboot", "a b"}) {
    h.spec.passive.dcgm_host = bad;
    EXPECT_THAT(validate(h), NamesFields(Fields{"spec.passive.dcgmHost"})) << bad;
  }
}

TEST(ValidateHealthCheck, SignalsNameNodeConditionsOtherThanReadyAndDeviceTaintKeys) {
  auto h = valid_health_check();
  h.spec.signals.node_conditions = {"GpuXidError", "Ready", ""};
  h.spec.signals.device_taints = {"*",    "gpu.example.com/xid",  "xid",       "bad key",
                                  "/xid", "gpu..example.com/xid", "example/-x"};
  EXPECT_THAT(validate(h),
              NamesFields(Fields{"spec.signals.nodeConditions[1]", "spec.signals.nodeConditions[2]",
                                 "spec.signals.deviceTaints[3]", "spec.signals.deviceTaints[4]",
                                 "spec.signals.deviceTaints[5]", "spec.signals.deviceTaints[6]"}));
}

LabelSelector one_term(LabelSelector::Requirement term) {
  LabelSelector s;
  s.match_expressions = {std::move(term)};
  return s;
}

TEST(LabelSelector, MatchesEveryTermAndAnEmptySelectorMatchesAll) {
  const StringMap gpu = {{"app.kubernetes.io/instance", "slurm-worker-gpu"}, {"tier", "gpu"}};
  EXPECT_TRUE(LabelSelector{}.matches(gpu));
  EXPECT_TRUE(LabelSelector{}.matches({}));
  LabelSelector s;
  s.match_labels = {{"tier", "gpu"}};
  EXPECT_TRUE(s.matches(gpu));
  EXPECT_FALSE(s.matches({{"tier", "cpu"}}));
  s.match_expressions = {{"app.kubernetes.io/instance", "In", {"slurm-worker-gpu", "other"}}};
  EXPECT_TRUE(s.matches(gpu));
  s.match_expressions = {{"app.kubernetes.io/instance", "NotIn", {"slurm-worker-gpu"}}};
  EXPECT_FALSE(s.matches(gpu));
  EXPECT_TRUE(one_term({"rack", "NotIn", {"r1"}}).matches(gpu));
  EXPECT_TRUE(one_term({"tier", "Exists", {}}).matches(gpu));
  EXPECT_FALSE(one_term({"rack", "Exists", {}}).matches(gpu));
  EXPECT_TRUE(one_term({"rack", "DoesNotExist", {}}).matches(gpu));
  EXPECT_FALSE(one_term({"tier", "Near", {}}).matches(gpu));
}

}  // namespace
}  // namespace tightrope::api
