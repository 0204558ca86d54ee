// The reconcilers of the five kinds besides NodeSet. Each reads its resource from the cache,
// gathers what its builder needs (Secrets, ConfigMaps, the Controller), applies the built
// objects, prunes what is no longer wanted, and reports Ready with a reason for every cause of
// not being ready. A reconcile is safe to repeat and to interrupt at any line.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "operator/build/controller.hpp"
#include "operator/reconcile_support.hpp"

namespace tightrope::op {

class ControllerReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  // What slurm.conf and the cluster's objects are built from (its NodeSets, the Nodes' GPU
  // cliques, the Accounting, the referenced ConfigMaps, the keys' hashes); why not, if a
  // ConfigMap or Secret cannot be read.
  std::optional<Readiness> read_inputs(const api::Controller& c, build::ControllerInputs& in);
  // Applies slurmctld's objects, the workers' Service and budget, and prunes what the spec no
  // longer asks for; `objects` gets what was built, `stored` what was applied. Why not, if a
  // write failed.
  std::optional<Readiness> apply_controller_objects(const api::Controller& c,
                                                    const build::ControllerInputs& in,
                                                    std::vector<nlohmann::json>& objects,
                                                    std::map<std::string, nlohmann::json>& stored);
  // The doctor's checks the operator can run (diagnosis.hpp): the Healthy condition, an Event
  // for each problem not seen at the previous check, the findings gauge.
  void diagnose(const api::Controller& c, const nlohmann::json& doc,
                const std::vector<nlohmann::json>& objects, const std::string& slurm_key_hash,
                slurm::Client& client, std::vector<api::Condition>& conditions);
  // HA: the controller-active label on the slurmctld pod in control (the client Service, and so
  // SlurmctldAddr, selects it), off the others; written only where it differs. `client` null:
  // Slurm cannot be asked.
  void follow_active_slurmctld(const api::Controller& c, slurm::Client* client);

  std::mutex reported_mu_;
  std::map<std::string, std::set<std::string>> reported_;  // controller key -> finding keys
  // When each Controller was last diagnosed: at most once a Slurm check period, however many
  // events bring its reconcile back.
  std::map<std::string, std::chrono::steady_clock::time_point> diagnosed_at_;
};

class RestApiReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  // Applies slurmrestd's Deployment and Service (`stored` gets them as applied); why not.
  std::optional<Readiness> apply_restapi_objects(const api::RestApi& r,
                                                 const api::Controller& controller,
                                                 std::map<std::string, nlohmann::json>& stored);
};

class AccountingReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  // Builds and applies slurmdbd's objects (`stored` gets them as applied); why not.
  std::optional<NotReady> apply_accounting_objects(const api::Accounting& a,
                                                   std::map<std::string, nlohmann::json>& stored);
};

class LoginSetReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;

 private:
  // Builds and applies the login pods' objects (`stored` gets them as applied); why not.
  std::optional<NotReady> apply_loginset_objects(const api::LoginSet& l,
                                                 const api::Controller& controller,
                                                 std::map<std::string, nlohmann::json>& stored);
};

class TokenReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

}  // namespace tightrope::op
