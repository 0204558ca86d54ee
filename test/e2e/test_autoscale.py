"""Autoscaling on pending jobs with the ecosystem's tools: KEDA (pinned, built from the Go module
proxy: scripts/testbed build --tool keda) runs on the bed's node from its own manifests and
drives a NodeSet's scale subresource from a Prometheus query of the operator's job metric; the
API server's aggregation layer serves KEDA's external metrics to the controller-manager's HPA.
An empty partition gets four jobs: workers appear, the jobs run, and once idle the NodeSet is
back at 0 through the drain-first scale-in, with no job killed. Runs after test_metrics.py."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from harness import (ENV, NODESET, NS, OPERATOR_NS, RELEASE, REPO, cluster_state, get, helm, install_cluster,
                     install_operator, job_state, kubectl, run, slurm, submit, wait_until, workers)
from monitoring import endpoint_targets, running_prometheus

KEDA_VERSION = "v2.21.0"  # scripts/testbed's OPTIONAL_GO_TOOLS pins the same
KEDA_IMAGE = f"localhost/tightrope/keda:{KEDA_VERSION}"
PARTITION = "slinky"  # the NodeSet's own partition
MAX_WORKERS = 4
JOBS = 4
# The NodeSet starts empty; slurmctld serves its metrics too (a dashboard would show them).
AUTOSCALE_VALUES = {"nodesets": {"slinky": {"replicas": 0}}}


def jobs_query(partition: str = PARTITION) -> str:
    """Pending and running jobs of the partition: one worker each. "or vector(0)": no job is a 0,
    not no answer, so KEDA sees the partition idle rather than the query failing."""
    return (f'sum(tightrope_slurm_jobs{{namespace="{NS}",partition="{partition}",'
            f'state=~"pending|running"}}) or vector(0)')


JOBS_QUERY = jobs_query()


def keda_module() -> Path:
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(cache) / f"github.com/kedacore/keda/v2@{KEDA_VERSION}"


def keda_manifests() -> list[dict]:
    """KEDA's own minimal install (CRDs, RBAC, operator, metrics adapter, APIService; no
    admission webhooks) from its module's kustomization, running the bed's image of it."""
    text = kubectl("kustomize", str(keda_module() / "config/minimal"), timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        if doc["kind"] == "Deployment":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                c["image"] = KEDA_IMAGE
                c["imagePullPolicy"] = "IfNotPresent"
                c.pop("resources", None)  # 1 GiB limits and 100m requests do not fit a 2-core bed
    return docs


def worker_count() -> int:
    return len([p for p in workers() if "deletionTimestamp" not in p["metadata"]])


def replicas() -> int:
    return get("nodeset", NODESET).get("spec", {}).get("replicas", -1)


def slurm_time(job: str, field: str) -> datetime | None:
    out = slurm("scontrol", "show", "job", job, "-o", check=False)
    for word in out.split():
        if word.startswith(f"{field}="):
            value = word.split("=", 1)[1]
            return None if value in ("Unknown", "None", "N/A") else datetime.fromisoformat(value)
    return None


@contextlib.contextmanager
def installed_keda():
    """KEDA built, imported into every Node's containerd, applied and answering; removed on exit."""
    run(str(REPO / "scripts/testbed"), "build", "--tool", "keda", timeout=2400)
    run(str(REPO / "scripts/images"), "build", "keda", timeout=900)
    for address in ENV["CONTAINERD_ADDRESSES"].split(","):  # every Node may get a KEDA pod
        run(str(REPO / "scripts/images"), "import", "--address", address, "keda", timeout=300)
    docs = keda_manifests()
    kubectl("apply", "--server-side", "-f", "-", stdin="\n---\n".join(yaml.safe_dump(d) for d in docs), timeout=180)
    for name in ("keda-operator", "keda-metrics-apiserver"):
        kubectl("-n", "keda", "rollout", "status", f"deploy/{name}", "--timeout=300s", timeout=320)
    wait_until("KEDA's external metrics API to be available",
               lambda: kubectl("get", "--raw", "/apis/external.metrics.k8s.io/v1beta1", check=False).returncode == 0,
               180, lambda: kubectl("get", "apiservice", "v1beta1.external.metrics.k8s.io", "-o", "yaml").stdout)
    try:
        yield
    finally:
        kubectl("delete", "--wait=true", "--ignore-not-found", "-f", "-",
                stdin="\n---\n".join(yaml.safe_dump(d) for d in reversed(docs)), timeout=300, check=False)


@pytest.fixture(scope="module")
def keda():
    with installed_keda():
        yield


@pytest.fixture(scope="module")
def cluster(keda):
    install_operator()
    install_cluster("autoscale", AUTOSCALE_VALUES)
    wait_until("the login pod to answer sinfo",
               lambda: slurm("sinfo", "-h", "-o", "%P", check=False).strip(), 300, cluster_state, period=5)
    yield
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)


@contextlib.contextmanager
def operator_prometheus(work: Path):
    """Prometheus on the node's bridge address, where KEDA's pods reach it, scraping the operator."""
    selector = {"app.kubernetes.io/name": "slurm-operator", "app.kubernetes.io/instance": "slurm-operator"}
    targets = wait_until("the operator's metrics endpoint",
                         lambda: endpoint_targets([OPERATOR_NS], selector, "metrics"), 60)
    config = {"global": {"scrape_interval": "5s"},
              "scrape_configs": [{"job_name": "slurm-operator", "honor_labels": True, "static_configs": targets}]}
    with running_prometheus(work, config, host=ENV["HOST_IP"]) as p:
        wait_until("the operator's job metric", lambda: p.query(JOBS_QUERY), 60)
        yield p


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory):
    with operator_prometheus(tmp_path_factory.mktemp("prometheus")) as p:
        yield p


def scaled_object(server: str, nodeset: str = NODESET, partition: str = PARTITION,
                  most: int = MAX_WORKERS) -> dict:
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": f"{partition}-workers", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "name": nodeset},
            "minReplicaCount": 0, "maxReplicaCount": most,
            "pollingInterval": 5,
            # Back to 0 after 30 s without jobs; the HPA in between scales in after 20 s.
            "cooldownPeriod": 30,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 20},
                "scaleUp": {"stabilizationWindowSeconds": 0}}}},
            "triggers": [{"type": "prometheus", "metadata": {
                "serverAddress": server, "query": jobs_query(partition),
                # One worker per pending or running job; any job at all wakes the NodeSet from 0.
                "threshold": "1", "activationThreshold": "0"}}],
        },
    }


def test_keda_scales_an_empty_nodeset_out_for_pending_jobs_and_back_to_zero_when_idle(prometheus):
    assert replicas() == 0 and worker_count() == 0, cluster_state()
    kubectl("apply", "-f", "-", stdin=json.dumps(scaled_object(prometheus.url)))
    try:
        wait_until("KEDA to take the NodeSet (ScaledObject Ready)",
                   lambda: any(c["type"] == "Ready" and c["status"] == "True" for c in
                               get("scaledobject", "slinky-workers").get("status", {}).get("conditions", [])),
                   120, lambda: kubectl("-n", NS, "get", "scaledobject", "slinky-workers", "-o", "yaml").stdout)
        assert replicas() == 0, "KEDA woke an idle NodeSet"

        submitted = time.monotonic()
        jobs = [submit("-p", PARTITION, "--exclusive", "-N1", "--wrap", "sleep 20") for _ in range(JOBS)]
        first = wait_until("a job to start", lambda: next((j for j in jobs if job_state(j) in ("RUNNING", "COMPLETED")), None),
                           300, cluster_state, period=1)
        seen_start = time.monotonic() - submitted
        wait_until(f"the NodeSet to grow past one worker (up to {MAX_WORKERS})", lambda: replicas() >= 2, 120,
                   cluster_state)
        peak = replicas()
        wait_until("every job to complete",
                   lambda: all(job_state(j) in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT",
                                                "OUT_OF_MEMORY", "PREEMPTED") for j in jobs),
                   420, cluster_state, period=3)
        states = {j: job_state(j) for j in jobs}
        assert set(states.values()) == {"COMPLETED"}, states  # no job killed by a scale-in
        start = slurm_time(first, "StartTime")
        submit_time = slurm_time(first, "SubmitTime")
        done = time.monotonic()
        wait_until("the NodeSet to be back at 0 with no worker pod",
                   lambda: replicas() == 0 and worker_count() == 0, 300, cluster_state)
        idle_to_zero = time.monotonic() - done
        print(f"\nautoscale: submit -> first job start {(start - submit_time).total_seconds():.0f} s by Slurm's "
              f"clock ({seen_start:.1f} s seen by the test); peak {peak} workers for {JOBS} jobs; "
              f"last job done -> 0 workers {idle_to_zero:.0f} s")
    finally:
        kubectl("-n", NS, "delete", "scaledobject", "slinky-workers", "--ignore-not-found", "--wait=true",
                timeout=120, check=False)
