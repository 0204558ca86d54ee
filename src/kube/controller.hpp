// The controller framework: a Reconciler for one kind, keys from watches on the primary kind,
// on kinds it owns (mapped to the controlling owner) and through any mapping function, a
// rate-limited work queue and N workers. A reconcile is level-triggered: it gets a key, reads
// the world from caches, and says whether to look again. Knows nothing of Slurm.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.hpp"
#include "kube/informer.hpp"
#include "kube/workqueue.hpp"

namespace tightrope::kube {

// The object a reconcile is about.
struct Request {
  std::string namespace_name;
  std::string name;

  std::string key() const { return object_key(namespace_name, name); }
  static Request from_key(const std::string& key);
};

struct ReconcileResult {
  bool requeue = false;                        // again, with backoff
  std::chrono::milliseconds requeue_after{0};  // again after this long (no backoff)
};

using ReconcileOutcome = tightrope::Result<ReconcileResult, std::string>;

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // An error or an exception is logged with the key and retried with backoff.
  virtual ReconcileOutcome reconcile(const Request& request) = 0;
};

struct ControllerOptions {
  std::string name;  // "nodeset": the label on metrics and logs
  int workers = 1;
  WorkQueueOptions queue;  // its name defaults to the controller's
  metrics::Registry* metrics = nullptr;
};

class Controller {
 public:
  Controller(ControllerOptions options, Reconciler& reconciler);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Watches are set up before start().

  // Every change of a primary object enqueues its own key, and every start() all of them.
  template <typename T>
  void watch_primary(Informer<T>& informer) {
    watch_mapped<T>(informer, [](const T& object) {
      return std::vector<Request>{{object.meta.namespace_name, object.meta.name}};
    });
    primaries_.emplace_back([this, &informer] {
      for (const auto& object : informer.store().list()) {
        enqueue({object->meta.namespace_name, object->meta.name});
      }
    });
  }

  // A change of an owned object enqueues its controlling owner of kind `owner_kind` (owners
  // live in the same namespace as what they own).
  template <typename T>
  void watch_owned(Informer<T>& informer, std::string owner_kind) {
    watch_mapped<T>(informer, [owner_kind = std::move(owner_kind)](const T& object) {
      const OwnerReference* owner = object.meta.controller_ref();
      if (owner == nullptr || owner->kind != owner_kind) {
        return std::vector<Request>{};
      }
      return std::vector<Request>{{object.meta.namespace_name, owner->name}};
    });
  }

  // Any mapping from a changed object to the keys to reconcile. With `matters`, an update
  // counts only when it says so of (before, after): a write of what the reconciler never reads
  // (another controller's status) wakes nothing.
  template <typename T>
  void watch_mapped(Informer<T>& informer, std::function<std::vector<Request>(const T&)> map,
                    std::function<bool(const T&, const T&)> matters = nullptr) {
    auto shared = std::make_shared<std::function<std::vector<Request>(const T&)>>(std::move(map));
    informer.on_add([this, shared](const std::shared_ptr<const T>& object) {
      enqueue_all((*shared)(*object));
    });
    informer.on_update(
        [this, shared, matters = std::move(matters)](const std::shared_ptr<const T>& before,
                                                     const std::shared_ptr<const T>& after) {
          if (matters && !matters(*before, *after)) {
            return;
          }
          // An owner may change: both the old and the new mapping need a look.
          enqueue_all((*shared)(*before));
          enqueue_all((*shared)(*after));
        });
    informer.on_delete(
        [this, shared](const Deleted<T>& deleted) { enqueue_all((*shared)(*deleted.object)); });
  }

  void enqueue(const Request& request) { queue_.add(request.key()); }

  // Looks at every primary object (again), then works: a controller stopped because its process
  // stopped leading starts again in a new term as a new process would, with nothing assumed
  // about what the leader in between did.
  void start();
  // Stops taking keys and waits for the reconciles under way; keys added meanwhile wait for the
  // next start().
  void stop();

  WorkQueue& queue() { return queue_; }
  const std::string& name() const { return options_.name; }

 private:
  void enqueue_all(const std::vector<Request>& requests);
  void work();
  void process(const std::string& key);

  ControllerOptions options_;
  Reconciler& reconciler_;
  WorkQueue queue_;
  std::vector<std::thread> workers_;
  std::vector<std::function<void()>> primaries_;  // each enqueues one informer's objects
  metrics::CounterFamily* reconciles_ = nullptr;
  metrics::CounterFamily* errors_ = nullptr;
  metrics::HistogramFamily* duration_ = nullptr;
};

}  // namespace tightrope::kube
