#include "api/defaults.hpp"

#include <gtest/gtest.h>

#include "schema_walker.hpp"
#include "support.hpp"

namespace tightrope::api {
namespace {

using nlohmann::json;
using std::chrono::seconds;

TEST(Defaults, ControllerPersistsStateAndHasOneBackup) {
  Controller c;
  c.spec.ha.backups = 0;
  apply_defaults(c);
  EXPECT_EQ(c.spec.persistence.enabled, true);
  EXPECT_EQ(c.spec.ha.backups, 1);
}

TEST(Defaults, ControllerKeepsWhatIsSet) {
  Controller c;
  c.spec.persistence.enabled = false;
  c.spec.ha.backups = 3;
  apply_defaults(c);
  EXPECT_EQ(c.spec.persistence.enabled, false);
  EXPECT_EQ(c.spec.ha.backups, 3);
}

TEST(Defaults, ControllerClusterNameIsNamespaceUnderscoreName) {
  Controller c;
  c.metadata.name = "slurm";
  c.metadata.namespace_name = "hpc";
  EXPECT_EQ(c.cluster_name(), "hpc_slurm");
  c.spec.cluster_name = "prod";
  EXPECT_EQ(c.cluster_name(), "prod");
}

TEST(Defaults, NodeSetGetsSlinkysDefaults) {
  NodeSet n;
  apply_defaults(n);
  const NodeSetSpec& s = n.spec;
  EXPECT_EQ(s.replicas, 1);
  EXPECT_EQ(s.scaling_mode, "StatefulSet");
  EXPECT_EQ(s.update_strategy.type, "RollingUpdate");
  EXPECT_EQ(s.update_strategy.max_unavailable, "25%");
  EXPECT_EQ(s.update_strategy.scheduled_update.duration, "30m");
  EXPECT_EQ(s.persistent_volume_claim_retention_policy.when_deleted, "Retain");
  EXPECT_EQ(s.persistent_volume_claim_retention_policy.when_scaled, "Retain");
  EXPECT_EQ(s.workload_disruption_protection, true);
  EXPECT_EQ(s.prune_slurm_node_records, "Never");
}

TEST(Defaults, NodeSetKeepsZeroReplicasAndAnIntegerMaxUnavailable) {
  NodeSet n;
  n.spec.replicas = 0;
  n.spec.update_strategy.max_unavailable = 2;
  n.spec.workload_disruption_protection = false;
  apply_defaults(n);
  EXPECT_EQ(n.spec.replicas, 0);
  EXPECT_EQ(n.spec.update_strategy.max_unavailable, 2);
  EXPECT_EQ(n.spec.workload_disruption_protection, false);
}

TEST(Defaults, NodeSetSlurmNameIsTheHostnameWithoutItsDash) {
  NodeSet n;
  n.metadata.name = "gpu-pool";
  EXPECT_EQ(n.slurm_name(), "gpu-pool");
  n.spec.template_.spec["hostname"] = "gpu-";
  EXPECT_EQ(n.slurm_name(), "gpu");
}

TEST(Defaults, LoginSetAndRestApiRunOneReplica) {
  LoginSet l;
  apply_defaults(l);
  EXPECT_EQ(l.spec.replicas, 1);
  RestApi r;
  apply_defaults(r);
  EXPECT_EQ(r.spec.replicas, 1);
}

TEST(Defaults, AccountingUsesMysqlsPortAndSlurmsDatabase) {
  Accounting a;
  apply_defaults(a);
  EXPECT_EQ(a.spec.storage_config.port, 3306);
  EXPECT_EQ(a.spec.storage_config.database, "slurm_acct_db");
}

TEST(Defaults, TokenLivesFifteenMinutesRefreshesAndNamesItsSecret) {
  Token t;
  t.metadata.name = "exporter";
  t.spec.username = "slurm";
  apply_defaults(t);
  EXPECT_EQ(t.spec.lifetime, "15m");
  EXPECT_EQ(t.spec.refresh, true);
  ASSERT_TRUE(t.spec.secret_ref);
  EXPECT_EQ(t.spec.secret_ref->name, "exporter-jwt-slurm");
  EXPECT_EQ(t.spec.secret_ref->key, "SLURM_JWT");
}

TEST(Defaults, TokenFillsOnlyTheMissingHalfOfItsSecretRef) {
  Token t;
  t.metadata.name = "exporter";
  t.spec.username = "slurm";
  t.spec.secret_ref = KeyRef{"mine", "", std::nullopt};
  apply_defaults(t);
  EXPECT_EQ(t.spec.secret_ref->name, "mine");
  EXPECT_EQ(t.spec.secret_ref->key, "SLURM_JWT");
}

// The API server applies the CRD's defaults; the operator applies apply_defaults to objects
// written before a default existed. Both must give the same object.
TEST(Defaults, TheCrdsDefaultsAreTheCodesDefaults) {
  const std::map<std::string, json> minimal = {
      {"Controller", {{"slurmKeyRef", {{"name", "k"}, {"key", "k"}}}}},
      {"NodeSet", {{"controllerRef", {{"name", "slurm"}}}}},
      {"LoginSet", {{"controllerRef", {{"name", "slurm"}}}}},
      {"RestApi", {{"controllerRef", {{"name", "slurm"}}}}},
      {"Accounting", {{"storageConfig", {{"host", "db"}}}}},
      // The Secret's default name depends on the resource's name, which a schema cannot say.
      {"Token", {{"username", "u"}, {"secretRef", {{"name", "s"}, {"key", "k"}}}}},
      {"HealthCheck", {{"nodeSetSelector", json::object()}}},
  };
  for (const testing::Kind& kind : testing::kinds()) {
    const json doc = {{"apiVersion", kind.api_version()},
                      {"kind", kind.name},
                      {"metadata", {{"name", "x"}, {"namespace", "slurm"}}},
                      {"spec", minimal.at(kind.name)}};
    json by_schema = doc;
    testing::apply_schema_defaults(by_schema, testing::root_schema(testing::load_crd(kind)));
    const auto schema_defaulted = kind.round_trip(by_schema);
    const auto code_defaulted = kind.defaulted(doc);
    ASSERT_TRUE(schema_defaulted && code_defaulted) << kind.name;
    EXPECT_EQ(*schema_defaulted, *code_defaulted) << kind.name;
  }
}

TEST(ParseDuration, ReadsGoDurations) {
  EXPECT_EQ(parse_duration("15m"), seconds(900));
  EXPECT_EQ(parse_duration("1h30m"), seconds(5400));
  EXPECT_EQ(parse_duration("2.5h"), seconds(9000));
  EXPECT_EQ(parse_duration("90s"), seconds(90));
  EXPECT_EQ(parse_duration("1h0m0s"), seconds(3600));
  EXPECT_EQ(parse_duration("1500ms"), seconds(1));
  EXPECT_EQ(parse_duration(".5m"), seconds(30));
  EXPECT_EQ(parse_duration("0"), seconds(0));
}

TEST(ParseDuration, ReadsTheMicroSign) {
  EXPECT_EQ(parse_duration("2000000µs"), seconds(2));
  EXPECT_EQ(parse_duration("3000000us"), seconds(3));
  EXPECT_EQ(parse_duration("4000000μs"), seconds(4));  // Greek small letter mu
}

TEST(ParseDuration, RefusesWhatGoRefuses) {
  for (const char* text :
       {"", "5x", "m", "15", "1h 30m", ".", "1.2.3h", "-", "h1", "1d", "99999999999999h"}) {
    EXPECT_EQ(parse_duration(text), std::nullopt) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace tightrope::api
