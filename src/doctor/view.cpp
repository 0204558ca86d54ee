#include "doctor/view.hpp"

#include <algorithm>
#include <unordered_map>

#include "api/well_known.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::doctor {
namespace {

using json_pointer = json::json_pointer;

}  // namespace

std::string str_at(const json& doc, const json_pointer& at) {
  if (!doc.contains(at)) {
    return "";
  }
  const json& v = doc.at(at);
  return v.is_string() ? v.get<std::string>() : (v.is_null() ? "" : v.dump());
}

namespace {

// metadata.<field>[key] when it is a string: found by two lookups, no pointer parsed.
const std::string* metadata_entry(const json& doc, const char* field, const std::string& key) {
  const auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) {
    return nullptr;
  }
  const auto map = meta->find(field);
  if (map == meta->end() || !map->is_object()) {
    return nullptr;
  }
  const auto it = map->find(key);
  return it != map->end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

}  // namespace

std::string label(const json& doc, const std::string& key) {
  const std::string* value = metadata_entry(doc, "labels", key);
  return value != nullptr ? *value : "";
}

std::string annotation(const json& doc, const std::string& key) {
  const std::string* value = metadata_entry(doc, "annotations", key);
  return value != nullptr ? *value : "";
}

std::string node_state(const slurm::Node& node) {
  std::string out;
  for (const auto& w : node.state) {
    if (w != "DYNAMIC_NORM") {
      out.append(out.empty() ? "" : "+").append(w);
    }
  }
  return out;
}

std::string name_of(const json& doc) {
  return str_at(doc, "/metadata/name"_json_pointer);
}

const json* condition(const json& doc, const std::string& type) {
  const json_pointer at("/status/conditions");
  if (!doc.contains(at) || !doc.at(at).is_array()) {
    return nullptr;
  }
  for (const auto& c : doc.at(at)) {
    if (c.value("type", "") == type) {
      return &c;
    }
  }
  return nullptr;
}

std::string ClusterView::controller_name() const {
  return name_of(controller);
}

struct LookupCache::Index {
  // What it was built from: a vector that moved or changed size means a rebuild.
  std::vector<std::pair<const void*, size_t>> built_from;
  std::unordered_map<std::string, const json*> pod_by_hostname;  // first one wins, as a scan
  std::unordered_map<std::string, const json*> kube_node_by_name;
  std::unordered_map<std::string, const slurm::Node*> slurm_node_by_name;
  std::unordered_map<std::string, std::vector<const slurm::Job*>> jobs_by_node;
};

LookupCache::LookupCache() = default;
LookupCache::LookupCache(const LookupCache&) {}
LookupCache::LookupCache(LookupCache&&) noexcept {}
LookupCache::~LookupCache() = default;

LookupCache& LookupCache::operator=(const LookupCache&) {
  index_.reset();
  return *this;
}

LookupCache& LookupCache::operator=(LookupCache&&) noexcept {
  index_.reset();
  return *this;
}

void ClusterView::forget_lookups() const {
  lookups_.index_.reset();
}

const LookupCache::Index& ClusterView::lookups() const {
  const std::vector<std::pair<const void*, size_t>> from = {
      {pods.data(), pods.size()},
      {kube_nodes.data(), kube_nodes.size()},
      {slurm.nodes.data(), slurm.nodes.size()},
      {slurm.jobs.data(), slurm.jobs.size()}};
  if (lookups_.index_ && lookups_.index_->built_from == from) {
    return *lookups_.index_;
  }
  auto index = std::make_unique<LookupCache::Index>();
  index->built_from = from;
  const std::string name_key(api::kLabelName);
  const std::string hostname_key(api::kLabelNodeSetPodHostname);
  for (const auto& p : pods) {
    const std::string* component = metadata_entry(p, "labels", name_key);
    const std::string* hostname = metadata_entry(p, "labels", hostname_key);
    if (component != nullptr && *component == "slurmd" && hostname != nullptr) {
      index->pod_by_hostname.emplace(*hostname, &p);
    }
  }
  for (const auto& n : kube_nodes) {
    index->kube_node_by_name.emplace(name_of(n), &n);
  }
  for (const auto& n : slurm.nodes) {
    index->slurm_node_by_name.emplace(n.name, &n);
  }
  for (const auto& j : slurm.jobs) {
    if (!(j.has("RUNNING") || j.has("SUSPENDED") || j.has("COMPLETING")) || j.nodes.empty()) {
      continue;
    }
    if (auto hosts = slurm::expand_hostlist(j.nodes)) {
      std::sort(hosts->begin(), hosts->end());
      hosts->erase(std::unique(hosts->begin(), hosts->end()), hosts->end());
      for (const auto& host : *hosts) {
        index->jobs_by_node[host].push_back(&j);
      }
    }
  }
  lookups_.index_ = std::move(index);
  return *lookups_.index_;
}

const json* ClusterView::pod_of_slurm_node(const std::string& node) const {
  const auto& by = lookups().pod_by_hostname;
  const auto it = by.find(node);
  return it != by.end() ? it->second : nullptr;
}

const json* ClusterView::kube_node(const std::string& name) const {
  const auto& by = lookups().kube_node_by_name;
  const auto it = by.find(name);
  return it != by.end() ? it->second : nullptr;
}

const json* ClusterView::nodeset(const std::string& name) const {
  for (const auto& n : nodesets) {
    if (name_of(n) == name) {
      return &n;
    }
  }
  return nullptr;
}

const slurm::Node* ClusterView::slurm_node(const std::string& name) const {
  const auto& by = lookups().slurm_node_by_name;
  const auto it = by.find(name);
  return it != by.end() ? it->second : nullptr;
}

std::vector<const slurm::Job*> ClusterView::jobs_on(const std::string& node) const {
  const auto& by = lookups().jobs_by_node;
  const auto it = by.find(node);
  return it != by.end() ? it->second : std::vector<const slurm::Job*>{};
}

}  // namespace tightrope::doctor
