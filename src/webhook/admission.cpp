#include "webhook/admission.hpp"

#include <exception>
#include <set>
#include <utility>

#include "api/defaults.hpp"
#include "api/types.hpp"
#include "api/validation.hpp"
#include "api/well_known.hpp"
#include "base/text.hpp"
#include "kube/base64.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/gpus.hpp"
#include "operator/build/power.hpp"

namespace tightrope::webhook {
namespace {

using nlohmann::json;

constexpr std::string_view kReviewV1 = "admission.k8s.io/v1";
constexpr std::string_view kReviewV1beta1 = "admission.k8s.io/v1beta1";

// The string at `key`, or "" when it is absent or not a string (json::value would throw).
std::string text(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Verdict& deny(Verdict& v, int code, std::string reason, std::string message) {
  v.allowed = false;
  v.code = code;
  v.reason = std::move(reason);
  v.message = std::move(message);
  return v;
}

Verdict& bad_request(Verdict& v, const std::string& message) {
  return deny(v, 400, "BadRequest", "malformed AdmissionReview: " + message);
}

std::string object_name(const Verdict& v) {
  return v.namespace_name.empty() ? v.name : v.namespace_name + "/" + v.name;
}

using Request = ReviewRequest;

// ConfigMaps fetched at most once a review: an UPDATE checks both objects against them.
class ConfigMaps {
 public:
  ConfigMaps(const ConfigMapLookup& lookup, std::string ns)
      : lookup_(lookup), namespace_(std::move(ns)) {}

  const std::optional<std::map<std::string, std::string>>& get(const std::string& name) {
    const auto it = seen_.find(name);
    if (it != seen_.end()) {
      return it->second;
    }
    std::optional<std::map<std::string, std::string>> data;
    if (lookup_) {
      data = lookup_(namespace_, name);
    }
    return seen_.emplace(name, std::move(data)).first->second;
  }

 private:
  const ConfigMapLookup& lookup_;
  std::string namespace_;
  std::map<std::string, std::optional<std::map<std::string, std::string>>> seen_;
};

// Checks beyond validate(): the Controller's on its extraConf and the files its ConfigMaps
// bring, and a NodeSet's GPUs (what it would register against what its pods get) and power
// saving. NodeSets are not gathered: a clash of extraConf with a NodeSet record is the
// reconciler's to report, as it depends on objects other than this one.
template <typename T>
api::FieldErrors config_errors(const T& /*object*/, ConfigMaps& /*maps*/,
                               std::vector<std::string>* /*warnings*/) {
  return {};
}

api::FieldErrors config_errors(const api::NodeSet& n, ConfigMaps& /*maps*/,
                               std::vector<std::string>* /*warnings*/) {
  api::FieldErrors errors;
  if (auto gpus = op::build::nodeset_gpus(n); !gpus) {
    errors.push_back(gpus.error());
  }
  if (auto power = op::build::nodeset_power_saving(n); !power) {
    errors.push_back(power.error());
  }
  return errors;
}

api::FieldErrors config_errors(const api::Controller& c, ConfigMaps& maps,
                               std::vector<std::string>* warnings) {
  op::build::ControllerInputs in;
  std::set<std::string> reported;
  for (const auto& [refs, field, scripts] : c.spec.config_refs()) {
    for (size_t i = 0; i < refs->size(); ++i) {
      const std::string& name = (*refs)[i].name;
      if (name.empty()) {
        continue;
      }
      if (const auto& data = maps.get(name)) {
        in.config_maps.emplace(name, *data);
      } else if (warnings != nullptr && reported.insert(name).second) {
        std::string warning = std::string(field) + "[" + std::to_string(i) + "]: ConfigMap \"";
        warning += name;
        warning += "\" was not found or not readable, so its files were not checked";
        warnings->push_back(std::move(warning));
      }
    }
  }
  return op::build::check_controller_config(c, in);
}

void deprecations(const api::Controller& c, std::vector<std::string>& warnings) {
  if (c.spec.jwt_hs256_key_ref) {
    warnings.emplace_back("spec.jwtHs256KeyRef is deprecated: use spec.jwtKeyRef");
  }
}
void deprecations(const api::Accounting& a, std::vector<std::string>& warnings) {
  if (a.spec.jwt_hs256_key_ref) {
    warnings.emplace_back("spec.jwtHs256KeyRef is deprecated: use spec.jwtKeyRef");
  }
}
void deprecations(const api::Token& t, std::vector<std::string>& warnings) {
  if (t.spec.jwt_hs256_key_ref) {
    warnings.emplace_back("spec.jwtHs256KeyRef is deprecated: use spec.jwtKeyRef");
  }
}
void deprecations(const api::NodeSet& n, std::vector<std::string>& warnings) {
  if (n.spec.taint_kube_nodes) {
    warnings.emplace_back("spec.taintKubeNodes is deprecated and has no effect");
  }
}
void deprecations(const api::LoginSet& /*object*/, std::vector<std::string>& /*warnings*/) {}
void deprecations(const api::HealthCheck& /*object*/, std::vector<std::string>& /*warnings*/) {}
void deprecations(const api::RestApi& /*object*/, std::vector<std::string>& /*warnings*/) {}

// Namespace and name as the request gives them when the object leaves them out, then Slinky's
// defaults, which validation expects.
template <typename T>
void complete(T& object, const Verdict& v) {
  if (object.metadata.namespace_name.empty()) {
    object.metadata.namespace_name = v.namespace_name;
  }
  if (object.metadata.name.empty()) {
    object.metadata.name = v.name;
  }
  api::apply_defaults(object);
}

// Errors the stored object had already become warnings: an update is refused only for what it
// makes worse (Kubernetes' CRD validation ratcheting, on by default since 1.30).
void ratchet(api::FieldErrors& errors, const api::FieldErrors& prior,
             std::vector<std::string>& warnings) {
  api::FieldErrors kept;
  for (auto& e : errors) {
    bool old = false;
    for (const auto& p : prior) {
      old = old || p == e;
    }
    if (old) {
      warnings.push_back(e.to_string() + " (already so before this update)");
    } else {
      kept.push_back(std::move(e));
    }
  }
  errors = std::move(kept);
}

template <typename T>
void check(const Request& r, api::Decoded<T> (*decode)(const json&), const ConfigMapLookup& lookup,
           Verdict& v) {
  auto object = decode(*r.object);
  if (!object) {
    deny_invalid(v, object.error());
    return;
  }
  complete(*object, v);
  if (r.operation == "UPDATE" && object->metadata.deleting) {
    return;
  }
  std::optional<T> old;
  if (r.operation == "UPDATE") {
    // An old object that does not decode was stored before a schema change: judge the new one
    // on its own.
    if (auto decoded = decode(*r.old_object)) {
      old = std::move(*decoded);
      complete(*old, v);
    }
  }
  ConfigMaps maps(lookup, object->metadata.namespace_name);
  api::FieldErrors errors = old ? api::validate_update(*old, *object) : api::validate(*object);
  for (auto& e : config_errors(*object, maps, &v.warnings)) {
    errors.push_back(std::move(e));
  }
  if (old) {
    api::FieldErrors prior = api::validate(*old);
    for (auto& e : config_errors(*old, maps, nullptr)) {
      prior.push_back(std::move(e));
    }
    ratchet(errors, prior, v.warnings);
  }
  deprecations(*object, v.warnings);
  if (!errors.empty()) {
    deny_invalid(v, std::move(errors));
  }
}

using Checker = void (*)(const Request&, const ConfigMapLookup&, Verdict&);

template <typename T, api::Decoded<T> (*Decode)(const json&)>
void check_kind(const Request& r, const ConfigMapLookup& lookup, Verdict& v) {
  check<T>(r, Decode, lookup, v);
}

const std::map<std::string, Checker, std::less<>>& checkers() {
  static const std::map<std::string, Checker, std::less<>> all = {
      {"Controller", &check_kind<api::Controller, &api::decode_controller>},
      {"NodeSet", &check_kind<api::NodeSet, &api::decode_nodeset>},
      {"LoginSet", &check_kind<api::LoginSet, &api::decode_loginset>},
      {"RestApi", &check_kind<api::RestApi, &api::decode_restapi>},
      {"Accounting", &check_kind<api::Accounting, &api::decode_accounting>},
      {"Token", &check_kind<api::Token, &api::decode_token>},
      {"HealthCheck", &check_kind<api::HealthCheck, &api::decode_health_check>},
  };
  return all;
}

// Reads the review into `r` and `v`; false (with `v` denied) when it is not one.
}  // namespace

bool read_review(const json& review, ReviewRequest& r, Verdict& v) {
  if (!review.is_object()) {
    bad_request(v, "the body is not a JSON object");
    return false;
  }
  // The uid first, so that even a refusal below answers the request it refuses.
  const auto request = review.find("request");
  if (request != review.end() && request->is_object()) {
    v.uid = text(*request, "uid");
  }
  const std::string api_version = text(review, "apiVersion");
  if (api_version == kReviewV1beta1) {
    v.api_version = api_version;
  } else if (api_version != kReviewV1) {
    bad_request(v, "apiVersion is \"" + api_version + "\", not " + std::string(kReviewV1));
    return false;
  }
  if (text(review, "kind") != "AdmissionReview") {
    bad_request(v, "kind is \"" + text(review, "kind") + "\", not AdmissionReview");
    return false;
  }
  if (request == review.end() || !request->is_object()) {
    bad_request(v, "request: required");
    return false;
  }
  if (v.uid.empty()) {
    bad_request(v, "request.uid: required");
    return false;
  }
  r.operation = text(*request, "operation");
  v.operation = r.operation;
  if (r.operation != "CREATE" && r.operation != "UPDATE" && r.operation != "DELETE" &&
      r.operation != "CONNECT") {
    bad_request(
        v, "request.operation: \"" + r.operation + "\" is not CREATE, UPDATE, DELETE or CONNECT");
    return false;
  }
  const auto gvk = request->find("kind");
  if (gvk == request->end() || !gvk->is_object() || text(*gvk, "kind").empty()) {
    bad_request(v, "request.kind: required (group, version, kind)");
    return false;
  }
  r.group = text(*gvk, "group");
  r.version = text(*gvk, "version");
  r.kind = text(*gvk, "kind");
  v.kind = r.kind;
  r.sub_resource = text(*request, "subResource");
  if (const auto resource = request->find("resource");
      resource != request->end() && resource->is_object()) {
    r.resource = text(*resource, "resource");
  }
  v.namespace_name = text(*request, "namespace");
  v.name = text(*request, "name");
  const auto object = request->find("object");
  if (object != request->end() && object->is_object()) {
    r.object = &*object;
  }
  const auto old_object = request->find("oldObject");
  if (old_object != request->end() && old_object->is_object()) {
    r.old_object = &*old_object;
  }
  if ((r.operation == "CREATE" || r.operation == "UPDATE") && r.object == nullptr) {
    bad_request(v, "request.object: required for " + r.operation);
    return false;
  }
  if (r.operation == "UPDATE" && r.old_object == nullptr) {
    bad_request(v, "request.oldObject: required for UPDATE");
    return false;
  }
  if (r.object != nullptr) {
    // The request names the object only once it exists (generateName): take the object's.
    const auto meta = r.object->find("metadata");
    if (meta != r.object->end() && meta->is_object()) {
      if (v.name.empty()) {
        v.name = text(*meta, "name");
      }
      if (v.namespace_name.empty()) {
        v.namespace_name = text(*meta, "namespace");
      }
    }
  }
  return true;
}

void deny_invalid(Verdict& v, api::FieldErrors errors) {
  deny(v, 422, "Invalid", v.kind + " " + object_name(v) + ": " + api::join(errors));
  v.causes = std::move(errors);
}

// A new replicas count through a power-saved NodeSet's scale subresource: an autoscaler's
// (KEDA and the HPA write there), refused, since Slurm powers that NodeSet's nodes up and down
// and spec.replicas is only their most. A person changes it in the spec.
void check_scale(const Request& r, const NodeSetLookup& nodesets, Verdict& v) {
  if (r.resource != "nodesets" || r.operation != "UPDATE" || !nodesets ||
      r.object->value("/spec/replicas"_json_pointer, json()) ==
          r.old_object->value("/spec/replicas"_json_pointer, json())) {
    return;
  }
  const auto stored = nodesets(v.namespace_name, v.name);
  if (!stored) {
    return;
  }
  const auto n = api::decode_nodeset(*stored);
  if (!n || !op::build::power_saved(*n)) {
    return;
  }
  deny(v, 422, "Invalid",
       "NodeSet " + object_name(v) + " is power-saved (" +
           std::string(api::kAnnotationSuspendTime) +
           "): Slurm powers its nodes up and down, and spec.replicas is the most it may use, "
           "which an autoscaler (KEDA, an HPA) must not drive; remove the autoscaler, or the "
           "annotation to scale it so. To change the most, patch spec.replicas");
}

Verdict admit(const json& review, const ConfigMapLookup& config_maps,
              const NodeSetLookup& nodesets) {
  Verdict v;
  try {
    Request r;
    if (!read_review(review, r, v)) {
      return v;
    }
    if (r.operation != "CREATE" && r.operation != "UPDATE") {
      return v;
    }
    // Status and scale go through subresources that the operator (or an autoscaler) writes;
    // the spec rules do not apply to them.
    if (!r.sub_resource.empty()) {
      if (r.sub_resource == "scale") {
        check_scale(r, nodesets, v);
      }
      return v;
    }
    const auto checker = checkers().find(r.kind);
    if (r.group != api::kGroup || r.version != api::kVersion || checker == checkers().end()) {
      v.warnings.push_back("slurm-operator-webhook does not validate " + r.group + "/" + r.version +
                           " " + r.kind + "; allowed unchecked");
      return v;
    }
    checker->second(r, config_maps, v);
  } catch (const std::exception& e) {
    // Our bug, not the object's: deny (failurePolicy Fail would deny too) and say so.
    v.warnings.clear();
    v.causes.clear();
    deny(v, 500, "InternalError", std::string("slurm-operator-webhook failed: ") + e.what());
  }
  return v;
}

Verdict parse_review_body(std::string_view body, json& review) {
  Verdict v;
  if (json_nested_deeper_than(body, kMaxReviewDepth)) {
    return bad_request(
        v, "the body is nested deeper than " + std::to_string(kMaxReviewDepth) + " levels");
  }
  review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    return bad_request(v, "the body is not JSON");
  }
  return v;
}

Verdict admit(std::string_view body, const ConfigMapLookup& config_maps,
              const NodeSetLookup& nodesets) {
  json review;
  if (Verdict v = parse_review_body(body, review); !v.allowed) {
    return v;
  }
  return admit(review, config_maps, nodesets);
}

json review_response(const Verdict& v) {
  json response = {{"uid", v.uid}, {"allowed", v.allowed}};
  if (!v.allowed) {
    json status = {
        {"status", "Failure"}, {"code", v.code}, {"reason", v.reason}, {"message", v.message}};
    if (!v.causes.empty()) {
      json causes = json::array();
      for (const auto& c : v.causes) {
        const bool required = c.message.rfind("required", 0) == 0;
        causes.push_back({{"reason", required ? "FieldValueRequired" : "FieldValueInvalid"},
                          {"field", c.field},
                          {"message", c.message}});
      }
      status["details"] = {{"group", api::kGroup},
                           {"kind", v.kind},
                           {"name", v.name},
                           {"causes", std::move(causes)}};
    }
    response["status"] = std::move(status);
  }
  if (!v.warnings.empty()) {
    response["warnings"] = v.warnings;
  }
  if (v.allowed && v.patch.is_array() && !v.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = kube::encode_base64(v.patch.dump());
  }
  return {{"apiVersion", v.api_version}, {"kind", "AdmissionReview"}, {"response", response}};
}

std::pair<Verdict, std::optional<Binding>> read_binding(std::string_view body) {
  json review;
  Verdict v = parse_review_body(body, review);
  Request r;
  if (!v.allowed) {
    return {v, std::nullopt};
  }
  if (!read_review(review, r, v)) {
    return {v, std::nullopt};
  }
  const json& request = review["request"];
  if (r.operation != "CREATE" || !r.group.empty() || r.kind != "Binding" ||
      request.value("/resource/resource"_json_pointer, std::string()) != "pods" ||
      r.sub_resource != "binding" || request.value("dryRun", false)) {
    return {v, std::nullopt};
  }
  Binding b;
  b.namespace_name = v.namespace_name;
  b.pod = v.name;
  b.node = r.object->value("/target/name"_json_pointer, std::string());
  if (b.pod.empty() || b.node.empty()) {
    return {v, std::nullopt};
  }
  return {v, b};
}

std::optional<std::string> topology_for(const json& pod, const json& node) {
  const std::string key(api::kAnnotationNodeTopologySpec);
  if (pod.value("/metadata/labels"_json_pointer, json::object()).value(api::kLabelName, "") !=
      "slurmd") {
    return std::nullopt;
  }
  const json annotations = node.value("/metadata/annotations"_json_pointer, json::object());
  const auto wanted = annotations.find(key);
  if (wanted == annotations.end() || !wanted->is_string() || wanted->get<std::string>().empty()) {
    return std::nullopt;
  }
  const json has = pod.value("/metadata/annotations"_json_pointer, json::object());
  if (has.value(key, "") == wanted->get<std::string>()) {
    return std::nullopt;
  }
  return wanted->get<std::string>();
}

const std::vector<std::string>& validated_kind_paths() {
  static const std::vector<std::string> all = {
      "/validate-slinky-slurm-net-v1beta1-controller",
      "/validate-slinky-slurm-net-v1beta1-nodeset",
      "/validate-slinky-slurm-net-v1beta1-loginset",
      "/validate-slinky-slurm-net-v1beta1-restapi",
      "/validate-slinky-slurm-net-v1beta1-accounting",
      "/validate-slinky-slurm-net-v1beta1-token",
      "/validate-tightrope-slurm-net-v1alpha1-healthcheck",
  };
  return all;
}

}  // namespace tightrope::webhook
