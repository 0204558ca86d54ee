#include "bridge/bridge.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

#include "base/log.hpp"
#include "base/text.hpp"
#include "kube/time.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::bridge {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const kube::ResourceType& batch_jobs() {
  static const kube::ResourceType type{"batch", "v1", "jobs", "Job", true};
  return type;
}
const kube::ResourceType& pod_groups() {
  static const kube::ResourceType type{"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup",
                                       true};
  return type;
}
const kube::ResourceType& leader_worker_sets() {
  static const kube::ResourceType type{"leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                                       "LeaderWorkerSet", true};
  return type;
}
const kube::ResourceType& job_sets() {
  static const kube::ResourceType type{"jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", true};
  return type;
}

constexpr const char* kGroupIndex = "group";
constexpr const char* kSlurmNameIndex = "slurm-name";
// How long a job the bridge just submitted counts as PENDING before the feed has seen it.
constexpr auto kRecentJob = std::chrono::seconds(30);

kube::ObjectReference node_reference(const Node& node) {
  return {"v1", "Node", "", node.meta.name, node.meta.uid};
}

std::string pod_key(const Pod& pod) {
  return pod.meta.namespace_name + "/" + pod.meta.name;
}

}  // namespace

std::string group_index_key(const Pod& pod) {
  const std::string& ns = pod.meta.namespace_name;
  if (const std::string* group = pod.meta.label(kLabelPodGroup); group != nullptr) {
    return GroupKey{ns, "PodGroup", *group}.key();
  }
  const std::string* lws = pod.meta.label(kLabelLwsName);
  const std::string* index = pod.meta.label(kLabelLwsGroupIndex);
  if (lws != nullptr && index != nullptr) {
    return GroupKey{ns, "LeaderWorkerSet", *lws + "-" + *index}.key();
  }
  if (const kube::OwnerReference* owner = pod.meta.controller_ref();
      owner != nullptr && owner->kind == "Job") {
    return GroupKey{ns, "Job", owner->name}.key();
  }
  return GroupKey{ns, "Pod", pod.meta.name}.key();
}

class Bridge::GroupReconciler final : public kube::Reconciler {
 public:
  explicit GroupReconciler(Bridge& bridge) : bridge_(bridge) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override {
    return bridge_.reconcile_group(request.key());
  }

 private:
  Bridge& bridge_;
};

class Bridge::NodeReconciler final : public kube::Reconciler {
 public:
  explicit NodeReconciler(Bridge& bridge) : bridge_(bridge) {}
  kube::ReconcileOutcome reconcile(const kube::Request& request) override {
    return bridge_.reconcile_node(request.name);
  }

 private:
  Bridge& bridge_;
};

Bridge::Bridge(kube::Client& kube, kube::EventRecorder& events, slurm::Client& slurm,
               BridgeOptions options, metrics::Registry* metrics)
    : kube_(kube), events_(events), slurm_(slurm), options_(std::move(options)), feed_(slurm, [&] {
        slurm::FeedOptions f;
        f.period = options_.slurm_period;
        f.follow_jobs = true;
        f.include_future = false;
        return f;
      }()) {
  kube::ReflectorOptions reflector;
  reflector.metrics = metrics;
  kube::ReflectorOptions pod_reflector = reflector;
  pod_reflector.field_selector = "spec.schedulerName=" + options_.scheduler_name;
  pods_owned_ = std::make_unique<kube::Informer<Pod>>(kube_, kube::resources::pods(), "",
                                                      decode_pod, pod_reflector);
  nodes_owned_ = std::make_unique<kube::Informer<Node>>(kube_, kube::resources::nodes(), "",
                                                        decode_node, reflector);
  batch_jobs_owned_ = std::make_unique<kube::Informer<BatchJob>>(kube_, batch_jobs(), "",
                                                                 decode_batch_job, reflector);
  namespaces_owned_ = std::make_unique<kube::Informer<Namespace>>(
      kube_, kube::resources::namespaces(), "", decode_namespace, reflector);
  pods_ = pods_owned_.get();
  nodes_ = nodes_owned_.get();
  batch_jobs_ = batch_jobs_owned_.get();
  namespaces_ = namespaces_owned_.get();

  group_reconciler_ = std::make_unique<GroupReconciler>(*this);
  node_reconciler_ = std::make_unique<NodeReconciler>(*this);
  kube::ControllerOptions groups;
  groups.name = "bridge-groups";
  groups.workers = options_.group_workers;
  groups.metrics = metrics;
  groups_ = std::make_unique<kube::Controller>(groups, *group_reconciler_);
  kube::ControllerOptions nodes;
  nodes.name = "bridge-nodes";
  nodes.workers = options_.node_workers;
  nodes.metrics = metrics;
  nodes_controller_ = std::make_unique<kube::Controller>(nodes, *node_reconciler_);

  if (metrics != nullptr) {
    submitted_ = &metrics->counter("tightrope_bridge_jobs_submitted_total",
                                   "Slurm external jobs the bridge submitted for pods", {});
    bound_ = &metrics->counter("tightrope_bridge_pods_bound_total",
                               "Pods the bridge bound to the Nodes of their job's allocation", {});
    cancelled_ =
        &metrics->counter("tightrope_bridge_jobs_cancelled_total",
                          "Jobs the bridge cancelled because their pods ended or went", {});
    deleted_ = &metrics->counter("tightrope_bridge_pods_deleted_total",
                                 "Pods the bridge deleted because their Slurm job ended", {});
    failures_ =
        &metrics->counter("tightrope_bridge_failures_total",
                          "Requests of the bridge that failed, by what it was doing", {"action"});
  }

  pods_->store().add_index(
      kGroupIndex, [](const Pod& pod) { return std::vector<std::string>{group_index_key(pod)}; });
  nodes_->store().add_index(kSlurmNameIndex, [](const Node& node) {
    return std::vector<std::string>{node.slurm_name()};
  });
  const auto enqueue_pod = [this](const Pod& pod) {
    groups_->enqueue(kube::Request::from_key(group_index_key(pod)));
  };
  pods_->on_add([enqueue_pod](const kube::Informer<Pod>::Ptr& pod) { enqueue_pod(*pod); });
  pods_->on_update(
      [enqueue_pod](const kube::Informer<Pod>::Ptr& before, const kube::Informer<Pod>::Ptr& after) {
        if (group_index_key(*before) != group_index_key(*after)) {
          enqueue_pod(*before);
        }
        enqueue_pod(*after);
      });
  pods_->on_delete([enqueue_pod](const kube::Deleted<Pod>& gone) { enqueue_pod(*gone.object); });
  pods_->set_resync_period(options_.resync);
  const auto enqueue_node = [this](const Node& node) {
    if (node.external() || node.annotation(kAnnotationCordonedBy) != nullptr ||
        std::any_of(node.taints.begin(), node.taints.end(),
                    [](const Taint& t) { return t.key == kTaintManagedNode; })) {
      nodes_controller_->enqueue({"", node.slurm_name()});
    }
  };
  nodes_->on_add([enqueue_node](const kube::Informer<Node>::Ptr& node) { enqueue_node(*node); });
  nodes_->on_update([enqueue_node](const kube::Informer<Node>::Ptr& before,
                                   const kube::Informer<Node>::Ptr& after) {
    enqueue_node(*before);
    enqueue_node(*after);
  });
  nodes_->on_delete([this](const kube::Deleted<Node>& gone) {
    nodes_controller_->enqueue({"", gone.object->slurm_name()});
  });
  nodes_->set_resync_period(options_.resync);
  batch_jobs_->on_add([this](const kube::Informer<BatchJob>::Ptr& job) {
    groups_->enqueue({job->meta.namespace_name, "Job/" + job->meta.name});
  });
  feed_.subscribe_changes(
      [this](const slurm::ChangeFeed::Changes& changes) { on_slurm_changes(changes); });
  feed_.subscribe_health([this](const slurm::FeedHealth& health) {
    if (health.synced) {
      enqueue_every_group();
    }
  });
}

Bridge::~Bridge() {
  stop();
}

void Bridge::start_informers() {
  for (kube::InformerBase* informer :
       std::initializer_list<kube::InformerBase*>{nodes_, batch_jobs_, namespaces_, pods_}) {
    informer->start();
  }
  feed_.start();
}

bool Bridge::wait_for_sync(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (kube::InformerBase* informer :
       std::initializer_list<kube::InformerBase*>{nodes_, batch_jobs_, namespaces_, pods_}) {
    while (!informer->has_synced()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  return true;
}

bool Bridge::synced() const {
  return pods_->has_synced() && nodes_->has_synced() && batch_jobs_->has_synced() &&
         namespaces_->has_synced();
}

void Bridge::start_controllers() {
  groups_->start();
  nodes_controller_->start();
  enqueue_every_group();
}

void Bridge::stop_controllers() {
  groups_->stop();
  nodes_controller_->stop();
}

void Bridge::stop() {
  stop_controllers();
  feed_.stop();
  for (kube::InformerBase* informer :
       std::initializer_list<kube::InformerBase*>{pods_, namespaces_, batch_jobs_, nodes_}) {
    informer->stop();
  }
}

void Bridge::enqueue_every_group() {
  for (const auto& pod : pods_->store().list()) {
    groups_->enqueue(kube::Request::from_key(group_index_key(*pod)));
  }
  {
    std::lock_guard lock(claims_mu_);
    for (const auto& [group, ids] : claims_) {
      groups_->enqueue(kube::Request::from_key(group));
    }
  }
  for (const auto& node : nodes_->store().list()) {
    nodes_controller_->enqueue({"", node->slurm_name()});
  }
  const slurm::SlurmSnapshot snapshot = feed_.snapshot();
  for (const auto& [name, node] : *snapshot.nodes) {
    if (node.has("EXTERNAL")) {
      nodes_controller_->enqueue({"", name});
    }
  }
}

void Bridge::on_slurm_changes(const slurm::ChangeFeed::Changes& changes) {
  for (const slurm::JobEvent& event : changes.jobs) {
    const auto claim = JobClaim::decode(event.job.admin_comment);
    if (!claim || claim->group.empty()) {
      continue;
    }
    {
      std::lock_guard lock(claims_mu_);
      if (event.type == slurm::JobEvent::Type::kRemoved) {
        auto& ids = claims_[claim->group];
        ids.erase(event.job.id);
        if (ids.empty()) {
          claims_.erase(claim->group);
        }
      } else {
        claims_[claim->group].insert(event.job.id);
      }
    }
    groups_->enqueue(kube::Request::from_key(claim->group));
  }
  for (const slurm::NodeEvent& event : changes.nodes) {
    if (event.node.has("EXTERNAL") ||
        !nodes_->store().by_index(kSlurmNameIndex, event.node.name).empty()) {
      nodes_controller_->enqueue({"", event.node.name});
    }
  }
}

kube::ObjectReference Bridge::reference(const Pod& pod) {
  return {"v1", "Pod", pod.meta.namespace_name, pod.meta.name, pod.meta.uid};
}

JobDefaults Bridge::defaults_for(const std::string& namespace_name) const {
  JobDefaults d;
  d.partition = options_.partition;
  d.mcs_label = options_.mcs_label;
  d.user = options_.default_user;
  if (const auto ns = namespaces_->store().get(namespace_name)) {
    const auto user = ns->annotations.find(std::string(kAnnotationNamespaceUser));
    if (user != ns->annotations.end() && !user->second.empty()) {
      d.user = user->second;
      d.allowed_users.push_back(user->second);
    }
    const auto users = ns->annotations.find(std::string(kAnnotationNamespaceUsers));
    if (users != ns->annotations.end()) {
      for (auto& u : split_list(users->second)) {
        d.allowed_users.push_back(std::move(u));
      }
    }
  }
  return d;
}

Annotations Bridge::workload_annotations(const GroupKey& group, const Pod& pod,
                                         const BatchJob* batch_job) {
  const std::vector<std::string> prefixes = {std::string(kJobAnnotationPrefix)};
  Annotations out;
  const auto merge = [&out](const Annotations& more) {
    for (const auto& [key, value] : more) {
      out[key] = value;
    }
  };
  const auto fetch = [&](const kube::ResourceType& type, const std::string& name) {
    auto object = kube_.get(type, group.namespace_name, name);
    if (object) {
      merge(annotations_of(*object, prefixes));
    } else if (object.error().kind != kube::ErrorKind::kNotFound) {
      log::warn("bridge.workload_unreadable",
                {{"kind", type.kind}, {"name", name}, {"error", object.error().message}});
    }
  };
  if (batch_job != nullptr) {
    merge(batch_job->annotations);
  }
  if (const std::string* job_set = pod.meta.label(kLabelJobSetName); job_set != nullptr) {
    fetch(job_sets(), *job_set);
  }
  if (group.kind == "LeaderWorkerSet") {
    if (const std::string* lws = pod.meta.label(kLabelLwsName); lws != nullptr) {
      fetch(leader_worker_sets(), *lws);
    }
  } else if (group.kind == "PodGroup") {
    fetch(pod_groups(), group.name);
  }
  return out;
}

std::optional<int64_t> Bridge::pod_group_min_member(const GroupKey& group) {
  auto object = kube_.get(pod_groups(), group.namespace_name, group.name);
  if (!object) {
    return std::nullopt;
  }
  const json* min = &(*object)["spec"]["minMember"];
  return min->is_number_integer() ? std::optional<int64_t>(min->get<int64_t>()) : std::nullopt;
}

std::set<int64_t> Bridge::claiming_jobs(const std::string& key) {
  std::set<int64_t> claimed;
  {
    std::lock_guard lock(claims_mu_);
    if (const auto it = claims_.find(key); it != claims_.end()) {
      claimed = it->second;
    }
  }
  std::lock_guard lock(recent_mu_);
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [id, recent] : recent_) {
    if (recent.group == key && !recent.cancelled && now - recent.at < kRecentJob) {
      claimed.insert(id);
    }
  }
  return claimed;
}

std::optional<JobView> Bridge::job_view(int64_t id, const slurm::SlurmSnapshot& snapshot) {
  std::optional<Recent> recent;
  {
    std::lock_guard lock(recent_mu_);
    const auto it = recent_.find(id);
    if (it != recent_.end() && std::chrono::steady_clock::now() - it->second.at < kRecentJob) {
      recent = it->second;
    }
  }
  if (const auto it = snapshot.jobs->find(id); it != snapshot.jobs->end()) {
    JobView v{it->second, true};
    if (recent && recent->cancelled && v.job.active()) {
      v.job.state = {"CANCELLED"};  // taken by Slurm; the feed shows it at its next read
    }
    return v;
  }
  if (recent) {
    JobView v;
    v.job.id = id;
    v.job.state = {recent->cancelled ? "CANCELLED" : "PENDING"};
    v.job.admin_comment = recent->admin_comment;
    return v;
  }
  auto asked = slurm_.get_job(id);
  if (asked) {
    return JobView{*asked, true};
  }
  if (asked.error().kind == slurm::ErrorKind::kNotFound) {
    JobView gone;
    gone.job.id = id;
    gone.known = false;
    return gone;
  }
  return std::nullopt;
}

kube::ReconcileOutcome Bridge::reconcile_group(const std::string& key) {
  const auto group = GroupKey::parse(key);
  if (!group) {
    return kube::ReconcileResult{};
  }
  if (!feed_.health().synced) {
    // Fail closed: nothing is submitted, cancelled or deleted while Slurm cannot be read.
    return kube::ReconcileResult{false, std::chrono::seconds(2)};
  }
  std::vector<std::shared_ptr<const Pod>> held = pods_->store().by_index(kGroupIndex, key);
  std::shared_ptr<const BatchJob> batch_job;
  if (group->kind == "Job") {
    batch_job = batch_jobs_->store().get(group->namespace_name + "/" + group->name);
    const bool waiting = std::any_of(held.begin(), held.end(), [](const auto& p) {
      return p->meta.label(kLabelJobId) == nullptr && !p->terminal();
    });
    if (batch_job == nullptr && waiting) {
      // Its pods came before the Job did: whether it is a gang is not known yet.
      return kube::ReconcileResult{false, std::chrono::seconds(1)};
    }
  }
  const bool gang = group->kind != "Job" || (batch_job != nullptr && batch_job->gang());
  std::vector<std::vector<const Pod*>> subgroups;
  if (gang) {
    subgroups.emplace_back();
    for (const auto& p : held) {
      subgroups.back().push_back(p.get());
    }
  } else {
    for (const auto& p : held) {
      subgroups.push_back({p.get()});
    }
  }
  const std::set<int64_t> claimed = claiming_jobs(key);
  const slurm::SlurmSnapshot snapshot = feed_.snapshot();
  const auto view_of = [&](int64_t id) { return job_view(id, snapshot); };
  std::set<int64_t> used;
  bool retry = false;
  bool later = false;
  std::vector<std::shared_ptr<const Node>> held_nodes;  // the Nodes the plans point at
  const int64_t size =
      gang && !held.empty()
          ? group_size(*group, *held.front(), batch_job.get(),
                       group->kind == "PodGroup" ? pod_group_min_member(*group) : std::nullopt)
          : 1;
  const auto run = [&](const std::vector<const Pod*>& pods, const std::set<int64_t>& extra) {
    GroupState state;
    state.pods = pods;
    state.size = size;
    for (const Pod* pod : pods) {
      if (const std::string* label = pod->meta.label(kLabelJobId); label != nullptr) {
        int64_t id = 0;
        if (std::from_chars(label->data(), label->data() + label->size(), id).ec == std::errc() &&
            !state.jobs.contains(id)) {
          if (auto view = view_of(id)) {
            state.jobs.emplace(id, std::move(*view));
          } else {
            retry = true;
          }
        }
      }
      if (pod->bound()) {
        const auto node = nodes_->store().get(pod->node_name);
        state.nodes[pod->node_name] = node.get();
        held_nodes.push_back(node);
      }
    }
    for (const int64_t id : extra) {
      if (auto view = view_of(id); view && !state.jobs.contains(id)) {
        state.jobs.emplace(id, std::move(*view));
      }
    }
    const GroupPlan plan = plan_group(state);
    const Outcome outcome = carry_out(*group, plan, batch_job.get());
    retry = retry || outcome == Outcome::kRetry;
    later = later || outcome == Outcome::kLater;
  };
  for (const auto& pods : subgroups) {
    // The jobs that claim these pods (found in Slurm alone, after a restart).
    std::set<int64_t> extra;
    for (const int64_t id : claimed) {
      const auto view = view_of(id);
      if (!view) {
        continue;
      }
      const auto claim = JobClaim::decode(view->job.admin_comment);
      const bool names = claim && std::any_of(pods.begin(), pods.end(), [&](const Pod* p) {
                           return std::find(claim->pods.begin(), claim->pods.end(), pod_key(*p)) !=
                                  claim->pods.end();
                         });
      if (names) {
        extra.insert(id);
        used.insert(id);
      }
    }
    run(pods, extra);
  }
  // Claiming jobs none of whose pods is left: a plan without pods cancels them.
  std::set<int64_t> orphans;
  std::set_difference(claimed.begin(), claimed.end(), used.begin(), used.end(),
                      std::inserter(orphans, orphans.end()));
  for (const auto& pod : held) {
    for (const int64_t id : std::set<int64_t>(orphans)) {
      if (const std::string* label = pod->meta.label(kLabelJobId);
          label != nullptr && *label == std::to_string(id)) {
        orphans.erase(id);  // a pod names it: that pod's plan decides
      }
    }
  }
  if (!orphans.empty()) {
    run({}, orphans);
  }
  if (retry) {
    return kube::ReconcileResult{true, milliseconds(0)};
  }
  if (later) {
    return kube::ReconcileResult{false, std::chrono::seconds(10)};
  }
  return kube::ReconcileResult{};
}

Bridge::Outcome Bridge::carry_out(const GroupKey& group, const GroupPlan& plan,
                                  const BatchJob* batch_job) {
  bool ok = true;
  bool later = false;
  const auto failed = [this, &ok](const char* action, const std::string& error,
                                  const std::string& subject) {
    ok = false;
    log::warn("bridge.action_failed", {{"action", action}, {"subject", subject}, {"error", error}});
    if (failures_ != nullptr) {
      failures_->with({{"action", action}}).inc();
    }
  };
  std::set<int64_t> cancelled;
  for (const auto& [id, why] : plan.cancel) {
    auto done = slurm_.cancel_job(id);
    if (!done && done.error().kind != slurm::ErrorKind::kNotFound) {
      failed("cancel", done.error().message, "job " + std::to_string(id));
      continue;
    }
    cancelled.insert(id);
    remember(id, true);
    feed_.poll_soon(milliseconds(100));  // the nodes it freed may start a waiting job
    log::info("bridge.job_cancelled",
              {{"job", std::to_string(id)}, {"group", group.key()}, {"why", why}});
    if (cancelled_ != nullptr) {
      cancelled_->with({}).inc();
    }
  }
  for (const Pod* pod : plan.release) {
    // A job to cancel keeps its pods until Slurm took the cancel.
    const std::string* label = pod->meta.label(kLabelJobId);
    const bool waits =
        label != nullptr && std::any_of(plan.cancel.begin(), plan.cancel.end(), [&](const auto& c) {
          return std::to_string(c.first) == *label && !cancelled.contains(c.first);
        });
    if (!waits && !release(*pod)) {
      ok = false;
    }
  }
  for (const auto& [pod, why] : plan.remove) {
    kube::DeleteOptions options;
    options.precondition_uid = pod->meta.uid;
    auto gone =
        kube_.remove(kube::resources::pods(), pod->meta.namespace_name, pod->meta.name, options);
    if (!gone && gone.error().kind != kube::ErrorKind::kNotFound) {
      failed("delete-pod", gone.error().message, pod_key(*pod));
      continue;
    }
    events_.normal(reference(*pod), "SlurmJobEnded", "Deleted: " + why);
    log::info("bridge.pod_deleted", {{"pod", pod_key(*pod)}, {"why", why}});
    if (deleted_ != nullptr) {
      deleted_->with({}).inc();
    }
  }
  for (const auto& [pod, id] : plan.adopt) {
    if (!label(*pod, id)) {
      ok = false;
    }
  }
  if (!plan.submit.empty()) {
    const Outcome submitted = submit(group, plan.submit, batch_job);
    ok = ok && submitted != Outcome::kRetry;
    later = submitted == Outcome::kLater;
  }
  for (const int64_t id : plan.place) {
    std::vector<const Pod*> pods;
    // Every pod of the job, bound ones too: they hold their places.
    for (const auto& pod : pods_->store().by_index(kGroupIndex, group.key())) {
      const std::string* label = pod->meta.label(kLabelJobId);
      if (label != nullptr && *label == std::to_string(id) && !pod->terminal()) {
        pods.push_back(pod.get());
      }
    }
    if (!place(id, pods)) {
      ok = false;
    }
  }
  for (const auto& [pod, message] : plan.waiting) {
    const bool pending = message.starts_with("Slurm job");
    if (!tell_waiting(*pod, pending ? "SlurmJobPending" : "WaitingForGroup", message)) {
      ok = false;
    }
  }
  return !ok ? Outcome::kRetry : later ? Outcome::kLater : Outcome::kDone;
}

Bridge::Outcome Bridge::submit(const GroupKey& group, const std::vector<const Pod*>& pods,
                               const BatchJob* batch_job) {
  const Pod& first = *pods.front();
  for (const Pod* pod : pods) {
    if (pod->resource_claims) {
      tell_waiting(*pod, "Unsupported",
                   "spec.resourceClaims: the bridge cannot place pods that claim DRA devices");
      return Outcome::kDone;
    }
  }
  const Annotations annotations =
      job_annotations(first, workload_annotations(group, first, batch_job));
  auto job =
      to_external_job(group, pods, annotations, defaults_for(group.namespace_name), batch_job);
  if (!job) {
    const std::string message = "invalid job options: " + api::join(job.error());
    for (const Pod* pod : pods) {
      if (pod->scheduled_message != message) {
        events_.warning(reference(*pod), "InvalidJobOptions", message);
        tell_waiting(*pod, "InvalidJobOptions", message);
      }
    }
    return Outcome::kDone;  // nothing to retry until the workload changes
  }
  // Slurm nodes Kubernetes could not run the pods on; only names Slurm has (others are refused).
  std::vector<const Node*> bridge_nodes;
  std::vector<std::shared_ptr<const Node>> held;
  const slurm::SlurmSnapshot snapshot = feed_.snapshot();
  for (const auto& node : nodes_->store().list()) {
    if (snapshot.nodes->contains(node->slurm_name())) {
      bridge_nodes.push_back(node.get());
      held.push_back(node);
    }
  }
  job->excluded_nodes = excluded_nodes(pods, bridge_nodes);
  if (!bridge_nodes.empty() && job->excluded_nodes.size() == bridge_nodes.size()) {
    // Slurm would refuse a job with nowhere to go; say why here, and look again later.
    const std::string message = "no Kubernetes Node of a Slurm node can run it: " +
                                unfit_reason(first, *bridge_nodes.front());
    for (const Pod* pod : pods) {
      if (pod->scheduled_message != message) {
        events_.warning(reference(*pod), "NoFittingNode", message);
        tell_waiting(*pod, "NoFittingNode", message);
      }
    }
    return Outcome::kLater;
  }
  // Slurm nodes no Kubernetes Node is (other slurmd of a partition shared with NodeSets): a
  // pod could not be bound there.
  for (const auto& [name, node] : *snapshot.nodes) {
    if (nodes_->store().by_index(kSlurmNameIndex, name).empty()) {
      job->excluded_nodes.push_back(name);
    }
  }
  auto id = slurm_.submit_external_job(*job);
  const auto invalid_node = [&id] {
    return !id && id.error().message.find("Invalid node name") != std::string::npos;
  };
  if (invalid_node()) {
    // An excluded node left Slurm since the feed's last read: exclude only the nodes Slurm has
    // now, read here, and submit again. Waiting for the feed instead would fail the group's
    // retries, and so lengthen its backoff, for as long as the feed takes to read again.
    feed_.force_resync();
    if (auto now = slurm_.list_nodes(); now && now->changed) {
      std::set<std::string> present;
      for (const auto& node : now->list.nodes) {
        present.insert(node.name);
      }
      std::erase_if(job->excluded_nodes,
                    [&present](const std::string& name) { return present.count(name) == 0; });
      id = slurm_.submit_external_job(*job);
    }
  }
  if (invalid_node()) {
    log::info("bridge.submit_retried", {{"group", group.key()}, {"error", id.error().message}});
    return Outcome::kRetry;
  }
  if (!id) {
    const std::string message = "Slurm refused the job: " + id.error().message;
    for (const Pod* pod : pods) {
      if (pod->scheduled_message != message) {
        events_.warning(reference(*pod), "SubmitFailed", message);
        tell_waiting(*pod, "SubmitFailed", message);
      }
    }
    if (failures_ != nullptr) {
      failures_->with({{"action", "submit"}}).inc();
    }
    log::warn("bridge.submit_failed", {{"group", group.key()}, {"error", id.error().message}});
    return Outcome::kRetry;
  }
  remember(*id, false, group.key(), job->admin_comment);
  // Slurm usually allocates within milliseconds of a submission: read its answer soon, not at the
  // end of the feed's period.
  feed_.poll_soon(milliseconds(100));
  if (submitted_ != nullptr) {
    submitted_->with({}).inc();
  }
  log::info("bridge.job_submitted", {{"job", std::to_string(*id)},
                                     {"group", group.key()},
                                     {"pods", std::to_string(pods.size())},
                                     {"partition", job->partition}});
  // No Event here: the label names the job, the PodScheduled message says why it waits and the
  // Scheduled Event where it went. In a burst every request a pod costs counts.
  bool ok = true;
  for (const Pod* pod : pods) {
    ok = label(*pod, *id) && ok;
  }
  return ok ? Outcome::kDone : Outcome::kRetry;
}

bool Bridge::registered_recently(const std::string& slurm_name) {
  std::lock_guard lock(recent_mu_);
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(registered_, [now](const auto& r) { return now - r.second > kRecentJob; });
  return registered_.contains(slurm_name);
}

void Bridge::remember(int64_t job_id, bool cancelled, const std::string& group,
                      const std::string& admin_comment) {
  std::lock_guard lock(recent_mu_);
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(recent_, [now](const auto& r) { return now - r.second.at > kRecentJob; });
  Recent& recent = recent_[job_id];
  recent.at = now;
  recent.cancelled = cancelled;
  if (!group.empty()) {
    recent.group = group;
    recent.admin_comment = admin_comment;
  }
}

bool Bridge::label(const Pod& pod, int64_t job_id) {
  json patch = {{"metadata",
                 {{"labels", {{std::string(kLabelJobId), std::to_string(job_id)}}},
                  {"finalizers", json::array({std::string(kFinalizer)})}}}};
  if (!tolerates_bridge(pod, options_.scheduler_name)) {
    json tolerations = json::array();
    for (const Toleration& t : pod.tolerations) {
      json one = json::object();
      for (const auto& [k, v] : {std::pair{"key", t.key}, std::pair{"operator", t.op},
                                 std::pair{"value", t.value}, std::pair{"effect", t.effect}}) {
        if (!v.empty()) {
          one[k] = v;
        }
      }
      tolerations.push_back(one);
    }
    tolerations.push_back({{"key", std::string(kTaintManagedNode)},
                           {"operator", "Equal"},
                           {"value", options_.scheduler_name},
                           {"effect", "NoExecute"}});
    patch["spec"] = {{"tolerations", tolerations}};
  }
  auto done = kube_.patch(kube::resources::pods(), pod.meta.namespace_name, pod.meta.name,
                          kube::PatchType::kStrategicMerge, patch);
  if (!done && done.error().kind != kube::ErrorKind::kNotFound) {
    log::warn("bridge.label_failed", {{"pod", pod_key(pod)}, {"error", done.error().message}});
    if (failures_ != nullptr) {
      failures_->with({{"action", "label"}}).inc();
    }
    return false;
  }
  return true;
}

bool Bridge::release(const Pod& pod) {
  if (!pod.finalizer) {
    return true;
  }
  // Finalizers merge as a set: the directive removes ours whatever the others do meanwhile.
  const json patch = {
      {"metadata",
       {{"$deleteFromPrimitiveList/finalizers", json::array({std::string(kFinalizer)})}}}};
  auto done = kube_.patch(kube::resources::pods(), pod.meta.namespace_name, pod.meta.name,
                          kube::PatchType::kStrategicMerge, patch);
  if (!done && done.error().kind != kube::ErrorKind::kNotFound) {
    log::warn("bridge.release_failed", {{"pod", pod_key(pod)}, {"error", done.error().message}});
    return false;
  }
  return true;
}

bool Bridge::tell_waiting(const Pod& pod, const std::string& reason, const std::string& message) {
  const json patch = {
      {"status",
       {{"conditions", json::array({{{"type", "PodScheduled"},
                                     {"status", "False"},
                                     {"reason", reason},
                                     {"message", message},
                                     {"lastTransitionTime",
                                      kube::format_time(std::chrono::system_clock::now())}}})}}}};
  auto done = kube_.patch(kube::resources::pods(), pod.meta.namespace_name, pod.meta.name,
                          kube::PatchType::kStrategicMerge, patch, "status");
  if (!done && done.error().kind != kube::ErrorKind::kNotFound) {
    log::warn("bridge.status_failed", {{"pod", pod_key(pod)}, {"error", done.error().message}});
    return false;
  }
  return true;
}

bool Bridge::bind(const Pod& pod, const std::string& node) {
  const json binding = {{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata",
                         {{"name", pod.meta.name},
                          {"uid", pod.meta.uid},
                          {"annotations", {{std::string(kAnnotationSlurmNode), node}}}}},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  auto done = kube_.create(kube::resources::pods(), pod.meta.namespace_name, binding, pod.meta.name,
                           "binding");
  if (!done) {
    // Gone, or bound by a look a moment ago that the cache has not shown yet.
    if (done.error().kind == kube::ErrorKind::kNotFound ||
        done.error().kind == kube::ErrorKind::kConflict) {
      return true;
    }
    log::warn("bridge.bind_failed",
              {{"pod", pod_key(pod)}, {"node", node}, {"error", done.error().message}});
    if (failures_ != nullptr) {
      failures_->with({{"action", "bind"}}).inc();
    }
    return false;
  }
  if (bound_ != nullptr) {
    bound_->with({}).inc();
  }
  return true;
}

bool Bridge::place(int64_t job_id, const std::vector<const Pod*>& pods) {
  const slurm::SlurmSnapshot snapshot = feed_.snapshot();
  const auto it = snapshot.jobs->find(job_id);
  if (it == snapshot.jobs->end()) {
    return false;
  }
  const slurm::Job& job = it->second;
  const auto slurm_nodes = slurm::expand_hostlist(job.nodes);
  if (!slurm_nodes || slurm_nodes->empty()) {
    return false;
  }
  // Slurm's node names to Kubernetes Nodes.
  std::vector<Slot> slots;
  std::vector<std::string> unknown;
  for (const std::string& name : *slurm_nodes) {
    const auto nodes = nodes_->store().by_index(kSlurmNameIndex, name);
    if (nodes.empty()) {
      unknown.push_back(name);
    } else {
      slots.push_back({nodes.front()->meta.name, 1});
    }
  }
  if (!unknown.empty()) {
    for (const Pod* pod : pods) {
      tell_waiting(*pod, "SlurmNodeUnknown",
                   "Slurm job " + std::to_string(job_id) + " runs on Slurm node " +
                       unknown.front() +
                       ", which no Kubernetes Node is: its partition must hold only bridge nodes");
    }
    return true;
  }
  // Fewer nodes than pods: Slurm packed tasks; each node takes as many pods as it has CPUs for.
  if (slots.size() < pods.size()) {
    auto allocation = slurm_.job_allocation(job_id);
    if (!allocation) {
      return false;
    }
    const int64_t cpus = std::accumulate(
        allocation->begin(), allocation->end(), int64_t{0},
        [](int64_t sum, const slurm::JobNodeAllocation& a) { return sum + a.cpus; });
    const int64_t per_pod = std::max<int64_t>(1, cpus / static_cast<int64_t>(pods.size()));
    for (Slot& slot : slots) {
      for (const auto& a : *allocation) {
        const auto nodes = nodes_->store().by_index(kSlurmNameIndex, a.node);
        if (!nodes.empty() && nodes.front()->meta.name == slot.node) {
          slot.pods = std::max<int64_t>(1, a.cpus / per_pod);
        }
      }
    }
  }
  bool ok = true;
  for (const auto& placed : assign_pods(pods, slots)) {
    const std::string& name = placed.first;
    const std::string& node = placed.second;
    const auto pod = std::find_if(pods.begin(), pods.end(),
                                  [&name](const Pod* p) { return p->meta.name == name; });
    if (pod == pods.end() || (*pod)->meta.deleting) {
      continue;
    }
    if (bind(**pod, node)) {
      events_.normal(reference(**pod), "Scheduled",
                     "Slurm job " + std::to_string(job_id) + " placed it on " + node);
    } else {
      ok = false;
    }
  }
  return ok;
}

kube::ReconcileOutcome Bridge::reconcile_node(const std::string& slurm_name) {
  if (!feed_.health().synced) {
    return kube::ReconcileResult{false, std::chrono::seconds(2)};
  }
  const auto nodes = nodes_->store().by_index(kSlurmNameIndex, slurm_name);
  const std::shared_ptr<const Node> node = nodes.empty() ? nullptr : nodes.front();
  const slurm::SlurmSnapshot snapshot = feed_.snapshot();
  const auto in_slurm = snapshot.nodes->find(slurm_name);
  const slurm::Node* slurm_node = in_slurm == snapshot.nodes->end() ? nullptr : &in_slurm->second;
  const NodePlan plan =
      plan_node({node.get(), slurm_node, options_.scheduler_name, options_.partition});
  const auto slurm_failed = [&](const char* action,
                                const slurm::Error& error) -> kube::ReconcileOutcome {
    if (node != nullptr) {
      events_.warning(node_reference(*node), "SlurmNodeSyncFailed",
                      std::string(action) + " Slurm node " + slurm_name + ": " + error.message);
    }
    if (failures_ != nullptr) {
      failures_->with({{"action", action}}).inc();
    }
    return fail(std::string(action) + " " + slurm_name + ": " + error.message);
  };
  if (plan.create && registered_recently(slurm_name)) {
    return kube::ReconcileResult{false, milliseconds(500)};  // the feed has not shown it yet
  }
  if (plan.create) {
    auto done = slurm_.create_node(*plan.create);
    if (!done && done.error().message.find("already exists") != std::string::npos) {
      // Registered a moment ago; the feed has not shown it yet.
      return kube::ReconcileResult{false, milliseconds(500)};
    }
    if (!done) {
      return slurm_failed("register", done.error());
    }
    {
      std::lock_guard lock(recent_mu_);
      registered_[slurm_name] = std::chrono::steady_clock::now();
    }
    events_.normal(node_reference(*node), "SlurmNodeRegistered",
                   "registered in Slurm: " + *plan.create);
    log::info("bridge.node_registered", {{"node", slurm_name}, {"conf", *plan.create}});
  }
  if (plan.drain) {
    if (auto done = slurm_.drain(slurm_name, *plan.drain); !done) {
      return slurm_failed("drain", done.error());
    }
    log::info("bridge.node_drained", {{"node", slurm_name}, {"reason", *plan.drain}});
  }
  if (plan.undrain) {
    if (auto done = slurm_.undrain(slurm_name); !done) {
      return slurm_failed("undrain", done.error());
    }
    log::info("bridge.node_undrained", {{"node", slurm_name}});
  }
  if (plan.remove) {
    if (auto done = slurm_.delete_node(slurm_name);
        !done && done.error().kind != slurm::ErrorKind::kNotFound) {
      return slurm_failed("remove", done.error());
    }
    log::info("bridge.node_removed", {{"node", slurm_name}});
  }
  if (node == nullptr) {
    return kube::ReconcileResult{};
  }
  json patch = json::object();
  if (plan.taint || plan.untaint) {
    json taints = json::array();
    for (const Taint& t : node->taints) {
      if (t.key != kTaintManagedNode) {
        json one = {{"key", t.key}, {"effect", t.effect}};
        if (!t.value.empty()) {
          one["value"] = t.value;
        }
        taints.push_back(one);
      }
    }
    if (plan.taint) {
      taints.push_back({{"key", std::string(kTaintManagedNode)},
                        {"value", options_.scheduler_name},
                        {"effect", "NoExecute"}});
    }
    patch["spec"]["taints"] = taints;
    patch["metadata"]["resourceVersion"] = node->meta.resource_version;
  }
  if (plan.cordon) {
    patch["spec"]["unschedulable"] = true;
    patch["metadata"]["annotations"][std::string(kAnnotationCordonedBy)] = *plan.cordon;
  } else if (plan.uncordon) {
    patch["spec"]["unschedulable"] = false;
    patch["metadata"]["annotations"][std::string(kAnnotationCordonedBy)] = nullptr;
  }
  if (!patch.empty()) {
    auto done =
        kube_.patch(kube::resources::nodes(), "", node->meta.name, kube::PatchType::kMerge, patch);
    if (!done) {
      return fail("patch Node " + node->meta.name + ": " + done.error().message);
    }
    if (plan.cordon) {
      events_.normal(node_reference(*node), "CordonedForSlurmDrain",
                     "Slurm drained " + slurm_name + ": " + *plan.cordon);
    } else if (plan.uncordon) {
      events_.normal(node_reference(*node), "UncordonedForSlurm",
                     "Slurm node " + slurm_name + " is no longer drained");
    }
  }
  return kube::ReconcileResult{};
}

}  // namespace tightrope::bridge
