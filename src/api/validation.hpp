// What a resource must satisfy beyond its schema, with the field and the reason for each
// failure: required references, values the schema cannot express, and fields that must not
// change once set (an admission webhook calls validate_update with the stored object). Runs on
// defaulted objects. The Controller's extraConf and config files are checked by the operator's
// builders, which know the keys they own.
#pragma once

#include "api/codec.hpp"
#include "api/types.hpp"

namespace tightrope::api {

FieldErrors validate(const Controller& object);
FieldErrors validate(const NodeSet& object);
FieldErrors validate(const LoginSet& object);
FieldErrors validate(const RestApi& object);
FieldErrors validate(const Accounting& object);
FieldErrors validate(const Token& object);
FieldErrors validate(const HealthCheck& object);

FieldErrors validate_update(const Controller& old_object, const Controller& object);
FieldErrors validate_update(const NodeSet& old_object, const NodeSet& object);
FieldErrors validate_update(const LoginSet& old_object, const LoginSet& object);
FieldErrors validate_update(const RestApi& old_object, const RestApi& object);
FieldErrors validate_update(const Accounting& old_object, const Accounting& object);
FieldErrors validate_update(const Token& old_object, const Token& object);
FieldErrors validate_update(const HealthCheck& old_object, const HealthCheck& object);

// The longest ClusterName slurmdbd accepts in its table names, as Slinky enforces.
inline constexpr size_t kMaxClusterName = 40;

}  // namespace tightrope::api
