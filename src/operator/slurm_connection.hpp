// The one component that makes and drops each cluster's Slurm connection (SlurmClients): from
// the Controller (its jwtKeyRef) and its RestApis (the oldest one's slurmrestd). Reconcilers
// only read the connection and its reach; none makes or drops one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "operator/reconcile_support.hpp"

namespace tightrope::op {

// What a Controller's connection should be: to `url` with the key of `jwt_key`, or none, for a
// reason (SlurmReachable's) and a message.
struct ConnectionPlan {
  std::string url;
  std::optional<api::KeyRef> jwt_key;
  std::string reason;  // set when there is to be none
  std::string message;
};

// The RestApi a Controller's connection goes through: the oldest (then by name) of those that
// name it and are not being deleted, so that a second RestApi never moves it.
std::optional<api::RestApi> connection_restapi(const std::string& controller,
                                               std::vector<api::RestApi> restapis);

// Whether and where Controller `c` is reached: none without a RestApi or a jwtKeyRef.
// `restapi_url` is where the chosen RestApi's slurmrestd answers.
ConnectionPlan plan_connection(const api::Controller& c, const std::optional<api::RestApi>& restapi,
                               const std::string& restapi_url);

class SlurmConnectionReconciler : public ResourceReconciler {
 public:
  using ResourceReconciler::ResourceReconciler;
  // Keyed by Controller.
  kube::ReconcileOutcome reconcile(const kube::Request& request) override;
};

}  // namespace tightrope::op
