"""Metrics, scraped for real: a Prometheus server (Debian's) on the host scrapes the operator's and
slurmctld's endpoints, found through their ServiceMonitors' selectors, and answers queries over
what it scraped; every endpoint's exposition passes `promtool check metrics`. Runs after
test_site.py, on the bed's node."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from harness import (ENV, NODESET, NS, OPERATOR_NS, RELEASE, REPO, VALUES, cluster_state, get, helm,
                     install_operator, job_state, kubectl, node_states, submit, wait_until)

# The ServiceMonitor kind as the Prometheus Operator's CRD serves it, without its schema: the
# operator and the chart only need the API to exist.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                       "singular": "servicemonitor"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}

METRICS_VALUES = {"controller": {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True}}}}
SLURMCTLD_PATHS = ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler"]


def endpoint_targets(namespaces: list[str], selector: dict, port: str) -> list[dict]:
    """The ready addresses of the Endpoints of every Service in `namespaces` whose labels hold
    `selector`, on the port named `port`: what Prometheus' Kubernetes discovery (role endpoints)
    finds and a ServiceMonitor's selector keeps."""
    groups = []
    for ns in namespaces:
        for svc in get("services", ns=ns).get("items", []):
            labels = svc["metadata"].get("labels", {})
            if any(labels.get(k) != v for k, v in selector.items()):
                continue
            endpoints = get("endpoints", svc["metadata"]["name"], ns)
            for subset in endpoints.get("subsets", []):
                ports = [p["port"] for p in subset.get("ports", []) if p.get("name") == port]
                for address in subset.get("addresses", []):
                    for number in ports:
                        groups.append({"targets": [f"{address['ip']}:{number}"],
                                       "labels": {"namespace": ns, "service": svc["metadata"]["name"],
                                                  "pod": address.get("targetRef", {}).get("name", "")}})
    return groups


def scrape_configs(monitors: list[dict]) -> list[dict]:
    """What the Prometheus Operator makes of each ServiceMonitor: a job per endpoint, over the
    Endpoints of the Services its selector matches in the namespaces it names. Debian's Prometheus
    is built without Kubernetes discovery, so the test discovers (endpoint_targets) and hands
    Prometheus the targets as static ones."""
    jobs = []
    for m in monitors:
        spec = m["spec"]
        namespaces = spec.get("namespaceSelector", {}).get("matchNames", [m["metadata"]["namespace"]])
        for i, endpoint in enumerate(spec["endpoints"]):
            jobs.append({
                "job_name": f"serviceMonitor/{m['metadata']['namespace']}/{m['metadata']['name']}/{i}",
                "metrics_path": endpoint.get("path", "/metrics"),
                "scrape_interval": "5s", "scrape_timeout": "4s",
                "static_configs": endpoint_targets(namespaces, spec["selector"]["matchLabels"], endpoint["port"]),
            })
    return jobs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def api(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def answers(self) -> bool:
        try:
            return bool(self.api("status/buildinfo"))
        except OSError:  # not listening yet
            return False

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def targets(self) -> list[dict]:
        return self.api("targets", state="active")["activeTargets"]


@pytest.fixture(scope="module")
def cluster():
    kubectl("apply", "-f", "-", stdin=json.dumps(SERVICE_MONITOR_CRD))
    kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "--timeout=60s")
    install_operator("operator.serviceMonitor.enabled=true")
    kubectl("create", "namespace", NS, check=False)
    overlay = Path(ENV["TESTBED_DIR"]) / "metrics-values.json"
    overlay.write_text(json.dumps(METRICS_VALUES))
    helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(overlay), timeout=120)
    wait_until("sinfo to show 2 idle workers",
               lambda: list(node_states().values()) == ["idle", "idle"], 420, cluster_state, period=5)
    yield
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)
    kubectl("delete", "crd", "servicemonitors.monitoring.coreos.com", "--wait=true", timeout=120)


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory):
    monitors = get("servicemonitors", ns=OPERATOR_NS).get("items", []) + get("servicemonitors").get("items", [])
    names = sorted(m["metadata"]["name"] for m in monitors)
    assert names == ["slurm-controller", "slurm-operator"], names
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text(json.dumps({"global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
                                  "scrape_configs": scrape_configs(monitors)}))
    check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = (work / "prometheus.log").open("w")
    server = subprocess.Popen(
        [shutil.which("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        p = Prometheus(f"http://127.0.0.1:{port}")
        wait_until("Prometheus to answer", p.answers, 60,
                   lambda: (work / "prometheus.log").read_text())
        yield p
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


def test_prometheus_finds_and_scrapes_every_endpoint_through_the_servicemonitors(prometheus):
    def all_up():
        targets = prometheus.targets()
        paths = sorted(urllib.parse.urlparse(t["scrapeUrl"]).path for t in targets)
        if paths == sorted(["/metrics"] + SLURMCTLD_PATHS) and all(t["health"] == "up" for t in targets):
            return targets
        return None

    targets = wait_until("Prometheus to scrape the operator and slurmctld's four endpoints", all_up, 120,
                         lambda: json.dumps(prometheus.targets(), indent=1))
    for t in targets:
        assert t["labels"]["namespace"] in (NS, OPERATOR_NS), t["labels"]
        assert t["labels"]["pod"], t["labels"]


def test_every_exposed_metric_passes_promtool(prometheus):
    problems = {}
    for t in prometheus.targets():
        with urllib.request.urlopen(t["scrapeUrl"], timeout=10) as r:
            body = r.read()
        check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
        if check.returncode != 0 or check.stdout.strip() or check.stderr.strip():
            problems[t["scrapeUrl"]] = (check.stdout + check.stderr).decode()
    assert not problems, json.dumps(problems, indent=1)


def test_prometheus_answers_with_the_clusters_state_and_the_operators_work(prometheus):
    job = submit("--wrap", "sleep 1")
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60, cluster_state)

    def series(expr: str):
        return prometheus.query(expr) or None

    # Two idle Slurm nodes as slurmctld counts them, reconciles the operator did, its Slurm REST calls.
    wait_until("slurmctld's node metrics", lambda: series('{__name__=~"slurm_node.*",job=~".*slurm-controller.*"}'),
               60, lambda: json.dumps(prometheus.targets(), indent=1))
    reconciles = wait_until("the operator's reconciles",
                            lambda: series('sum by (controller) (controller_runtime_reconcile_total)'), 60)
    assert {r["metric"]["controller"] for r in reconciles} >= {"nodeset", "controller"}, reconciles
    assert series('sum(up) == 5'), prometheus.query("up")
    # The NodeSet as the operator counts it: 2 wanted, 2 ready, 2 idle Slurm nodes, Ready True.
    for expr in (f'tightrope_nodeset_desired_replicas{{nodeset="{NODESET}"}} == 2',
                 f'tightrope_nodeset_ready_replicas{{nodeset="{NODESET}"}} == 2',
                 f'tightrope_nodeset_slurm_nodes{{nodeset="{NODESET}",state="idle"}} == 2',
                 f'tightrope_nodeset_condition{{nodeset="{NODESET}",type="Ready",status="True"}} == 1',
                 f'tightrope_nodeset_condition{{nodeset="{NODESET}",type="JobsConfined",status="False"}} == 1'):
        wait_until(expr, lambda: series(expr), 60, lambda: json.dumps(prometheus.query(
            f'{{__name__=~"tightrope_nodeset_.*",nodeset="{NODESET}"}}'), indent=1))
