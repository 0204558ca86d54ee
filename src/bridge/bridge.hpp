// slurm-bridge's runtime: Slurm schedules the pods that name the bridge's scheduler. Pods,
// Nodes, batch Jobs and Namespaces come from informers; Slurm's jobs and nodes from the change
// feed (one conditional request a second, nothing decoded when nothing changed). Two
// controllers act on what changed:
//   groups: the pods of one Slurm job (workload.hpp) — submit, tell pods why they wait, bind
//           them to the Nodes of the job's allocation, cancel the job when they end or go,
//           delete them when the job ends;
//   nodes:  labelled Nodes ↔ Slurm external nodes — register, taint, cordon ↔ drain, remove.
// Every decision is a pure plan (plan.hpp). Nothing is acted on while Slurm cannot be read:
// a pod is never deleted, nor a job cancelled, on a guess.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/metrics.hpp"
#include "bridge/objects.hpp"
#include "bridge/plan.hpp"
#include "bridge/well_known.hpp"
#include "bridge/workload.hpp"
#include "kube/client.hpp"
#include "kube/controller.hpp"
#include "kube/events.hpp"
#include "kube/informer.hpp"
#include "kube/manager.hpp"
#include "slurm/client.hpp"
#include "slurm/feed.hpp"

namespace tightrope::bridge {

struct BridgeOptions {
  std::string scheduler_name{kDefaultSchedulerName};
  std::string partition = "slurm-bridge";  // of jobs that name none; the feature of new nodes
  std::string mcs_label;                   // on every job ("": none)
  std::string default_user;                // Slurm user of namespaces without one ("": token's)
  int group_workers = 4;
  int node_workers = 1;
  std::chrono::milliseconds slurm_period{1000};
  // How often every pod and Node is looked at again, whatever happened: a safety net only.
  std::chrono::seconds resync{60};
};

class Bridge final : public kube::Runnable {
 public:
  Bridge(kube::Client& kube, kube::EventRecorder& events, slurm::Client& slurm,
         BridgeOptions options, metrics::Registry* metrics);
  ~Bridge() override;
  Bridge(const Bridge&) = delete;
  Bridge& operator=(const Bridge&) = delete;

  void start_informers() override;
  bool wait_for_sync(std::chrono::milliseconds timeout) override;
  bool synced() const override;
  void start_controllers() override;
  void stop_controllers() override;
  void stop() override;

  slurm::ChangeFeed& feed() { return feed_; }

 private:
  class GroupReconciler;
  class NodeReconciler;

  kube::ReconcileOutcome reconcile_group(const std::string& key);
  // The jobs that claim group `key`: as the feed read them, and those submitted a moment ago
  // (whose pods' labels the cache may not show yet: without them, the group would be
  // submitted twice).
  std::set<int64_t> claiming_jobs(const std::string& key);
  // Job `id` as the snapshot, a moment-old submission or cancellation, or a direct read says;
  // nullopt when Slurm cannot be asked.
  std::optional<JobView> job_view(int64_t id, const slurm::SlurmSnapshot& snapshot);
  kube::ReconcileOutcome reconcile_node(const std::string& slurm_name);

  // How a group's plan went: done, failed (retried with backoff), or waiting for something no
  // event announces (a Node that can run it: looked at again after a while).
  enum class Outcome { kDone, kRetry, kLater };
  Outcome carry_out(const GroupKey& group, const GroupPlan& plan, const BatchJob* batch_job);
  Outcome submit(const GroupKey& group, const std::vector<const Pod*>& pods,
                 const BatchJob* batch_job);
  bool place(int64_t job_id, const std::vector<const Pod*>& pods);
  bool label(const Pod& pod, int64_t job_id);
  bool release(const Pod& pod);
  bool tell_waiting(const Pod& pod, const std::string& reason, const std::string& message);
  bool bind(const Pod& pod, const std::string& node);

  // The annotations of the workload a group's pods belong to (fetched; empty when unreadable).
  Annotations workload_annotations(const GroupKey& group, const Pod& pod,
                                   const BatchJob* batch_job);
  std::optional<int64_t> pod_group_min_member(const GroupKey& group);
  JobDefaults defaults_for(const std::string& namespace_name) const;

  void on_slurm_changes(const slurm::ChangeFeed::Changes& changes);
  void enqueue_every_group();
  static kube::ObjectReference reference(const Pod& pod);

  kube::Client& kube_;
  kube::EventRecorder& events_;
  slurm::Client& slurm_;
  BridgeOptions options_;
  slurm::ChangeFeed feed_;
  std::unique_ptr<kube::Informer<Pod>> pods_owned_;
  std::unique_ptr<kube::Informer<Node>> nodes_owned_;
  std::unique_ptr<kube::Informer<BatchJob>> batch_jobs_owned_;
  std::unique_ptr<kube::Informer<Namespace>> namespaces_owned_;
  kube::Informer<Pod>* pods_ = nullptr;
  kube::Informer<Node>* nodes_ = nullptr;
  kube::Informer<BatchJob>* batch_jobs_ = nullptr;
  kube::Informer<Namespace>* namespaces_ = nullptr;
  std::unique_ptr<GroupReconciler> group_reconciler_;
  std::unique_ptr<NodeReconciler> node_reconciler_;
  std::unique_ptr<kube::Controller> groups_;
  std::unique_ptr<kube::Controller> nodes_controller_;

  // From the feed: the jobs whose admin comment claims each group, by group key.
  mutable std::mutex claims_mu_;
  std::map<std::string, std::set<int64_t>> claims_;

  // Jobs just submitted or cancelled, which the feed may not show so yet: PENDING (CANCELLED)
  // until it does, so that a second look does not act twice.
  struct Recent {
    std::chrono::steady_clock::time_point at;
    bool cancelled = false;
    std::string group;          // the group key it was submitted for
    std::string admin_comment;  // its claim, as submitted
  };
  void remember(int64_t job_id, bool cancelled, const std::string& group = "",
                const std::string& admin_comment = "");
  // Registered in Slurm a moment ago, which the feed may not show yet.
  bool registered_recently(const std::string& slurm_name);
  std::mutex recent_mu_;
  std::map<int64_t, Recent> recent_;
  std::map<std::string, std::chrono::steady_clock::time_point> registered_;

  metrics::CounterFamily* submitted_ = nullptr;
  metrics::CounterFamily* bound_ = nullptr;
  metrics::CounterFamily* cancelled_ = nullptr;
  metrics::CounterFamily* deleted_ = nullptr;
  metrics::CounterFamily* failures_ = nullptr;
};

// The index of the pod store that gathers a group's pods: "ns/PodGroup/g", "ns/LeaderWorkerSet/
// lws-0", "ns/Job/j" (all of a Job's pods, gang or not), else "ns/Pod/p".
std::string group_index_key(const Pod& pod);

}  // namespace tightrope::bridge
