// What the reconcilers share that has logic of its own: the memory of what was applied.
#include "operator/reconcile_support.hpp"

#include <gtest/gtest.h>

#include "api/well_known.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using nlohmann::json;

json service(const std::string& name, int port) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", name}, {"namespace", "hpc"}}},
          {"spec", {{"ports", json::array({{{"port", port}}})}}}};
}

// A cache whose Services are known by identity, filled by hand (the informer never starts).
struct CachedServices {
  kube::Client client{testing::unreached_api_server()};
  kube::Informer<kube::MetaOnly> services{client, kube::resources::services(), "hpc",
                                          kube::decode_meta_only};
  ResourceCache cache;
  CachedServices() { cache.add_meta(kube::resources::services(), &services); }
  void put(const std::string& name, const std::string& resource_version) {
    auto object = std::make_shared<kube::MetaOnly>();
    object->meta.namespace_name = "hpc";
    object->meta.name = name;
    object->meta.resource_version = resource_version;
    services.store().put("hpc/" + name, object);
  }
  void erase(const std::string& name) { services.store().erase("hpc/" + name); }
};

json stored(const json& object, const std::string& resource_version) {
  json out = object;
  out["metadata"]["resourceVersion"] = resource_version;
  return out;
}

TEST(AppliedObjects, ACachedObjectIsAppliedAgainOnlyWhenBuiltOrStoredDifferently) {
  CachedServices cached;
  AppliedObjects applied(std::chrono::minutes(5));
  EXPECT_FALSE(applied.unchanged(service("workers", 6818), cached.cache));
  applied.remember(service("workers", 6818), stored(service("workers", 6818), "41"));
  // The watch has not brought our write yet: apply again rather than trust an older object.
  cached.put("workers", "40");
  EXPECT_FALSE(applied.unchanged(service("workers", 6818), cached.cache));
  cached.put("workers", "41");
  EXPECT_TRUE(applied.unchanged(service("workers", 6818), cached.cache));
  // Built differently, or another object.
  EXPECT_FALSE(applied.unchanged(service("workers", 6819), cached.cache));
  EXPECT_FALSE(applied.unchanged(service("other", 6818), cached.cache));
  // Edited by hand, or deleted.
  cached.put("workers", "57");
  EXPECT_FALSE(applied.unchanged(service("workers", 6818), cached.cache));
  cached.erase("workers");
  EXPECT_FALSE(applied.unchanged(service("workers", 6818), cached.cache));
}

TEST(AppliedObjects, AnUncachedKindIsAppliedAgainAfterTheRefresh) {
  CachedServices cached;  // no PodDisruptionBudgets in it
  const json pdb = {{"apiVersion", "policy/v1"},
                    {"kind", "PodDisruptionBudget"},
                    {"metadata", {{"name", "workers"}, {"namespace", "hpc"}}},
                    {"spec", {{"maxUnavailable", 0}}}};
  AppliedObjects recent(std::chrono::minutes(5));
  recent.remember(pdb, stored(pdb, "9"));
  EXPECT_TRUE(recent.unchanged(pdb, cached.cache));
  AppliedObjects always(std::chrono::seconds(0));
  always.remember(pdb, stored(pdb, "9"));
  EXPECT_FALSE(always.unchanged(pdb, cached.cache));
}

TEST(KeptStatus, KeepsWhatWasWrittenAndAddsWhatIsRequired) {
  const json stored = {{"conditions", json::array({{{"type", "Ready"}}})},
                       {"nodeSetHash", "workers-abc"},
                       {"replicas", 3}};
  const json required = {{"nodeSetHash", ""}, {"selector", "app=slurmd"}};
  EXPECT_EQ(kept_status(stored, required),
            (json{{"nodeSetHash", "workers-abc"}, {"replicas", 3}, {"selector", "app=slurmd"}}));
  EXPECT_EQ(kept_status(stored), (json{{"nodeSetHash", "workers-abc"}, {"replicas", 3}}));
  // A resource never written yet gets the required fields alone.
  EXPECT_EQ(kept_status(json(), required), required);
}

TEST(ActiveSlurmctld, IsTheFirstThatAnswersBackupsIncluded) {
  // slurmrestd's ping as decoded: the first controller that answers. A backup that answers
  // while the first configured one does not is in control; `primary` says only that it is not
  // the first configured.
  slurm::Ping backup;
  backup.hostname = "slurm-controller-1";
  backup.responding = true;
  backup.primary = false;
  EXPECT_EQ(active_slurmctld(backup), "slurm-controller-1");
  slurm::Ping none;
  none.hostname = "slurm-controller-1";
  EXPECT_EQ(active_slurmctld(none), "");
}

TEST(Adoption, HoldsOnlyAtTheGenerationItWasRecordedAt) {
  api::ObjectMeta meta;
  meta.generation = 4;
  EXPECT_FALSE(adoption_in_force(meta));
  meta.annotations[std::string(api::kAnnotationAdoptedGeneration)] = "4";
  EXPECT_TRUE(adoption_in_force(meta));
  meta.generation = 5;  // the spec changed: Tightrope builds and applies its own
  EXPECT_FALSE(adoption_in_force(meta));
}

TEST(Adoption, OnlyAResourceTightropeNeverReconciledIsAdopted) {
  EXPECT_FALSE(reconciled_before({}));
  // Slinky writes no Ready condition on its resources; Tightrope always does.
  EXPECT_FALSE(reconciled_before({{"UpdateReservation", "False", "", "", 1, ""}}));
  EXPECT_TRUE(reconciled_before({{"Ready", "False", "ApplyFailed", "", 1, ""}}));
}

}  // namespace
}  // namespace tightrope::op
