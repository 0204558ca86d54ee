// What is known of one Slurm cluster at one moment: the Kubernetes objects that make it, as the
// API server has them, and what slurmrestd says. doctor's checks (checks.hpp) are pure functions
// of it; kubectl-slurm fills it by asking (src/cli/view.hpp), the operator from its caches.
// Secrets are read for what they prove (a key's hash, a certificate's expiry, a token's
// signature), never kept. Knows both systems' documents; does no I/O.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "slurm/error.hpp"
#include "slurm/model.hpp"

namespace tightrope::doctor {

using json = nlohmann::json;
using Time = std::chrono::system_clock::time_point;

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

// The lookups by name of a ClusterView (pods by hostname, Nodes, Slurm nodes, jobs by node),
// built on first use: linear scans made the catalog quadratic (264 ms at 1,000 workers). It
// points into the view's vectors, so a copied or moved view builds its own, and it is built
// again when those vectors were reallocated or resized; ClusterView::forget_lookups drops it
// for a view changed in place. Not for concurrent use.
class LookupCache {
 public:
  struct Index;
  LookupCache();
  LookupCache(const LookupCache&);
  LookupCache(LookupCache&&) noexcept;
  LookupCache& operator=(const LookupCache&);
  LookupCache& operator=(LookupCache&&) noexcept;
  ~LookupCache();

 private:
  friend struct ClusterView;
  std::unique_ptr<Index> index_;
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
  // When the key Secret last changed (made, or written): a slurmd reads its key when it starts,
  // and worker pods carry no key hash (as Slinky's do not), so one started before runs the old.
  std::optional<Time> slurm_key_changed_at;
  std::vector<TokenState> token_states;
  SlurmView slurm;
  OperatorView op;
  std::vector<std::string> unreadable;  // what could not be read, with the API server's words

  std::string controller_name() const;
  const json* pod_of_slurm_node(const std::string& node) const;  // a worker pod by hostname
  const json* kube_node(const std::string& name) const;
  const json* nodeset(const std::string& name) const;
  const slurm::Node* slurm_node(const std::string& name) const;
  // The jobs that run (or are suspended, or completing) on a Slurm node, by their hostlists.
  std::vector<const slurm::Job*> jobs_on(const std::string& node) const;
  // After changing pods, Nodes, Slurm nodes or jobs in place (doctor::diagnose calls it).
  void forget_lookups() const;

 private:
  const LookupCache::Index& lookups() const;
  mutable LookupCache lookups_;
};

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

}  // namespace tightrope::doctor
