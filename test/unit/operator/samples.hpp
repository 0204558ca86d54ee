// Resources the operator's unit tests share.
#pragma once

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "kube/config.hpp"

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

// An API server no test reaches: a cache's informers filled by hand are never started.
inline kube::Config unreached_api_server() {
  kube::Config config;
  config.server = "https://127.0.0.1:1";
  return config;
}

}  // namespace tightrope::op::testing
