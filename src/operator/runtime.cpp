#include "operator/runtime.hpp"

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "base/log.hpp"
#include "kube/base64.hpp"
#include "kube/discovery.hpp"
#include "kube/time.hpp"
#include "operator/conditions.hpp"
#include "operator/resources.hpp"

namespace tightrope::op {

using nlohmann::json;

Runtime::Runtime(kube::Client& kube, kube::EventRecorder& events, SlurmClients& slurm,
                 OperatorOptions options)
    : kube_(kube), events_(events), slurm_(slurm), options_(std::move(options)) {}

std::string Runtime::now() {
  return kube::format_time(std::chrono::system_clock::now());
}

kube::Result<json> Runtime::apply(const json& object) {
  const std::string api_version = object.value("apiVersion", "");
  const std::string kind = object.value("kind", "");
  const kube::ResourceType* type = resources::for_object(api_version, kind);
  if (type == nullptr) {
    return fail(kube::Error{kube::ErrorKind::kInvalid,
                            0,
                            "the operator does not write " + api_version + " " + kind,
                            {}});
  }
  json body = object;
  if (kind == "Secret" && body.contains("stringData")) {
    json data = body.value("data", json::object());
    for (const auto& [key, value] : body["stringData"].items()) {
      data[key] = kube::encode_base64(value.get<std::string>());
    }
    body.erase("stringData");
    body["data"] = data;
  }
  const std::string ns = body["metadata"].value("namespace", "");
  return kube_.apply(*type, ns, body, {std::string(api::kFieldManager), true});
}

kube::Result<bool> Runtime::remove_owned(const kube::ResourceType& type, const std::string& ns,
                                         const std::string& name, const std::string& owner_uid,
                                         const Removal& how) {
  if (!how.maybe_foreign && cache_ != nullptr && cache_->caches(type) &&
      !cache_->resource_version(type, kube::object_key(ns, name))) {
    return false;
  }
  auto current = kube_.get(type, ns, name);
  if (!current) {
    if (current.error().kind == kube::ErrorKind::kNotFound) {
      return false;
    }
    return fail(current.error());
  }
  bool owned = false;
  for (const auto& ref : current->value("/metadata/ownerReferences"_json_pointer, json::array())) {
    owned = owned || (ref.value("uid", "") == owner_uid && ref.value("controller", false));
  }
  if (!owned) {
    return false;  // someone else's: never ours to delete
  }
  kube::DeleteOptions options;
  options.precondition_uid = current->value("/metadata/uid"_json_pointer, std::string());
  options.propagation = how.propagation;
  auto removed = kube_.remove(type, ns, name, options);
  if (!removed && removed.error().kind != kube::ErrorKind::kNotFound) {
    return fail(removed.error());
  }
  log::info(
      "operator.pruned",
      {{"kind", type.kind},
       {"object", ns + "/" + name},
       {"dependents", how.propagation == kube::PropagationPolicy::kOrphan ? "kept" : "deleted"}});
  return true;
}

kube::Result<json> Runtime::object(const kube::ResourceType& type, const std::string& ns,
                                   const std::string& name) {
  const std::string memo_key = type.resource + "/" + ns + "/" + name;
  std::optional<std::string> cached_version;
  if (cache_ != nullptr) {
    cached_version = cache_->resource_version(type, kube::object_key(ns, name));
  }
  if (cached_version) {
    std::lock_guard lock(reads_mu_);
    const auto it = reads_.find(memo_key);
    if (it != reads_.end() && it->second.resource_version == *cached_version) {
      return it->second.object;
    }
  }
  auto object = kube_.get(type, ns, name);
  if (!object) {
    return fail(object.error());
  }
  std::lock_guard lock(reads_mu_);
  reads_[memo_key] = {object->value("/metadata/resourceVersion"_json_pointer, std::string()),
                      *object};
  return std::move(*object);
}

kube::Result<std::map<std::string, std::string>> Runtime::read_data(const kube::ResourceType& type,
                                                                    const std::string& ns,
                                                                    const std::string& name) {
  auto object = this->object(type, ns, name);
  if (!object) {
    return fail(object.error());
  }
  const bool secret = type.kind == "Secret";
  std::map<std::string, std::string> out;
  const json data = object->value("data", json::object());  // items() must not outlive it
  for (const auto& [key, value] : data.items()) {
    if (!value.is_string()) {
      continue;
    }
    if (!secret) {
      out[key] = value.get<std::string>();
    } else if (auto bytes = kube::decode_base64(value.get<std::string>())) {
      out[key] = *bytes;
    }
  }
  return out;
}

kube::Result<std::map<std::string, std::string>> Runtime::secret_data(const std::string& ns,
                                                                      const std::string& name) {
  return read_data(kube::resources::secrets(), ns, name);
}

kube::Result<std::map<std::string, std::string>> Runtime::config_map_data(const std::string& ns,
                                                                          const std::string& name) {
  return read_data(kube::resources::config_maps(), ns, name);
}

bool Runtime::serves(const std::string& api_version, const std::string& kind, bool ask) {
  const std::string key = api_version + "/" + kind;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(serves_mu_);
    const auto it = serves_.find(key);
    if (!ask) {
      return it != serves_.end() && it->second.first;
    }
    // A CRD installed later is noticed within seconds; one removed, within minutes.
    const auto ttl = it == serves_.end() || it->second.first ? std::chrono::seconds(300)
                                                             : std::chrono::seconds(10);
    if (it != serves_.end() && now - it->second.second < ttl) {
      return it->second.first;
    }
  }
  kube::Discovery discovery(kube_);
  const bool served = discovery.for_kind(api_version, kind).ok();
  std::lock_guard lock(serves_mu_);
  serves_[key] = {served, now};
  return served;
}

std::string Runtime::slurmrestd_url(const std::string& service, const std::string& ns) const {
  std::string url = options_.slurmrestd_url;
  for (const auto& [placeholder, value] :
       {std::pair<std::string, std::string>{"{service}", service}, {"{namespace}", ns}}) {
    for (size_t at = url.find(placeholder); at != std::string::npos;
         at = url.find(placeholder, at + value.size())) {
      url.replace(at, placeholder.size(), value);
    }
  }
  return url;
}

kube::Result<Done> Runtime::publish(const kube::ResourceType& type, const api::ObjectMeta& meta,
                                    const std::vector<api::Condition>& before,
                                    std::vector<api::Condition> conditions, const Readiness& ready,
                                    const json& extra_status, bool extra_changed) {
  const std::string stamp = now();
  set_condition(
      conditions,
      {"Ready", ready.ready ? "True" : "False", ready.reason, ready.message, meta.generation, ""},
      stamp);
  for (auto& c : conditions) {
    c.observed_generation = meta.generation;
  }
  const api::Condition* old = find_condition(before, "Ready");
  const bool transition = old == nullptr || old->status != (ready.ready ? "True" : "False") ||
                          old->reason != ready.reason;
  if (transition) {
    const kube::ObjectReference ref{type.api_version(), type.kind, meta.namespace_name, meta.name,
                                    meta.uid};
    if (ready.ready) {
      events_.normal(ref, ready.reason, ready.message);
    } else {
      events_.warning(ref, ready.reason, ready.message);
    }
    log::info("operator.readiness", {{"kind", type.kind},
                                     {"object", meta.namespace_name + "/" + meta.name},
                                     {"ready", ready.ready ? "true" : "false"},
                                     {"reason", ready.reason},
                                     {"message", ready.message}});
  }
  if (!transition && conditions == before && (extra_status.empty() || !extra_changed)) {
    return Done{};
  }
  json status = extra_status;
  status["conditions"] = api::encode_conditions(conditions);
  const json body = {{"apiVersion", type.api_version()},
                     {"kind", type.kind},
                     {"metadata", {{"name", meta.name}, {"namespace", meta.namespace_name}}},
                     {"status", status}};
  auto applied = kube_.apply(type, meta.namespace_name, body,
                             {std::string(api::kFieldManager), true}, "status");
  if (!applied && applied.error().kind != kube::ErrorKind::kNotFound) {
    return fail(applied.error());
  }
  return Done{};
}

SecretKey read_secret_key(Runtime& runtime, const std::string& ns, const api::KeyRef& ref,
                          const std::string& field) {
  auto data = runtime.secret_data(ns, ref.name);
  if (!data) {
    if (data.error().kind == kube::ErrorKind::kNotFound) {
      return {"",
              {false, "SecretNotFound",
               "Secret " + ns + "/" + ref.name + " (" + field + ") does not exist"}};
    }
    return {"",
            {false, "SecretUnreadable",
             "Secret " + ns + "/" + ref.name + " (" + field + "): " + data.error().message}};
  }
  const auto it = data->find(ref.key);
  if (it == data->end() || it->second.empty()) {
    return {"",
            {false, "SecretKeyNotFound",
             "Secret " + ns + "/" + ref.name + " has no key \"" + ref.key + "\" (" + field + ")"}};
  }
  return {it->second, {true, "", ""}};
}

}  // namespace tightrope::op
