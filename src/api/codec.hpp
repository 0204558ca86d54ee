// JSON for the slinky.slurm.net/v1beta1 resources and Tightrope's HealthCheck: decode what the API
// server sends (a wrong type names the field: "spec.replicas: must be an integer"), encode what the
// operator writes. Encoding leaves out what is empty or zero, as Go's omitempty does, so an encoded
// spec is what a user would have written.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/types.hpp"
#include "base/result.hpp"

namespace tightrope::api {

// One thing wrong with one field of a resource.
struct FieldError {
  std::string field;  // "spec.slurmKeyRef.name"
  std::string message;
  std::string to_string() const { return field.empty() ? message : field + ": " + message; }
  bool operator==(const FieldError&) const = default;
};
using FieldErrors = std::vector<FieldError>;
// "spec.a: x; spec.b: y"
std::string join(const FieldErrors& errors);

template <typename T>
using Decoded = tightrope::Result<T, FieldErrors>;

Decoded<Controller> decode_controller(const nlohmann::json& doc);
Decoded<NodeSet> decode_nodeset(const nlohmann::json& doc);
Decoded<LoginSet> decode_loginset(const nlohmann::json& doc);
Decoded<RestApi> decode_restapi(const nlohmann::json& doc);
Decoded<Accounting> decode_accounting(const nlohmann::json& doc);
Decoded<Token> decode_token(const nlohmann::json& doc);
Decoded<HealthCheck> decode_health_check(const nlohmann::json& doc);

// The whole resource: apiVersion, kind, metadata (name, namespace, labels, annotations), spec and
// status.
nlohmann::json encode(const Controller& object);
nlohmann::json encode(const NodeSet& object);
nlohmann::json encode(const LoginSet& object);
nlohmann::json encode(const RestApi& object);
nlohmann::json encode(const Accounting& object);
nlohmann::json encode(const Token& object);
nlohmann::json encode(const HealthCheck& object);
// A HealthCheck's status alone, as its status subresource takes it.
nlohmann::json encode_health_status(const HealthCheckStatus& status);

// The health failures a Kubernetes Node's annotation records; an unreadable one reads as none.
std::vector<NodeFailure> decode_node_failures(const nlohmann::json& kube_node);
// The annotation's value for `failures`.
std::string encode_node_failures(const std::vector<NodeFailure>& failures);

nlohmann::json encode_conditions(const std::vector<Condition>& conditions);
std::vector<Condition> decode_conditions(const nlohmann::json& array);

}  // namespace tightrope::api
