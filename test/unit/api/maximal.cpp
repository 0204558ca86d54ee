#include "maximal.hpp"

namespace tightrope::api::testing {
namespace {

using nlohmann::json;

ObjectMeta meta(const std::string& name) {
  ObjectMeta m;
  m.name = name;
  m.namespace_name = "slurm";
  m.labels = {{"team", "hpc"}};
  m.annotations = {{"note", "maximal"}};
  return m;
}

KeyRef key_ref(const std::string& name, const std::string& key) {
  return {name, key, true};
}

Metadata labelled(const std::string& what) {
  return {{{"tier", what}}, {{"owner", what + "-team"}}};
}

PodTemplate pod_template(const std::string& hostname) {
  return {labelled("pod"), {{"hostname", hostname}, {"priorityClassName", "high"}}};
}

ServiceTemplate service(int64_t port) {
  return {labelled("svc"), {{"type", "NodePort"}}, port, 30000 + port % 1000};
}

Container container(const std::string& image) {
  return {{"image", image}, {"resources", {{"limits", {{"memory", "1Gi"}}}}}};
}

std::vector<Condition> conditions() {
  return {{"Ready", "True", "Reconciled", "all pods ready", 4, "2026-12-02T10:00:00Z"},
          {"Degraded", "False", "AllGood", "", 4, "2026-12-02T10:00:00Z"}};
}

}  // namespace

Controller maximal_controller() {
  Controller c;
  c.metadata = meta("slurm");
  ControllerSpec& s = c.spec;
  s.cluster_name = "prod";
  s.slurm_key_ref = key_ref("slurm-auth-slurm", "slurm.key");
  s.jwt_hs256_key_ref = key_ref("slurm-auth-jwths256-old", "jwt_hs256.key");
  s.jwt_key_ref = key_ref("slurm-auth-jwths256", "jwt_hs256.key");
  s.jwks_key_ref = key_ref("slurm-jwks", "jwks.json");
  s.accounting_ref = LocalRef{"slurm"};
  s.external = true;
  s.external_config = {"slurmctld.example.org", 6817};
  s.ha = {true, 2};
  s.slurmctld = container("slurmctld:1");
  s.inplace_reconfigure = true;
  s.reconfigure = container("slurmctld:1");
  s.logfile = container("alpine:3");
  s.template_ = pod_template("ctl");
  s.extra_conf = "MaxNodeCount=128\n";
  s.config_file_refs = {{"cgroup"}, {"gres"}};
  s.prolog_script_refs = {{"prolog"}};
  s.epilog_script_refs = {{"epilog"}};
  s.prolog_slurmctld_script_refs = {{"prolog-ctld"}};
  s.epilog_slurmctld_script_refs = {{"epilog-ctld"}};
  s.persistence.enabled = false;
  s.persistence.existing_claim = "slurm-state";
  s.persistence.claim_spec = {{"storageClassName", "fast"},
                              {"accessModes", json::array({"ReadWriteMany"})}};
  s.service = service(6817);
  s.metrics.enabled = true;
  s.metrics.service_monitor = {true,
                               {{"release", "prometheus"}},
                               {{"scrape", "yes"}},
                               "30s",
                               "10s",
                               {{"/metrics/nodes", "15s", "5s"}, {"/metrics/jobs", "60s", "20s"}}};
  c.status.conditions = conditions();
  return c;
}

NodeSet maximal_nodeset() {
  NodeSet n;
  n.metadata = meta("gpu");
  NodeSetSpec& s = n.spec;
  s.controller_ref = {"slurm", "slurm"};
  s.replicas = 4;
  s.scaling_mode = "DaemonSet";
  s.slurmd = container("slurmd:1");
  s.ssh = {true, "X11Forwarding no", key_ref("sssd", "sssd.conf")};
  s.logfile = container("alpine:3");
  s.template_ = pod_template("gpu-");
  s.extra_conf = "Features=h100";
  s.partition = {true, "MaxTime=1:00:00"};
  s.volume_claim_templates =
      json::array({{{"metadata", {{"name", "scratch"}}},
                    {"spec", {{"accessModes", json::array({"ReadWriteOnce"})}}}}});
  s.update_strategy.type = "ScheduledUpdate";
  s.update_strategy.max_unavailable = "50%";
  s.update_strategy.scheduled_update = {"2026-12-24T02:00:00Z", "2h", {"DAILY", "FLEX"}};
  s.revision_history_limit = 5;
  s.persistent_volume_claim_retention_policy = {"Delete", "Delete"};
  s.min_ready_seconds = 30;
  s.ordinal_padding = 3;
  s.pin_to_node = true;
  s.taint_kube_nodes = true;
  s.workload_disruption_protection = false;
  s.prune_slurm_node_records = "NodeNotFound";
  s.oversubscribe_node = true;
  NodeSetStatus& st = n.status;
  st.replicas = 4;
  st.updated_replicas = 3;
  st.ready_replicas = 2;
  st.available_replicas = 2;
  st.unavailable_replicas = 2;
  st.desired = 4;
  st.slurm_idle = 1;
  st.slurm_allocated = 1;
  st.slurm_down = 1;
  st.slurm_drain = 1;
  st.observed_generation = 7;
  st.node_set_hash = "gpu-5d8f9c";
  st.collision_count = 1;
  st.conditions = conditions();
  st.ordinal_to_node = {{"0", "host-a"}, {"1", "host-b"}};
  st.selector = "app.kubernetes.io/instance=gpu";
  return n;
}

LoginSet maximal_loginset() {
  LoginSet l;
  l.metadata = meta("login");
  LoginSetSpec& s = l.spec;
  s.controller_ref = {"slurm"};
  s.replicas = 2;
  s.login = container("login:1");
  s.initconf = container("alpine:3");
  s.template_ = pod_template("login");
  s.root_ssh_authorized_keys = "ssh-ed25519 AAAA admin@example.org\n";
  s.extra_sshd_config = "MaxSessions 20";
  s.sssd_conf_ref = key_ref("sssd", "sssd.conf");
  s.strategy = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", 1}}}};
  s.service = service(22);
  l.status.replicas = 2;
  l.status.conditions = conditions();
  l.status.selector = "app.kubernetes.io/instance=login";
  return l;
}

RestApi maximal_restapi() {
  RestApi r;
  r.metadata = meta("slurm");
  r.spec.controller_ref = {"slurm"};
  r.spec.replicas = 2;
  r.spec.slurmrestd = container("slurmrestd:1");
  r.spec.template_ = pod_template("restapi");
  r.spec.service = service(6820);
  r.status.conditions = conditions();
  return r;
}

Accounting maximal_accounting() {
  Accounting a;
  a.metadata = meta("slurm");
  AccountingSpec& s = a.spec;
  s.slurm_key_ref = key_ref("slurm-auth-slurm", "slurm.key");
  s.jwt_hs256_key_ref = key_ref("slurm-auth-jwths256-old", "jwt_hs256.key");
  s.jwt_key_ref = key_ref("slurm-auth-jwths256", "jwt_hs256.key");
  s.jwks_key_ref = key_ref("slurm-jwks", "jwks.json");
  s.external = true;
  s.external_config = {"slurmdbd.example.org", 6819};
  s.slurmdbd = container("slurmdbd:1");
  s.template_ = pod_template("dbd");
  s.storage_config = {"mariadb", 3307, "acct", "slurm", key_ref("mariadb", "password")};
  s.extra_conf = "CommitDelay=1\n";
  s.service = service(6819);
  a.status.conditions = conditions();
  return a;
}

Token maximal_token() {
  Token t;
  t.metadata = meta("token");
  TokenSpec& s = t.spec;
  s.jwt_hs256_key_ref = key_ref("slurm-auth-jwths256-old", "jwt_hs256.key");
  s.jwt_key_ref = key_ref("slurm-auth-jwths256", "jwt_hs256.key");
  s.username = "alice";
  s.lifetime = "1h30m";
  s.refresh = false;
  s.secret_ref = key_ref("alice-jwt", "TOKEN");
  t.status.issued_at = "2026-12-02T10:00:00Z";
  t.status.conditions = conditions();
  return t;
}

HealthCheck maximal_health_check() {
  HealthCheck h;
  h.metadata = meta("gpu-workers");
  HealthCheckSpec& s = h.spec;
  s.node_set_selector.match_labels = {{"app.kubernetes.io/instance", "slurm-worker-gpu"}};
  s.node_set_selector.match_expressions = {{"tier", "In", {"gpu", "cpu"}}};
  s.passive.interval_seconds = 120;
  s.passive.checks = {"mounts", "gpus"};
  s.passive.mounts = {"/home", "/scratch"};
  s.passive.scripts = LocalRef{"site-health-checks"};
  s.passive.timeout_seconds = 20;
  s.passive.dcgm_host = "nvidia-dcgm.gpu-operator.svc:5555";
  ActiveChecks& a = s.active.emplace();
  a.interval_seconds = 43200;
  a.after_replacement = false;
  a.checks = {"cpu", "nccl"};
  a.timeout_seconds = 300;
  a.max_concurrent = "25%";
  a.min_cpu_gflops = 100;
  a.min_memory_bandwidth_mbps = 50000;
  a.min_nccl_bus_bandwidth_gbps = 350;
  a.nccl_tests = "/opt/nccl-tests/all_reduce_perf";
  s.signals.node_conditions = {"GpuXidError"};
  s.signals.device_taints = {"gpu.example.com/xid"};
  s.signals.pod_cordon_requested = true;
  s.remediation.max_unhealthy = "10%";
  s.remediation.replace = false;
  s.remediation.quarantine_after = 3;
  s.remediation.window_seconds = 3600;
  HealthCheckStatus& st = h.status;
  st.observed_generation = 4;
  st.conditions = conditions();
  st.remediations = {{"gpu-3", "slurm-worker-gpu", "8f1c", "node-2", "gpus",
                      "2 GPUs registered, 1 present", "Replacing", "2026-12-07T03:00:00Z"}};
  st.kube_nodes = {{"node-2", {"2026-12-06T21:00:00Z", "2026-12-07T03:00:00Z"}, true}};
  return h;
}

}  // namespace tightrope::api::testing
