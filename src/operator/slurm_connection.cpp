#include "operator/slurm_connection.hpp"

#include <algorithm>
#include <tuple>

#include "api/codec.hpp"
#include "base/log.hpp"
#include "operator/build/components.hpp"
#include "operator/build/controller.hpp"
#include "operator/log_hints.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

std::optional<api::RestApi> connection_restapi(const std::string& controller,
                                               std::vector<api::RestApi> restapis) {
  std::erase_if(restapis, [&](const api::RestApi& r) {
    return r.spec.controller_ref.name != controller || r.metadata.deleting;
  });
  if (restapis.empty()) {
    return std::nullopt;
  }
  return *std::min_element(restapis.begin(), restapis.end(),
                           [](const api::RestApi& a, const api::RestApi& b) {
                             return std::tie(a.metadata.creation_timestamp, a.metadata.name) <
                                    std::tie(b.metadata.creation_timestamp, b.metadata.name);
                           });
}

ConnectionPlan plan_connection(const api::Controller& c, const std::optional<api::RestApi>& restapi,
                               const std::string& restapi_url) {
  if (!restapi) {
    return {"", std::nullopt, "NoRestApi",
            "no RestApi names this Controller: the operator has no slurmrestd to ask"};
  }
  const api::KeyRef* key = c.spec.jwt_key();
  if (key == nullptr) {
    return {"", std::nullopt, "NoJwtKey", "no jwtKeyRef: the operator cannot mint a token"};
  }
  return {restapi_url, *key, "", ""};
}

kube::ReconcileOutcome SlurmConnectionReconciler::reconcile(const kube::Request& request) {
  const std::string key = request.key();
  const auto doc = cache_.get(resources::controllers(), key);
  LogHints* hints = runtime_.log_hints();
  if (!doc || doc->meta.deleting) {
    if (hints != nullptr) {
      hints->stop(key);
    }
    runtime_.slurm().erase(key);
    return settled();
  }
  auto c = checked(*doc, &api::decode_controller);
  if (!c) {
    if (hints != nullptr) {
      hints->stop(key);
    }
    runtime_.slurm().disconnect(key, "InvalidSpec", api::join(c.error()));
    return settled();  // a corrected spec is an update, and so a reconcile
  }
  const std::string& ns = request.namespace_name;
  std::vector<api::RestApi> restapis;
  for (const auto& r : cache_.list(resources::restapis(), ns)) {
    if (auto restapi = api::decode_restapi(r->doc)) {
      restapis.push_back(std::move(*restapi));
    }
  }
  const auto restapi = connection_restapi(request.name, std::move(restapis));
  const ConnectionPlan plan = plan_connection(
      *c, restapi,
      restapi ? runtime_.slurmrestd_url(build::restapi_name(*restapi), ns) : std::string());
  if (!plan.jwt_key) {
    if (hints != nullptr) {
      hints->stop(key);
    }
    runtime_.slurm().disconnect(key, plan.reason, plan.message);
    return settled();
  }
  // The key is read at each mint, so a rotated Secret needs no new connection.
  Runtime* rt = &runtime_;
  const api::KeyRef ref = *plan.jwt_key;
  runtime_.slurm().ensure(
      key, plan.url,
      [rt, ns, ref]() -> slurm::Result<std::string> {
        const SecretKey secret = read_secret_key(*rt, ns, ref, "spec.jwtKeyRef");
        if (!secret.problem.ready) {
          return fail(slurm::Error{slurm::ErrorKind::kUnauthorized, 0, secret.problem.message, {}});
        }
        return secret.value;
      },
      "Secret " + ns + "/" + ref.name + " key " + ref.key);
  if (hints != nullptr) {
    // slurmctld's own pods: an external slurmctld's log is not the operator's to follow.
    hints->follow(key, build::controller_pod_names(*c));
  }
  return settled();
}

}  // namespace tightrope::op
