// The informer's cache: objects by key ("namespace/name"), immutable once stored (readers hold
// shared pointers, so a reader never sees an object change under it), with indexes from a
// value (a namespace, an owner UID, a node name, a label value) to the keys that have it.
// Knows nothing of Slurm.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tightrope::kube {

template <typename T>
class Store {
 public:
  using Ptr = std::shared_ptr<const T>;
  using IndexFn = std::function<std::vector<std::string>(const T&)>;

  // Indexes are added before the store is filled.
  void add_index(const std::string& name, IndexFn fn) {
    std::unique_lock lock(mu_);
    indexes_[name].fn = std::move(fn);
  }

  Ptr get(const std::string& key) const {
    std::shared_lock lock(mu_);
    const auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second;
  }

  std::vector<Ptr> list() const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    out.reserve(objects_.size());
    for (const auto& [key, object] : objects_) {
      out.push_back(object);
    }
    return out;
  }

  std::vector<std::string> keys() const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    out.reserve(objects_.size());
    for (const auto& [key, object] : objects_) {
      out.push_back(key);
    }
    return out;
  }

  // Objects whose index `index` yields `value`; an unknown index is empty.
  std::vector<Ptr> by_index(const std::string& index, const std::string& value) const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    const auto idx = indexes_.find(index);
    if (idx == indexes_.end()) {
      return out;
    }
    const auto keys = idx->second.entries.find(value);
    if (keys == idx->second.entries.end()) {
      return out;
    }
    for (const auto& key : keys->second) {
      if (const auto it = objects_.find(key); it != objects_.end()) {
        out.push_back(it->second);
      }
    }
    return out;
  }

  size_t size() const {
    std::shared_lock lock(mu_);
    return objects_.size();
  }

  // Stores `object` under `key`; returns what was there.
  Ptr put(const std::string& key, Ptr object) {
    std::unique_lock lock(mu_);
    Ptr old;
    if (auto it = objects_.find(key); it != objects_.end()) {
      old = std::move(it->second);
      remove_from_indexes(key, *old);
      it->second = object;
    } else {
      objects_.emplace(key, object);
    }
    add_to_indexes(key, *object);
    return old;
  }

  Ptr erase(const std::string& key) {
    std::unique_lock lock(mu_);
    const auto it = objects_.find(key);
    if (it == objects_.end()) {
      return nullptr;
    }
    Ptr old = std::move(it->second);
    objects_.erase(it);
    remove_from_indexes(key, *old);
    return old;
  }

 private:
  struct Index {
    IndexFn fn;
    std::unordered_map<std::string, std::unordered_set<std::string>> entries;
  };

  void add_to_indexes(const std::string& key, const T& object) {
    for (auto& [name, idx] : indexes_) {
      for (auto& value : idx.fn(object)) {
        idx.entries[std::move(value)].insert(key);
      }
    }
  }

  void remove_from_indexes(const std::string& key, const T& object) {
    for (auto& [name, idx] : indexes_) {
      for (const auto& value : idx.fn(object)) {
        if (auto it = idx.entries.find(value); it != idx.entries.end()) {
          it->second.erase(key);
          if (it->second.empty()) {
            idx.entries.erase(it);
          }
        }
      }
    }
  }

  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Ptr> objects_;
  std::unordered_map<std::string, Index> indexes_;
};

// Index functions for any cached type with an ObjectMeta `meta`.
namespace index {
inline constexpr const char* kNamespace = "namespace";
inline constexpr const char* kOwnerUid = "owner-uid";

template <typename T>
std::vector<std::string> by_namespace(const T& object) {
  return {object.meta.namespace_name};
}

template <typename T>
std::vector<std::string> by_owner_uid(const T& object) {
  std::vector<std::string> out;
  for (const auto& ref : object.meta.owner_references) {
    out.push_back(ref.uid);
  }
  return out;
}

// The value of one label, for objects that carry it.
template <typename T>
typename Store<T>::IndexFn by_label(std::string label) {
  return [label = std::move(label)](const T& object) {
    const std::string* value = object.meta.label(label);
    return value == nullptr ? std::vector<std::string>{} : std::vector<std::string>{*value};
  };
}
}  // namespace index

}  // namespace tightrope::kube
