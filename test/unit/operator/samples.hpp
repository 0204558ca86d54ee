// Resources the operator's unit tests share.
#pragma once

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "kube/config.hpp"
#include "operator/cached_pod.hpp"

namespace tightrope::op::testing {

// The Controller hpc/slurm, with its Slurm and JWT keys.
inline api::Controller controller() {
  return api::testing::decoded(api::decode_controller(api::testing::yaml_to_json(R"(
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata: {name: slurm, namespace: hpc, uid: c-uid}
spec:
  slurmKeyRef: {name: slurm-key, key: slurm.key}
  jwtKeyRef: {name: jwt-key, key: jwt.key}
)")
                                                          .front()));
}

// A pod document as the operator's cache keeps it; one without a name reads as an empty pod.
inline CachedPod cached_pod(const nlohmann::json& pod) {
  simdjson::dom::parser parser;
  const std::string text = pod.dump();
  CachedPod out;
  simdjson::dom::element element;
  if (parser.parse(text).get(element) != simdjson::SUCCESS || !decode_cached_pod(element, &out)) {
    return {};
  }
  return out;
}

// An API server no test reaches: a cache's informers filled by hand are never started.
inline kube::Config unreached_api_server() {
  kube::Config config;
  config.server = "https://127.0.0.1:1";
  return config;
}

}  // namespace tightrope::op::testing
