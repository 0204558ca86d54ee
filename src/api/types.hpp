// The slinky.slurm.net/v1beta1 resources as C++ values: Controller, NodeSet, LoginSet, RestApi,
// Accounting and Token, with Slinky's field names; and Tightrope's own tightrope.slurm.net/v1alpha1
// HealthCheck. Kubernetes types that the operator passes
// through without reading (a container, a pod spec, a service spec) stay JSON. Knows nothing of
// HTTP or of Slurm's daemons; codec.hpp reads and writes these, defaults.hpp and validation.hpp
// complete and check them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tightrope::api {

inline constexpr std::string_view kGroup = "slinky.slurm.net";
inline constexpr std::string_view kVersion = "v1beta1";
inline constexpr std::string_view kApiVersion = "slinky.slurm.net/v1beta1";
// Kinds Slinky has no counterpart of live in a group of their own, so Slinky's stays as it is.
inline constexpr std::string_view kTightropeGroup = "tightrope.slurm.net";
inline constexpr std::string_view kTightropeVersion = "v1alpha1";
inline constexpr std::string_view kTightropeApiVersion = "tightrope.slurm.net/v1alpha1";

// corev1.LocalObjectReference.
struct LocalRef {
  std::string name;
  bool operator==(const LocalRef&) const = default;
};

// NodeSet's controllerRef: a name and, for manifests that spell it out, the namespace (which
// must be the NodeSet's own).
struct ControllerRef {
  std::string name;
  std::string namespace_name;
  bool operator==(const ControllerRef&) const = default;
};

// corev1.SecretKeySelector and corev1.ConfigMapKeySelector.
struct KeyRef {
  std::string name;
  std::string key;
  std::optional<bool> optional;
  bool empty() const { return name.empty() && key.empty(); }
  bool operator==(const KeyRef&) const = default;
};

using StringMap = std::map<std::string, std::string>;

struct Metadata {
  StringMap labels;
  StringMap annotations;
  bool operator==(const Metadata&) const = default;
};

// A pod template whose spec is merged over what the operator builds (containers by name).
struct PodTemplate {
  Metadata metadata;
  nlohmann::json spec = nlohmann::json::object();  // corev1.PodSpec, passed through
  bool operator==(const PodTemplate&) const = default;
};

// corev1.Container fields a user sets on one of the operator's containers (image, resources, env,
// args, ...), merged over the operator's container of that role.
using Container = nlohmann::json;

struct ServiceTemplate {
  Metadata metadata;
  nlohmann::json spec = nlohmann::json::object();  // corev1.ServiceSpec, passed through
  int64_t port = 0;                                // 0: the component's own port
  int64_t node_port = 0;
  bool operator==(const ServiceTemplate&) const = default;
};

struct ExternalConfig {
  std::string host;
  int64_t port = 0;
  bool operator==(const ExternalConfig&) const = default;
};

struct MetricEndpoint {
  std::string path;
  std::string interval;
  std::string scrape_timeout;
  bool operator==(const MetricEndpoint&) const = default;
};

struct ServiceMonitorSpec {
  bool enabled = false;
  StringMap labels;
  StringMap annotations;
  std::string interval;
  std::string scrape_timeout;
  std::vector<MetricEndpoint> endpoints;
  bool operator==(const ServiceMonitorSpec&) const = default;
};

struct MetricsSpec {
  bool enabled = false;
  ServiceMonitorSpec service_monitor;
  bool operator==(const MetricsSpec&) const = default;
};

// metav1.Condition.
struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  int64_t observed_generation = 0;
  std::string last_transition_time;  // RFC 3339
  bool operator==(const Condition&) const = default;
};

// The metadata the operator reads of its own resources.
struct ObjectMeta {
  std::string name;
  std::string namespace_name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;
  bool deleting = false;
  StringMap labels;
  StringMap annotations;
  bool operator==(const ObjectMeta&) const = default;
};

// ---- Controller: slurmctld and the cluster's slurm.conf.

struct HighAvailability {
  bool enabled = false;
  int64_t backups = 1;  // standby slurmctld pods besides the primary
  bool operator==(const HighAvailability&) const = default;
};

struct ControllerPersistence {
  std::optional<bool> enabled;  // default true
  std::string existing_claim;
  // The inline corev1.PersistentVolumeClaimSpec fields (accessModes, resources, ...).
  nlohmann::json claim_spec = nlohmann::json::object();
  bool operator==(const ControllerPersistence&) const = default;
};

struct ControllerSpec {
  std::string cluster_name;
  KeyRef slurm_key_ref;
  std::optional<KeyRef> jwt_hs256_key_ref;  // deprecated spelling of jwt_key_ref
  std::optional<KeyRef> jwt_key_ref;
  std::optional<KeyRef> jwks_key_ref;  // a ConfigMap key
  std::optional<LocalRef> accounting_ref;
  bool external = false;
  ExternalConfig external_config;
  HighAvailability ha;
  Container slurmctld = nlohmann::json::object();
  bool inplace_reconfigure = false;
  Container reconfigure = nlohmann::json::object();
  Container logfile = nlohmann::json::object();
  PodTemplate template_;
  std::string extra_conf;
  std::vector<LocalRef> config_file_refs;
  std::vector<LocalRef> prolog_script_refs;
  std::vector<LocalRef> epilog_script_refs;
  std::vector<LocalRef> prolog_slurmctld_script_refs;
  std::vector<LocalRef> epilog_slurmctld_script_refs;
  ControllerPersistence persistence;
  ServiceTemplate service;
  MetricsSpec metrics;
  bool operator==(const ControllerSpec&) const = default;

  // jwtKeyRef, or the deprecated jwtHs256KeyRef.
  const KeyRef* jwt_key() const;

  // One list of ConfigMaps whose files land in /etc/slurm, with its field's path.
  struct ConfigRefs {
    const std::vector<LocalRef>* refs;
    const char* field;  // "spec.configFileRefs"
    bool scripts;       // prologs and epilogs: their files are made executable
  };
  // configFileRefs, then the four prolog and epilog lists, in that order.
  std::array<ConfigRefs, 5> config_refs() const;
};

struct ControllerStatus {
  std::vector<Condition> conditions;
  bool operator==(const ControllerStatus&) const = default;
};

struct Controller {
  ObjectMeta metadata;
  ControllerSpec spec;
  ControllerStatus status;
  // The Slurm ClusterName: spec.clusterName, else "<namespace>_<name>".
  std::string cluster_name() const;
};

// ---- NodeSet: slurmd pods (reconciled by the NodeSet controller; the Controller reads its name
// and partition).

struct NodeSetPartition {
  bool enabled = false;
  std::string config;  // one line appended to the partition's line
  bool operator==(const NodeSetPartition&) const = default;
};

struct NodeSetSsh {
  bool enabled = false;
  std::string extra_sshd_config;
  KeyRef sssd_conf_ref;
  bool operator==(const NodeSetSsh&) const = default;
};

struct ScheduledUpdate {
  std::string start_time;  // RFC 3339
  std::string duration;    // Go duration, default "30m"
  std::vector<std::string> flags;
  bool operator==(const ScheduledUpdate&) const = default;
};

struct NodeSetUpdateStrategy {
  std::string type;  // RollingUpdate (default), OnDelete, ScheduledUpdate
  // rollingUpdate.maxUnavailable: an integer or a percentage; JSON so both survive.
  nlohmann::json max_unavailable;
  ScheduledUpdate scheduled_update;
  bool operator==(const NodeSetUpdateStrategy&) const = default;
};

struct PvcRetentionPolicy {
  std::string when_deleted;  // Retain (default), Delete
  std::string when_scaled;
  bool operator==(const PvcRetentionPolicy&) const = default;
};

struct NodeSetSpec {
  ControllerRef controller_ref;
  std::optional<int64_t> replicas;  // default 1
  std::string scaling_mode;         // StatefulSet (default), DaemonSet
  Container slurmd = nlohmann::json::object();
  NodeSetSsh ssh;
  Container logfile = nlohmann::json::object();
  PodTemplate template_;
  std::string extra_conf;
  NodeSetPartition partition;
  nlohmann::json volume_claim_templates = nlohmann::json::array();  // corev1.PVC list
  NodeSetUpdateStrategy update_strategy;
  int64_t revision_history_limit = 0;
  PvcRetentionPolicy persistent_volume_claim_retention_policy;
  int64_t min_ready_seconds = 0;
  int64_t ordinal_padding = 0;
  bool pin_to_node = false;
  bool taint_kube_nodes = false;  // deprecated in Slinky; accepted, not acted on
  std::optional<bool> workload_disruption_protection;  // default true
  std::string prune_slurm_node_records;                // Never (default), NodeNotFound
  bool oversubscribe_node = false;
  bool operator==(const NodeSetSpec&) const = default;
};

struct NodeSetStatus {
  int64_t replicas = 0;
  int64_t updated_replicas = 0;
  int64_t ready_replicas = 0;
  int64_t available_replicas = 0;
  int64_t unavailable_replicas = 0;
  int64_t desired = 0;
  int64_t slurm_idle = 0;
  int64_t slurm_allocated = 0;
  int64_t slurm_down = 0;
  int64_t slurm_drain = 0;
  int64_t observed_generation = 0;
  std::string node_set_hash;
  std::optional<int64_t> collision_count;
  std::vector<Condition> conditions;
  StringMap ordinal_to_node;
  std::string selector;
  bool operator==(const NodeSetStatus&) const = default;
};

struct NodeSet {
  ObjectMeta metadata;
  NodeSetSpec spec;
  NodeSetStatus status;
  // The Slurm NodeSet (and feature) name: the template hostname without its trailing '-', else
  // the resource's name.
  std::string slurm_name() const;
};

// ---- LoginSet: sackd + sshd + SSSD login pods.

struct LoginSetSpec {
  LocalRef controller_ref;
  std::optional<int64_t> replicas;  // default 1
  Container login = nlohmann::json::object();
  Container initconf = nlohmann::json::object();
  PodTemplate template_;
  std::string root_ssh_authorized_keys;
  std::string extra_sshd_config;
  KeyRef sssd_conf_ref;
  nlohmann::json strategy = nlohmann::json::object();  // appsv1.DeploymentStrategy
  ServiceTemplate service;
  bool operator==(const LoginSetSpec&) const = default;
};

struct LoginSetStatus {
  int64_t replicas = 0;
  std::vector<Condition> conditions;
  std::string selector;
  bool operator==(const LoginSetStatus&) const = default;
};

struct LoginSet {
  ObjectMeta metadata;
  LoginSetSpec spec;
  LoginSetStatus status;
};

// ---- RestApi: slurmrestd.

struct RestApiSpec {
  LocalRef controller_ref;
  std::optional<int64_t> replicas;  // default 1
  Container slurmrestd = nlohmann::json::object();
  PodTemplate template_;
  ServiceTemplate service;
  bool operator==(const RestApiSpec&) const = default;
};

struct RestApiStatus {
  std::vector<Condition> conditions;
  bool operator==(const RestApiStatus&) const = default;
};

struct RestApi {
  ObjectMeta metadata;
  RestApiSpec spec;
  RestApiStatus status;
};

// ---- Accounting: slurmdbd in front of an existing MySQL/MariaDB.

struct StorageConfig {
  std::string host;
  int64_t port = 0;      // default 3306
  std::string database;  // default "slurm_acct_db"
  std::string username;
  KeyRef password_key_ref;
  bool operator==(const StorageConfig&) const = default;
};

struct AccountingSpec {
  KeyRef slurm_key_ref;
  std::optional<KeyRef> jwt_hs256_key_ref;
  std::optional<KeyRef> jwt_key_ref;
  std::optional<KeyRef> jwks_key_ref;
  bool external = false;
  ExternalConfig external_config;
  Container slurmdbd = nlohmann::json::object();
  PodTemplate template_;
  StorageConfig storage_config;
  std::string extra_conf;
  ServiceTemplate service;
  bool operator==(const AccountingSpec&) const = default;

  const KeyRef* jwt_key() const;
};

struct AccountingStatus {
  std::vector<Condition> conditions;
  bool operator==(const AccountingStatus&) const = default;
};

struct Accounting {
  ObjectMeta metadata;
  AccountingSpec spec;
  AccountingStatus status;
};

// ---- Token: a JWT for a Slurm user, kept fresh in a Secret.

struct TokenSpec {
  std::optional<KeyRef> jwt_hs256_key_ref;
  std::optional<KeyRef> jwt_key_ref;
  std::string username;
  std::string lifetime;              // Go duration ("15m", "1h30m"); default 15m
  std::optional<bool> refresh;       // default true; false: the Secret is immutable
  std::optional<KeyRef> secret_ref;  // default "<token>-jwt-<username>", key SLURM_JWT
  bool operator==(const TokenSpec&) const = default;

  const KeyRef* jwt_key() const;
};

struct TokenStatus {
  std::string issued_at;  // RFC 3339
  std::vector<Condition> conditions;
  bool operator==(const TokenStatus&) const = default;
};

struct Token {
  ObjectMeta metadata;
  TokenSpec spec;
  TokenStatus status;
};

// ---- HealthCheck (tightrope.slurm.net/v1alpha1): what to check on the workers of some NodeSets
// and what to do with one that fails. docs/health.md.

// metav1.LabelSelector.
struct LabelSelector {
  struct Requirement {
    std::string key;
    std::string op;  // In, NotIn, Exists, DoesNotExist
    std::vector<std::string> values;
    bool operator==(const Requirement&) const = default;
  };
  StringMap match_labels;
  std::vector<Requirement> match_expressions;
  bool operator==(const LabelSelector&) const = default;

  // Whether labels satisfy every term; an empty selector matches everything.
  bool matches(const StringMap& labels) const;
};

struct PassiveChecks {
  int64_t interval_seconds = 0;     // default 60
  std::vector<std::string> checks;  // built-in checks; default all of kBuiltinHealthChecks
  std::vector<std::string> mounts;  // absolute paths that must be mounted
  std::optional<LocalRef> scripts;  // scripts.configMapRef: every key an executable check
  int64_t timeout_seconds = 0;      // default 30
  // The DCGM host engine the dcgm check asks (dcgmi --host): host[:port]; "" is dcgmi's own
  // default, this machine's.
  std::string dcgm_host;
  bool operator==(const PassiveChecks&) const = default;
};

inline constexpr std::array<std::string_view, 5> kBuiltinHealthChecks = {"mounts", "memory", "cpus",
                                                                         "gpus", "dcgm"};

// Checks a Slurm job runs on an idle worker, in a reservation of that node alone, so that no
// user job waits behind them: on a schedule and after each replacement.
struct ActiveChecks {
  int64_t interval_seconds = 0;           // default 86400: how often an idle worker is checked
  std::optional<bool> after_replacement;  // default true: a replacement is checked once it is idle
  std::vector<std::string> checks;        // of kBuiltinActiveChecks; default all
  int64_t timeout_seconds = 0;            // default 120: the whole job's
  nlohmann::json max_concurrent;          // of a NodeSet's workers at once: count or %; default 1
  int64_t min_cpu_gflops = 0;             // 0: measured and reported, no floor
  int64_t min_memory_bandwidth_mbps = 0;  // MB/s of a STREAM triad
  int64_t min_nccl_bus_bandwidth_gbps =
      0;                   // GB/s, nccl-tests all_reduce_perf's average bus bandwidth
  std::string nccl_tests;  // default /usr/local/bin/all_reduce_perf
  bool operator==(const ActiveChecks&) const = default;
};

inline constexpr std::array<std::string_view, 3> kBuiltinActiveChecks = {"cpu", "memory-bandwidth",
                                                                         "nccl"};

// Signals from outside Tightrope's checks that fail a worker as a check would.
struct HealthSignals {
  // Kubernetes Node conditions (a node problem detector's, NVSentinel's) that fail every worker
  // on that Node while True. They speak of the machine: the Node is quarantined at once.
  std::vector<std::string> node_conditions;
  // DRA device taint keys ("*": any) that fail every worker on the Node of the tainted device,
  // whether a driver put the taint in its ResourceSlice or a DeviceTaintRule selects the device.
  // Like a Node condition, the machine's: the Node is quarantined at once.
  std::vector<std::string> device_taints;
  // A pod's slinky.slurm.net/pod-cordon-requested (a health tool's request) fails the worker.
  bool pod_cordon_requested = false;
  bool operator==(const HealthSignals&) const = default;
};

struct Remediation {
  // At most this many of a NodeSet's nodes drained by checks at once: an integer or a
  // percentage; JSON so both survive. Default 1.
  nlohmann::json max_unhealthy;
  std::optional<bool> replace;   // default true: replace the pod once drained and idle
  int64_t quarantine_after = 0;  // default 2: failures on one Kubernetes Node that taint it
  int64_t window_seconds = 0;    // default 86400: how long a failure counts
  bool operator==(const Remediation&) const = default;
};

struct HealthCheckSpec {
  LabelSelector node_set_selector;  // NodeSets of the HealthCheck's namespace
  PassiveChecks passive;
  std::optional<ActiveChecks> active;  // none unless asked for
  HealthSignals signals;
  Remediation remediation;
  bool operator==(const HealthCheckSpec&) const = default;
};

// A Slurm node on its way through remediation (docs/health.md, "Remediation, step by step").
struct NodeRemediation {
  std::string node;       // the Slurm node
  std::string node_set;   // its NodeSet
  std::string pod_uid;    // the pod that failed; another uid under the name is its replacement
  std::string kube_node;  // where that pod ran
  std::string check;
  std::string message;
  std::string phase;  // Draining, Replacing, Verifying
  std::string since;  // RFC 3339, when the check failed
  bool operator==(const NodeRemediation&) const = default;
};

// A health failure a Kubernetes Node records (kAnnotationHealthFailures: a JSON list of
// {"pod","uid","check","at"}), once per pod.
struct NodeFailure {
  std::string pod;  // namespace/name
  std::string uid;
  std::string check;
  int64_t at = 0;  // unix seconds: when the check failed
  bool operator==(const NodeFailure&) const = default;
};

// What checks have seen of one Kubernetes Node: its failures within the window.
struct KubeNodeHealth {
  std::string name;
  std::vector<std::string> failures;  // RFC 3339, oldest first
  bool quarantined = false;
  bool operator==(const KubeNodeHealth&) const = default;
};

struct HealthCheckStatus {
  int64_t observed_generation = 0;
  std::vector<Condition> conditions;
  std::vector<NodeRemediation> remediations;
  std::vector<KubeNodeHealth> kube_nodes;
  bool operator==(const HealthCheckStatus&) const = default;
};

struct HealthCheck {
  ObjectMeta metadata;
  HealthCheckSpec spec;
  HealthCheckStatus status;
};

}  // namespace tightrope::api
