// The validating admission webhook's decisions: an AdmissionReview (admission.k8s.io/v1) in, the
// AdmissionReview answer out, for the six slinky.slurm.net/v1beta1 kinds. Pure: ConfigMaps come
// through a callback, and nothing here knows HTTP, TLS or the Kubernetes client.
//
// A denial carries code 422 and reason "Invalid" with one cause per field, as the API server's
// own validation of an object does, so a client tells a spec error from an RBAC refusal (403)
// by its code. controller-runtime's Denied(), which Slinky's webhooks use, answers 403; the
// message and the field paths are the same either way. A review that cannot be read is denied
// with 400 "BadRequest".
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.hpp"

namespace tightrope::webhook {

// The data of ConfigMap `name` in namespace `ns` (binaryData keys with empty values), or nothing
// when it does not exist or cannot be read: the checks that need it are then skipped with a
// warning, and the Controller's reconciler reports the missing ConfigMap.
using ConfigMapLookup = std::function<std::optional<std::map<std::string, std::string>>(
    const std::string& ns, const std::string& name)>;

// NodeSet `name` in namespace `ns` as stored, or nothing when it does not exist or cannot be
// read (the check that needs it then lets the request through).
using NodeSetLookup =
    std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>;

// What the webhook decided about one request, with what a log line needs.
struct Verdict {
  std::string api_version = "admission.k8s.io/v1";  // echoed: v1, or v1beta1 if asked so
  std::string uid;                                  // the request's, echoed
  bool allowed = true;
  int code = 0;         // when denied: 422 invalid object, 400 unreadable review, 500 our fault
  std::string reason;   // when denied: "Invalid", "BadRequest", "InternalError"
  std::string message;  // when denied: "Controller slurm/slurm: spec.clusterName: ..."
  api::FieldErrors causes;
  std::vector<std::string> warnings;
  // When allowed, a mutating webhook's changes: JSON Patch operations (null: none).
  nlohmann::json patch;

  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string kind;       // "Controller"
  std::string namespace_name;
  std::string name;
};

// Decides on a parsed AdmissionReview. Never throws: whatever goes wrong is a denial.
//   CREATE: decode, default, validate, and for a Controller check_controller_config with the
//           ConfigMaps it references.
//   UPDATE: the same with validate_update against the (defaulted) old object. What the stored
//           object already got wrong is a warning, not a denial (CRD validation ratcheting), so
//           an object created before the webhook existed can still have its labels edited. An
//           object being deleted is let through: a finalizer must always be removable.
//   DELETE, CONNECT, subresources, kinds of other groups: allowed (the last with a warning),
//           but for a change of a power-saved NodeSet's replicas through its scale subresource,
//           which is an autoscaler's (KEDA, an HPA) and would fight Slurm's power saving.
Verdict admit(const nlohmann::json& review, const ConfigMapLookup& config_maps,
              const NodeSetLookup& nodesets = {});
// The same from the request body; text that is not JSON is a denial.
Verdict admit(std::string_view body, const ConfigMapLookup& config_maps,
              const NodeSetLookup& nodesets = {});

// The deepest nesting of arrays and objects a review's body may have. The objects of these
// kinds are a few dozen levels deep; the decoders copy objects recursively (a hundred thousand
// levels overflowed the stack), and the operator's informers parse no deeper than 1024
// (simdjson's default), so nothing admitted here can stop their lists.
inline constexpr size_t kMaxReviewDepth = 512;

// A review's body as JSON; a denial (400) saying why when it is not JSON or nested too deep.
Verdict parse_review_body(std::string_view body, nlohmann::json& review);

// What one request is about, read and checked.
struct ReviewRequest {
  std::string operation;
  std::string group;
  std::string version;
  std::string kind;
  std::string sub_resource;
  std::string resource;  // "nodesets"
  const nlohmann::json* object = nullptr;
  const nlohmann::json* old_object = nullptr;
};
// Reads a review's envelope (apiVersion, kind, uid, operation, the objects) into `r` and the
// Verdict's identity fields; false, with `v` a 400 denial saying why, when it cannot be read.
bool read_review(const nlohmann::json& review, ReviewRequest& r, Verdict& v);
// Denies with 422 "Invalid", one cause per field, as the API server's own validation does.
void deny_invalid(Verdict& v, api::FieldErrors errors);

// The AdmissionReview that answers: apiVersion, kind, response {uid, allowed, status, warnings}.
nlohmann::json review_response(const Verdict& verdict);

// pods/binding, Slinky's optional mutating webhook: a slurmd pod bound to a Node that carries
// topology.slinky.slurm.net/spec gets that annotation before the kubelet sees it, so slurmd
// starts with SLINKY_TOPOLOGY set. The binding itself is never changed nor refused: what the
// webhook does is a side effect on the pod, skipped for a dry run.
struct Binding {
  std::string namespace_name;
  std::string pod;
  std::string node;
};
// The binding to act on, with the Verdict that answers the review (always allowed; a review
// that cannot be read is a 400). Nothing to do: anything but a CREATE of pods/binding, a dry run.
std::pair<Verdict, std::optional<Binding>> read_binding(std::string_view body);
// The topology annotation `pod` should get once bound to `node`: the Node's, for a slurmd pod
// whose annotation differs; nullopt otherwise (another pod, a Node without one, already there).
std::optional<std::string> topology_for(const nlohmann::json& pod, const nlohmann::json& node);

// The per-kind paths of the kinds validated here, Slinky's and Tightrope's own
// ("/validate-slinky-slurm-net-v1beta1-nodeset",
// "/validate-tightrope-slurm-net-v1alpha1-healthcheck").
const std::vector<std::string>& validated_kind_paths();

}  // namespace tightrope::webhook
