#include "bridge/plan.hpp"

#include <algorithm>
#include <charconv>

#include "bridge/well_known.hpp"
#include "bridge/workload.hpp"
#include "doctor/checks.hpp"

namespace tightrope::bridge {

namespace {

std::optional<int64_t> job_label(const Pod& pod) {
  const std::string* label = pod.meta.label(kLabelJobId);
  int64_t id = 0;
  if (label == nullptr ||
      std::from_chars(label->data(), label->data() + label->size(), id).ec != std::errc()) {
    return std::nullopt;
  }
  return id;
}

std::string words(const std::vector<std::string>& state) {
  std::string out;
  for (const auto& w : state) {
    out.append(out.empty() ? "" : "+").append(w);
  }
  return out.empty() ? "UNKNOWN" : out;
}

}  // namespace

std::string pending_reason(const slurm::Job& job) {
  const std::string& reason = job.state_reason.empty() ? std::string("None") : job.state_reason;
  return "is pending (" + reason + "): " + doctor::explain_pending_reason(reason).meaning;
}

GroupPlan plan_group(const GroupState& state) {
  GroupPlan plan;
  // A pod is done with for its job once it ended, or is being deleted and will never run on:
  // not bound yet, or bound to a Node that is gone or not Ready (its kubelet cannot report).
  const auto finished = [&state](const Pod* pod) {
    if (pod->terminal()) {
      return true;
    }
    if (!pod->meta.deleting) {
      return false;
    }
    if (!pod->bound()) {
      return true;
    }
    const auto node = state.nodes.find(pod->node_name);
    return node == state.nodes.end() || node->second == nullptr || !node->second->ready;
  };
  std::map<int64_t, std::vector<const Pod*>> by_job;
  std::vector<const Pod*> unlabeled;
  for (const Pod* pod : state.pods) {
    if (const auto id = job_label(*pod)) {
      by_job[*id].push_back(pod);
    } else {
      unlabeled.push_back(pod);
    }
  }
  bool job_active = false;
  for (const auto& [id, pods] : by_job) {
    const auto found = state.jobs.find(id);
    if (found == state.jobs.end()) {
      continue;  // not looked up yet: act on nothing rather than on a guess
    }
    const JobView& view = found->second;
    const std::string job_name = "Slurm job " + std::to_string(id);
    if (!view.known || !view.job.active()) {
      const std::string why = !view.known ? "Slurm no longer has job " + std::to_string(id)
                                          : job_name + " ended " + words(view.job.state);
      for (const Pod* pod : pods) {
        if (!pod->terminal() && !pod->meta.deleting) {
          plan.remove.emplace_back(pod, why);
        }
        if (pod->finalizer) {
          plan.release.push_back(pod);
        }
      }
      continue;
    }
    std::vector<const Pod*> live;
    std::copy_if(pods.begin(), pods.end(), std::back_inserter(live),
                 [&](const Pod* p) { return !finished(p); });
    if (live.empty()) {
      const bool ended =
          std::all_of(pods.begin(), pods.end(), [](const Pod* p) { return p->terminal(); });
      plan.cancel.emplace_back(id, ended ? "its pods ended" : "its pods were deleted");
      for (const Pod* pod : pods) {
        if (pod->finalizer) {
          plan.release.push_back(pod);
        }
      }
      continue;
    }
    job_active = true;
    const bool unplaced = std::any_of(
        live.begin(), live.end(), [](const Pod* p) { return !p->bound() && !p->meta.deleting; });
    if (view.job.has("RUNNING") && !view.job.nodes.empty()) {
      if (unplaced) {
        plan.place.push_back(id);
      }
    } else if (view.job.has("PENDING") && !view.job.state_reason.empty()) {
      // (A job only just submitted, which the feed has not read yet, has no reason to tell.)
      const std::string message = job_name + " " + pending_reason(view.job);
      for (const Pod* pod : live) {
        if (!pod->bound() && pod->scheduled_message != message) {
          plan.waiting.emplace_back(pod, message);
        }
      }
    }
  }
  // Pods that no label names a job for yet but that an active job claims (its labels were not
  // written, or not seen yet): they are the job's, not a new one's. A claiming job that no pod
  // names and that claims none left is cancelled.
  std::map<std::string, int64_t> claimed_by;
  for (const auto& [id, view] : state.jobs) {
    if (!view.known || !view.job.active()) {
      continue;
    }
    if (const auto claim = JobClaim::decode(view.job.admin_comment)) {
      for (const auto& key : claim->pods) {
        claimed_by.emplace(key, id);
      }
    }
  }
  std::set<const Pod*> adopted;
  std::set<int64_t> adopting;
  for (const Pod* pod : unlabeled) {
    const auto claim = claimed_by.find(pod->meta.namespace_name + "/" + pod->meta.name);
    if (claim != claimed_by.end() && !finished(pod)) {
      plan.adopt.emplace_back(pod, claim->second);
      adopted.insert(pod);
      adopting.insert(claim->second);
      job_active = true;
    }
  }
  for (const auto& [id, view] : state.jobs) {
    if (!by_job.contains(id) && view.known && view.job.active() && !adopting.contains(id)) {
      plan.cancel.emplace_back(id, "none of the pods it was submitted for is left");
    }
  }
  std::vector<const Pod*> candidates;
  for (const Pod* pod : unlabeled) {
    if (finished(pod)) {
      if (pod->finalizer) {
        plan.release.push_back(pod);
      }
    } else if (!adopted.contains(pod) && !pod->bound()) {
      candidates.push_back(pod);
    }
  }
  if (candidates.empty()) {
    return plan;
  }
  // A group is all or nothing; pods that join one whose job already runs get a job of their own.
  if (job_active || static_cast<int64_t>(candidates.size()) >= state.size) {
    plan.submit = candidates;
  } else {
    const std::string message =
        "waits for the rest of its group: " + std::to_string(candidates.size()) + " of " +
        std::to_string(state.size) + " pods exist";
    for (const Pod* pod : candidates) {
      if (pod->scheduled_message != message) {
        plan.waiting.emplace_back(pod, message);
      }
    }
  }
  return plan;
}

std::string node_conf(const Node& node, const std::string& default_partition) {
  const std::string* partitions = node.annotation(kAnnotationExternalNodePartitions);
  std::string line = "NodeName=" + node.slurm_name();
  if (!node.address.empty()) {
    line += " NodeAddr=" + node.address;
  }
  line += " State=EXTERNAL CPUs=" +
          std::to_string(std::max<int64_t>(1, node.allocatable.cpu_milli / 1000)) + " RealMemory=" +
          std::to_string(std::max<int64_t>(1, node.allocatable.memory_bytes >> 20));
  const std::string features =
      partitions != nullptr && !partitions->empty() ? *partitions : default_partition;
  if (!features.empty()) {
    line += " Features=" + features;
  }
  if (node.allocatable.gpus > 0) {
    // Without a gres.conf line slurmctld drops a GPU that names no device file.
    const std::string count = std::to_string(node.allocatable.gpus);
    line += " Gres=gpu:" + count + " GresConf=name=gpu,count=" + count;
  }
  if (const std::string* topology = node.annotation(kAnnotationTopology);
      topology != nullptr && !topology->empty()) {
    line += " Topology=" + *topology;
  }
  return line;
}

NodePlan plan_node(const NodeState& state) {
  NodePlan plan;
  const Node* node = state.node;
  const slurm::Node* slurm = state.slurm;
  const bool wanted = node != nullptr && node->external() && !node->meta.deleting;
  if (!wanted) {
    if (node != nullptr && node->annotation(kAnnotationCordonedBy) != nullptr) {
      plan.uncordon = true;
    }
    if (node != nullptr && std::any_of(node->taints.begin(), node->taints.end(),
                                       [](const Taint& t) { return t.key == kTaintManagedNode; })) {
      plan.untaint = true;
    }
    if (slurm == nullptr || !slurm->has("EXTERNAL")) {
      return plan;
    }
    if (slurm->busy()) {
      // Its jobs' pods end with the Node; the node goes once they have.
      if (!slurm->drain()) {
        plan.drain = std::string(kDrainReasonPrefix) + "Kubernetes Node " +
                     (node != nullptr ? node->meta.name : slurm->name) + " left the bridge";
      }
      plan.note = "waits for its jobs to end before it leaves Slurm";
    } else {
      plan.remove = true;
    }
    return plan;
  }
  if (!std::any_of(node->taints.begin(), node->taints.end(),
                   [](const Taint& t) { return t.key == kTaintManagedNode; })) {
    plan.taint = true;
  }
  if (slurm == nullptr) {
    plan.create = node_conf(*node, state.default_partition);
    if (node->unschedulable) {
      plan.drain =
          std::string(kDrainReasonPrefix) + "Kubernetes Node " + node->meta.name + " is cordoned";
    }
    return plan;
  }
  const bool ours = slurm->reason.starts_with(kDrainReasonPrefix);
  const std::string* cordoned_by = node->annotation(kAnnotationCordonedBy);
  if (node->unschedulable && cordoned_by == nullptr) {
    // Someone cordoned the Node: Slurm must not start anything new there.
    if (!slurm->drain()) {
      plan.drain =
          std::string(kDrainReasonPrefix) + "Kubernetes Node " + node->meta.name + " is cordoned";
    }
  } else if (!node->unschedulable && slurm->drain()) {
    if (ours || cordoned_by != nullptr) {
      // The cordon that drained it was lifted, or someone uncordoned the Node that mirrored a
      // Slurm drain: Kubernetes says the node is back in service.
      plan.undrain = true;
      plan.uncordon = cordoned_by != nullptr;
    } else {
      plan.cordon = slurm->reason.empty() ? std::string("drained in Slurm") : slurm->reason;
    }
  } else if (cordoned_by != nullptr && !slurm->drain()) {
    plan.uncordon = true;  // the Slurm drain it mirrored was lifted
  }
  return plan;
}

}  // namespace tightrope::bridge
