#include "cli/report.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/remediation.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::cli {
namespace {

namespace build = op::build;
using doctor::diagnose;
using doctor::explain_pending_reason;
using doctor::PendingReason;

using json_pointer = json::json_pointer;

std::string paint(bool on, const char* code, const std::string& text) {
  return on ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
}

bool is_ready(const json& pod) {
  const json* c = condition(pod, "Ready");
  return c != nullptr && c->value("status", "") == "True";
}

std::string component_of(const json& pod) {
  return label(pod, std::string(api::kLabelName));
}

json condition_json(const json* c) {
  if (c == nullptr) {
    return nullptr;
  }
  return {{"status", c->value("status", "")},
          {"reason", c->value("reason", "")},
          {"message", c->value("message", "")}};
}

std::string time_text(std::optional<Time> t) {
  return t ? kube::format_time(*t) : "";
}

json job_json(const slurm::Job& j) {
  json out = {
      {"id", j.id},           {"name", j.name},           {"user", j.user},
      {"account", j.account}, {"partition", j.partition}, {"state", build::join(j.state, "+")},
      {"nodes", j.nodes},     {"reason", j.state_reason}};
  out["timeLimit"] =
      j.time_limit ? json(std::to_string(j.time_limit->count()) + "m") : json("UNLIMITED");
  if (j.start_time) {
    out["start"] = time_text(j.start_time);
  }
  if (j.end_time && j.time_limit) {
    out["end"] = time_text(j.end_time);
  }
  if (j.has("PENDING")) {
    const PendingReason r = explain_pending_reason(j.state_reason);
    out["reasonMeans"] = r.meaning;
  }
  return out;
}

json slurm_node_json(const ClusterView& view, const slurm::Node& n) {
  json out = {
      {"name", n.name}, {"state", node_state(n)}, {"cpus", n.cpus}, {"allocCpus", n.alloc_cpus}};
  if (!n.reason.empty()) {
    out["reason"] = n.reason;
    out["reasonSetBy"] = n.reason_set_by;
    out["reasonSince"] = time_text(n.reason_changed_at);
    out["drainedBy"] =
        n.reason.starts_with(api::kReasonPrefix) ? "the operator" : "an administrator";
  }
  if (!n.gres.empty()) {
    out["gres"] = n.gres;
    out["gresUsed"] = n.gres_used;
  }
  // Its own health checks (docs/health.md), and where remediation stands.
  if (const auto report = health::read_report(n.extra)) {
    json failed = json::array();
    for (const auto& f : report->failed) {
      failed.push_back(f.check + ": " + f.message);
    }
    json checks = {{"ok", report->ok},
                   {"reported", time_text(Time(std::chrono::seconds(report->at)))},
                   {"failed", failed}};
    if (op::health_drained(n)) {
      const std::string step = op::health_step(n.reason);
      checks["remediation"] =
          step == "replacing"   ? "drained; its pod is replaced once no job runs on it"
          : step == "verifying" ? "drained until the new pod's first report passes"
                                : "drained until its report passes";
    }
    out["healthChecks"] = checks;
  }
  // The active checks' last report: its figures, and what did not run.
  if (const auto report = health::read_report(n.extra, health::kActiveExtraKey)) {
    json failed = json::array();
    for (const auto& f : report->failed) {
      failed.push_back(f.check + ": " + f.message);
    }
    json skipped = json::array();
    for (const auto& f : report->skipped) {
      skipped.push_back(f.check + ": " + f.message);
    }
    out["activeChecks"] = {{"ok", report->ok},
                           {"reported", time_text(Time(std::chrono::seconds(report->at)))},
                           {"measured", report->measured},
                           {"failed", failed},
                           {"skipped", skipped}};
  }
  if (n.reservation.starts_with("tightrope-check-")) {
    out["activeChecks"]["underWay"] = "in reservation " + n.reservation;
  }
  json jobs = json::array();
  for (const slurm::Job* j : view.jobs_on(n.name)) {
    jobs.push_back(job_json(*j));
  }
  out["jobs"] = jobs;
  return out;
}

json kube_node_json(const json& node) {
  json out = {{"name", name_of(node)},
              {"cordoned", node.value("/spec/unschedulable"_json_pointer, false)}};
  if (const std::string reason = annotation(node, std::string(api::kAnnotationNodeCordonReason));
      !reason.empty()) {
    out["cordonReason"] = reason;
  }
  json taints = json::array();
  for (const auto& t : node.value("/spec/taints"_json_pointer, json::array())) {
    taints.push_back(t.value("key", "") + (t.contains("value") ? "=" + t.value("value", "") : "") +
                     ":" + t.value("effect", ""));
  }
  out["taints"] = taints;
  if (const auto failures = api::decode_node_failures(node); !failures.empty()) {
    json kept = json::array();
    for (const auto& f : failures) {
      kept.push_back("pod " + f.pod + " failed " + f.check + " at " +
                     time_text(Time(std::chrono::seconds(f.at))));
    }
    out["healthFailures"] = kept;
  }
  json conditions = json::array();
  for (const auto& c : node.value("/status/conditions"_json_pointer, json::array())) {
    // Only what is off: Ready not True, any other condition True.
    const bool ready_type = c.value("type", "") == "Ready";
    if ((ready_type && c.value("status", "") != "True") ||
        (!ready_type && c.value("status", "") == "True")) {
      conditions.push_back(c.value("type", "") + "=" + c.value("status", "") + " (" +
                           c.value("reason", "") + "): " + c.value("message", ""));
    }
  }
  out["conditionsOff"] = conditions;
  json gpus = json::object();
  const json allocatable = node.value("/status/allocatable"_json_pointer, json::object());
  for (const auto& [k, v] : allocatable.items()) {
    if (k.find("gpu") != std::string::npos || k.find("imex") != std::string::npos) {
      gpus[k] = v;
    }
  }
  out["gpus"] = gpus;
  return out;
}

json pod_json(const json& pod) {
  json out = {{"name", name_of(pod)},
              {"component", component_of(pod)},
              {"phase", str_at(pod, "/status/phase"_json_pointer)},
              {"ready", is_ready(pod)},
              {"node", str_at(pod, "/spec/nodeName"_json_pointer)}};
  json waiting = json::array();
  for (const auto& c : pod.value("/status/containerStatuses"_json_pointer, json::array())) {
    if (const std::string reason = str_at(c, "/state/waiting/reason"_json_pointer);
        !reason.empty()) {
      waiting.push_back(c.value("name", "") + ": " + reason);
    }
  }
  if (!waiting.empty()) {
    out["waiting"] = waiting;
  }
  // Pending for want of a Node: the scheduler's words (what a Node autoscaler acts on).
  for (const auto& c : pod.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
        c.value("reason", "") == "Unschedulable") {
      out["unschedulable"] = c.value("message", "no Node can take it");
    }
  }
  // Who holds a drain, and what the operator keeps on the pod (docs/operator.md).
  for (const std::string_view a :
       {api::kAnnotationPodCordon, api::kAnnotationPodOperatorCordon,
        api::kAnnotationPodCordonRequested, api::kAnnotationPodDrainReason,
        api::kAnnotationPodDeadline, api::kAnnotationSafeToEvict, api::kAnnotationDoNotDisrupt}) {
    if (const std::string v = annotation(pod, std::string(a)); !v.empty()) {
      out["annotations"][std::string(a)] = v;
    }
  }
  if (label(pod, std::string(api::kLabelNodeSetPodProtect)) == "true") {
    out["protected"] = true;
  }
  return out;
}

json nodeset_json(const json& n) {
  return {{"name", name_of(n)},
          {"replicas", n.value("/spec/replicas"_json_pointer, int64_t{1})},
          {"ready", n.value("/status/readyReplicas"_json_pointer, int64_t{0})},
          {"idle", n.value("/status/slurmIdle"_json_pointer, int64_t{0})},
          {"allocated", n.value("/status/slurmAllocated"_json_pointer, int64_t{0})},
          {"down", n.value("/status/slurmDown"_json_pointer, int64_t{0})},
          {"drain", n.value("/status/slurmDrain"_json_pointer, int64_t{0})},
          {"readyCondition", condition_json(condition(n, "Ready"))},
          {"deletionBlocked", condition_json(condition(n, "DeletionBlocked"))}};
}

// A table: columns padded to the widest cell; colour applied after padding.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::vector<int>> tone;  // 0 plain, 1 good, 2 warn, 3 bad

  void add(std::vector<std::string> row, std::vector<int> tones = {}) {
    tones.resize(row.size(), 0);
    rows.push_back(std::move(row));
    tone.push_back(std::move(tones));
  }
  std::string render(const Style& style) const {
    std::vector<size_t> width(header.size(), 0);
    for (size_t c = 0; c < header.size(); ++c) {
      width[c] = header[c].size();
      for (const auto& r : rows) {
        width[c] = std::max(width[c], r[c].size());
      }
    }
    auto line = [&](const std::vector<std::string>& cells, const std::vector<int>* tones,
                    bool head) {
      std::string out;
      for (size_t c = 0; c < cells.size(); ++c) {
        std::string cell = cells[c];
        if (c + 1 < cells.size()) {
          cell += std::string(width[c] - cells[c].size() + 2, ' ');
        }
        const int t = tones != nullptr ? (*tones)[c] : 0;
        out += head     ? style.bold(cell)
               : t == 1 ? style.good(cell)
               : t == 2 ? style.warn(cell)
               : t == 3 ? style.bad(cell)
                        : cell;
      }
      while (!out.empty() && out.back() == ' ') {
        out.pop_back();
      }
      return out + "\n";
    };
    std::string out = line(header, nullptr, true);
    for (size_t i = 0; i < rows.size(); ++i) {
      out += line(rows[i], &tone[i], false);
    }
    return out;
  }
};

int state_tone(const std::string& state) {
  if (state.find("DOWN") != std::string::npos ||
      state.find("NOT_RESPONDING") != std::string::npos ||
      state.find("FAIL") != std::string::npos) {
    return 3;
  }
  if (state.find("DRAIN") != std::string::npos || state.find("FUTURE") != std::string::npos) {
    return 2;
  }
  return state.empty() ? 0 : 1;
}

std::string text_of(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  return v.is_null() ? "" : v.dump();
}

YAML::Node to_yaml_node(const json& doc) {
  switch (doc.type()) {
    case json::value_t::object: {
      YAML::Node node(YAML::NodeType::Map);
      for (const auto& [k, v] : doc.items()) {
        node[k] = to_yaml_node(v);
      }
      return node;
    }
    case json::value_t::array: {
      YAML::Node node(YAML::NodeType::Sequence);
      for (const auto& v : doc) {
        node.push_back(to_yaml_node(v));
      }
      return node;
    }
    case json::value_t::null:
      return YAML::Node(YAML::NodeType::Null);
    case json::value_t::string:
      return YAML::Node(doc.get<std::string>());
    default:
      return YAML::Node(doc.dump());
  }
}

// Fields in the order a person reads them: the name, then plain values, then what nests.
std::vector<std::pair<std::string, const json*>> reading_order(const json& doc) {
  std::vector<std::pair<std::string, const json*>> out;
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& [k, v] : doc.items()) {
      const int rank = k == "name" ? 0 : v.is_structured() ? 2 : 1;
      if (rank == pass) {
        out.emplace_back(k, &v);
      }
    }
  }
  return out;
}

void render_tree(const json& doc, const Style& style, int depth, std::string& out) {
  const std::string indent(static_cast<size_t>(depth) * 2, ' ');
  for (const auto& [k, value] : reading_order(doc)) {
    const json& v = *value;
    if (v.is_object()) {
      if (v.empty()) {
        continue;
      }
      out += indent + style.bold(k) + ":\n";
      render_tree(v, style, depth + 1, out);
    } else if (v.is_array()) {
      if (v.empty()) {
        continue;
      }
      out += indent + style.bold(k) + ":\n";
      for (const auto& item : v) {
        if (item.is_object()) {
          std::string inner;
          render_tree(item, style, depth + 2, inner);
          // The first line of an item carries its dash.
          const std::string pad(static_cast<size_t>(depth + 2) * 2, ' ');
          if (inner.starts_with(pad)) {
            inner.replace(0, pad.size(), indent + "  - ");
          }
          out += inner;
        } else {
          out += indent + "  - " + text_of(item) + "\n";
        }
      }
    } else if (!v.is_null()) {
      std::string text = text_of(v);
      const int tone = k == "state" ? state_tone(text) : 0;
      text = tone == 1   ? style.good(text)
             : tone == 2 ? style.warn(text)
             : tone == 3 ? style.bad(text)
                         : text;
      out.append(indent).append(k).append(": ").append(text).append("\n");
    }
  }
}

}  // namespace

std::string Style::good(const std::string& text) const {
  return paint(color, "32", text);
}
std::string Style::warn(const std::string& text) const {
  return paint(color, "33", text);
}
std::string Style::bad(const std::string& text) const {
  return paint(color, "31", text);
}
std::string Style::bold(const std::string& text) const {
  return paint(color, "1", text);
}
std::string Style::severity(Severity s, const std::string& text) const {
  return s == Severity::kCritical ? bad(text) : s == Severity::kWarning ? warn(text) : text;
}

json status_report(const ClusterView& view) {
  json report;
  report["controller"] = {
      {"namespace", view.namespace_name},
      {"name", view.controller_name()},
      {"ready", condition_json(condition(view.controller, "Ready"))},
      {"slurmReachable", condition_json(condition(view.controller, "SlurmReachable"))}};
  const auto& s = view.slurm;
  json slurm = {{"via", s.via}, {"token", s.token_from}, {"reached", s.reached()}};
  if (s.error) {
    slurm["error"] = s.error->message;
  }
  if (s.ping) {
    slurm["slurmctld"] = {
        {"host", s.ping->hostname}, {"responding", s.ping->responding}, {"mode", s.ping->mode}};
  }
  int64_t running = 0;
  int64_t pending = 0;
  for (const auto& j : s.jobs) {
    running += j.has("RUNNING") ? 1 : 0;
    pending += j.has("PENDING") ? 1 : 0;
  }
  slurm["jobsRunning"] = running;
  slurm["jobsPending"] = pending;
  if (s.accounting_asked) {
    slurm["accounting"] = s.accounting_error ? s.accounting_error->message : "answering";
  }
  report["slurm"] = slurm;

  json daemons = json::array();
  for (const std::string component : {"slurmctld", "slurmrestd", "slurmdbd", "login"}) {
    json pods = json::array();
    int ready = 0;
    for (const auto& p : view.pods) {
      if (component_of(p) == component) {
        pods.push_back(pod_json(p));
        ready += is_ready(p) ? 1 : 0;
      }
    }
    if (!pods.empty()) {
      daemons.push_back({{"component", component},
                         {"ready", std::to_string(ready) + "/" + std::to_string(pods.size())},
                         {"pods", pods}});
    }
  }
  report["daemons"] = daemons;

  json nodesets = json::array();
  std::set<std::string> shown;
  for (const auto& n : view.nodesets) {
    json entry = nodeset_json(n);
    json workers = json::array();
    for (const auto& p : view.pods) {
      if (component_of(p) != "slurmd" || label(p, std::string(api::kLabelInstance)) != name_of(n)) {
        continue;
      }
      const std::string host = label(p, std::string(api::kLabelNodeSetPodHostname));
      json w = {{"pod", name_of(p)},
                {"phase", str_at(p, "/status/phase"_json_pointer)},
                {"ready", is_ready(p)},
                {"kubeNode", str_at(p, "/spec/nodeName"_json_pointer)},
                {"slurmNode", host}};
      if (const json* node = view.kube_node(str_at(p, "/spec/nodeName"_json_pointer))) {
        w["cordoned"] = node->value("/spec/unschedulable"_json_pointer, false);
      }
      if (const slurm::Node* sn = view.slurm_node(host)) {
        w["state"] = node_state(*sn);
        w["reason"] = sn->reason;
        w["jobs"] = view.jobs_on(host).size();
        shown.insert(host);
      } else {
        w["state"] = s.reached() ? "not registered" : "unknown";
      }
      workers.push_back(w);
    }
    entry["workers"] = workers;
    nodesets.push_back(entry);
  }
  report["nodesets"] = nodesets;
  json others = json::array();
  for (const auto& n : s.nodes) {
    if (shown.count(n.name) == 0) {
      others.push_back({{"slurmNode", n.name}, {"state", node_state(n)}, {"reason", n.reason}});
    }
  }
  report["slurmNodesWithoutPod"] = others;

  json partitions = json::array();
  for (const auto& p : s.partitions) {
    int64_t r = 0;
    int64_t q = 0;
    for (const auto& j : s.jobs) {
      if (j.partition == p.name) {
        r += j.has("RUNNING") ? 1 : 0;
        q += j.has("PENDING") ? 1 : 0;
      }
    }
    partitions.push_back({{"name", p.name},
                          {"state", build::join(p.state, "+")},
                          {"nodes", p.total_nodes},
                          {"running", r},
                          {"pending", q}});
  }
  report["partitions"] = partitions;

  json draining = json::array();
  for (const auto& n : s.nodes) {
    if (n.drain()) {
      draining.push_back(
          {{"slurmNode", n.name},
           {"state", node_state(n)},
           {"reason", n.reason},
           {"by", n.reason.starts_with(api::kReasonPrefix) ? "operator" : n.reason_set_by},
           {"since", time_text(n.reason_changed_at)},
           {"jobs", view.jobs_on(n.name).size()}});
    }
  }
  report["draining"] = draining;

  const auto findings = diagnose(view);
  json counts = {{"critical", 0}, {"warning", 0}, {"info", 0}};
  json top = json::array();
  for (const auto& f : findings) {
    counts[std::string(to_string(f.severity))] =
        counts[std::string(to_string(f.severity))].get<int>() + 1;
    if (f.severity != Severity::kInfo) {
      top.push_back(f.check + ": " + f.subject + ": " + f.message);
    }
  }
  report["doctor"] = {{"counts", counts}, {"problems", top}};
  if (!view.unreadable.empty()) {
    report["unreadable"] = view.unreadable;
  }
  return report;
}

std::string render_status(const json& r, const Style& style) {
  std::string out;
  const json& c = r["controller"];
  const json& ready = c["ready"];
  const bool ok = ready.is_object() && ready.value("status", "") == "True";
  out += style.bold("Controller " + c.value("namespace", "") + "/" + c.value("name", "")) + ": " +
         (ready.is_object() ? (ok ? style.good("Ready") : style.bad("not Ready")) + " (" +
                                  ready.value("reason", "") + ")"
                            : style.warn("no Ready condition yet")) +
         "\n";
  const json& s = r["slurm"];
  if (s.value("reached", false)) {
    out += "Slurm:    " + style.good("reached") + " through " + s.value("via", "") + "\n";
  } else {
    out +=
        "Slurm:    " + style.bad("not reached") + ": " + s.value("error", std::string("?")) + "\n";
  }
  if (s.contains("slurmctld")) {
    out += "          slurmctld " + s["slurmctld"].value("host", "") + " " +
           (s["slurmctld"].value("responding", false) ? style.good("responding")
                                                      : style.bad("not responding")) +
           "; jobs: " + std::to_string(s.value("jobsRunning", 0)) + " running, " +
           std::to_string(s.value("jobsPending", 0)) + " pending\n";
  }
  if (s.contains("accounting")) {
    const std::string a = s.value("accounting", "");
    out += "          slurmdbd " + (a == "answering" ? style.good(a) : style.bad(a)) + "\n";
  }
  out += "\n";
  Table daemons{{"COMPONENT", "READY", "PODS"}, {}, {}};
  for (const auto& d : r["daemons"]) {
    std::vector<std::string> pods;
    bool all = true;
    for (const auto& p : d["pods"]) {
      std::string text = p.value("name", "");
      if (p.contains("waiting")) {
        text += " (" + build::join(p["waiting"].get<std::vector<std::string>>(), ", ") + ")";
      }
      all = all && p.value("ready", false);
      pods.push_back(text);
    }
    daemons.add({d.value("component", ""), d.value("ready", ""), build::join(pods, ", ")},
                {0, all ? 1 : 3, 0});
  }
  out += daemons.render(style) + "\n";

  Table sets{{"NODESET", "REPLICAS", "READY", "IDLE", "ALLOC", "DOWN", "DRAIN", "STATUS"}, {}, {}};
  Table workers{{"POD", "SLURM NODE", "STATE", "JOBS", "K8S NODE", "REASON"}, {}, {}};
  for (const auto& n : r["nodesets"]) {
    const json& rc = n["readyCondition"];
    const bool set_ok = rc.is_object() && rc.value("status", "") == "True";
    std::string status = rc.is_object() ? rc.value("reason", "") : "";
    if (n["deletionBlocked"].is_object() && n["deletionBlocked"].value("status", "") == "True") {
      status += ", scale-in blocked: " + n["deletionBlocked"].value("reason", "");
    }
    sets.add({n.value("name", ""), text_of(n["replicas"]), text_of(n["ready"]), text_of(n["idle"]),
              text_of(n["allocated"]), text_of(n["down"]), text_of(n["drain"]), status},
             {0, 0, 0, 0, 0, 0, 0, set_ok ? 1 : 3});
    for (const auto& w : n["workers"]) {
      std::string kube_node = w.value("kubeNode", "");
      if (w.value("cordoned", false)) {
        kube_node += " (cordoned)";
      }
      const std::string state = w.value("state", "");
      workers.add(
          {w.value("pod", "") +
               (w.value("ready", false) ? "" : " (" + w.value("phase", "") + ", not ready)"),
           w.value("slurmNode", ""), state, w.contains("jobs") ? text_of(w["jobs"]) : "", kube_node,
           w.value("reason", "")},
          {0, 0, state_tone(state == "not registered" ? "DOWN" : state), 0,
           w.value("cordoned", false) ? 2 : 0, 0});
    }
  }
  out += sets.render(style) + "\n";
  if (!workers.rows.empty()) {
    out += workers.render(style) + "\n";
  }
  if (!r["slurmNodesWithoutPod"].empty()) {
    Table others{{"SLURM NODE WITHOUT POD", "STATE", "REASON"}, {}, {}};
    for (const auto& n : r["slurmNodesWithoutPod"]) {
      others.add({n.value("slurmNode", ""), n.value("state", ""), n.value("reason", "")},
                 {0, state_tone(n.value("state", "")), 0});
    }
    out += others.render(style) + "\n";
  }
  if (!r["partitions"].empty()) {
    Table parts{{"PARTITION", "STATE", "NODES", "RUNNING", "PENDING"}, {}, {}};
    for (const auto& p : r["partitions"]) {
      parts.add({p.value("name", ""), p.value("state", ""), text_of(p["nodes"]),
                 text_of(p["running"]), text_of(p["pending"])},
                {0, p.value("state", "") == "UP" ? 1 : 3, 0, 0, 0});
    }
    out += parts.render(style) + "\n";
  }
  if (!r["draining"].empty()) {
    Table drains{{"DRAINING", "STATE", "JOBS", "BY", "SINCE", "REASON"}, {}, {}};
    for (const auto& d : r["draining"]) {
      drains.add({d.value("slurmNode", ""), d.value("state", ""), text_of(d["jobs"]),
                  d.value("by", ""), d.value("since", ""), d.value("reason", "")},
                 {0, 2, 0, 0, 0, 0});
    }
    out += drains.render(style) + "\n";
  }
  const json& counts = r["doctor"]["counts"];
  const int critical = counts.value("critical", 0);
  const int warning = counts.value("warning", 0);
  std::string summary = "doctor: " + std::to_string(critical) + " critical, " +
                        std::to_string(warning) + " warning, " +
                        std::to_string(counts.value("info", 0)) + " info";
  out += (critical > 0  ? style.bad(summary)
          : warning > 0 ? style.warn(summary)
                        : style.good(summary)) +
         "\n";
  for (const auto& p : r["doctor"]["problems"]) {
    out += "  " + p.get<std::string>() + "\n";
  }
  if (critical + warning > 0) {
    out += "  (kubectl slurm doctor: evidence and fixes)\n";
  }
  if (r.contains("unreadable")) {
    for (const auto& u : r["unreadable"]) {
      out += style.warn("could not read: ") + u.get<std::string>() + "\n";
    }
  }
  return out;
}

tightrope::Result<json, std::string> explain(const ClusterView& view, ExplainKind kind,
                                             const std::string& name) {
  json report;
  std::set<std::string> subjects;  // names whose findings belong to this report
  auto add_pod = [&](const json& pod, json& into) {
    json p = pod_json(pod);
    const std::string host = label(pod, std::string(api::kLabelNodeSetPodHostname));
    const std::string nodeset = label(pod, std::string(api::kLabelInstance));
    subjects.insert(name_of(pod));
    subjects.insert(host);
    if (const slurm::Node* n = view.slurm_node(host)) {
      p["slurmNode"] = slurm_node_json(view, *n);
    } else {
      p["slurmNode"] = view.slurm.reached() ? json("none: slurmctld has no node " + host)
                                            : json("unknown: Slurm not reached");
    }
    if (const json* node = view.kube_node(str_at(pod, "/spec/nodeName"_json_pointer))) {
      p["kubeNode"] = kube_node_json(*node);
      subjects.insert(name_of(*node));
    }
    if (const json* n = view.nodeset(nodeset)) {
      p["nodeSet"] = nodeset_json(*n);
      subjects.insert(nodeset);
    }
    into.push_back(p);
  };
  json pods = json::array();
  if (kind == ExplainKind::kPod) {
    for (const auto& p : view.pods) {
      if (name_of(p) == name) {
        add_pod(p, pods);
      }
    }
    if (pods.empty()) {
      return fail("no pod " + name + " in cluster " + view.namespace_name + "/" +
                  view.controller_name());
    }
    report["pod"] = pods[0];
  } else if (kind == ExplainKind::kNode) {
    if (const json* node = view.kube_node(name)) {
      // A Kubernetes Node: every Slurm node on it.
      report["kubeNode"] = kube_node_json(*node);
      subjects.insert(name);
      for (const auto& p : view.pods) {
        if (component_of(p) == "slurmd" && str_at(p, "/spec/nodeName"_json_pointer) == name) {
          add_pod(p, pods);
        }
      }
      report["workers"] = pods;
    } else if (const json* pod = view.pod_of_slurm_node(name)) {
      add_pod(*pod, pods);
      report["pod"] = pods[0];
    } else if (const slurm::Node* n = view.slurm_node(name)) {
      report["slurmNode"] = slurm_node_json(view, *n);
      report["pod"] = "none: no pod of this cluster has hostname " + name;
      subjects.insert(name);
    } else {
      return fail("no Kubernetes Node, worker pod hostname or Slurm node named " + name +
                  (view.slurm.reached()
                       ? ""
                       : " (Slurm not reached: " +
                             (view.slurm.error ? view.slurm.error->message : "") + ")"));
    }
  } else {
    const slurm::Job* job = nullptr;
    for (const auto& j : view.slurm.jobs) {
      if (std::to_string(j.id) == name) {
        job = &j;
      }
    }
    if (job == nullptr) {
      return fail(view.slurm.reached() ? "slurmctld knows no pending or running job " + name
                                       : "Slurm not reached: " +
                                             (view.slurm.error ? view.slurm.error->message : ""));
    }
    report["job"] = job_json(*job);
    if (auto hosts = slurm::expand_hostlist(job->nodes)) {
      for (const auto& host : *hosts) {
        if (const json* pod = view.pod_of_slurm_node(host)) {
          add_pod(*pod, pods);
        } else {
          pods.push_back({{"slurmNode", host}, {"pod", "none"}});
        }
      }
    }
    report["nodes"] = pods;
  }
  json related = json::array();
  for (const auto& f : diagnose(view)) {
    bool mine = false;
    for (const auto& s : subjects) {
      mine = mine || (!s.empty() && (f.subject.find(s) != std::string::npos ||
                                     f.message.find(s) != std::string::npos));
    }
    if (mine) {
      related.push_back(std::string(to_string(f.severity)) + " " + f.check + ": " + f.message +
                        " (fix: " + f.fix + ")");
    }
  }
  report["findings"] = related;
  return report;
}

std::string render_explain(const json& report, const Style& style) {
  std::string out;
  render_tree(report, style, 0, out);
  return out;
}

json findings_report(const std::vector<Finding>& findings) {
  json out = json::array();
  for (const auto& f : findings) {
    out.push_back({{"check", f.check},
                   {"severity", std::string(to_string(f.severity))},
                   {"subject", f.subject},
                   {"message", f.message},
                   {"evidence", f.evidence},
                   {"fix", f.fix}});
  }
  return {{"findings", out}, {"failing", failing(findings)}};
}

std::string render_findings(const std::vector<Finding>& findings, const Style& style) {
  std::string out;
  for (const auto& f : findings) {
    std::string tag = std::string(to_string(f.severity));
    for (auto& ch : tag) {
      ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    out += style.severity(f.severity, tag) + " " + style.bold(f.check) + "  " + f.subject + "\n";
    out += "  " + f.message + "\n";
    for (const auto& e : f.evidence) {
      out += "    · " + e + "\n";
    }
    out += "  fix: " + f.fix + "\n\n";
  }
  int bad = 0;
  for (const auto& f : findings) {
    bad += f.severity != Severity::kInfo ? 1 : 0;
  }
  out +=
      bad == 0
          ? style.good("no problem found") + " (" + std::to_string(findings.size()) + " notes)\n"
          : style.bad(std::to_string(bad) + " problem" + (bad == 1 ? "" : "s") + " found") + "\n";
  return out;
}

std::string to_yaml(const json& doc) {
  YAML::Emitter emitter;
  emitter << to_yaml_node(doc);
  return std::string(emitter.c_str()) + "\n";
}

}  // namespace tightrope::cli
