// A ClusterView built by hand: one Controller "slurm" in namespace "slurm" with a NodeSet
// "workers", a RestApi, slurmctld and slurmrestd pods Ready, and helpers to add workers, Nodes,
// Slurm nodes and jobs. Each test changes what its check looks at.
#pragma once

#include <string>

#include "doctor/view.hpp"
#include "kube/time.hpp"

namespace tightrope::doctor::testing {

inline Time at(const char* rfc3339) {
  return *kube::parse_time(rfc3339);
}

inline json pod(const std::string& name, const std::string& component, const std::string& node,
                bool ready = true, const std::string& phase = "Running") {
  return {
      {"metadata",
       {{"name", name},
        {"namespace", "slurm"},
        {"labels",
         {{"app.kubernetes.io/name", component},
          {"app.kubernetes.io/instance", component == "slurmd" ? "workers" : "slurm"},
          {"slinky.slurm.net/cluster", "slurm"}}}}},
      {"spec", {{"nodeName", node}}},
      {"status",
       {{"phase", phase},
        {"startTime", "2026-12-04T10:00:00Z"},
        {"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

struct Fixture {
  ClusterView view;

  Fixture() {
    view.now = at("2026-12-04T12:00:00Z");
    view.namespace_name = "slurm";
    view.controller = {{"metadata", {{"name", "slurm"}, {"namespace", "slurm"}}},
                       {"spec",
                        {{"slurmKeyRef", {{"name", "slurm-key"}, {"key", "slurm.key"}}},
                         {"jwtKeyRef", {{"name", "jwt-key"}, {"key", "jwt.key"}}},
                         {"accountingRef", {{"name", "acct"}}}}}};
    view.restapis = {{{"metadata", {{"name", "slurm"}, {"namespace", "slurm"}}}}};
    view.accountings = {{{"metadata", {{"name", "acct"}, {"namespace", "slurm"}}}}};
    view.nodesets = {{{"metadata", {{"name", "workers"}, {"namespace", "slurm"}}},
                      {"spec", {{"replicas", 1}}},
                      {"status", {{"nodeSetHash", "workers-abc"}, {"readyReplicas", 1}}}}};
    view.pods = {pod("slurm-controller-0", "slurmctld", "k8s-0"),
                 pod("slurm-restapi-x", "slurmrestd", "k8s-0"),
                 pod("acct-accounting-y", "slurmdbd", "k8s-0")};
    view.kube_nodes = {{{"metadata", {{"name", "k8s-0"}}}, {"spec", json::object()}}};
    view.slurm.have_nodes = true;
    view.slurm.via = "the API server's service proxy to slurm/slurm-restapi:6820";
    view.slurm.ping = slurm::Ping{"slurm-controller-0", true, "primary", true, 100};
    for (const char* plural :
         {"controllers", "nodesets", "loginsets", "restapis", "accountings", "tokens"}) {
      view.op.crds.push_back(
          {{"metadata", {{"name", std::string(plural) + ".slinky.slurm.net"}}},
           {"spec",
            {{"versions",
              json::array({{{"name", "v1beta1"}, {"served", true}, {"storage", true}}})}}}});
    }
    view.op.deployments = {{{"metadata", {{"name", "slurm-operator"}, {"namespace", "slinky"}}},
                            {"spec", {{"replicas", 1}}},
                            {"status", {{"readyReplicas", 1}}}}};
  }

  // A worker pod with its Slurm node, IDLE.
  json& worker(const std::string& host, const std::string& node = "k8s-0") {
    json p = pod("workers-" + host, "slurmd", node);
    p["metadata"]["labels"]["nodeset.slinky.slurm.net/pod-hostname"] = host;
    p["metadata"]["labels"]["controller-revision-hash"] = "workers-abc";
    view.pods.push_back(p);
    slurm::Node n;
    n.name = host;
    n.state = {"IDLE"};
    n.cpus = 2;
    view.slurm.nodes.push_back(n);
    return view.pods.back();
  }

  slurm::Node& slurm_node(const std::string& name) {
    for (auto& n : view.slurm.nodes) {
      if (n.name == name) {
        return n;
      }
    }
    view.slurm.nodes.push_back({});
    view.slurm.nodes.back().name = name;
    return view.slurm.nodes.back();
  }

  slurm::Job& job(int64_t id, const std::string& state, const std::string& nodes = "") {
    slurm::Job j;
    j.id = id;
    j.name = "job" + std::to_string(id);
    j.user = "alice";
    j.partition = "workers";
    j.state = {state};
    j.nodes = nodes;
    view.slurm.jobs.push_back(j);
    return view.slurm.jobs.back();
  }
};

}  // namespace tightrope::doctor::testing
