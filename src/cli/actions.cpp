#include "cli/actions.hpp"

#include <thread>

#include "api/well_known.hpp"
#include "operator/build/common.hpp"

namespace tightrope::cli {
namespace {

namespace build = op::build;

using json_pointer = json::json_pointer;

const json* find_pod(const ClusterView& view, const std::string& target) {
  for (const auto& p : view.pods) {
    if (label(p, std::string(api::kLabelName)) == "slurmd" && name_of(p) == target) {
      return &p;
    }
  }
  return view.pod_of_slurm_node(target);
}

std::string hostname_of(const json& pod) {
  return label(pod, std::string(api::kLabelNodeSetPodHostname));
}

// The Slurm nodes of the cluster's workers on a Kubernetes Node; with `requested` false, only
// those without a drain request of their own.
std::vector<std::string> workers_on(const ClusterView& view, const std::string& node,
                                    bool requested = true) {
  std::vector<std::string> hosts;
  for (const auto& p : view.pods) {
    if (label(p, std::string(api::kLabelName)) == "slurmd" &&
        str_at(p, "/spec/nodeName"_json_pointer) == node &&
        (requested || annotation(p, std::string(api::kAnnotationPodDrainReason)).empty())) {
      hosts.push_back(hostname_of(p));
    }
  }
  return hosts;
}

// Waits until `done` holds for every one of the Slurm nodes, asking slurmrestd about once a
// second, within one --wait for all of them.
ActionResult wait_for(kube::Client& kube, const ClusterView& view, const ActionOptions& options,
                      const std::vector<std::string>& nodes, const std::string& what,
                      const std::string& message, bool (*done)(const slurm::Node&)) {
  if (options.wait.count() <= 0 || nodes.empty()) {
    return message;
  }
  auto client = connect_slurm(kube, view, options.slurm);
  if (!client) {
    return fail(message + "; cannot wait: " + client.error());
  }
  const auto deadline = std::chrono::steady_clock::now() + options.wait;
  std::string last = "not asked yet";
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> shown;
    for (const auto& name : nodes) {
      auto n = (*client)->get_node(name);
      if (!n) {
        last = name + ": " + n.error().message;
        break;
      }
      if (!done(*n)) {
        last = name + " is " + node_state(*n);
        break;
      }
      shown.push_back(name + " " + node_state(*n) +
                      (n->reason.empty() ? "" : " (" + n->reason + ")"));
    }
    if (shown.size() == nodes.size()) {
      return message + "; Slurm shows " + build::join(shown, ", ");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return fail(message + "; but after " + std::to_string(options.wait.count()) + "s Slurm is not " +
              what + ": " + last + " (is the operator running? kubectl slurm doctor)");
}

bool drained(const slurm::Node& n) {
  return n.drain();
}
bool undrained(const slurm::Node& n) {
  return !n.drain();
}

std::string operator_reason(const std::string& reason) {
  return std::string(api::kReasonPrefix) + reason;
}

}  // namespace

ActionResult cordon(kube::Client& kube, const ClusterView& view, const std::string& node,
                    const ActionOptions& options) {
  if (view.kube_node(node) == nullptr) {
    return fail("no Kubernetes Node " + node);
  }
  json patch = {{"spec", {{"unschedulable", true}}}};
  if (!options.reason.empty()) {
    patch["metadata"]["annotations"][std::string(api::kAnnotationNodeCordonReason)] =
        options.reason;
  }
  if (auto done = kube.patch(kube::resources::nodes(), "", node, kube::PatchType::kMerge, patch);
      !done) {
    return fail("cordon Node " + node + ": " + done.error().message);
  }
  const auto hosts = workers_on(view, node);
  std::string message = "Node " + node + " cordoned";
  if (hosts.empty()) {
    return message + "; no worker of " + view.controller_name() + " runs there";
  }
  message += "; the operator drains Slurm node" + std::string(hosts.size() == 1 ? " " : "s ") +
             build::join(hosts, ", ") + " (running jobs finish, no new job starts there)";
  return wait_for(kube, view, options, hosts, "drained", message, drained);
}

ActionResult uncordon(kube::Client& kube, const ClusterView& view, const std::string& node,
                      const ActionOptions& options) {
  if (view.kube_node(node) == nullptr) {
    return fail("no Kubernetes Node " + node);
  }
  const json patch = {
      {"spec", {{"unschedulable", nullptr}}},
      {"metadata", {{"annotations", {{std::string(api::kAnnotationNodeCordonReason), nullptr}}}}}};
  if (auto done = kube.patch(kube::resources::nodes(), "", node, kube::PatchType::kMerge, patch);
      !done) {
    return fail("uncordon Node " + node + ": " + done.error().message);
  }
  const auto hosts = workers_on(view, node, /*requested=*/false);
  const std::string message = "Node " + node + " uncordoned";
  if (hosts.empty()) {
    return message;
  }
  return wait_for(kube, view, options, hosts, "undrained",
                  message + "; the operator undoes the drains it made for the cordon", undrained);
}

ActionResult drain(kube::Client& kube, const ClusterView& view, const std::string& target,
                   const ActionOptions& options) {
  if (options.reason.empty()) {
    return fail("a drain needs --reason: Slurm shows it to users and the next administrator");
  }
  if (const json* pod = find_pod(view, target)) {
    const std::string host = hostname_of(*pod);
    const json patch = {
        {"metadata",
         {{"annotations", {{std::string(api::kAnnotationPodDrainReason), options.reason}}}}}};
    if (auto done = kube.patch(kube::resources::pods(), view.namespace_name, name_of(*pod),
                               kube::PatchType::kMerge, patch);
        !done) {
      return fail("annotate pod " + name_of(*pod) + ": " + done.error().message);
    }
    return wait_for(kube, view, options, {host}, "drained",
                    "pod " + view.namespace_name + "/" + name_of(*pod) +
                        " annotated; the operator drains Slurm node " + host + " with reason \"" +
                        operator_reason(options.reason) + "\" and keeps it drained until undrain",
                    drained);
  }
  // A Slurm node without a pod (a slurmd outside Kubernetes): an administrator's drain in Slurm.
  auto client = connect_slurm(kube, view, options.slurm);
  if (!client) {
    return fail("no worker pod or Slurm node " + target + " to drain: " + client.error());
  }
  auto node = (*client)->get_node(target);
  if (!node) {
    return fail("no worker pod of " + view.controller_name() + " and no Slurm node named " +
                target);
  }
  if (auto done = (*client)->drain(target, options.reason); !done) {
    return fail("drain " + target + " in Slurm: " + done.error().message);
  }
  return "Slurm node " + target + " has no pod: drained in Slurm with reason \"" + options.reason +
         "\" (an administrator's drain, which the operator never undoes)";
}

ActionResult undrain(kube::Client& kube, const ClusterView& view, const std::string& target,
                     const ActionOptions& options) {
  const json* pod = find_pod(view, target);
  const std::string host = pod != nullptr ? hostname_of(*pod) : target;
  if (pod != nullptr) {
    if (const json* node = view.kube_node(str_at(*pod, "/spec/nodeName"_json_pointer));
        node != nullptr && node->value("/spec/unschedulable"_json_pointer, false)) {
      return fail("Slurm node " + host + " is drained because Node " + name_of(*node) +
                  " is cordoned: kubectl slurm uncordon " + name_of(*node));
    }
    const std::string requested = annotation(*pod, std::string(api::kAnnotationPodCordonRequested));
    if (!requested.empty() && requested != "false") {
      return fail("Slurm node " + host + " is drained because pod " + name_of(*pod) + " has " +
                  std::string(api::kAnnotationPodCordonRequested) + "=" + requested +
                  " (a health check's request): kubectl annotate pod -n " + view.namespace_name +
                  " " + name_of(*pod) + " " + std::string(api::kAnnotationPodCordonRequested) +
                  "-");
    }
    // What a person asked for on the pod: kubectl slurm drain's request, a pod-cordon by hand
    // (one without the operator's mark). The operator takes its own mark back by itself.
    json requests = json::object();
    if (!annotation(*pod, std::string(api::kAnnotationPodDrainReason)).empty()) {
      requests[std::string(api::kAnnotationPodDrainReason)] = nullptr;
    }
    if (annotation(*pod, std::string(api::kAnnotationPodCordon)) == "true" &&
        annotation(*pod, std::string(api::kAnnotationPodOperatorCordon)) != "true") {
      requests[std::string(api::kAnnotationPodCordon)] = nullptr;
    }
    if (!requests.empty()) {
      const json patch = {{"metadata", {{"annotations", requests}}}};
      if (auto done = kube.patch(kube::resources::pods(), view.namespace_name, name_of(*pod),
                                 kube::PatchType::kMerge, patch);
          !done) {
        return fail("annotate pod " + name_of(*pod) + ": " + done.error().message);
      }
      return wait_for(kube, view, options, {host}, "undrained",
                      "drain request removed from pod " + view.namespace_name + "/" +
                          name_of(*pod) + "; the operator undrains Slurm node " + host,
                      undrained);
    }
  }
  // Not the operator's: undrain in Slurm, unless the operator drained it (scale-in, update).
  auto client = connect_slurm(kube, view, options.slurm);
  if (!client) {
    return fail("cannot ask Slurm about " + host + ": " + client.error());
  }
  auto node = (*client)->get_node(host);
  if (!node) {
    return fail("Slurm node " + host + ": " + node.error().message);
  }
  if (!node->drain()) {
    return "Slurm node " + host + " is not drained (" + node_state(*node) + ")";
  }
  if (node->reason.starts_with(api::kReasonPrefix)) {
    return fail("Slurm node " + host + " was drained by the operator (\"" + node->reason +
                "\"): it undoes that drain itself when the reason is gone (a scale-in or update "
                "in progress ends by deleting the pod)");
  }
  if (auto done = (*client)->undrain(host); !done) {
    return fail("undrain " + host + " in Slurm: " + done.error().message);
  }
  return "Slurm node " + host + " undrained (it was an administrator's drain: \"" + node->reason +
         "\")";
}

}  // namespace tightrope::cli
