"""slurm-bridge on a real node: pods that name the bridge become Slurm external jobs, Slurm
decides when and where they run, the kubelet runs them, and each side's ends reach the other.

The bed has one Kubernetes Node, which already runs the cluster: it cannot be a tainted external
node (the bridge's NoExecute taint would evict the cluster itself), so this file uses the hybrid
mode, where the Node also runs slurmd: the Node is labelled with the Slurm node of its first
worker (slinky-0) and the bridge's partition is that NodeSet's. Slurm batch jobs and pods then
compete for one node under one queue. External nodes (registration, the taint, cordon <-> drain
both ways, gangs over several nodes) are proven on the bed's API server and Slurm with hollow
Nodes in integration_bridge."""

from __future__ import annotations

import json
import time

import pytest

from harness import (ENV, HOST, NS, RELEASE, REPO, cluster_state, get, helm, install_cluster, install_operator,
                     job_state, kubectl, node_states, run, slurm, submit, wait_until)

BRIDGE = "slurm-bridge"
PODS_NS = "bridge-e2e"
KUBE_NODE = ENV["TESTBED_NODE"]
SLURM_NODE = f"{HOST}0"
PARTITION = "slinky"
IMAGE = "localhost/tightrope/slurm-base:26.05"
DB_SECRET = "site-db"


def pod_manifest(name: str, seconds: int, annotations: dict | None = None, scheduler: bool = False) -> dict:
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", f"sleep {seconds}"],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    if scheduler:
        spec["schedulerName"] = "slurm-bridge-scheduler"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": PODS_NS, "annotations": annotations or {}},
            "spec": spec}


def create(manifest: dict, check: bool = True):
    return kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=check)


def pod(name: str) -> dict:
    return get("pod", name, ns=PODS_NS)


def job_of(name: str) -> str:
    return pod(name).get("metadata", {}).get("labels", {}).get("scheduler.slinky.slurm.net/slurm-jobid", "")


def phase(name: str) -> str:
    return pod(name).get("status", {}).get("phase", "")


def bridge_state() -> str:
    logs = kubectl("-n", NS, "logs", f"deploy/{BRIDGE}", "--tail=60", check=False).stdout
    pods = kubectl("-n", PODS_NS, "get", "pods", "-o", "wide", check=False).stdout
    events = kubectl("-n", PODS_NS, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout
    queue = slurm("squeue", "-o", "%i %j %T %N %R %Q", check=False)
    return f"pods:\n{pods}\nqueue:\n{queue}\nevents:\n{events[-3000:]}\nbridge:\n{logs}"


def wait_job(name: str, timeout: float = 60) -> str:
    return wait_until(f"pod {name} to get its Slurm job", lambda: job_of(name), timeout, bridge_state)


def occupy() -> str:
    """A batch job holding the worker's whole node."""
    job = submit("-p", PARTITION, "-w", SLURM_NODE, "--exclusive", "--wrap", "sleep 600")
    wait_until(f"batch job {job} to run", lambda: job_state(job) == "RUNNING", 120, bridge_state)
    return job


@pytest.fixture(scope="module", autouse=True)
def cluster():
    install_operator()
    helm("uninstall", BRIDGE, "-n", NS, "--ignore-not-found", "--wait", timeout=200)
    helm("uninstall", RELEASE, "-n", NS, "--ignore-not-found", "--wait", "--timeout", "180s", timeout=200)
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120, check=False)
    kubectl("-n", NS, "delete", "secret", "slurm-auth-slurm", "--ignore-not-found", check=False)
    kubectl("delete", "namespace", PODS_NS, "--ignore-not-found", "--wait=true", timeout=180, check=False)
    kubectl("create", "namespace", NS, check=False)
    kubectl("-n", NS, "create", "secret", "generic", DB_SECRET,
            f"--from-literal=password={ENV['SITE_DB_PASSWORD']}", check=False)
    values = json.loads(run(str(REPO / "scripts/testbed"), "--name", ENV["TESTBED_NAME"], "site-values").stdout)
    values["nodesets"]["slinky"]["replicas"] = 2
    install_cluster("bridge", values)
    wait_until("2 idle workers", lambda: sorted(node_states().items()) == [(f"{HOST}0", "idle"), (f"{HOST}1", "idle")],
               420, cluster_state, period=5)
    kubectl("label", "node", KUBE_NODE, f"slinky.slurm.net/slurm-nodename={SLURM_NODE}", "--overwrite")
    kubectl("create", "namespace", PODS_NS)
    # The namespace's Slurm user: the site enforces associations, and root has one.
    kubectl("annotate", "namespace", PODS_NS, "tightrope.slurm.net/slurm-user=root")
    # The bridge's token is minted from the cluster's own jwt key, whatever its Secret is called (a
    # release that found an older chart's Secret keeps that one).
    spec = get("controller", RELEASE)["spec"]
    jwt = spec.get("jwtKeyRef") or spec.get("jwtHs256KeyRef")
    helm("upgrade", "--install", BRIDGE, str(REPO / "deploy/helm/slurm-bridge"), "-n", NS,
         "--set", "sharedConfig.token.create=true", "--set", f"sharedConfig.token.jwtKeyRef.name={jwt['name']}",
         "--set", f"sharedConfig.token.jwtKeyRef.key={jwt['key']}", "--set", f"schedulerConfig.partition={PARTITION}",
         "--set", "schedulerConfig.mcsLabel=", "--set", f"admission.managedNamespaces={{{PODS_NS}}}",
         "--set", "scheduler.slurmPollMilliseconds=500", "--wait", "--timeout", "180s", timeout=240)
    # The webhook answers once its Service is programmed: a dry run of a pod shows its patch.
    wait_until("the bridge's webhook to admit pods", lambda: "slurm-bridge-scheduler" in kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod_manifest("probe", 1)),
        check=False).stdout, 90, bridge_state)
    yield
    kubectl("delete", "namespace", PODS_NS, "--wait=true", timeout=180, check=False)
    kubectl("label", "node", KUBE_NODE, "slinky.slurm.net/slurm-nodename-", check=False)
    helm("uninstall", BRIDGE, "-n", NS, "--wait", timeout=200, check=False)
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200, check=False)
    kubectl("-n", NS, "delete", "pvc", "--all", "--wait=true", timeout=120, check=False)
    kubectl("-n", NS, "delete", "secret", "slurm-auth-slurm", "--ignore-not-found", check=False)


def test_the_webhook_hands_pods_to_the_bridge_and_refuses_bad_job_options():
    out = json.loads(kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                             stdin=json.dumps(pod_manifest("probe", 1))).stdout)
    assert out["spec"]["schedulerName"] == "slurm-bridge-scheduler"
    assert any(t.get("key") == "slinky.slurm.net/managed-node" for t in out["spec"]["tolerations"])
    bad = create(pod_manifest("bad", 1, {"slurmjob.slinky.slurm.net/timelimit": "soon"}), check=False)
    assert bad.returncode != 0
    assert "metadata.annotations[slurmjob.slinky.slurm.net/timelimit]" in bad.stderr, bad.stderr


def test_a_job_of_three_pods_runs_where_slurm_put_it_and_accounting_shows_it():
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "three", "namespace": PODS_NS},
           "spec": {"completions": 3, "parallelism": 3, "backoffLimit": 0,
                    "template": {"spec": pod_manifest("x", 2)["spec"]}}}
    create(job)

    def done():
        status = get("job", "three", ns=PODS_NS).get("status", {})
        return status.get("succeeded") == 3
    wait_until("the Job's 3 pods to succeed", done, 300, bridge_state, period=3)
    pods = [p for p in get("pods", ns=PODS_NS)["items"]
            if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == "three"]
    ids = set()
    for p in pods:
        assert p["spec"]["nodeName"] == KUBE_NODE
        assert p["metadata"]["annotations"]["slinky.slurm.net/slurm-node"] == KUBE_NODE
        ids.add(p["metadata"]["labels"]["scheduler.slinky.slurm.net/slurm-jobid"])
    assert len(ids) == 3
    # slurmdbd has each job, on the worker's Slurm node, with the pod in its admin comment.
    def accounted():
        out = slurm("sacct", "-X", "-n", "-P", "-j", ",".join(sorted(ids)), "-o", "JobID,NodeList,AdminComment",
                    check=False)
        rows = [line.split("|") for line in out.splitlines() if line.strip()]
        return len(rows) == 3 and all(r[1] == SLURM_NODE and "three-" in r[2] for r in rows) and rows
    wait_until("sacct to show the 3 jobs", accounted, 120, bridge_state, period=5)


@pytest.mark.parametrize("pod_wins", [False, True])
def test_a_batch_job_and_a_pod_compete_for_the_node_and_slurm_priority_decides(pod_wins):
    """The loser is always submitted first: only priority can put the winner before it."""
    blocker = occupy()
    name = f"rival-{int(pod_wins)}"
    low, high = "100", "5000"

    def submit_pod(priority: str) -> str:
        create(pod_manifest(name, 5, {"slurmjob.slinky.slurm.net/priority": priority}))
        return wait_job(name)

    def submit_batch(priority: str) -> str:
        return submit("-p", PARTITION, "-w", SLURM_NODE, "--exclusive", f"--priority={priority}",
                      "--wrap", "sleep 15")
    if pod_wins:
        batch = submit_batch(low)
        pod_job = submit_pod(high)
    else:
        pod_job = submit_pod(low)
        batch = submit_batch(high)
    wait_until("both to wait", lambda: job_state(pod_job) == "PENDING" and job_state(batch) == "PENDING", 60,
               bridge_state)
    slurm("scancel", blocker)
    first, second = (pod_job, batch) if pod_wins else (batch, pod_job)
    wait_until(f"job {first} to run first", lambda: job_state(first) == "RUNNING", 120, bridge_state)
    assert job_state(second) == "PENDING"
    if pod_wins:
        wait_until(f"pod {name} to be bound", lambda: pod(name)["spec"].get("nodeName") == KUBE_NODE, 60,
                   bridge_state)
    else:
        assert not pod(name)["spec"].get("nodeName"), "the pod was bound while Slurm ran another job"
    wait_until(f"job {second} to run after", lambda: job_state(second) in ("RUNNING", "COMPLETED", "CANCELLED"),
               180, bridge_state)
    wait_until(f"pod {name} to succeed", lambda: phase(name) == "Succeeded", 180, bridge_state)
    slurm("scancel", batch, check=False)


def test_scancel_deletes_the_pod_and_deleting_a_pod_ends_its_job():
    create(pod_manifest("victim", 600))
    victim = wait_job("victim")
    wait_until("victim to run", lambda: phase("victim") == "Running", 120, bridge_state)
    slurm("scancel", victim)
    wait_until("the cancelled job's pod to go", lambda: not pod("victim"), 120, bridge_state)
    create(pod_manifest("dropped", 600))
    dropped = wait_job("dropped")
    wait_until("dropped to run", lambda: phase("dropped") == "Running", 120, bridge_state)
    kubectl("-n", PODS_NS, "delete", "pod", "dropped", "--wait=false")
    wait_until("the deleted pod's job to end", lambda: job_state(dropped) not in ("RUNNING", "PENDING", ""),
               120, bridge_state)
    wait_until("the deleted pod to go", lambda: not pod("dropped"), 120, bridge_state)


def test_a_cordoned_node_takes_no_pod_until_uncordoned():
    kubectl("cordon", KUBE_NODE)
    try:
        wait_until("the operator to drain the worker", lambda: "drain" in slurm(
            "sinfo", "-h", "-n", SLURM_NODE, "-o", "%T", check=False), 120, bridge_state)
        create(pod_manifest("patient", 2))
        job = wait_job("patient")
        time.sleep(5)
        assert job_state(job) == "PENDING"
        assert not pod("patient")["spec"].get("nodeName")
    finally:
        kubectl("uncordon", KUBE_NODE)
    wait_until("patient to succeed once uncordoned", lambda: phase("patient") == "Succeeded", 240, bridge_state)


def test_a_bridge_restarted_mid_flight_loses_nothing():
    blocker = occupy()
    create(pod_manifest("survivor", 2))
    job = wait_job("survivor")
    assert job_state(job) == "PENDING"
    kubectl("-n", NS, "rollout", "restart", f"deploy/{BRIDGE}")
    kubectl("-n", NS, "rollout", "status", f"deploy/{BRIDGE}", "--timeout=120s", timeout=150)
    slurm("scancel", blocker)
    wait_until("survivor to succeed", lambda: phase("survivor") == "Succeeded", 240, bridge_state)
    assert job_of("survivor") == job, "the restarted bridge submitted the pod again"
    claims = slurm("squeue", "-h", "-t", "all", "-o", "%i %j", check=False)
    assert sum(1 for line in claims.splitlines() if line.split()[1:] == [f"{PODS_NS}/survivor"]) <= 1, claims
