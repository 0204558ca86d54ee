// How kubectl-slurm fills a doctor::ClusterView: every object of the cluster read once from the
// API server, slurmrestd asked through the API server's service proxy with a token minted from
// the Controller's key. status, explain and doctor are pure functions of what it returns; this
// is the only place that does I/O for them.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "doctor/view.hpp"
#include "kube/client.hpp"
#include "slurm/client.hpp"

namespace tightrope::cli {

using doctor::annotation;
using doctor::ClusterView;
using doctor::condition;
using doctor::json;
using doctor::label;
using doctor::name_of;
using doctor::node_state;
using doctor::OperatorView;
using doctor::str_at;
using doctor::Time;
using doctor::TokenState;
using doctor::WebhookCertificate;

// How kubectl-slurm reaches slurmrestd and with which token.
struct SlurmAccess {
  // Direct URL (a port-forward); empty: the API server's service proxy to the RestApi's Service.
  std::string url;
  // A JWT to send; empty: minted from the Controller's jwtKeyRef Secret, if readable.
  std::string token;
  std::string user = "slurm";  // the user a minted token speaks for
  std::chrono::milliseconds timeout{5000};
};

// Every Controller of the namespace, by name.
tightrope::Result<std::vector<std::string>, std::string> list_controllers(kube::Client& kube,
                                                                          const std::string& ns);

struct GatherOptions {
  std::string namespace_name;
  std::string controller;  // empty: the only Controller of the namespace
  SlurmAccess slurm;
  bool operator_side = true;  // read the operator's Deployments, Lease, CRDs, webhook
};

// Reads everything; what cannot be read is said in `unreadable` or the SlurmView's errors,
// never fatal, except a Controller that cannot be found.
tightrope::Result<ClusterView, std::string> gather(kube::Client& kube,
                                                   const GatherOptions& options);

// The Slurm client kubectl-slurm uses for this view's cluster (for drain/undrain), or why none.
tightrope::Result<std::shared_ptr<slurm::Client>, std::string> connect_slurm(
    kube::Client& kube, const ClusterView& view, const SlurmAccess& access,
    std::string* via = nullptr, std::string* token_from = nullptr);

}  // namespace tightrope::cli
