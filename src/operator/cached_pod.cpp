#include "operator/cached_pod.hpp"

#include <algorithm>

namespace tightrope::op {

using kube::string_at;
using nlohmann::json;

namespace {

constexpr std::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

std::string affinity_node_of(simdjson::dom::element spec) {
  simdjson::dom::array terms;
  if (spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
          ["nodeSelectorTerms"]
              .get(terms) != simdjson::SUCCESS ||
      terms.size() == 0) {
    return "";
  }
  simdjson::dom::array values;
  if (terms.at(0)["matchFields"].at(0)["values"].get(values) != simdjson::SUCCESS ||
      values.size() != 1) {
    return "";
  }
  std::string_view node;
  return values.at(0).get(node) == simdjson::SUCCESS ? std::string(node) : "";
}

void decode_waiting(simdjson::dom::element status, bool init,
                    std::vector<CachedPod::Waiting>* out) {
  simdjson::dom::array statuses;
  if (status[init ? "initContainerStatuses" : "containerStatuses"].get(statuses) !=
      simdjson::SUCCESS) {
    return;
  }
  for (const auto c : statuses) {
    simdjson::dom::element waiting;
    if (c["state"]["waiting"].get(waiting) != simdjson::SUCCESS) {
      continue;
    }
    CachedPod::Waiting w;
    w.container = string_at(c, "name");
    w.init = init;
    w.reason = string_at(waiting, "reason");
    w.message = string_at(waiting, "message");
    w.restarts = kube::int_at(c, "restartCount");
    simdjson::dom::element terminated;
    if (w.reason == "CrashLoopBackOff" &&
        c["lastState"]["terminated"].get(terminated) == simdjson::SUCCESS) {
      int64_t code = 0;
      if (terminated["exitCode"].get(code) == simdjson::SUCCESS) {
        w.last_exit_code = code;
      }
      w.last_exit_message = string_at(terminated, "message");
    }
    out->push_back(std::move(w));
  }
}

}  // namespace

const std::string* CachedPod::annotation(std::string_view key) const {
  for (const auto& [k, v] : annotations) {
    if (k == key) {
      return &v;
    }
  }
  return nullptr;
}

const CachedPod::Condition* CachedPod::condition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) {
      return &c;
    }
  }
  return nullptr;
}

kube::DecodeResult decode_cached_pod(simdjson::dom::element object, CachedPod* out) {
  if (auto ok = kube::decode_meta(object, &out->meta); !ok) {
    return ok;
  }
  simdjson::dom::element meta = object["metadata"];
  out->created = string_at(meta, "creationTimestamp");
  out->deleted_at = string_at(meta, "deletionTimestamp");
  simdjson::dom::object annotations;
  if (meta["annotations"].get(annotations) == simdjson::SUCCESS) {
    for (const auto field : annotations) {
      std::string_view value;
      if (field.key != kLastApplied && field.value.get(value) == simdjson::SUCCESS) {
        out->annotations.emplace_back(field.key, value);
      }
    }
    out->annotations.shrink_to_fit();
  }
  simdjson::dom::element spec;
  if (object["spec"].get(spec) == simdjson::SUCCESS) {
    out->node_name = string_at(spec, "nodeName");
    out->hostname = string_at(spec, "hostname");
    out->affinity_node = affinity_node_of(spec);
  }
  simdjson::dom::element status;
  if (object["status"].get(status) == simdjson::SUCCESS) {
    out->phase = string_at(status, "phase");
    out->start_time = string_at(status, "startTime");
    out->ip = string_at(status, "podIP");
    simdjson::dom::array conditions;
    if (status["conditions"].get(conditions) == simdjson::SUCCESS) {
      for (const auto c : conditions) {
        out->conditions.push_back(
            {std::string(string_at(c, "type")), std::string(string_at(c, "status")),
             std::string(string_at(c, "reason")), std::string(string_at(c, "message")),
             std::string(string_at(c, "lastTransitionTime"))});
      }
      out->conditions.shrink_to_fit();
    }
    decode_waiting(status, true, &out->waiting);
    decode_waiting(status, false, &out->waiting);
    out->waiting.shrink_to_fit();
  }
  return std::monostate{};
}

json pod_document(const CachedPod& pod) {
  json meta = {{"name", pod.meta.name},
               {"namespace", pod.meta.namespace_name},
               {"uid", pod.meta.uid},
               {"resourceVersion", pod.meta.resource_version},
               {"creationTimestamp", pod.created}};
  if (pod.meta.deleting) {
    meta["deletionTimestamp"] = pod.deleted_at;
  }
  for (const auto& [k, v] : pod.meta.labels) {
    meta["labels"][k] = v;
  }
  for (const auto& [k, v] : pod.annotations) {
    meta["annotations"][k] = v;
  }
  for (const auto& o : pod.meta.owner_references) {
    meta["ownerReferences"].push_back({{"apiVersion", o.api_version},
                                       {"kind", o.kind},
                                       {"name", o.name},
                                       {"uid", o.uid},
                                       {"controller", o.controller}});
  }
  json spec = json::object();
  if (!pod.node_name.empty()) {
    spec["nodeName"] = pod.node_name;
  }
  if (!pod.hostname.empty()) {
    spec["hostname"] = pod.hostname;
  }
  if (!pod.affinity_node.empty()) {
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"] = json::array(
            {{{"matchFields", json::array({{{"key", "metadata.name"},
                                            {"operator", "In"},
                                            {"values", json::array({pod.affinity_node})}}})}}});
  }
  json status = json::object();
  if (!pod.phase.empty()) {
    status["phase"] = pod.phase;
  }
  if (!pod.start_time.empty()) {
    status["startTime"] = pod.start_time;
  }
  if (!pod.ip.empty()) {
    status["podIP"] = pod.ip;
  }
  for (const auto& c : pod.conditions) {
    json condition = {{"type", c.type}, {"status", c.status}};
    for (const auto& [key, value] :
         {std::pair{"reason", &c.reason}, std::pair{"message", &c.message},
          std::pair{"lastTransitionTime", &c.last_transition}}) {
      if (!value->empty()) {
        condition[key] = *value;
      }
    }
    status["conditions"].push_back(std::move(condition));
  }
  for (const auto& w : pod.waiting) {
    json c = {{"name", w.container}, {"restartCount", w.restarts}};
    c["state"]["waiting"]["reason"] = w.reason;
    if (!w.message.empty()) {
      c["state"]["waiting"]["message"] = w.message;
    }
    if (w.last_exit_code) {
      c["lastState"]["terminated"] = {{"exitCode", *w.last_exit_code},
                                      {"message", w.last_exit_message}};
    }
    status[w.init ? "initContainerStatuses" : "containerStatuses"].push_back(std::move(c));
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", std::move(meta)},
          {"spec", std::move(spec)},
          {"status", std::move(status)}};
}

}  // namespace tightrope::op
