// A worker pod as the operator's cache keeps it: the fields its controllers and its doctor read,
// decoded once from the watch, and nothing else. Containers, volumes, tolerations, managed
// fields and running containers' statuses are never kept: a cached pod is a few hundred bytes of
// strings where the whole document is about 19 KB, which at 10,000 workers was most of the
// operator's memory.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/object.hpp"

namespace tightrope::op {

struct CachedPod {
  kube::ObjectMeta meta;
  std::string created;     // metadata.creationTimestamp
  std::string deleted_at;  // metadata.deletionTimestamp, "" unless meta.deleting
  // Every annotation but kubectl's last-applied copy of the object.
  std::vector<std::pair<std::string, std::string>> annotations;

  std::string node_name;  // spec.nodeName; "" while unscheduled
  std::string hostname;   // spec.hostname
  // The Node a required node affinity names by metadata.name (how a DaemonSet-mode pod is
  // pinned), "" when none does.
  std::string affinity_node;

  std::string phase;  // status.phase, "" before the kubelet has written one
  std::string start_time;
  std::string ip;  // status.podIP, "" before the kubelet has written one
  struct Condition {
    std::string type, status, reason, message, last_transition;
  };
  std::vector<Condition> conditions;
  // A container that waits (image pulls, crash loops, config errors): the only container
  // statuses that say something a reconcile or a check acts on.
  struct Waiting {
    std::string container;
    bool init = false;
    std::string reason, message;
    int64_t restarts = 0;
    // The last exit, kept for a crash loop only: what the kubelet says of why it crashed.
    std::optional<int64_t> last_exit_code;
    std::string last_exit_message;
  };
  std::vector<Waiting> waiting;

  const std::string* annotation(std::string_view key) const;
  const Condition* condition(std::string_view type) const;
};

// The projection of a pod object as a watch or a list delivers it.
kube::DecodeResult decode_cached_pod(simdjson::dom::element object, CachedPod* out);
// The pod document the doctor's checks read, made from the projection: what the projection
// keeps, in the places the API puts it.
nlohmann::json pod_document(const CachedPod& pod);

}  // namespace tightrope::op
