"""kubectl slurm, against a real cluster: the plugin runs as `kubectl slurm`, reaches slurmrestd
through the API server's service proxy with a token it mints, shows and explains the cluster,
drains and cordons through the operator, and `doctor` names each failure this file causes on the
bed, one at a time: what the catalog promises is what a person at 3 a.m. gets.

The cluster: the site's values (accounting on the site's MariaDB, users from LDAP), two workers,
SlurmdTimeout=15 so that a silent slurmd shows as NOT_RESPONDING within seconds, not minutes, and
MaxNodeCount=3, which a third Slurm node reaches."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness import (ENV, HOST, NODESET, NS, OPERATOR_NS, RELEASE, REPO, VALUES, cluster_state, get, helm,
                     install_cluster, install_operator, job_state, kubectl, node_states, nodeset_condition,
                     operator_metrics, run, slurm, submit, wait_until)

PLUGIN = os.environ.get("KUBECTL_SLURM", str(REPO / "build/dev/src/kubectl-slurm"))
KUBE_NODE = ENV["TESTBED_NODE"]
DB_SECRET = "site-db"
LOGINSET = f"{RELEASE}-login-slinky"


def plugin(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    r = run(PLUGIN, "-n", NS, *args, check=False, timeout=timeout)
    if check and r.returncode not in (0, 1):
        raise AssertionError(f"kubectl-slurm {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def findings(*checks: str, extra: tuple[str, ...] = ()) -> list[dict]:
    args = ["doctor", "-o", "json", *extra] + (["--check", ",".join(checks)] if checks else [])
    return json.loads(plugin(*args, timeout=180).stdout)["findings"]


def named(check: str, subject: str = "", severity: str = "", extra: tuple[str, ...] = ()):
    """doctor's findings of `check` (about `subject`, at `severity`); falsy while there are none."""
    found = [f for f in findings(check, extra=extra) if subject in f["subject"]
             and (not severity or f["severity"] == severity)]
    return found


def wait_named(check: str, subject: str = "", timeout: float = 120, **kw) -> dict:
    got = wait_until(f"doctor to name {check} {subject}", lambda: named(check, subject, **kw), timeout,
                     lambda: json.dumps(findings(), indent=1)[-3000:], period=3)
    return got[0]


def wait_clear(check: str, subject: str = "", timeout: float = 180):
    wait_until(f"doctor to stop naming {check} {subject}", lambda: not named(check, subject), timeout,
               lambda: json.dumps(findings(check), indent=1), period=3)


def in_pod(pod: str, container: str, script: str) -> None:
    kubectl("-n", NS, "exec", pod, "-c", container, "--", "sh", "-c", script, timeout=60)


def signal(pod: str, container: str, program: str, sig: str) -> None:
    in_pod(pod, container, f"for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = {program} ] && "
                           f"kill -{sig} ${{p#/proc/}}; done; true")


def restapi_pod() -> str:
    pods = get("pods", ns=NS)["items"]
    return next(p["metadata"]["name"] for p in pods
                if p["metadata"]["labels"].get("app.kubernetes.io/name") == "slurmrestd")


def two_idle() -> bool:
    return sorted(node_states().items()) == [(f"{HOST}0", "idle"), (f"{HOST}1", "idle")]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    install_operator()
    helm("uninstall", RELEASE, "-n", NS, "--ignore-not-found", "--wait", "--timeout", "180s", timeout=200)
    # A run stopped halfway leaves slurmctld's saved state (its node records) and the key test's
    # Secret, made outside the release: both go with the cluster.
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120, check=False)
    kubectl("-n", NS, "delete", "secret", "slurm-auth-slurm", "--ignore-not-found", check=False)
    kubectl("create", "namespace", NS, check=False)
    kubectl("-n", NS, "create", "secret", "generic", DB_SECRET,
            f"--from-literal=password={ENV['SITE_DB_PASSWORD']}", check=False)
    (Path(ENV["TESTBED_DIR"]) / "node" / "home").mkdir(parents=True, exist_ok=True)
    values = json.loads(run(str(REPO / "scripts/testbed"), "--name", ENV["TESTBED_NAME"], "site-values").stdout)
    values["nodesets"]["slinky"]["replicas"] = 2
    # MaxNodeCount=3: a third Slurm node (the orphan test's) reaches it.
    values["controller"]["extraConf"] += "SlurmdTimeout=15\nMaxNodeCount=3\n"
    install_cluster("kubectl-slurm", values)
    wait_until("sinfo to show 2 idle workers", two_idle, 420, cluster_state, period=5)
    wait_until("doctor to find nothing wrong", lambda: not [f for f in findings() if f["severity"] != "info"],
               300, lambda: json.dumps(findings(), indent=1)[-4000:], period=5)
    yield
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200, check=False)
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120, check=False)
    kubectl("-n", NS, "delete", "secret", "slurm-auth-slurm", "--ignore-not-found", check=False)


def test_runs_as_a_kubectl_plugin_and_lists_its_catalog(tmp_path):
    (tmp_path / "kubectl-slurm").symlink_to(PLUGIN)
    env = dict(ENV, PATH=f"{tmp_path}:{ENV['PATH']}")
    out = subprocess.run([ENV["KUBECTL"], "slurm", "doctor", "--list"], env=env, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    ids = [line.split("\t")[0] for line in out.splitlines()]
    assert len(ids) >= 20 and len(set(ids)) == len(ids), out
    # The healthy cluster: nothing but notes.
    problems = [f for f in findings() if f["severity"] != "info"]
    assert problems == [], json.dumps(problems, indent=1)
    assert plugin("doctor").returncode == 0


def test_status_joins_each_worker_pod_to_its_slurm_node():
    report = json.loads(plugin("status", "-o", "json").stdout)
    assert report["slurm"]["reached"], report["slurm"]
    assert "service proxy" in report["slurm"]["via"]
    workers = {w["slurmNode"]: w for w in report["nodesets"][0]["workers"]}
    assert sorted(workers) == [f"{HOST}0", f"{HOST}1"]
    assert all(w["state"] == "IDLE" and w["kubeNode"] == KUBE_NODE for w in workers.values()), workers
    assert report["slurm"]["accounting"] == "answering"
    text = plugin("status").stdout
    assert "\033" not in text and f"{HOST}0" in text and "doctor: 0 critical, 0 warning" in text, text


def test_drain_goes_through_the_operator_and_undrain_undoes_it():
    out = plugin("drain", f"{HOST}0", "--reason", "bad DIMM", "--wait", "60").stdout
    assert "Slurm shows" in out, out
    assert slurm("scontrol", "show", "node", f"{HOST}0").count("Reason=slurm-operator: bad DIMM") == 1
    pod = get("pod", f"{NODESET}-0")
    assert pod["metadata"]["annotations"]["tightrope.slurm.net/drain-reason"] == "bad DIMM"
    assert not named("admin-drain")  # the operator's drain, not an administrator's
    explained = json.loads(plugin("explain", "node", f"{HOST}0", "-o", "json").stdout)
    assert explained["pod"]["slurmNode"]["drainedBy"] == "the operator"
    plugin("undrain", f"{HOST}0", "--wait", "60")
    wait_until("slinky-0 idle again", two_idle, 60, cluster_state)


def test_a_cordon_drains_every_slurm_node_on_the_node_and_undrain_points_at_it():
    plugin("cordon", KUBE_NODE, "--reason", "kernel upgrade", "--wait", "60")
    wait_until("both drained", lambda: set(node_states().values()) == {"drain"}, 60, cluster_state)
    refused = plugin("undrain", f"{HOST}1")
    assert refused.returncode == 1 and f"uncordon {KUBE_NODE}" in refused.stderr, refused.stderr
    plugin("uncordon", KUBE_NODE, "--wait", "60")
    wait_until("both idle", two_idle, 60, cluster_state)


def test_undrain_takes_a_hand_set_pod_cordon_off_and_refuses_a_health_checks_request():
    pod = f"{NODESET}-0"
    cordon = "nodeset.slinky.slurm.net/pod-cordon"
    # Slinky's guide drains a node by hand this way; undrain takes the annotation off.
    kubectl("-n", NS, "annotate", "pod", pod, f"{cordon}=true", "--overwrite")
    wait_until(f"{HOST}0 drained for its pod's cordon", lambda: node_states().get(f"{HOST}0") == "drain", 60,
               cluster_state)
    plugin("undrain", f"{HOST}0", "--wait", "60")
    assert cordon not in get("pod", pod)["metadata"].get("annotations", {})
    wait_until("both idle", two_idle, 60, cluster_state)
    # A health check's request is the checker's to take back: refused, with the command that does.
    kubectl("-n", NS, "annotate", "pod", pod, f"{cordon}-requested=GPU XID 79", "--overwrite")
    wait_until(f"{HOST}0 drained as requested", lambda: node_states().get(f"{HOST}0") == "drain", 60,
               cluster_state)
    refused = plugin("undrain", f"{HOST}0")
    assert refused.returncode == 1 and f"{cordon}-requested-" in refused.stderr, refused.stderr
    kubectl("-n", NS, "annotate", "pod", pod, f"{cordon}-requested-")
    wait_until("both idle", two_idle, 60, cluster_state)


def test_doctor_names_a_pending_job_and_translates_why():
    slurm("scontrol", "update", f"partitionname={HOST[:-1]}", "state=down")
    job = submit("-p", HOST[:-1], "--wrap", "true")
    try:
        wait_until("the job to pend on PartitionDown",
                   lambda: "PartitionDown" in slurm("squeue", "-h", "-j", job, "-o", "%r"), 60)
        f = wait_named("job-pending", "PartitionDown", severity="warning")
        assert job in " ".join(f["evidence"])
        explained = json.loads(plugin("explain", "job", job, "-o", "json").stdout)
        assert "DOWN" in explained["job"]["reasonMeans"], explained
    finally:
        slurm("scontrol", "update", f"partitionname={HOST[:-1]}", "state=up")
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60, cluster_state)


def healthy() -> dict:
    return next((c for c in get("controller", RELEASE).get("status", {}).get("conditions", [])
                 if c["type"] == "Healthy"), {})


def test_doctor_names_a_maintenance_reservation_and_so_does_the_operator():
    slurm("scontrol", "create", "reservation=maint-e2e", "flags=maint", "nodes=ALL", "starttime=now",
          "duration=10", "users=root")
    try:
        f = wait_named("maintenance-reservation", "maint-e2e", severity="warning")
        assert any("flags" in e and "MAINT" in e for e in f["evidence"]), f
        # Without the plugin: the Controller's condition, an Event, the findings gauge.
        wait_until("the Controller to be unhealthy", lambda: healthy().get("reason") == "MaintenanceReservation",
                   90, lambda: json.dumps(healthy()))
        assert "reservation maint-e2e" in healthy()["message"], healthy()
        events = get("events")["items"]
        assert any(e["reason"] == "MaintenanceReservation" and e["involvedObject"]["kind"] == "Controller"
                   and e["type"] == "Warning" for e in events), [e["reason"] for e in events]
        assert 'tightrope_doctor_findings{namespace="slurm",controller="slurm",check="maintenance-reservation",' \
               'severity="warning"} 1' in operator_metrics()
    finally:
        slurm("scontrol", "delete", "reservation=maint-e2e")
    wait_clear("maintenance-reservation")
    wait_until("the Controller to be healthy again", lambda: healthy().get("status") == "True", 90,
               lambda: json.dumps(healthy()))


def test_doctor_names_a_slurm_node_without_a_pod_and_the_node_count_at_its_limit():
    slurm("scontrol", "create", "nodename=ghost-0", "cpus=1", "state=future")
    try:
        wait_named("orphan-slurm-node", "ghost-0")
        f = wait_named("max-node-count", severity="critical")
        assert "MaxNodeCount=3" in f["evidence"] and "Slurm nodes: 3" in f["evidence"], f
    finally:
        slurm("scontrol", "delete", "nodename=ghost-0")
    wait_clear("orphan-slurm-node")
    wait_clear("max-node-count")


def test_doctor_notes_an_administrators_drain_and_undrain_lifts_it_in_slurm():
    slurm("scontrol", "update", f"nodename={HOST}1", "state=drain", "reason=replacing a fan")
    f = wait_named("admin-drain", f"{HOST}1", severity="info")
    assert "replacing a fan" in f["evidence"][0]
    out = plugin("undrain", f"{HOST}1").stdout
    assert "administrator's drain" in out, out
    wait_until("slinky-1 idle", two_idle, 60, cluster_state)


def test_doctor_names_a_drain_held_by_a_job_without_end_a_budget_and_old_pods():
    job = submit("-w", f"{HOST}0", "--time=UNLIMITED", "--wrap", "sleep 3600")
    try:
        wait_until(f"job {job} to run", lambda: job_state(job) == "RUNNING", 60, cluster_state)
        plugin("drain", f"{HOST}0", "--reason", "e2e drain")
        f = wait_named("drain-stuck", f"{HOST}0")
        assert any(f"job {job}" in e and "no time limit" in e for e in f["evidence"]), f
        plugin("undrain", f"{HOST}0")
        # The busy pod is protected: a cordon's eviction would wait on its budget.
        wait_until("the busy pod to be protected", lambda: get("pod", f"{NODESET}-0")["metadata"]["labels"].get(
            "nodeset.slinky.slurm.net/pod-protect") == "true", 60)
        plugin("cordon", KUBE_NODE, "--reason", "e2e")
        f = wait_named("pdb-blocks-eviction")
        assert any(f"job {job}" in e for e in f["evidence"]), f
        plugin("uncordon", KUBE_NODE)
        # A new template: the idle worker is replaced, the busy one waits for its job.
        kubectl("-n", NS, "patch", "nodeset", NODESET, "--type=merge", "-p",
                json.dumps({"spec": {"template": {"metadata": {"annotations": {"e2e/revision": "2"}}}}}))
        f = wait_named("config-drift", NODESET, timeout=180)
        assert any(f"{NODESET}-0" in e and f"job {job}" in e for e in f["evidence"]), f
    finally:
        slurm("scancel", job, check=False)
        plugin("uncordon", KUBE_NODE, check=False)
    wait_clear("config-drift", timeout=240)
    wait_until("both idle", two_idle, 180, cluster_state)


def test_doctor_names_slurmrestd_down_and_the_scale_in_it_blocks():
    pod = restapi_pod()
    signal(pod, "slurmrestd", "slurmrestd", "STOP")
    try:
        kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=1")
        f = wait_named("slurmrestd-unreachable", extra=("--timeout", "3"))
        assert any("service proxy" in e for e in f["evidence"]), f
        wait_named("scale-in-blocked", NODESET, extra=("--timeout", "3"))
    finally:
        signal(pod, "slurmrestd", "slurmrestd", "CONT")
    wait_until("the scale-in to finish", lambda: list(node_states()) == [f"{HOST}0"], 180, cluster_state)
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=2")
    wait_until("two idle workers again", two_idle, 180, cluster_state)


def test_doctor_names_a_token_slurmrestd_refuses():
    f = named("slurm-token-rejected", extra=("--token", "not-a-jwt"))
    assert f and "the token given" in f[0]["message"], f


def test_doctor_names_slurmctld_that_does_not_answer():
    signal("slurm-controller-0", "slurmctld", "slurmctld", "STOP")
    try:
        f = wait_named("slurmctld-unreachable", extra=("--timeout", "20"), timeout=180)
        assert any("slurmrestd answered" in e for e in f["evidence"]), f
    finally:
        signal("slurm-controller-0", "slurmctld", "slurmctld", "CONT")
    wait_clear("slurmctld-unreachable")


def test_doctor_names_slurmdbd_that_does_not_answer():
    signal("slurm-accounting-0", "slurmdbd", "slurmdbd", "STOP")
    try:
        wait_named("accounting-unavailable", severity="warning", extra=("--timeout", "5"), timeout=180)
    finally:
        signal("slurm-accounting-0", "slurmdbd", "slurmdbd", "CONT")
    wait_clear("accounting-unavailable")


def test_doctor_names_a_silent_slurmd():
    signal(f"{NODESET}-1", "slurmd", "slurmd", "STOP")
    try:
        f = wait_named("slurm-node-not-responding", f"{HOST}1", timeout=120)
        assert "NOT_RESPONDING" in f["message"], f
    finally:
        signal(f"{NODESET}-1", "slurmd", "slurmd", "CONT")
    wait_clear("slurm-node-not-responding", timeout=120)


def test_doctor_names_a_worker_slurm_does_not_know():
    slurm("scontrol", "delete", f"nodename={HOST}1")
    wait_named("worker-not-registered", f"{NODESET}-1", timeout=120)
    kubectl("-n", NS, "delete", "pod", f"{NODESET}-1", "--wait=true", timeout=120)
    wait_until("the new pod to register", two_idle, 180, cluster_state)
    wait_clear("worker-not-registered")


def token(name: str, key_secret: str) -> dict:
    return {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Token", "metadata": {"name": name, "namespace": NS},
            "spec": {"username": "slurm", "jwtKeyRef": {"name": key_secret, "key": "jwt.key"}}}


def test_doctor_names_a_token_signed_with_another_key_and_one_with_no_key():
    key = base64.b64encode(os.urandom(32)).decode()
    kubectl("-n", NS, "create", "secret", "generic", "other-jwt-key", f"--from-literal=jwt.key={key}")
    kubectl("apply", "-f", "-", stdin=json.dumps(token("e2e-other", "other-jwt-key")))
    kubectl("apply", "-f", "-", stdin=json.dumps(token("e2e-nokey", "no-such-secret")))
    try:
        f = wait_named("jwt-stale", "e2e-other", severity="critical")
        assert "not signed" in f["message"], f
        # The operator cannot mint the other one: its Ready condition says why.
        f = wait_named("resource-not-ready", "Token slurm/e2e-nokey", severity="warning")
        assert "no-such-secret" in f["evidence"][0], f
    finally:
        kubectl("-n", NS, "delete", "token", "e2e-other", "e2e-nokey", "--wait=true")
        kubectl("-n", NS, "delete", "secret", "other-jwt-key")


def test_doctor_names_a_pod_that_cannot_pull_and_one_nothing_can_schedule():
    image = get("loginset", LOGINSET)["spec"]["login"]["image"]
    kubectl("-n", NS, "patch", "loginset", LOGINSET, "--type=merge", "-p",
            json.dumps({"spec": {"login": {"image": "localhost/tightrope/no-such-image:1"}}}))
    try:
        f = wait_named("pod-failing", LOGINSET, timeout=120)
        assert any("Image" in e for e in f["evidence"]), f
    finally:
        kubectl("-n", NS, "patch", "loginset", LOGINSET, "--type=merge", "-p",
                json.dumps({"spec": {"login": {"image": image}}}))
    kubectl("-n", NS, "patch", "loginset", LOGINSET, "--type=merge", "-p",
            json.dumps({"spec": {"template": {"spec": {"nodeSelector": {"e2e/nowhere": "true"}}}}}))
    try:
        f = wait_named("pod-unschedulable", LOGINSET, timeout=120)
        assert any("node affinity/selector" in e for e in f["evidence"]), f
    finally:
        kubectl("-n", NS, "patch", "loginset", LOGINSET, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/spec/template/spec/nodeSelector"}]))
    wait_clear("pod-failing", timeout=180)
    wait_clear("pod-unschedulable", timeout=180)


def gpu_counts(status: str) -> dict | None:
    c = nodeset_condition(f"{RELEASE}-worker-gpu", "GpuCountsMatch")
    return c if c.get("status") == status else None


def test_doctor_names_gpus_the_node_no_longer_advertises(tmp_path):
    """A GPU NodeSet on the bed's stand-in GPUs; the device plugin stops, the kubelet marks its
    devices unhealthy and the Node advertises none: the operator drains the node that would hand
    out GPUs that are not there, and undrains it once they are back."""
    node = ENV["TESTBED_NODE"]
    product = "NVIDIA-H100-80GB-HBM3"
    kubectl("label", "node", node, f"nvidia.com/gpu.product={product}", "--overwrite")
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({"nodesets": {"gpu": {
        "replicas": 1, "oversubscribeNode": True, "pruneSlurmNodeRecords": "NodeNotFound",
        "partition": {"enabled": True, "configMap": {"State": "UP", "MaxTime": "UNLIMITED"}},
        "slurmd": {"resources": {"limits": {"nvidia.com/gpu": 4}}},
        "podSpec": {"nodeSelector": {"nvidia.com/gpu.product": product}},
        "gres": {"conf": "Name=gpu File=/dev/nvidia[0-3]\n"}}}}))
    values = Path(ENV["TESTBED_DIR"]) / "kubectl-slurm-values.json"
    helm("upgrade", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES), "-f", str(values),
         "-f", str(gpu), timeout=120)
    wait_until("gpu-0 idle", lambda: node_states().get("gpu-0") == "idle", 300, cluster_state, period=5)
    wait_until("GpuCountsMatch True", lambda: gpu_counts("True"), 60, cluster_state)
    bed = str(REPO / "scripts/testbed")
    run(bed, "--name", ENV["TESTBED_NAME"], "up", "--fake-gpus", "0", timeout=300)
    try:
        c = wait_until("GpuCountsMatch False", lambda: gpu_counts("False"), 120, cluster_state)
        assert c["reason"] == "GpuCountMismatch" and f"Node {KUBE_NODE} allocates 0 nvidia.com/gpu" in c["message"], c
        wait_until("gpu-0 drained for its GPU count",
                   lambda: slurm("sinfo", "-h", "-n", "gpu-0", "-o", "%E").startswith("slurm-operator: GPU count: Node"),
                   60, cluster_state)
        f = wait_named("gres-missing", f"{RELEASE}-worker-gpu", severity="critical", timeout=120)
        assert any("advertises nvidia.com/gpu" in e for e in f["evidence"]), f
        assert any("GPU count:" in e for e in f["evidence"]), f
    finally:
        run(bed, "--name", ENV["TESTBED_NAME"], "up", "--fake-gpus", "4", timeout=300)
    wait_clear("gres-missing")
    wait_until("GpuCountsMatch True again", lambda: gpu_counts("True"), 120, cluster_state)
    wait_until("gpu-0 undrained", lambda: node_states().get("gpu-0") == "idle", 120, cluster_state, period=5)
    helm("upgrade", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES), "-f", str(values),
         timeout=120)
    wait_until("the GPU NodeSet gone", lambda: not get("nodeset", f"{RELEASE}-worker-gpu"), 300, cluster_state)
    kubectl("label", "node", node, "nvidia.com/gpu.product-")
    # Its record goes with it, unless slurmctld, restarting for the new slurm.conf meanwhile, read
    # it back from its saved state: then it is an orphan, which is what doctor says.
    if "gpu-0" in node_states():
        wait_named("orphan-slurm-node", "gpu-0")
        slurm("scontrol", "delete", "nodename=gpu-0")
    wait_until("two idle workers and nothing else", two_idle, 300, cluster_state, period=5)


def test_doctor_names_a_stopped_operator_its_lease_and_what_nobody_rolls_or_mirrors(tmp_path):
    kubectl("-n", OPERATOR_NS, "scale", "deployment", "slurm-operator", "--replicas=0")
    try:
        wait_named("operator-absent", "slurm-operator", severity="critical", timeout=60)
        wait_named("operator-not-leading", "slurm-operator", timeout=60)
        kubectl("cordon", KUBE_NODE)
        wait_named("cordon-drain-mismatch", KUBE_NODE, timeout=30)
        # A key rotation as an administrator does it (the chart's key Secret and the Controller's
        # slurmKeyRef are immutable: the Secret is made again under its name): nobody rolls the
        # pods that run the old key.
        key = tmp_path / "slurm.key"
        key.write_bytes(os.urandom(1024))
        kubectl("-n", NS, "delete", "secret", "slurm-auth-slurm", "--wait=true")
        kubectl("-n", NS, "create", "secret", "generic", "slurm-auth-slurm", f"--from-file=slurm.key={key}")
        f = wait_named("slurm-key-mismatch", timeout=60)
        assert any("slurmctld" in e and "mounts key" in e for e in f["evidence"]), f
    finally:
        kubectl("uncordon", KUBE_NODE)
        kubectl("-n", OPERATOR_NS, "scale", "deployment", "slurm-operator", "--replicas=2")
    wait_clear("operator-absent")
    wait_clear("operator-not-leading", timeout=120)
    wait_clear("slurm-key-mismatch", timeout=300)  # the operator rolls them, slurmctld first
    wait_until("both idle with the new key", two_idle, 300, cluster_state)


def test_doctor_names_a_missing_crd_and_an_expiring_webhook_certificate(tmp_path):
    crd = get("crd", "tokens.slinky.slurm.net", ns="")
    for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        crd["metadata"].pop(field, None)
    crd.pop("status", None)
    kubectl("delete", "crd", "tokens.slinky.slurm.net", "--wait=true", timeout=120)
    try:
        wait_named("crd-version-mismatch", "tokens.slinky.slurm.net", severity="critical", timeout=60)
    finally:
        kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    wait_clear("crd-version-mismatch")

    secret = get("secret", "slurm-operator-webhook-tls", ns=OPERATOR_NS)
    key, cert = tmp_path / "tls.key", tmp_path / "tls.crt"
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-days", "2", "-subj", "/CN=slurm-operator-webhook.slinky.svc", "-keyout", str(key), "-out", str(cert))
    original = secret["data"]["tls.crt"]
    kubectl("-n", OPERATOR_NS, "patch", "secret", "slurm-operator-webhook-tls", "--type=merge", "-p",
            json.dumps({"data": {"tls.crt": base64.b64encode(cert.read_bytes()).decode()}}))
    try:
        f = wait_named("webhook-certificate-expiring", severity="warning", timeout=60)
        assert any("notAfter" in e for e in f["evidence"]), f
    finally:
        kubectl("-n", OPERATOR_NS, "patch", "secret", "slurm-operator-webhook-tls", "--type=merge", "-p",
                json.dumps({"data": {"tls.crt": original}}))
    wait_clear("webhook-certificate-expiring")
