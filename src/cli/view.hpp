// What kubectl-slurm knows of one Slurm cluster at one moment: the Kubernetes objects that make
// it, as the API server has them, and what slurmrestd says, each read once. status, explain and
// doctor are pure functions of a ClusterView; gather() is the only place that does I/O for them.
// Secrets are read for what they prove (a key's hash, a certificate's expiry, a token's
// signature), never kept.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kube/client.hpp"
#include "slurm/client.hpp"

namespace tightrope::cli {

using json = nlohmann::json;
using Time = std::chrono::system_clock::time_point;

// How kubectl-slurm reaches slurmrestd and with which token.
struct SlurmAccess {
  // Direct URL (a port-forward); empty: the API server's service proxy to the RestApi's Service.
  std::string url;
  // A JWT to send; empty: minted from the Controller's jwtKeyRef Secret, if readable.
  std::string token;
  std::string user = "slurm";  // the user a minted token speaks for
  std::chrono::milliseconds timeout{5000};
};

struct SlurmView {
  std::string via;         // "service proxy slurm/slurm-restapi:6820", or the URL given
  std::string token_from;  // "minted from Secret slurm/slurm-jwt-key", "--token"
  // Why nothing was asked (no RestApi, no key to mint with), or the first call's failure.
  std::optional<slurm::Error> error;
  std::optional<slurm::Ping> ping;
  std::optional<slurm::Error> ping_error;
  std::optional<slurm::Diag> diag;
  bool have_nodes = false;  // nodes and jobs were read
  std::vector<slurm::Node> nodes;
  std::vector<slurm::Job> jobs;
  std::vector<slurm::Partition> partitions;
  std::vector<slurm::Reservation> reservations;
  bool accounting_asked = false;  // slurmrestd serves slurmdbd's API (an Accounting exists)
  std::optional<slurm::Error> accounting_error;

  bool reached() const { return have_nodes; }
};

// A Token's Secret, as checked against the Controller's current JWT key.
struct TokenState {
  std::string token;   // the Token resource
  std::string secret;  // "<ns>/<name> key <key>"
  bool present = false;
  bool signed_by_current_key = false;
  std::optional<Time> expires_at;
};

// The webhook's serving certificate.
struct WebhookCertificate {
  std::string secret;  // "<ns>/<name>"
  std::optional<Time> not_after;
  std::string error;
};

struct OperatorView {
  std::vector<json> deployments;  // app.kubernetes.io/name=slurm-operator, any namespace
  std::vector<json> pods;
  std::vector<json> leases;    // the Leases those Deployments elect through
  std::vector<json> crds;      // the slinky.slurm.net ones
  std::vector<json> webhooks;  // ValidatingWebhookConfigurations for slinky.slurm.net
  std::vector<WebhookCertificate> certificates;
  std::string error;  // what could not be read (RBAC)
};

struct ClusterView {
  Time now;
  std::string namespace_name;
  json controller;  // the Controller resource (defaults not applied)
  std::vector<json> nodesets, restapis, accountings, loginsets, tokens;
  std::vector<json> pods;           // label slinky.slurm.net/cluster=<controller>
  std::vector<json> kube_nodes;     // every Node
  std::vector<json> pdbs;           // of the namespace
  std::vector<json> stateful_sets;  // the controller's
  std::string slurm_conf;           // the <controller>-config ConfigMap's slurm.conf
  // sha256 of the Secrets' keys the pods mount, as the pods' hash annotations carry them.
  std::string slurm_key_hash;
  std::vector<TokenState> token_states;
  SlurmView slurm;
  OperatorView op;
  std::vector<std::string> unreadable;  // what could not be read, with the API server's words

  std::string controller_name() const;
  const json* pod_of_slurm_node(const std::string& node) const;  // a worker pod by hostname
  const json* kube_node(const std::string& name) const;
  const json* nodeset(const std::string& name) const;
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

// A Slurm node's state as an administrator reads it: "IDLE+DRAIN" (how a node was made,
// DYNAMIC_NORM, left out, as the operator's pod conditions leave it out).
std::string node_state(const slurm::Node& node);

// Small readers of Kubernetes documents.
std::string str_at(const json& doc, const json::json_pointer& at);
std::string label(const json& doc, const std::string& key);
std::string annotation(const json& doc, const std::string& key);
std::string name_of(const json& doc);
// A condition of status.conditions by type, or null.
const json* condition(const json& doc, const std::string& type);

}  // namespace tightrope::cli
