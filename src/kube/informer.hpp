// Informers: a reflector (list + watch) feeding a typed Store, with add/update/delete handlers.
// T is what the cache keeps of each object: a Document (everything), or a projection — a
// struct with an ObjectMeta `meta` and the fields its controllers read — so that a cluster of
// ten thousand pods costs kilobytes a pod, not the whole JSON. Handlers run on the informer's
// thread and must be quick (they enqueue keys). InformerFactory shares one informer per
// resource, namespace, selector and cached type. Knows nothing of Slurm.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <typeinfo>
#include <unordered_set>
#include <vector>

#include "base/log.hpp"
#include "kube/object.hpp"
#include "kube/reflector.hpp"
#include "kube/store.hpp"

namespace tightrope::kube {

// What a delete handler gets: the last state the cache knew. final_state_unknown is true when
// the delete was inferred from a new list (the watch missed it), so the state may be stale.
template <typename T>
struct Deleted {
  std::shared_ptr<const T> object;
  bool final_state_unknown = false;
};

class InformerBase {
 public:
  virtual ~InformerBase() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual bool has_synced() const = 0;
};

template <typename T>
class Informer final : public InformerBase, private ReflectorSink {
 public:
  using Ptr = std::shared_ptr<const T>;
  using Decoder = std::function<DecodeResult(simdjson::dom::element, T*)>;
  using AddHandler = std::function<void(const Ptr&)>;
  using UpdateHandler = std::function<void(const Ptr& before, const Ptr& after)>;
  using DeleteHandler = std::function<void(const Deleted<T>&)>;

  Informer(Client& client, ResourceType type, std::string namespace_name, Decoder decode,
           ReflectorOptions options = {})
      : decode_(std::move(decode)),
        reflector_(client, std::move(type), std::move(namespace_name), std::move(options), *this) {}
  ~Informer() override { stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  Store<T>& store() { return store_; }
  const Store<T>& store() const { return store_; }

  // Handlers are registered before start().
  void on_add(AddHandler h) { add_handlers_.push_back(std::move(h)); }
  void on_update(UpdateHandler h) { update_handlers_.push_back(std::move(h)); }
  void on_delete(DeleteHandler h) { delete_handlers_.push_back(std::move(h)); }
  // Calls the update handlers with (object, object) for every cached object this often; off by
  // default, since watches are the means of convergence here.
  void set_resync_period(std::chrono::milliseconds period) { resync_period_ = period; }

  void start() override {
    std::lock_guard lock(run_mu_);
    if (thread_.joinable()) {
      return;
    }
    thread_ = std::thread([this] { reflector_.run(); });
    if (resync_period_.count() > 0) {
      resync_thread_ = std::thread([this] { resync_loop(); });
    }
  }

  void stop() override {
    std::lock_guard lock(run_mu_);
    reflector_.stop();
    {
      std::lock_guard wake(resync_mu_);
      stopping_ = true;
      resync_wake_.notify_all();
    }
    if (thread_.joinable()) {
      thread_.join();
    }
    if (resync_thread_.joinable()) {
      resync_thread_.join();
    }
  }

  bool has_synced() const override { return reflector_.synced(); }

  // Waits (bounded) for the first full list.
  bool wait_for_sync(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!has_synced()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  ReflectorStats stats() const { return reflector_.stats(); }
  const ResourceType& type() const { return reflector_.type(); }

 private:
  Ptr decode(simdjson::dom::element object) {
    auto value = std::make_shared<T>();
    if (auto ok = decode_(object, value.get()); !ok) {
      // One object the decoder cannot read must not stop the cache: skip it, say so once.
      if (decode_failures_++ == 0) {
        log::warn("kube.informer.decode_failed",
                  {{"resource", type().resource}, {"error", ok.error()}});
      }
      return nullptr;
    }
    return value;
  }

  void upsert(const Ptr& object) {
    const std::string key = object->meta.key();
    const Ptr before = store_.put(key, object);
    if (!before) {
      for (const auto& h : add_handlers_) {
        h(object);
      }
    } else if (before->meta.resource_version != object->meta.resource_version) {
      for (const auto& h : update_handlers_) {
        h(before, object);
      }
    }
  }

  void remove(const std::string& key, const Ptr& final_state, bool unknown) {
    const Ptr before = store_.erase(key);
    if (!before) {
      return;
    }
    const Deleted<T> deleted{final_state ? final_state : before, unknown};
    for (const auto& h : delete_handlers_) {
      h(deleted);
    }
  }

  void begin_list() override { listed_.clear(); }

  void list_item(simdjson::dom::element object) override {
    if (Ptr value = decode(object)) {
      listed_.insert(value->meta.key());
      upsert(value);
    }
  }

  void end_list() override {
    for (const auto& key : store_.keys()) {
      if (listed_.count(key) == 0) {
        remove(key, nullptr, true);
      }
    }
    listed_.clear();
  }

  void watch_event(WatchEventType type, simdjson::dom::element object) override {
    Ptr value = decode(object);
    if (!value) {
      return;
    }
    if (type == WatchEventType::kDeleted) {
      remove(value->meta.key(), value, false);
    } else {
      upsert(value);
    }
  }

  void resync_loop() {
    std::unique_lock lock(resync_mu_);
    while (!stopping_) {
      resync_wake_.wait_for(lock, resync_period_, [this] { return stopping_; });
      if (stopping_) {
        break;
      }
      lock.unlock();
      for (const auto& object : store_.list()) {
        for (const auto& h : update_handlers_) {
          h(object, object);
        }
      }
      lock.lock();
    }
  }

  Decoder decode_;
  Store<T> store_;
  Reflector reflector_;
  std::vector<AddHandler> add_handlers_;
  std::vector<UpdateHandler> update_handlers_;
  std::vector<DeleteHandler> delete_handlers_;
  std::unordered_set<std::string> listed_;
  std::atomic<uint64_t> decode_failures_{0};
  std::chrono::milliseconds resync_period_{0};

  std::mutex run_mu_;
  std::thread thread_;
  std::thread resync_thread_;
  std::mutex resync_mu_;
  std::condition_variable resync_wake_;
  bool stopping_ = false;
};

// One informer per (resource, namespace, selector, cached type), shared by the controllers of
// a process.
class InformerFactory {
 public:
  explicit InformerFactory(Client& client, ReflectorOptions defaults = {})
      : client_(client), defaults_(std::move(defaults)) {}
  ~InformerFactory() { stop_all(); }
  InformerFactory(const InformerFactory&) = delete;
  InformerFactory& operator=(const InformerFactory&) = delete;

  template <typename T>
  Informer<T>& informer(const ResourceType& type, const std::string& namespace_name,
                        typename Informer<T>::Decoder decode,
                        const std::string& label_selector = "") {
    const std::string key = type.api_version() + "/" + type.resource + "|" + namespace_name + "|" +
                            label_selector + "|" + typeid(T).name();
    std::lock_guard lock(mu_);
    auto& slot = informers_[key];
    if (!slot) {
      ReflectorOptions options = defaults_;
      options.label_selector = label_selector;
      slot =
          std::make_unique<Informer<T>>(client_, type, namespace_name, std::move(decode), options);
    }
    return static_cast<Informer<T>&>(*slot);
  }

  void start_all() {
    std::lock_guard lock(mu_);
    for (auto& [key, informer] : informers_) {
      informer->start();
    }
  }
  void stop_all() {
    std::lock_guard lock(mu_);
    for (auto& [key, informer] : informers_) {
      informer->stop();
    }
  }
  bool wait_for_sync(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool all = true;
      {
        std::lock_guard lock(mu_);
        for (auto& [key, informer] : informers_) {
          all = all && informer->has_synced();
        }
      }
      if (all) {
        return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  Client& client_;
  ReflectorOptions defaults_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<InformerBase>> informers_;
};

}  // namespace tightrope::kube
