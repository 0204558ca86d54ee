#include "doctor/checks.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "api/codec.hpp"
#include "api/well_known.hpp"
#include "health/checks.hpp"
#include "kube/time.hpp"
#include "slurm/hostlist.hpp"

namespace tightrope::doctor {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) {
    out.append(out.empty() ? "" : separator).append(p);
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

using json_pointer = json::json_pointer;

// ---- Readers shared by the checks.

std::string ns_name(const json& doc) {
  return str_at(doc, "/metadata/namespace"_json_pointer) + "/" + name_of(doc);
}

std::string since(Time now, std::optional<Time> then) {
  if (!then) {
    return "?";
  }
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - *then).count();
  const bool future = s < 0;
  s = std::abs(s);
  std::string text = s < 120      ? std::to_string(s) + "s"
                     : s < 7200   ? std::to_string(s / 60) + "m"
                     : s < 172800 ? std::to_string(s / 3600) + "h"
                                  : std::to_string(s / 86400) + "d";
  return future ? "in " + text : text + " ago";
}

std::optional<Time> time_at(const json& doc, const json_pointer& at) {
  return kube::parse_time(str_at(doc, at));
}

bool is_worker(const json& pod) {
  return label(pod, std::string(api::kLabelName)) == "slurmd";
}
std::string hostname_of(const json& pod) {
  return label(pod, std::string(api::kLabelNodeSetPodHostname));
}
std::string phase(const json& pod) {
  return str_at(pod, "/status/phase"_json_pointer);
}
std::string node_of(const json& pod) {
  return str_at(pod, "/spec/nodeName"_json_pointer);
}
bool deleting(const json& doc) {
  return doc.contains("/metadata/deletionTimestamp"_json_pointer);
}
bool ready(const json& pod) {
  const json* c = condition(pod, "Ready");
  return c != nullptr && c->value("status", "") == "True";
}
bool cordoned(const json& node) {
  return node.value("/spec/unschedulable"_json_pointer, false);
}

// Worker pods that run and are not on their way out.
std::vector<const json*> running_workers(const ClusterView& view) {
  std::vector<const json*> out;
  for (const auto& p : view.pods) {
    if (is_worker(p) && phase(p) == "Running" && !deleting(p)) {
      out.push_back(&p);
    }
  }
  return out;
}

std::string job_text(const ClusterView& view, const slurm::Job& j) {
  std::string text = "job " + std::to_string(j.id) + " (" + j.name + ", user " + j.user + ", " +
                     join(j.state, "+");
  if (!j.time_limit) {
    text += ", no time limit: it ends only when it exits or is cancelled";
  } else if (j.end_time) {
    text += ", ends " + since(view.now, j.end_time);
  }
  return text + ")";
}

std::string condition_text(const json& c) {
  return c.value("type", "") + "=" + c.value("status", "") + " (" + c.value("reason", "") +
         "): " + c.value("message", "");
}

void add(std::vector<Finding>& out, std::string_view check, Severity severity, std::string subject,
         std::string message, std::vector<std::string> evidence, std::string fix) {
  out.push_back({std::string(check), severity, std::move(subject), std::move(message),
                 std::move(evidence), std::move(fix)});
}

// The reason a container of this pod waits on something that will not pass by itself, with
// the kubelet's words: "container slurmd: ErrImagePull: ...".
std::vector<std::string> failing_containers(const json& pod) {
  static const std::set<std::string> stuck = {"ErrImagePull",         "ImagePullBackOff",
                                              "ErrImageNeverPull",    "InvalidImageName",
                                              "CrashLoopBackOff",     "CreateContainerConfigError",
                                              "CreateContainerError", "RunContainerError",
                                              "PostStartHookError",   "PreStartHookError"};
  std::vector<std::string> out;
  for (const char* list : {"/status/initContainerStatuses", "/status/containerStatuses"}) {
    const json_pointer at(list);
    if (!pod.contains(at) || !pod.at(at).is_array()) {
      continue;
    }
    for (const auto& c : pod.at(at)) {
      const std::string reason = str_at(c, "/state/waiting/reason"_json_pointer);
      if (stuck.count(reason) == 0) {
        continue;
      }
      std::string text = "container " + c.value("name", "") + ": " + reason;
      if (const std::string m = str_at(c, "/state/waiting/message"_json_pointer); !m.empty()) {
        text += ": " + m;
      }
      if (c.contains("/lastState/terminated"_json_pointer)) {
        text += " | last exit code " + str_at(c, "/lastState/terminated/exitCode"_json_pointer) +
                ": " + str_at(c, "/lastState/terminated/message"_json_pointer);
      }
      text += " (" + std::to_string(c.value("restartCount", 0)) + " restarts)";
      out.push_back(text);
    }
  }
  return out;
}

std::string pod_state(const json& pod) {
  std::string text =
      "pod " + ns_name(pod) + ": " + phase(pod) + (ready(pod) ? ", Ready" : ", not Ready");
  if (!node_of(pod).empty()) {
    text += ", on Node " + node_of(pod);
  }
  for (const auto& f : failing_containers(pod)) {
    text += "; " + f;
  }
  return text;
}

std::vector<std::string> pods_of(const ClusterView& view, const std::string& component) {
  std::vector<std::string> out;
  for (const auto& p : view.pods) {
    if (label(p, std::string(api::kLabelName)) == component) {
      out.push_back(pod_state(p));
    }
  }
  if (out.empty()) {
    out.push_back("no " + component + " pod exists");
  }
  return out;
}

bool any_ready(const ClusterView& view, const std::string& component) {
  return std::any_of(view.pods.begin(), view.pods.end(), [&](const json& p) {
    return label(p, std::string(api::kLabelName)) == component && ready(p);
  });
}

std::string cluster_subject(const ClusterView& view) {
  return "Controller " + view.namespace_name + "/" + view.controller_name();
}

bool mentions(const std::string& text, std::initializer_list<std::string_view> words) {
  const std::string folded = lower(text);
  return std::any_of(words.begin(), words.end(),
                     [&](std::string_view w) { return folded.find(w) != std::string::npos; });
}

// The API server's proxy answers for a Service it cannot reach; slurmrestd for a slurmctld it
// cannot reach. Their words tell which.
bool slurmctld_words(const std::string& message) {
  return mentions(message,
                  {"slurm controller", "slurmctld", "unable to contact", "socket timed out"});
}

// ---- The checks, in catalog order.

void operator_absent(const ClusterView& view, std::vector<Finding>& out) {
  const auto& op = view.op;
  if (op.deployments.empty()) {
    add(out, "operator-absent", Severity::kCritical, "slurm-operator",
        "no slurm-operator Deployment was found in any namespace: nothing reconciles the cluster",
        {op.error.empty() ? "Deployments labelled app.kubernetes.io/name=slurm-operator: none"
                          : "could not read: " + op.error},
        "install the slurm-operator chart (helm install slurm-operator ...), or check that your "
        "credentials may list Deployments in every namespace");
    return;
  }
  for (const auto& d : op.deployments) {
    const int64_t want = d.value("/spec/replicas"_json_pointer, int64_t{1});
    const int64_t have = d.value("/status/readyReplicas"_json_pointer, int64_t{0});
    if (have > 0) {
      continue;
    }
    std::vector<std::string> evidence = {"spec.replicas " + std::to_string(want) +
                                         ", status.readyReplicas " + std::to_string(have)};
    for (const auto& p : op.pods) {
      if (str_at(p, "/metadata/namespace"_json_pointer) ==
          str_at(d, "/metadata/namespace"_json_pointer)) {
        evidence.push_back(pod_state(p));
      }
    }
    add(out, "operator-absent", Severity::kCritical, "Deployment " + ns_name(d),
        want == 0 ? "the operator is scaled to zero: nothing reconciles the cluster"
                  : "no operator pod is ready: nothing reconciles the cluster",
        evidence,
        want == 0 ? "kubectl -n " + str_at(d, "/metadata/namespace"_json_pointer) +
                        " scale deployment/" + name_of(d) + " --replicas=1"
                  : "kubectl -n " + str_at(d, "/metadata/namespace"_json_pointer) +
                        " describe deployment/" + name_of(d) + "; kubectl logs on its pod");
  }
}

void operator_not_leading(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& lease : view.op.leases) {
    const std::string subject = "Lease " + ns_name(lease);
    if (lease.value("missing", false)) {
      add(out, "operator-not-leading", Severity::kCritical, subject,
          "the operator elects its leader through this Lease, and it does not exist: no operator "
          "replica leads",
          {"Lease not found"},
          "check the operator's logs for leader election errors (RBAC on leases)");
      continue;
    }
    const std::string holder = str_at(lease, "/spec/holderIdentity"_json_pointer);
    const auto renewed = time_at(lease, "/spec/renewTime"_json_pointer);
    const int64_t duration = lease.value("/spec/leaseDurationSeconds"_json_pointer, int64_t{15});
    std::vector<std::string> evidence = {"holder " + (holder.empty() ? "(none)" : holder) +
                                         ", renewed " + since(view.now, renewed) +
                                         ", lease duration " + std::to_string(duration) + "s"};
    if (holder.empty()) {
      add(out, "operator-not-leading", Severity::kCritical, subject,
          "no operator replica holds the leader Lease: nothing reconciles", evidence,
          "check that an operator pod runs and can update Leases in its namespace");
    } else if (!renewed || *renewed + std::chrono::seconds(duration) < view.now) {
      add(out, "operator-not-leading", Severity::kCritical, subject,
          "the leader Lease expired: its holder stopped renewing it and no replica took over",
          evidence,
          "an operator pod must be running to take the Lease over; see operator-absent, and the "
          "operator's logs");
    }
  }
}

void crd_version_mismatch(const ClusterView& view, std::vector<Finding>& out) {
  if (view.op.crds.empty() && !view.op.error.empty()) {
    return;
  }
  for (const std::string plural :
       {"controllers", "nodesets", "loginsets", "restapis", "accountings", "tokens"}) {
    const std::string name = plural + ".slinky.slurm.net";
    const json* crd = nullptr;
    for (const auto& c : view.op.crds) {
      if (name_of(c) == name) {
        crd = &c;
      }
    }
    if (crd == nullptr) {
      add(out, "crd-version-mismatch", Severity::kCritical, "CRD " + name,
          "the CRD is not installed: the operator cannot watch this kind and stops at start",
          {"CustomResourceDefinition " + name + " not found"},
          "helm upgrade --install slurm-operator-crds deploy/helm/slurm-operator-crds");
      continue;
    }
    bool served = false;
    std::string storage;
    std::vector<std::string> versions;
    for (const auto& v : crd->value("/spec/versions"_json_pointer, json::array())) {
      versions.push_back(v.value("name", "") + (v.value("served", false) ? "" : " (not served)") +
                         (v.value("storage", false) ? " (storage)" : ""));
      served = served || (v.value("name", "") == "v1beta1" && v.value("served", false));
      if (v.value("storage", false)) {
        storage = v.value("name", "");
      }
    }
    if (!served || storage != "v1beta1") {
      add(out, "crd-version-mismatch", Severity::kCritical, "CRD " + name,
          "the CRD does not serve and store slinky.slurm.net/v1beta1, the version the operator "
          "speaks",
          {"versions: " + join(versions, ", ")},
          "install the CRDs of the operator's release (slurm-operator-crds chart of the same "
          "version)");
    }
  }
}

void webhook_certificate(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& cert : view.op.certificates) {
    const std::string subject = "Secret " + cert.secret;
    if (!cert.error.empty()) {
      add(out, "webhook-certificate-expiring", Severity::kWarning, subject,
          "the webhook's serving certificate cannot be read", {cert.error},
          "check the webhook's Secret (cert-manager Certificate, or webhook.certificate values)");
      continue;
    }
    if (!cert.not_after) {
      continue;
    }
    const auto left = *cert.not_after - view.now;
    if (left < std::chrono::hours(24 * 30)) {
      const bool expired = left <= std::chrono::seconds(0);
      add(out, "webhook-certificate-expiring", expired ? Severity::kCritical : Severity::kWarning,
          subject,
          expired ? "the webhook's certificate expired: the API server refuses every create and "
                    "update of the six kinds"
                  : "the webhook's certificate expires within 30 days",
          {"notAfter " + kube::format_time(*cert.not_after) + " (" +
           since(view.now, cert.not_after) + ")"},
          "renew it: with cert-manager, `cmctl renew`; without, `helm upgrade` the operator chart, "
          "which writes a new certificate");
    }
  }
}

void slurmrestd_unreachable(const ClusterView& view, std::vector<Finding>& out) {
  const auto& s = view.slurm;
  if (view.restapis.empty()) {
    add(out, "slurmrestd-unreachable", Severity::kCritical, cluster_subject(view),
        "no RestApi names this Controller: neither the operator nor kubectl-slurm can ask Slurm, "
        "so scale-in is blocked (fail-closed) and no state is mirrored",
        {"RestApis with spec.controllerRef.name=" + view.controller_name() + ": none"},
        "create a RestApi for the Controller (the slurm chart's restapi values)");
    return;
  }
  if (!s.error || s.error->kind == slurm::ErrorKind::kUnauthorized ||
      slurmctld_words(s.error->message) || s.error->http_status == 403) {
    return;
  }
  std::vector<std::string> evidence = {"asked through " + s.via, "answer: " + s.error->message};
  const auto pods = pods_of(view, "slurmrestd");
  evidence.insert(evidence.end(), pods.begin(), pods.end());
  if (const json* c = condition(view.controller, "SlurmReachable")) {
    evidence.push_back("the operator's view: " + condition_text(*c));
  }
  add(out, "slurmrestd-unreachable", Severity::kCritical, cluster_subject(view),
      "slurmrestd does not answer: the operator cannot see Slurm, so it deletes no worker that "
      "may hold a job (scale-in and updates wait)",
      evidence,
      "kubectl -n " + view.namespace_name + " logs deploy/" + name_of(view.restapis.front()) +
          "-restapi; check its pod (above) and Service endpoints");
}

void slurm_token_rejected(const ClusterView& view, std::vector<Finding>& out) {
  const auto& s = view.slurm;
  if (s.error && (s.error->kind == slurm::ErrorKind::kUnauthorized ||
                  (s.error->http_status == 403 && !slurmctld_words(s.error->message)))) {
    add(out, "slurm-token-rejected", Severity::kCritical, cluster_subject(view),
        "slurmrestd refused the token kubectl-slurm sent (" + s.token_from + ")",
        {"asked through " + s.via, "answer: " + s.error->message},
        "a token minted from the Controller's jwtKeyRef is refused when slurmctld runs with "
        "another key: compare the jwt-key-hash annotation of the slurmctld pod with the Secret; a "
        "token given with --token may be expired (scontrol token lifespan=...)");
  }
  if (const json* c = condition(view.controller, "SlurmReachable");
      c != nullptr && c->value("reason", "") == "Unauthorized") {
    add(out, "slurm-token-rejected", Severity::kCritical, cluster_subject(view),
        "slurmctld refuses the operator's token: the operator cannot see Slurm and blocks "
        "scale-in",
        {"the operator's view: " + condition_text(*c)},
        "slurmctld and the operator must use the same auth/jwt key: check the Controller's "
        "jwtKeyRef Secret and restart slurmctld if it was rotated by hand");
  }
}

void slurmctld_unreachable(const ClusterView& view, std::vector<Finding>& out) {
  if (str_at(view.controller, "/spec/external"_json_pointer) == "true") {
    return;
  }
  const auto& s = view.slurm;
  const bool says_so = (s.error && slurmctld_words(s.error->message)) ||
                       (s.ping && !s.ping->responding &&
                        !(s.error && s.error->kind == slurm::ErrorKind::kUnauthorized)) ||
                       (!s.error && s.ping_error && slurmctld_words(s.ping_error->message));
  const bool none_ready = !any_ready(view, "slurmctld");
  if (!says_so && !none_ready) {
    return;
  }
  std::vector<std::string> evidence;
  if (s.error) {
    evidence.push_back("slurmrestd answered: " + s.error->message);
  } else if (s.ping && !s.ping->responding) {
    evidence.push_back("ping: slurmctld " + s.ping->hostname + " not responding");
  }
  const auto pods = pods_of(view, "slurmctld");
  evidence.insert(evidence.end(), pods.begin(), pods.end());
  for (const auto& p : view.pods) {
    if (label(p, std::string(api::kLabelName)) == "slurmctld" && phase(p) == "Pending") {
      if (const json* c = condition(p, "PodScheduled");
          c != nullptr && c->value("status", "") == "False") {
        evidence.push_back("scheduler: " + c->value("message", ""));
      }
    }
  }
  add(out, "slurmctld-unreachable", Severity::kCritical, cluster_subject(view),
      "slurmctld does not answer: no job starts, and the operator blocks scale-in until it does",
      evidence,
      "kubectl -n " + view.namespace_name + " logs statefulset/" + view.controller_name() +
          "-controller -c slurmctld; describe its pod (above) for scheduling or image problems");
}

void accounting_unavailable(const ClusterView& view, std::vector<Finding>& out) {
  const std::string ref = str_at(view.controller, "/spec/accountingRef/name"_json_pointer);
  if (ref.empty()) {
    add(out, "accounting-unavailable", Severity::kInfo, cluster_subject(view),
        "accounting is disabled: no sacct history, fair-share or QOS limits",
        {"spec.accountingRef is unset"},
        "create an Accounting (slurmdbd with MariaDB) and set the Controller's accountingRef");
    return;
  }
  if (view.accountings.empty()) {
    add(out, "accounting-unavailable", Severity::kCritical, cluster_subject(view),
        "the Controller names Accounting " + ref +
            ", which does not exist: slurmctld runs "
            "without slurmdbd and queues every record",
        {"Accounting " + view.namespace_name + "/" + ref + " not found"},
        "create the Accounting, or unset accountingRef");
    return;
  }
  const bool down = view.slurm.accounting_error.has_value();
  const bool none_ready = !any_ready(view, "slurmdbd");
  if (!down && !none_ready) {
    return;
  }
  std::vector<std::string> evidence;
  if (down) {
    evidence.push_back("slurmdbd through slurmrestd: " + view.slurm.accounting_error->message);
  }
  const auto pods = pods_of(view, "slurmdbd");
  evidence.insert(evidence.end(), pods.begin(), pods.end());
  if (view.slurm.diag) {
    evidence.push_back("slurmctld's agent queue: " +
                       std::to_string(view.slurm.diag->agent_queue_size));
  }
  add(out, "accounting-unavailable", Severity::kWarning,
      "Accounting " + view.namespace_name + "/" + ref,
      "slurmdbd does not answer: job records queue in slurmctld (lost if it restarts with a full "
      "queue); sacct and limits are stale",
      evidence,
      "kubectl -n " + view.namespace_name + " logs deploy/" + ref +
          "-accounting; check that MariaDB is reachable with the Accounting's storageConfig");
}

void slurm_key_mismatch(const ClusterView& view, std::vector<Finding>& out) {
  if (view.slurm_key_hash.empty()) {
    return;
  }
  // Pods that run another key than the Secret's: those whose hash annotation says so (slurmctld,
  // slurmrestd, slurmdbd, login roll on it), and workers started before the key changed.
  const std::string key(api::kAnnotationSlurmKeyHash);
  std::vector<std::string> evidence = {
      "the Secret's key now: sha256 " + view.slurm_key_hash.substr(0, 12) +
      (view.slurm_key_changed_at ? ", changed " + since(view.now, view.slurm_key_changed_at) : "")};
  bool controller_current = false;
  bool stale_worker = false;
  size_t stale = 0;
  for (const auto& p : view.pods) {
    if (phase(p) != "Running" || deleting(p)) {
      continue;
    }
    const std::string component = label(p, std::string(api::kLabelName));
    const std::string hash = annotation(p, key);
    if (!hash.empty()) {
      if (hash == view.slurm_key_hash) {
        controller_current = controller_current || component == "slurmctld";
        continue;
      }
      evidence.push_back("pod " + name_of(p) + " (" + component + ") mounts key sha256 " +
                         hash.substr(0, 12));
      ++stale;
      continue;
    }
    // A worker started before the key changed reads the new one when the kubelet refreshes its
    // volume; it is named only when slurmctld stopped hearing from it.
    const auto started = time_at(p, "/status/startTime"_json_pointer);
    const slurm::Node* n = view.slurm_node(hostname_of(p));
    if (!is_worker(p) || !view.slurm_key_changed_at || !started ||
        *started >= *view.slurm_key_changed_at || n == nullptr ||
        !(n->has("NOT_RESPONDING") || n->has("DOWN"))) {
      continue;
    }
    std::string text = "pod " + name_of(p) + " (slurmd) started " + since(view.now, started) +
                       ", before the key changed; Slurm node " + n->name + ": " + node_state(*n) +
                       (n->reason.empty() ? "" : " (" + n->reason + ")");
    for (const slurm::Job* j : view.jobs_on(n->name)) {
      text += "; " + job_text(view, *j);
    }
    evidence.push_back(text);
    stale_worker = true;
    ++stale;
  }
  if (stale == 0) {
    return;
  }
  const bool split = controller_current && stale_worker;
  add(out, "slurm-key-mismatch", split ? Severity::kCritical : Severity::kWarning,
      cluster_subject(view),
      split ? "slurmctld runs the new auth/slurm key and does not hear from slurmd that started "
              "with the old one: their nodes stay NOT_RESPONDING and their jobs are lost"
            : "pods run an auth/slurm key other than the Secret's: they must be replaced",
      evidence,
      "pods with a key hash roll when the operator runs; a worker that does not answer after the "
      "kubelet refreshed its key (a minute) needs a new pod: kubectl slurm drain <node> --reason "
      "key-rotation, then delete the pod when it is idle");
}

void jwt_stale(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& t : view.token_states) {
    const std::string subject = "Token " + view.namespace_name + "/" + t.token;
    if (!t.present) {
      add(out, "jwt-stale", Severity::kWarning, subject,
          "the Token's Secret holds no JWT: whatever mounts it cannot talk to slurmrestd",
          {"Secret " + t.secret + ": missing or empty"},
          "check the Token's status conditions and the operator's logs");
    } else if (!t.signed_by_current_key) {
      add(out, "jwt-stale", Severity::kCritical, subject,
          "the Token's JWT is not signed with the cluster's current JWT key: slurmrestd refuses it",
          {"Secret " + t.secret + ": signature does not verify with the jwtKeyRef Secret"},
          "with refresh: true the operator mints a new one; with refresh: false delete the Secret "
          "so the operator writes it again");
    } else if (t.expires_at && *t.expires_at <= view.now) {
      add(out, "jwt-stale", Severity::kCritical, subject,
          "the Token's JWT expired: slurmrestd refuses it",
          {"Secret " + t.secret + ": expired " + since(view.now, t.expires_at)},
          "set refresh: true on the Token (the operator renews it at 80 % of its lifetime), or "
          "delete the Secret to have it minted again");
    }
  }
}

void pod_failing(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& p : view.pods) {
    const auto failing = failing_containers(p);
    if (failing.empty()) {
      continue;
    }
    const std::string component = label(p, std::string(api::kLabelName));
    std::vector<std::string> evidence = failing;
    if (!node_of(p).empty()) {
      evidence.push_back("on Node " + node_of(p));
    }
    add(out, "pod-failing", Severity::kCritical, "pod " + ns_name(p),
        "the " + component + " pod cannot run, and will not recover by itself", evidence,
        mentions(join(failing, " "), {"image"})
            ? "the image cannot be pulled: check its name and tag in the resource's template, and "
              "that the Node can reach the registry (or has the image, with pullPolicy Never)"
            : "kubectl -n " + view.namespace_name + " logs " + name_of(p) +
                  " --previous; the last lines are in the evidence above");
  }
}

void pod_unschedulable(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& p : view.pods) {
    const json* c = condition(p, "PodScheduled");
    if (phase(p) != "Pending" || c == nullptr || c->value("status", "") != "False" ||
        c->value("reason", "") != "Unschedulable") {
      continue;
    }
    add(out, "pod-unschedulable", Severity::kWarning, "pod " + ns_name(p),
        "the scheduler finds no Node for this " + label(p, std::string(api::kLabelName)) + " pod",
        {"scheduler: " + c->value("message", "")},
        "compare the pod's requests, nodeSelector, affinity and tolerations with the Nodes "
        "(kubectl describe pod); a GPU pod needs Nodes whose device plugin advertises GPUs");
  }
}

void worker_not_registered(const ClusterView& view, std::vector<Finding>& out) {
  if (!view.slurm.reached()) {
    return;
  }
  for (const json* worker : running_workers(view)) {
    const json& p = *worker;
    const auto started = time_at(p, "/status/startTime"_json_pointer);
    if (view.slurm_node(hostname_of(p)) != nullptr ||
        (!ready(p) && started && view.now - *started < std::chrono::seconds(60))) {
      continue;
    }
    add(out, "worker-not-registered", Severity::kWarning, "pod " + ns_name(p),
        "the worker pod runs but slurmctld has no node " + hostname_of(p) +
            ": Slurm cannot place jobs on it",
        {pod_state(p), "Slurm nodes: " + std::to_string(view.slurm.nodes.size()) + ", none named " +
                           hostname_of(p)},
        "kubectl -n " + view.namespace_name + " logs " + name_of(p) +
            " -c slurmd: slurmd -Z registers at start; a refused registration (auth key, "
            "MaxNodeCount, a clashing name) is logged there. Deleting the pod makes it register "
            "again");
  }
}

void orphan_slurm_node(const ClusterView& view, std::vector<Finding>& out) {
  if (!view.slurm.reached()) {
    return;
  }
  for (const auto& n : view.slurm.nodes) {
    if (view.pod_of_slurm_node(n.name) != nullptr) {
      continue;
    }
    // A node that answers is a slurmd outside Kubernetes; one that does not has nobody behind it.
    const bool silent = n.has("FUTURE") || n.has("DOWN") || n.has("NOT_RESPONDING");
    if (!silent) {
      continue;
    }
    const json link = json::parse(n.comment, nullptr, false);
    std::vector<std::string> evidence = {"Slurm node " + n.name + ": " + node_state(n) +
                                         (n.reason.empty() ? "" : " (" + n.reason + ")")};
    if (link.is_object()) {
      evidence.push_back("it was pod " + link.value("podName", std::string("?")) + " of NodeSet " +
                         link.value("nodeSetName", std::string("?")));
    }
    evidence.push_back("no pod of this cluster has hostname " + n.name);
    add(out, "orphan-slurm-node", Severity::kWarning, "Slurm node " + n.name,
        "a Slurm node record with no pod behind it: sinfo counts it, and jobs that ask for it "
        "wait",
        evidence,
        "scontrol delete nodename=" + n.name +
            " (or set the NodeSet's pruneSlurmNodeRecords: NodeNotFound so the operator removes "
            "records of pods that are gone)");
  }
}

void slurm_node_not_responding(const ClusterView& view, std::vector<Finding>& out) {
  if (!view.slurm.reached()) {
    return;
  }
  for (const json* worker : running_workers(view)) {
    const json& p = *worker;
    const slurm::Node* n = view.slurm_node(hostname_of(p));
    if (n == nullptr || !(n->has("NOT_RESPONDING") || n->has("DOWN"))) {
      continue;
    }
    add(out, "slurm-node-not-responding", Severity::kWarning, "Slurm node " + n->name,
        "the pod runs but slurmctld marks its node " + node_state(*n) + ": no job goes there",
        {pod_state(p), "Slurm node " + n->name + ": " + node_state(*n) +
                           (n->reason.empty() ? "" : ", reason \"" + n->reason + "\"")},
        "kubectl -n " + view.namespace_name + " logs " + name_of(p) +
            " -c slurmd (auth errors mean a key mismatch, see slurm-key-mismatch); "
            "scontrol update nodename=" +
            n->name + " state=resume once it answers");
  }
}

void cordon_drain_mismatch(const ClusterView& view, std::vector<Finding>& out) {
  if (!view.slurm.reached()) {
    return;
  }
  for (const auto& p : view.pods) {
    if (!is_worker(p) || deleting(p) || node_of(p).empty()) {
      continue;
    }
    const json* node = view.kube_node(node_of(p));
    const slurm::Node* n = view.slurm_node(hostname_of(p));
    if (node == nullptr || n == nullptr) {
      continue;
    }
    if (cordoned(*node) && !n->drain()) {
      add(out, "cordon-drain-mismatch", Severity::kWarning, "Node " + node_of(p),
          "the Node is cordoned but Slurm still schedules jobs on " + n->name +
              ": the operator drains it within seconds when it runs",
          {"Node " + node_of(p) + ": spec.unschedulable=true",
           "Slurm node " + n->name + ": " + node_state(*n)},
          "check that the operator runs and leads (operator-absent, operator-not-leading); "
          "kubectl slurm drain " +
              n->name + " --reason ... meanwhile");
    } else if (!cordoned(*node) && n->drain() && n->reason.starts_with(api::kReasonPrefix) &&
               mentions(n->reason, {"cordon"}) &&
               annotation(p, std::string(api::kAnnotationPodCordon)) != "true") {
      add(out, "cordon-drain-mismatch", Severity::kWarning, "Slurm node " + n->name,
          "Slurm keeps " + n->name + " drained for a cordon that was lifted",
          {"Node " + node_of(p) + ": schedulable",
           "Slurm node " + n->name + ": " + node_state(*n) + " (" + n->reason + ")"},
          "the operator undoes its own drain when it runs; else kubectl slurm undrain " + n->name);
    }
  }
}

void drain_stuck(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& n : view.slurm.nodes) {
    if (!n.drain() || !n.busy()) {
      continue;
    }
    const auto jobs = view.jobs_on(n.name);
    std::vector<std::string> evidence = {"Slurm node " + n.name + ": " + node_state(n) +
                                         ", drained " + since(view.now, n.reason_changed_at) +
                                         " (\"" + n.reason + "\")"};
    bool far = jobs.empty();  // busy with jobs we cannot see: no end known
    for (const slurm::Job* j : jobs) {
      evidence.push_back(job_text(view, *j));
      far =
          far || !j->time_limit || (j->end_time && *j->end_time > view.now + std::chrono::hours(1));
    }
    if (!far) {
      continue;
    }
    add(out, "drain-stuck", Severity::kWarning, "Slurm node " + n.name,
        "the drain cannot finish for more than an hour: a job on the node has no end in sight" +
            std::string(n.reason.starts_with(api::kReasonPrefix)
                            ? ", and the operator waits for it before it deletes the pod"
                            : ""),
        evidence,
        "wait, or end the work: scancel <job> (or scontrol requeue <job>); the pod goes once the "
        "node is idle");
  }
}

void scale_in_blocked(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& n : view.nodesets) {
    const json* c = condition(n, "DeletionBlocked");
    if (c == nullptr || c->value("status", "") != "True") {
      continue;
    }
    const std::string reason = c->value("reason", "");
    add(out, "scale-in-blocked", Severity::kWarning, "NodeSet " + ns_name(n),
        "the operator refuses to delete worker pods that may hold jobs (fail-closed): " + reason,
        {condition_text(*c), "replicas: spec " + str_at(n, "/spec/replicas"_json_pointer) +
                                 ", status " + str_at(n, "/status/replicas"_json_pointer)},
        reason == "SlurmUnreachable" || reason == "WaitingForSlurm" || reason == "NoSlurmClient"
            ? "make Slurm reachable again (see slurmrestd-unreachable, slurmctld-unreachable); "
              "the scale-in goes on by itself"
        : reason == "SlurmNodeNotFound"
            ? "a Ready pod's Slurm node is unknown to slurmctld: see worker-not-registered"
            : "see the condition's message and the NodeSet's Events");
  }
}

void pdb_blocks_eviction(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& pdb : view.pdbs) {
    if (pdb.value("/status/disruptionsAllowed"_json_pointer, int64_t{1}) > 0) {
      continue;
    }
    const json selector = pdb.value("/spec/selector/matchLabels"_json_pointer, json::object());
    std::vector<std::string> blocked;
    for (const auto& p : view.pods) {
      bool matches = !selector.empty();
      for (const auto& [k, v] : selector.items()) {
        matches = matches && label(p, k) == v.get<std::string>();
      }
      const json* node = view.kube_node(node_of(p));
      if (matches && node != nullptr && cordoned(*node)) {
        std::string text = "pod " + name_of(p) + " on cordoned Node " + node_of(p);
        if (const slurm::Node* n = view.slurm_node(hostname_of(p))) {
          for (const slurm::Job* j : view.jobs_on(n->name)) {
            text += "; " + job_text(view, *j);
          }
        }
        blocked.push_back(text);
      }
    }
    if (blocked.empty()) {
      continue;
    }
    blocked.insert(blocked.begin(),
                   "PodDisruptionBudget " + ns_name(pdb) + ": disruptionsAllowed 0");
    add(out, "pdb-blocks-eviction", Severity::kInfo, "PodDisruptionBudget " + ns_name(pdb),
        "`kubectl drain` of the cordoned Node waits: the budget protects worker pods that run "
        "jobs (by design: no job is killed by a drain)",
        blocked,
        "let the jobs end (the operator drained their Slurm nodes, so no new job starts), or "
        "end them with scancel; the eviction then goes through");
  }
}

void job_pending(const ClusterView& view, std::vector<Finding>& out) {
  std::map<std::string, std::vector<const slurm::Job*>> by_reason;
  for (const auto& j : view.slurm.jobs) {
    if (j.has("PENDING")) {
      by_reason[j.state_reason].push_back(&j);
    }
  }
  for (const auto& [reason, jobs] : by_reason) {
    const PendingReason meaning = explain_pending_reason(reason);
    std::vector<std::string> evidence;
    for (size_t i = 0; i < jobs.size() && i < 5; ++i) {
      evidence.push_back("job " + std::to_string(jobs[i]->id) + " (" + jobs[i]->name + ", user " +
                         jobs[i]->user + ", partition " + jobs[i]->partition + ")");
    }
    if (jobs.size() > 5) {
      evidence.push_back("and " + std::to_string(jobs.size() - 5) + " more");
    }
    add(out, "job-pending", meaning.clears_by_itself ? Severity::kInfo : Severity::kWarning,
        std::to_string(jobs.size()) + " pending job" + (jobs.size() == 1 ? "" : "s") + ": " +
            reason,
        meaning.meaning, evidence,
        meaning.clears_by_itself ? "nothing to do: they start when it clears"
                                 : "scontrol show job <id> for the details; see the meaning above");
  }
}

void maintenance_reservation(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& r : view.slurm.reservations) {
    const bool maint = std::find(r.flags.begin(), r.flags.end(), "MAINT") != r.flags.end();
    const bool active =
        (!r.start_time || *r.start_time <= view.now) && (!r.end_time || *r.end_time > view.now);
    if (!maint || r.nodes.empty()) {
      continue;
    }
    add(out, "maintenance-reservation", active ? Severity::kWarning : Severity::kInfo,
        "reservation " + r.name,
        active ? "a maintenance reservation holds nodes now: jobs that need them wait (reason "
                 "ReqNodeNotAvail or Reservation)"
               : "a maintenance reservation is scheduled: jobs that would run into it wait",
        {"nodes " + r.nodes,
         "from " + (r.start_time ? kube::format_time(*r.start_time) : "?") + " to " +
             (r.end_time ? kube::format_time(*r.end_time) : "?"),
         "flags " + join(r.flags, ",")},
        "scontrol delete reservation=" + r.name +
            " when the maintenance is over (a NodeSet's "
            "ScheduledUpdate reservation goes by itself)");
  }
}

void max_node_count(const ClusterView& view, std::vector<Finding>& out) {
  int64_t max = 0;
  size_t from = 0;
  const std::string& conf = view.slurm_conf;
  while (from < conf.size()) {
    const size_t end = std::min(conf.find('\n', from), conf.size());
    std::string line = conf.substr(from, end - from);
    from = end + 1;
    const std::string folded = lower(line);
    if (const size_t at = folded.find("maxnodecount=");
        at != std::string::npos && folded.find('#') > at) {
      max = std::atoll(line.c_str() + at + 13);
    }
  }
  if (max <= 0) {
    return;
  }
  int64_t wanted = 0;
  for (const auto& n : view.nodesets) {
    wanted += n.value("/spec/replicas"_json_pointer, int64_t{1});
  }
  const auto have = static_cast<int64_t>(view.slurm.nodes.size());
  const int64_t most = std::max(have, wanted);
  if (most * 10 < max * 9) {
    return;
  }
  add(out, "max-node-count", most >= max ? Severity::kCritical : Severity::kWarning,
      cluster_subject(view),
      most >= max ? "the cluster is at slurm.conf's MaxNodeCount: new slurmd are refused when they "
                    "register"
                  : "the cluster is within 10 % of slurm.conf's MaxNodeCount",
      {"MaxNodeCount=" + std::to_string(max), "Slurm nodes: " + std::to_string(have),
       "NodeSet replicas: " + std::to_string(wanted)},
      "raise MaxNodeCount in the Controller's extraConf (or remove it: the operator sizes it "
      "from the NodeSets), then slurmctld restarts with the new limit");
}

void config_drift(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& ns : view.nodesets) {
    const std::string current = str_at(ns, "/status/nodeSetHash"_json_pointer);
    if (current.empty()) {
      continue;
    }
    std::vector<std::string> old;
    for (const auto& p : view.pods) {
      if (label(p, std::string(api::kLabelInstance)) != name_of(ns) || !is_worker(p) ||
          deleting(p)) {
        continue;
      }
      // An adopted pod carries only the label Slinky's operator wrote.
      std::string revision = label(p, std::string(api::kLabelRevision));
      if (revision.empty()) {
        revision = label(p, std::string(api::kLabelSlinkyRevision));
      }
      if (revision.empty() || revision == current) {
        continue;
      }
      std::string text = "pod " + name_of(p) + " runs revision " + revision;
      if (const slurm::Node* n = view.slurm_node(hostname_of(p))) {
        text += ", Slurm node " + node_state(*n);
        for (const slurm::Job* j : view.jobs_on(n->name)) {
          text += "; " + job_text(view, *j);
        }
      }
      old.push_back(text);
    }
    if (old.empty()) {
      continue;
    }
    old.insert(old.begin(), "current revision " + current);
    add(out, "config-drift", Severity::kWarning, "NodeSet " + ns_name(ns),
        std::to_string(old.size() - 1) + " worker pod" + (old.size() == 2 ? "" : "s") +
            " run an older template or configuration than the NodeSet's: the update drains "
            "them one by one and waits for their jobs",
        old,
        "nothing, if the update progresses (maxUnavailable at a time); a node held by a long "
        "job: see drain-stuck");
  }
  // slurmctld reads the configuration at start: a pod older than the ConfigMap runs the old one.
  for (const auto& p : view.pods) {
    if (label(p, std::string(api::kLabelName)) != "slurmctld" || deleting(p)) {
      continue;
    }
    for (const auto& s : view.stateful_sets) {
      const std::string want = annotation(s.value("/spec/template"_json_pointer, json::object()),
                                          std::string(api::kAnnotationSlurmConfigHash));
      const std::string have = annotation(p, std::string(api::kAnnotationSlurmConfigHash));
      if (name_of(s) == label(p, "app.kubernetes.io/instance") + "-controller" ||
          p.value("/metadata/ownerReferences/0/name"_json_pointer, std::string()) == name_of(s)) {
        if (!want.empty() && !have.empty() && want != have) {
          add(out, "config-drift", Severity::kWarning, "pod " + ns_name(p),
              "slurmctld runs an older slurm.conf than the Controller's",
              {"pod's slurm-config-hash " + have.substr(0, 12),
               "StatefulSet " + name_of(s) + " wants " + want.substr(0, 12)},
              "the StatefulSet replaces the pod; if it does not, kubectl -n " +
                  view.namespace_name + " delete pod " + name_of(p));
        }
      }
    }
  }
}

void gres_missing(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& ns : view.nodesets) {
    // The extended resources the NodeSet's slurmd container asks for ("nvidia.com/gpu").
    std::map<std::string, int64_t> wanted;
    const json limits = ns.value("/spec/slurmd/resources/limits"_json_pointer, json::object());
    for (const auto& [r, q] : limits.items()) {
      if (r.find('/') != std::string::npos && !r.starts_with("hugepages")) {
        wanted[r] = q.is_string() ? std::atoll(q.get<std::string>().c_str()) : q.get<int64_t>();
      }
    }
    if (wanted.empty()) {
      continue;
    }
    for (const auto& p : view.pods) {
      if (label(p, std::string(api::kLabelInstance)) != name_of(ns) || !is_worker(p)) {
        continue;
      }
      const json* node = view.kube_node(node_of(p));
      std::vector<std::string> evidence;
      for (const auto& [r, count] : wanted) {
        std::string escaped;
        for (char ch : r) {
          escaped += ch == '~' ? "~0" : ch == '/' ? "~1" : std::string(1, ch);
        }
        const json_pointer at("/status/allocatable/" + escaped);
        const std::string have = node != nullptr ? str_at(*node, at) : "";
        if (node != nullptr && std::atoll(have.c_str()) < count) {
          evidence.push_back("Node " + node_of(p) + " advertises " + r + " " +
                             (have.empty() ? "none" : have) + ", the pod asks " +
                             std::to_string(count) + " (is the device plugin running?)");
        }
      }
      if (const slurm::Node* n = view.slurm_node(hostname_of(p));
          n != nullptr && mentions(n->reason, {"gres/", "count reported lower", "gpu count:"})) {
        evidence.push_back("Slurm node " + n->name + ": " + node_state(*n) + " (" + n->reason +
                           ")");
      }
      if (!evidence.empty()) {
        add(out, "gres-missing", Severity::kCritical, "pod " + ns_name(p),
            "the worker is meant to have GPUs that are not there: Slurm drains the node (its GRES "
            "count is lower than configured) or the scheduler cannot place the pod",
            evidence,
            "check the GPU Operator's device plugin pod on that Node (kubectl get pods -A -o wide "
            "| grep device-plugin) and the Node's allocatable; docs/gpus.md");
      }
    }
  }
}

void resource_not_ready(const ClusterView& view, std::vector<Finding>& out) {
  auto look = [&](const json& doc, const std::string& kind) {
    const json* c = condition(doc, "Ready");
    if (c == nullptr || c->value("status", "") != "False") {
      return;
    }
    // What passes by itself (pods on their way, a drain for an update) is a note.
    static const std::set<std::string> passing = {"Progressing", "Draining", "UpdateScheduled",
                                                  "WaitingForSlurm", "WaitingForSlurmctld"};
    const bool transient = passing.count(c->value("reason", "")) != 0;
    add(out, "resource-not-ready", transient ? Severity::kInfo : Severity::kWarning,
        kind + " " + ns_name(doc),
        "the operator reports the " + kind + " not Ready: " + c->value("reason", ""),
        {condition_text(*c)},
        "kubectl -n " + view.namespace_name + " describe " + lower(kind) + " " + name_of(doc) +
            " (its Events say what the operator tried)");
  };
  look(view.controller, "Controller");
  for (const auto& [docs, kind] :
       std::initializer_list<std::pair<const std::vector<json>*, std::string>>{
           {&view.nodesets, "NodeSet"},
           {&view.restapis, "RestApi"},
           {&view.accountings, "Accounting"},
           {&view.loginsets, "LoginSet"},
           {&view.tokens, "Token"}}) {
    for (const auto& d : *docs) {
      look(d, kind);
    }
  }
}

void admin_drain(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& n : view.slurm.nodes) {
    if (!n.drain() || n.reason.empty() || n.reason.starts_with(api::kReasonPrefix)) {
      continue;
    }
    add(out, "admin-drain", Severity::kInfo, "Slurm node " + n.name,
        "drained by " + (n.reason_set_by.empty() ? std::string("someone") : n.reason_set_by) +
            " in Slurm; the operator never undoes it",
        {"reason \"" + n.reason + "\", set " + since(view.now, n.reason_changed_at),
         "state " + node_state(n)},
        "kubectl slurm undrain " + n.name + " when the node is fit again");
  }
}

void health_check_failed(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& n : view.slurm.nodes) {
    // The passive checks' report, or the active checks' when it fails.
    auto report = health::read_report(n.extra);
    if (auto active = health::read_report(n.extra, health::kActiveExtraKey);
        active && !active->ok) {
      report = std::move(active);
    }
    if (!report || report->ok) {
      continue;
    }
    std::vector<std::string> evidence;
    for (const auto& f : report->failed) {
      evidence.push_back(f.check + ": " + f.message);
    }
    evidence.push_back("reported " + since(view.now, Time(std::chrono::seconds(report->at))) +
                       ", state " + node_state(n));
    // Where remediation stands (docs/health.md): the operator's drain names the check.
    const bool remediating = n.drain() && n.reason.starts_with(api::kReasonPrefix) &&
                             n.reason.find("healthcheck: ") != std::string::npos;
    std::string remedy;
    if (remediating && n.reason.find("pending termination") != std::string::npos) {
      evidence.emplace_back("drained by the operator; its pod is replaced once no job runs on it");
      remedy = "nothing: the running job finishes, then the pod is replaced and checked again";
    } else if (remediating) {
      evidence.push_back("drained by the operator (\"" + n.reason + "\")");
      remedy = "fix what the check names: the operator undrains the node once its report passes";
    } else {
      evidence.emplace_back(
          "not drained for it: its NodeSet follows no HealthCheck with remediation, or as many "
          "nodes as its maxUnhealthy allows are in remediation already (the NodeSet's "
          "WorkersHealthy says which)");
      remedy = "fix what the check names; kubectl get nodeset -o yaml shows WorkersHealthy";
    }
    add(out, "health-check-failed", Severity::kWarning, "Slurm node " + n.name,
        "the node's own health checks (tightrope-health, for a HealthCheck) fail", evidence,
        remedy);
  }
}

void node_quarantined(const ClusterView& view, std::vector<Finding>& out) {
  for (const auto& node : view.kube_nodes) {
    bool tainted = false;
    for (const auto& t : node.value("/spec/taints"_json_pointer, json::array())) {
      tainted = tainted || t.value("key", "") == api::kTaintUnhealthy;
    }
    if (!tainted) {
      continue;
    }
    std::vector<std::string> evidence;
    for (const auto& f : api::decode_node_failures(node)) {
      evidence.push_back("pod " + f.pod + " failed " + f.check + " " +
                         since(view.now, Time(std::chrono::seconds(f.at))));
    }
    add(out, "node-quarantined", Severity::kWarning, "Node " + name_of(node),
        "tainted " + std::string(api::kTaintUnhealthy) +
            ":NoSchedule: health checks failed on it again and again, so no new worker pod "
            "lands there",
        evidence,
        "repair the machine, then kubectl taint node " + name_of(node) + " " +
            std::string(api::kTaintUnhealthy) + "- (and kubectl annotate node " + name_of(node) +
            " " + std::string(api::kAnnotationHealthFailures) + "- to forget its failures)");
  }
}

const std::vector<Check>& checks() {
  static const std::vector<Check> all = {
      {"operator-absent", "CRs change but nothing happens; no pods are made or replaced",
       "scale the operator's Deployment up, read its pod's logs", operator_absent},
      {"operator-not-leading", "operator pods run, yet nothing is reconciled",
       "the leader Lease must be held and renewed by a running replica", operator_not_leading},
      {"crd-version-mismatch", "the operator exits at start, or kubectl says no matches for kind",
       "install the slurm-operator-crds chart of the operator's version", crd_version_mismatch},
      {"webhook-certificate-expiring",
       "kubectl apply of a NodeSet fails with x509: certificate has expired",
       "renew the webhook's certificate (cert-manager, or helm upgrade)", webhook_certificate},
      {"slurmrestd-unreachable", "NodeSets stop scaling in; Slurm states stop showing on pods",
       "bring slurmrestd back: its pod, its Service, its logs", slurmrestd_unreachable},
      {"slurm-token-rejected", "SlurmReachable=False Unauthorized on the Controller",
       "make slurmctld and the operator use the same JWT key", slurm_token_rejected},
      {"slurmctld-unreachable", "sinfo hangs or says Unable to contact slurm controller",
       "bring slurmctld back: its pod's scheduling, image, logs", slurmctld_unreachable},
      {"accounting-unavailable",
       "sacct shows nothing new; slurmctld logs slurmdbd connection errors",
       "bring slurmdbd and its database back", accounting_unavailable},
      {"slurm-key-mismatch", "worker nodes go NOT_RESPONDING after a key rotation",
       "replace the pods that mount the old auth/slurm key", slurm_key_mismatch},
      {"jwt-stale", "a client that mounts a Token's Secret gets 401 from slurmrestd",
       "renew the Token's JWT (refresh: true, or delete its Secret)", jwt_stale},
      {"pod-failing", "a pod waits in ErrImagePull or CrashLoopBackOff",
       "fix the image or the configuration the container fails on", pod_failing},
      {"pod-unschedulable", "a pod stays Pending", "make a Node fit the pod's requests",
       pod_unschedulable},
      {"worker-not-registered", "a worker pod runs but sinfo does not list it",
       "read slurmd's log in the pod; restart the pod to register again", worker_not_registered},
      {"orphan-slurm-node", "sinfo lists nodes DOWN or FUTURE that no pod runs",
       "delete the record, or prune records with pruneSlurmNodeRecords", orphan_slurm_node},
      {"slurm-node-not-responding", "a worker pod runs but its node is DOWN or NOT_RESPONDING",
       "read slurmd's log; resume the node once it answers", slurm_node_not_responding},
      {"cordon-drain-mismatch",
       "jobs start on a cordoned Node, or a node stays drained after uncordon",
       "the operator mirrors cordons: make sure it runs", cordon_drain_mismatch},
      {"drain-stuck", "a scale-in or update never finishes; a node stays DRAINING",
       "wait for, requeue or cancel the job that holds the node", drain_stuck},
      {"scale-in-blocked", "NodeSet replicas lowered, pods stay",
       "make Slurm reachable: the operator deletes no pod it cannot ask about", scale_in_blocked},
      {"pdb-blocks-eviction", "kubectl drain of a Node hangs on worker pods",
       "let their jobs end; the budget protects running work", pdb_blocks_eviction},
      {"job-pending", "jobs stay PD in squeue", "act on Slurm's reason, translated", job_pending},
      {"maintenance-reservation", "jobs wait with ReqNodeNotAvail while nodes look idle",
       "end the reservation when the maintenance is over", maintenance_reservation},
      {"max-node-count", "new worker pods run but never register",
       "raise slurm.conf's MaxNodeCount", max_node_count},
      {"config-drift", "pods run an older configuration after a change",
       "let the update finish; it drains pods one by one", config_drift},
      {"gres-missing", "GPU jobs wait; nodes drained with gres/gpu count reported lower",
       "make the device plugin advertise the GPUs again", gres_missing},
      {"resource-not-ready", "a Controller, NodeSet or other resource shows Ready=False",
       "read its conditions and Events", resource_not_ready},
      {"admin-drain", "nodes drained by hand stay drained", "undrain them when they are fit",
       admin_drain},
      {"health-check-failed",
       "slurmd's log says health_check failed; a HealthCheck's findings in a node's Extra",
       "fix what the check names; the operator drains and replaces within the budget",
       health_check_failed},
      {"node-quarantined", "worker pods avoid a Node; it carries tightrope.slurm.net/unhealthy",
       "repair the machine, then remove the taint", node_quarantined},
  };
  return all;
}

}  // namespace

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

std::span<const Check> catalog() {
  return checks();
}

std::vector<Finding> diagnose(const ClusterView& view, const std::vector<std::string>& only) {
  view.forget_lookups();  // the caller may have changed the view since the last run
  std::vector<Finding> out;
  for (const auto& check : catalog()) {
    if (only.empty() || std::find(only.begin(), only.end(), check.id) != only.end()) {
      check.run(view, out);
    }
  }
  return out;
}

bool failing(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity != Severity::kInfo; });
}

PendingReason explain_pending_reason(std::string_view reason) {
  static const std::map<std::string_view, PendingReason> known = {
      {"Resources", {"the nodes it can use are busy: it starts when they free up", true}},
      {"Priority", {"jobs of higher priority wait before it in the same partition", true}},
      {"Dependency", {"it waits for the jobs it depends on", true}},
      {"BeginTime", {"it asked not to start before its begin time", true}},
      {"None", {"the scheduler has not looked at it yet", true}},
      {"JobHeldUser", {"its owner held it: scontrol release <id>", false}},
      {"JobHeldAdmin", {"an administrator held it: scontrol release <id>", false}},
      {"ReqNodeNotAvail",
       {"a node it needs is DOWN, DRAINED or reserved (a maintenance reservation, a drain for "
        "scale-in): it waits until that node is back",
        false}},
      {"PartitionDown", {"its partition is DOWN: scontrol update partition=<p> state=UP", false}},
      {"PartitionInactive", {"its partition is INACTIVE", false}},
      {"PartitionNodeLimit",
       {"it asks more nodes than the partition allows or has: it can never run as asked", false}},
      {"PartitionTimeLimit", {"its time limit is over the partition's MaxTime", false}},
      {"PartitionConfig", {"it asks what the partition cannot give (nodes, CPUs, GRES)", false}},
      {"BadConstraints", {"no node has the features or GRES it asks: it cannot run", false}},
      {"NodeDown", {"a node it was given is DOWN", false}},
      {"Reservation", {"it waits for a reservation to start, or its nodes are reserved", true}},
      {"AssocGrpCpuLimit",
       {"its account's CPU limit is used up: it waits for others to end", true}},
      {"AssocMaxJobsLimit", {"its association runs as many jobs as it may", true}},
      {"QOSMaxJobsPerUserLimit", {"its user runs as many jobs as the QOS allows", true}},
      {"InvalidAccount", {"its account does not exist in slurmdbd: it never runs", false}},
      {"InvalidQOS", {"its QOS does not exist or is not allowed: it never runs", false}},
      {"launch failed requeued held",
       {"it failed to start on a node and was held: scontrol release <id> once the node is fixed",
        false}},
  };
  if (auto it = known.find(reason); it != known.end()) {
    return it->second;
  }
  if (reason.starts_with("Assoc") || reason.starts_with("QOS")) {
    return {"an accounting limit (" + std::string(reason) + ") holds it until usage falls", true};
  }
  return {"Slurm's reason: " + std::string(reason) + " (scontrol show job for details)", false};
}

}  // namespace tightrope::doctor
