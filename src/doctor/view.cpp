#include "doctor/view.hpp"

#include <algorithm>

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

std::string label(const json& doc, const std::string& key) {
  const json_pointer at("/metadata/labels");
  if (!doc.contains(at) || !doc.at(at).is_object()) {
    return "";
  }
  const json& labels = doc.at(at);
  const auto it = labels.find(key);
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string annotation(const json& doc, const std::string& key) {
  const json_pointer at("/metadata/annotations");
  if (!doc.contains(at) || !doc.at(at).is_object()) {
    return "";
  }
  const json& annotations = doc.at(at);
  const auto it = annotations.find(key);
  return it != annotations.end() && it->is_string() ? it->get<std::string>() : "";
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

const json* ClusterView::pod_of_slurm_node(const std::string& node) const {
  for (const auto& p : pods) {
    if (label(p, std::string(api::kLabelName)) == "slurmd" &&
        label(p, std::string(api::kLabelNodeSetPodHostname)) == node) {
      return &p;
    }
  }
  return nullptr;
}

const json* ClusterView::kube_node(const std::string& name) const {
  for (const auto& n : kube_nodes) {
    if (name_of(n) == name) {
      return &n;
    }
  }
  return nullptr;
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
  for (const auto& n : slurm.nodes) {
    if (n.name == name) {
      return &n;
    }
  }
  return nullptr;
}

std::vector<const slurm::Job*> ClusterView::jobs_on(const std::string& node) const {
  std::vector<const slurm::Job*> out;
  for (const auto& j : slurm.jobs) {
    if (!(j.has("RUNNING") || j.has("SUSPENDED") || j.has("COMPLETING")) || j.nodes.empty()) {
      continue;
    }
    if (auto hosts = slurm::expand_hostlist(j.nodes);
        hosts && std::find(hosts->begin(), hosts->end(), node) != hosts->end()) {
      out.push_back(&j);
    }
  }
  return out;
}

}  // namespace tightrope::doctor
