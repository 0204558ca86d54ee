#include "operator/build/components.hpp"

#include "api/well_known.hpp"
#include "kube/time.hpp"
#include "operator/build/common.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/nodeset.hpp"
#include "slurm/conf.hpp"

namespace tightrope::op::build {

using nlohmann::json;

namespace {

json key_items(const api::KeyRef& ref, const char* path) {
  return {{"secret",
           {{"name", ref.name}, {"items", json::array({{{"key", ref.key}, {"path", path}}})}}}};
}

// The labels of an object of one cluster: the component's and slinky.slurm.net/cluster.
json cluster_labels(std::string_view name, std::string_view instance, std::string_view component,
                    const std::string& cluster) {
  json labels = component_labels(name, instance, component);
  labels[api::kLabelCluster] = cluster;
  return labels;
}

json cluster_labels(std::string_view name, std::string_view instance, std::string_view component,
                    const api::Controller& controller) {
  return cluster_labels(name, instance, component, controller.metadata.name);
}

}  // namespace

// ---- RestApi.

std::string restapi_name(const api::RestApi& r) {
  return r.metadata.name + "-restapi";
}

json build_restapi_deployment(const api::RestApi& r, const RestApiInputs& in) {
  const Owner owner{"RestApi", r.metadata.name, r.metadata.uid};
  const json labels = cluster_labels("slurmrestd", r.metadata.name, "restapi", in.controller);
  const bool accounting = in.controller.spec.accounting_ref.has_value();
  json container = {
      {"name", "slurmrestd"},
      {"image", slurm_image("slurmrestd")},
      {"args",
       json::array({"-s", accounting ? "openapi/slurmctld,openapi/slurmdbd" : "openapi/slurmctld",
                    "0.0.0.0:" + std::to_string(kSlurmrestdPort)})},
      // JWT daemon mode: every request carries its own token, checked by slurmctld.
      {"env", json::array({{{"name", "SLURM_JWT"}, {"value", "daemon"}},
                           {{"name", "SLURMRESTD_SECURITY"},
                            {"value", "disable_unshare_files,disable_unshare_sysv"}}})},
      {"ports",
       json::array(
           {{{"name", "slurmrestd"}, {"containerPort", kSlurmrestdPort}, {"protocol", "TCP"}}})},
      {"readinessProbe", {{"tcpSocket", {{"port", "slurmrestd"}}}}},
      {"livenessProbe", {{"tcpSocket", {{"port", "slurmrestd"}}}}},
      {"securityContext", unprivileged_daemon()},
      {"volumeMounts", json::array({{{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}}})}};
  container = merge_over(container, r.spec.slurmrestd);
  const json sources =
      json::array({{{"configMap",
                     {{"name", controller_config_map_name(in.controller)},
                      {"items", json::array({{{"key", "slurm.conf"}, {"path", "slurm.conf"}}})}}}},
                   key_items(in.controller.spec.slurm_key_ref, "slurm.key")});
  const json base = {
      {"automountServiceAccountToken", false},
      // fsGroup: the projected files are root's and 0600; the group gets read access to them.
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", kNobodyUid},
        {"runAsGroup", kNobodyUid},
        {"fsGroup", kNobodyUid},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", json::array({container})},
      {"volumes", json::array({{{"name", "slurm-etc"},
                                {"projected", {{"defaultMode", 0600}, {"sources", sources}}}}})}};
  const json annotations = {{api::kAnnotationSlurmConfigHash, in.config_hash},
                            {api::kAnnotationSlurmKeyHash, in.slurm_key_hash},
                            {api::kAnnotationDefaultContainer, "slurmrestd"}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", object_meta(restapi_name(r), r.metadata.namespace_name, labels, owner)},
          {"spec",
           {{"replicas", r.spec.replicas.value_or(1)},
            {"revisionHistoryLimit", 0},
            {"selector", {{"matchLabels", selector_labels("slurmrestd", r.metadata.name)}}},
            {"template", pod_template(labels, annotations, base, r.spec.template_)}}}};
}

json build_restapi_service(const api::RestApi& r) {
  const Owner owner{"RestApi", r.metadata.name, r.metadata.uid};
  return service(
      restapi_name(r), r.metadata.namespace_name,
      cluster_labels("slurmrestd", r.metadata.name, "restapi", r.spec.controller_ref.name), owner,
      {{"selector", selector_labels("slurmrestd", r.metadata.name)},
       {"ports", json::array({{{"name", "slurmrestd"},
                               {"port", kSlurmrestdPort},
                               {"targetPort", "slurmrestd"},
                               {"protocol", "TCP"}}})}},
      r.spec.service);
}

std::vector<json> build_restapi_objects(const api::RestApi& r, const RestApiInputs& in) {
  return {build_restapi_service(r), build_restapi_deployment(r, in)};
}

// ---- Accounting.

std::string accounting_name(const api::Accounting& a) {
  return a.metadata.name + "-accounting";
}

std::vector<std::string> owned_slurmdbd_conf_keys() {
  return {"DbdHost",     "DbdPort",     "SlurmUser",   "AuthType",    "AuthAltTypes", "StorageType",
          "StorageHost", "StoragePort", "StorageUser", "StoragePass", "StorageLoc"};
}

std::string build_slurmdbd_conf(const api::Accounting& a, const AccountingInputs& in) {
  const api::StorageConfig& db = a.spec.storage_config;
  slurm::SlurmConf conf;
  conf.append_comment("# slurmdbd.conf generated by the operator from Accounting " +
                      a.metadata.namespace_name + "/" + a.metadata.name +
                      ". Edit the Accounting, not this file.");
  // slurmdbd refuses to start on a host whose name is not DbdHost: the StatefulSet's pod.
  conf.set("DbdHost", accounting_name(a) + "-0");
  conf.set("DbdPort", std::to_string(kSlurmdbdPort));
  conf.set("SlurmUser", "slurm");
  conf.set("PidFile", "/run/slurmdbd/slurmdbd.pid");
  conf.set("AuthType", "auth/slurm");
  conf.set("AuthAltTypes", "auth/jwt");
  std::string alt = "jwt_key=/etc/slurm/jwt.key";
  if (a.spec.jwks_key_ref) {
    alt += ",jwks=/etc/slurm/jwks.json";
  }
  conf.set("AuthAltParameters", alt);
  conf.set("AuthInfo", "use_client_ids");
  conf.set("StorageType", "accounting_storage/mysql");
  conf.set("StorageHost", db.host);
  conf.set("StoragePort", std::to_string(db.port));
  conf.set("StorageUser", db.username.empty() ? std::string("slurm") : db.username);
  conf.set("StoragePass", in.storage_password);
  conf.set("StorageLoc", db.database);
  std::string text = conf.render();
  if (a.spec.extra_conf.find_first_not_of(" \n\t") != std::string::npos) {
    text += "\n### EXTRA CONFIG ###\n" + a.spec.extra_conf;
    if (text.back() != '\n') {
      text += '\n';
    }
  }
  return text;
}

json build_accounting_secret(const api::Accounting& a, const AccountingInputs& in) {
  const Owner owner{"Accounting", a.metadata.name, a.metadata.uid};
  return {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", object_meta(accounting_name(a), a.metadata.namespace_name,
                               component_labels("slurmdbd", a.metadata.name, "accounting"), owner)},
      {"type", "Opaque"},
      // stringData keeps the file readable in the build's golden output; the API server
      // stores it as data.
      {"stringData", {{"slurmdbd.conf", build_slurmdbd_conf(a, in)}}}};
}

json build_accounting_statefulset(const api::Accounting& a, const AccountingInputs& in) {
  const Owner owner{"Accounting", a.metadata.name, a.metadata.uid};
  const json labels = component_labels("slurmdbd", a.metadata.name, "accounting");
  json sources = json::array(
      {{{"secret",
         {{"name", accounting_name(a)},
          {"items", json::array({{{"key", "slurmdbd.conf"}, {"path", "slurmdbd.conf"}}})}}}},
       key_items(a.spec.slurm_key_ref, "slurm.key")});
  if (const api::KeyRef* jwt = a.spec.jwt_key()) {
    sources.push_back(key_items(*jwt, "jwt.key"));
  }
  if (a.spec.jwks_key_ref) {
    sources.push_back(
        {{"configMap",
          {{"name", a.spec.jwks_key_ref->name},
           {"items", json::array({{{"key", a.spec.jwks_key_ref->key}, {"path", "jwks.json"}}})}}}});
  }
  json container = {
      {"name", "slurmdbd"},
      {"image", slurm_image("slurmdbd")},
      {"ports",
       json::array(
           {{{"name", "slurmdbd"}, {"containerPort", kSlurmdbdPort}, {"protocol", "TCP"}}})},
      {"readinessProbe", {{"tcpSocket", {{"port", "slurmdbd"}}}}},
      {"livenessProbe",
       json::object({{"tcpSocket", {{"port", "slurmdbd"}}}, {"failureThreshold", 6}})},
      {"securityContext", unprivileged_daemon()},
      // /tmp: slurmdbd refuses to start when its ArchiveDir (by default /tmp) is not writable.
      {"volumeMounts", json::array({{{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}},
                                    {{"name", "run"}, {"mountPath", "/run/slurmdbd"}},
                                    {{"name", "tmp"}, {"mountPath", "/tmp"}}})}};
  container = merge_over(container, a.spec.slurmdbd);
  // slurmdbd refuses a slurmdbd.conf that is not mode 0600 and owned by SlurmUser, and a Secret
  // volume's files are root's (group-readable under fsGroup): copy them, as slurm, into memory.
  const json initconf = {
      {"name", "initconf"},
      {"image", container.value("image", slurm_image("slurmdbd"))},
      {"command",
       json::array({"sh", "-c", "cp /mnt/slurm/* /etc/slurm/ && chmod 600 /etc/slurm/*"})},
      {"securityContext", unprivileged_daemon()},
      {"volumeMounts", json::array({{{"name", "slurm-config"}, {"mountPath", "/mnt/slurm"}},
                                    {{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}}})}};
  const json base = {
      {"automountServiceAccountToken", false},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", kSlurmUid},
        {"runAsGroup", kSlurmUid},
        {"fsGroup", kSlurmUid},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"initContainers", json::array({initconf})},
      {"containers", json::array({container})},
      {"volumes", json::array({{{"name", "slurm-config"},
                                {"projected", {{"defaultMode", 0600}, {"sources", sources}}}},
                               {{"name", "slurm-etc"}, {"emptyDir", {{"medium", "Memory"}}}},
                               {{"name", "run"}, {"emptyDir", {{"medium", "Memory"}}}},
                               {{"name", "tmp"}, {"emptyDir", json::object()}}})}};
  const json annotations = {
      {api::kAnnotationSlurmdbdConfHash, sha256_hex(build_slurmdbd_conf(a, in))},
      {api::kAnnotationSlurmKeyHash, in.slurm_key_hash},
      {api::kAnnotationJwtKeyHash, in.jwt_key_hash},
      {api::kAnnotationDefaultContainer, "slurmdbd"}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", object_meta(accounting_name(a), a.metadata.namespace_name, labels, owner)},
          {"spec",
           {{"replicas", 1},
            {"serviceName", accounting_name(a)},
            {"podManagementPolicy", "Parallel"},
            {"revisionHistoryLimit", 0},
            {"selector", {{"matchLabels", selector_labels("slurmdbd", a.metadata.name)}}},
            {"template", pod_template(labels, annotations, base, a.spec.template_)}}}};
}

json build_accounting_service(const api::Accounting& a) {
  const Owner owner{"Accounting", a.metadata.name, a.metadata.uid};
  return service(accounting_name(a), a.metadata.namespace_name,
                 component_labels("slurmdbd", a.metadata.name, "accounting"), owner,
                 {{"selector", selector_labels("slurmdbd", a.metadata.name)},
                  {"ports", json::array({{{"name", "slurmdbd"},
                                          {"port", kSlurmdbdPort},
                                          {"targetPort", "slurmdbd"},
                                          {"protocol", "TCP"}}})}},
                 a.spec.service);
}

std::vector<json> build_accounting_objects(const api::Accounting& a, const AccountingInputs& in) {
  if (a.spec.external) {
    return {};
  }
  return {build_accounting_secret(a, in), build_accounting_service(a),
          build_accounting_statefulset(a, in)};
}

// ---- LoginSet.

std::string loginset_name(const api::LoginSet& l) {
  return l.metadata.name;
}
std::string loginset_host_keys_name(const api::LoginSet& l) {
  return l.metadata.name + "-ssh-host-keys";
}
std::string loginset_ssh_config_name(const api::LoginSet& l) {
  return l.metadata.name + "-ssh-config";
}

std::string build_sshd_config(const std::string& kind, const api::ObjectMeta& owner,
                              const std::string& extra) {
  std::string text = "# sshd_config generated by the operator from " + kind + " " +
                     owner.namespace_name + "/" + owner.name +
                     ".\n"
                     "Include /etc/ssh/sshd_config.d/*.conf\n";
  for (const auto& file : kSshHostKeyFiles) {
    text.append("HostKey /etc/ssh/").append(file).append("\n");
  }
  text +=
      "UsePAM yes\n"
      // A directory user's keys, when sssd.conf serves them (services = ssh,
      // ldap_user_ssh_public_key); without that the command finds none.
      "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys\n"
      "AuthorizedKeysCommandUser nobody\n"
      "KbdInteractiveAuthentication no\n"
      "X11Forwarding yes\n"
      "PrintMotd no\n"
      "AcceptEnv LANG LC_*\n"
      "Subsystem sftp internal-sftp\n";
  if (!extra.empty()) {
    text += "\n# extraSshdConfig\n" + extra;
    if (text.back() != '\n') {
      text += '\n';
    }
  }
  return text;
}

std::string build_sshd_config(const api::LoginSet& l) {
  return build_sshd_config("LoginSet", l.metadata, l.spec.extra_sshd_config);
}

json build_loginset_host_keys_secret(const api::LoginSet& l, const LoginSetInputs& in) {
  const Owner owner{"LoginSet", l.metadata.name, l.metadata.uid};
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", object_meta(loginset_host_keys_name(l), l.metadata.namespace_name,
                                   cluster_labels("login", l.metadata.name, "login",
                                                  l.spec.controller_ref.name),
                                   owner)},
          {"type", "Opaque"},
          {"immutable", true},
          {"stringData", in.host_keys}};
}

json build_loginset_ssh_config_map(const api::LoginSet& l) {
  const Owner owner{"LoginSet", l.metadata.name, l.metadata.uid};
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", object_meta(loginset_ssh_config_name(l), l.metadata.namespace_name,
                                   cluster_labels("login", l.metadata.name, "login",
                                                  l.spec.controller_ref.name),
                                   owner)},
          {"data",
           {{"sshd_config", build_sshd_config(l)},
            {"authorized_keys", l.spec.root_ssh_authorized_keys}}}};
}

json build_loginset_deployment(const api::LoginSet& l, const LoginSetInputs& in) {
  const Owner owner{"LoginSet", l.metadata.name, l.metadata.uid};
  const json labels = cluster_labels("login", l.metadata.name, "login", in.controller);
  // sackd wants slurm.key owned by slurm and private: an init container copies it from the
  // read-only Secret mount into a memory volume.
  json initconf = {
      {"name", "initconf"},
      {"image", kHelperImage},
      {"command",
       json::array({"sh", "-c",
                    "cp /mnt/slurm/* /etc/slurm/ && chown -R 401:401 /etc/slurm && chmod 600 "
                    "/etc/slurm/*"})},
      // Root, to give the files to slurm, with only the two capabilities that takes.
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"capabilities",
         {{"drop", json::array({"ALL"})}, {"add", json::array({"CHOWN", "FOWNER"})}}},
        {"readOnlyRootFilesystem", true}}},
      {"volumeMounts", json::array({{{"name", "slurm-keys"}, {"mountPath", "/mnt/slurm"}},
                                    {{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}}})}};
  initconf = merge_over(initconf, l.spec.initconf);
  json host_key_mounts = json::array();
  for (const auto& [file, pem] : in.host_keys) {
    host_key_mounts.push_back({{"name", "ssh-host-keys"},
                               {"mountPath", "/etc/ssh/" + file},
                               {"subPath", file},
                               {"readOnly", true}});
  }
  json mounts = json::array(
      {{{"name", "slurm-etc"}, {"mountPath", "/etc/slurm"}},
       {{"name", "ssh-config"}, {"mountPath", "/etc/ssh/sshd_config"}, {"subPath", "sshd_config"}},
       {{"name", "ssh-config"},
        {"mountPath", "/root/.ssh/authorized_keys"},
        {"subPath", "authorized_keys"}},
       {{"name", "sssd-conf"}, {"mountPath", "/etc/sssd/sssd.conf"}, {"subPath", "sssd.conf"}}});
  for (const auto& m : host_key_mounts) {
    mounts.push_back(m);
  }
  json login = {
      {"name", "login"},
      {"image", slurm_image("login")},
      {"env", json::array({{{"name", "SACKD_OPTIONS"},
                            {"value", "--conf-server " + controller_conf_server(in.controller)}}})},
      {"ports", json::array({{{"name", "ssh"}, {"containerPort", 22}, {"protocol", "TCP"}}})},
      {"readinessProbe",
       {{"exec", {{"command", json::array({"test", "-S", "/run/slurm/sack.socket"})}}}}},
      {"volumeMounts", mounts}};
  login = merge_over(login, l.spec.login);
  // `ssh slinky-0` from a login pod: the workers' names resolve (NodeSets with spec.ssh).
  const std::string workers =
      worker_service_name(in.controller) + "." + l.metadata.namespace_name + ".svc.cluster.local";
  const json base = {
      {"automountServiceAccountToken", false},
      {"dnsConfig", {{"searches", json::array({workers})}}},
      {"initContainers", json::array({initconf})},
      {"containers", json::array({login})},
      {"volumes",
       json::array(
           {{{"name", "slurm-keys"},
             {"projected",
              {{"sources",
                json::array({key_items(in.controller.spec.slurm_key_ref, "slurm.key")})}}}},
            {{"name", "slurm-etc"}, {"emptyDir", {{"medium", "Memory"}}}},
            {{"name", "ssh-config"}, {"configMap", {{"name", loginset_ssh_config_name(l)}}}},
            {{"name", "ssh-host-keys"},
             {"secret", {{"secretName", loginset_host_keys_name(l)}, {"defaultMode", 0600}}}},
            {{"name", "sssd-conf"},
             {"secret",
              {{"secretName", l.spec.sssd_conf_ref.name},
               {"defaultMode", 0600},
               {"items",
                json::array({{{"key", l.spec.sssd_conf_ref.key}, {"path", "sssd.conf"}}})}}}}})}};
  std::string host_keys;
  for (const auto& [file, pem] : in.host_keys) {
    host_keys.append(file).append("\n").append(pem).append("\n");
  }
  const json annotations = {
      {api::kAnnotationSshdConfHash,
       sha256_hex(build_sshd_config(l) + "\n" + l.spec.root_ssh_authorized_keys)},
      {api::kAnnotationSssdConfHash, in.sssd_conf_hash},
      {api::kAnnotationSshHostKeysHash, sha256_hex(host_keys)},
      {api::kAnnotationSlurmKeyHash, in.slurm_key_hash},
      {api::kAnnotationDefaultContainer, "login"}};
  json spec = {{"replicas", l.spec.replicas.value_or(1)},
               {"revisionHistoryLimit", 0},
               {"selector", {{"matchLabels", selector_labels("login", l.metadata.name)}}},
               {"template", pod_template(labels, annotations, base, l.spec.template_)}};
  if (!l.spec.strategy.empty()) {
    spec["strategy"] = l.spec.strategy;
  }
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", object_meta(loginset_name(l), l.metadata.namespace_name, labels, owner)},
          {"spec", spec}};
}

json build_loginset_service(const api::LoginSet& l) {
  const Owner owner{"LoginSet", l.metadata.name, l.metadata.uid};
  return service(
      loginset_name(l), l.metadata.namespace_name,
      cluster_labels("login", l.metadata.name, "login", l.spec.controller_ref.name), owner,
      {{"selector", selector_labels("login", l.metadata.name)},
       {"ports",
        json::array(
            {{{"name", "ssh"}, {"port", 22}, {"targetPort", "ssh"}, {"protocol", "TCP"}}})}},
      l.spec.service);
}

std::vector<json> build_loginset_objects(const api::LoginSet& l, const LoginSetInputs& in) {
  return {build_loginset_host_keys_secret(l, in), build_loginset_ssh_config_map(l),
          build_loginset_service(l), build_loginset_deployment(l, in)};
}

// ---- Token.

json build_token_secret(const api::Token& t, const std::string& jwt,
                        std::chrono::system_clock::time_point issued_at,
                        std::chrono::system_clock::time_point expires_at) {
  const Owner owner{"Token", t.metadata.name, t.metadata.uid};
  const api::KeyRef& ref = *t.spec.secret_ref;
  // The Token's own labels and annotations go with its Secret, as Slinky's do; the operator's
  // labels win where the two name the same key.
  json labels = json::object();
  for (const auto& [k, v] : t.metadata.labels) {
    labels[k] = v;
  }
  labels.update(component_labels("token", t.metadata.name, "token"));
  json meta = object_meta(ref.name, t.metadata.namespace_name, labels, owner);
  json annotations = json::object();
  for (const auto& [k, v] : t.metadata.annotations) {
    if (!k.starts_with("kubectl.kubernetes.io/")) {  // last-applied-configuration is the Token's
      annotations[k] = v;
    }
  }
  // For a human reading the Secret; the operator reads the times from the token itself.
  annotations[std::string(api::kAnnotationTokenIssuedAt)] = kube::format_time(issued_at);
  annotations[std::string(api::kAnnotationTokenExpiresAt)] = kube::format_time(expires_at);
  meta["annotations"] = annotations;
  json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", meta},
                 {"type", "Opaque"},
                 {"stringData", {{ref.key, jwt}}}};
  if (!t.spec.refresh.value_or(true)) {
    secret["immutable"] = true;
  }
  return secret;
}

std::chrono::system_clock::time_point token_refresh_at(
    std::chrono::system_clock::time_point issued_at, std::chrono::seconds lifetime) {
  return issued_at + lifetime * 8 / 10;
}

}  // namespace tightrope::op::build
