#include "bridge/placement.hpp"

#include <algorithm>
#include <charconv>

#include "bridge/well_known.hpp"

namespace tightrope::bridge {

namespace {

bool tolerates(const Pod& pod, const Taint& taint) {
  return std::any_of(pod.tolerations.begin(), pod.tolerations.end(), [&](const Toleration& t) {
    if (!t.effect.empty() && t.effect != taint.effect) {
      return false;
    }
    if (t.op == "Exists") {
      return t.key.empty() || t.key == taint.key;
    }
    return t.key == taint.key && t.value == taint.value;
  });
}

std::string mib(int64_t bytes) {
  return std::to_string(bytes >> 20) + "Mi";
}

int64_t completion_index(const Pod& pod) {
  const std::string* index = pod.annotation(kAnnotationCompletionIndex);
  int64_t n = -1;
  if (index != nullptr) {
    std::from_chars(index->data(), index->data() + index->size(), n);
  }
  return n;
}

}  // namespace

bool tolerates_bridge(const Pod& pod, std::string_view scheduler_name) {
  return tolerates(pod,
                   Taint{std::string(kTaintManagedNode), std::string(scheduler_name), "NoExecute"});
}

std::string unfit_reason(const Pod& pod, const Node& node) {
  if (!node.ready) {
    return "Node " + node.meta.name + " is not Ready";
  }
  for (const Taint& taint : node.taints) {
    // The bridge's own taint, a preference, and a cordon (Slurm drains a cordoned node and so
    // waits for it by itself; excluding it would refuse a job that could run once uncordoned).
    if (taint.key == kTaintManagedNode || taint.effect == "PreferNoSchedule" ||
        taint.key == kTaintUnschedulable) {
      continue;
    }
    if (!tolerates(pod, taint)) {
      std::string why = "Node " + node.meta.name;
      why.append(" has taint ").append(taint.key);
      if (!taint.value.empty()) {
        why.append("=").append(taint.value);
      }
      return why.append(":").append(taint.effect).append(" that the pod does not tolerate");
    }
  }
  for (const auto& [key, value] : pod.node_selector) {
    const std::string* label = node.meta.label(key);
    if (label == nullptr || *label != value) {
      std::string why = "Node " + node.meta.name;
      return why.append(" does not have label ")
          .append(key)
          .append("=")
          .append(value)
          .append(" of the pod's nodeSelector");
    }
  }
  const Resources& need = pod.requests;
  const Resources& has = node.allocatable;
  if (need.cpu_milli > has.cpu_milli) {
    return "Node " + node.meta.name + " has " + std::to_string(has.cpu_milli) +
           "m CPU allocatable, the pod needs " + std::to_string(need.cpu_milli) + "m";
  }
  if (need.memory_bytes > has.memory_bytes) {
    return "Node " + node.meta.name + " has " + mib(has.memory_bytes) +
           " memory allocatable, the pod needs " + mib(need.memory_bytes);
  }
  if (need.gpus > has.gpus) {
    return "Node " + node.meta.name + " has " + std::to_string(has.gpus) +
           " GPUs allocatable, the pod needs " + std::to_string(need.gpus);
  }
  return "";
}

std::vector<std::string> excluded_nodes(const std::vector<const Pod*>& pods,
                                        const std::vector<const Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* node : nodes) {
    if (std::any_of(pods.begin(), pods.end(),
                    [node](const Pod* p) { return !unfit_reason(*p, *node).empty(); })) {
      out.push_back(node->slurm_name());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::string> assign_pods(const std::vector<const Pod*>& pods,
                                               const std::vector<Slot>& slots) {
  std::map<std::string, int64_t> free;
  for (const Slot& slot : slots) {
    free[slot.node] += slot.pods;
  }
  std::vector<const Pod*> waiting;
  for (const Pod* pod : pods) {
    if (pod->bound()) {
      --free[pod->node_name];
    } else {
      waiting.push_back(pod);
    }
  }
  std::sort(waiting.begin(), waiting.end(), [](const Pod* a, const Pod* b) {
    const int64_t ia = completion_index(*a);
    const int64_t ib = completion_index(*b);
    return ia != ib ? ia < ib : a->meta.name < b->meta.name;
  });
  std::map<std::string, std::string> out;
  auto next = waiting.begin();
  for (const Slot& slot : slots) {
    while (next != waiting.end() && free[slot.node] > 0) {
      out[(*next)->meta.name] = slot.node;
      --free[slot.node];
      ++next;
    }
  }
  return out;
}

}  // namespace tightrope::bridge
