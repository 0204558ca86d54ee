"""A real Prometheus for e2e files: the Prometheus Operator's kinds as bare CRDs, the scrape
jobs it would make of ServiceMonitors (Debian's Prometheus has no Kubernetes discovery, so the
test discovers the Endpoints and hands them over as static targets), and a client of the
server's HTTP API."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from harness import get, wait_until


def monitoring_crd(kind: str) -> dict:
    """A kind of the Prometheus Operator's API as its CRD serves it, without its schema: the
    operator and the charts only need the API to exist."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]}}


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
                        # job: the Service's name, as the Prometheus Operator names it.
                        groups.append({"targets": [f"{address['ip']}:{number}"],
                                       "labels": {"namespace": ns, "service": svc["metadata"]["name"],
                                                  "job": svc["metadata"]["name"],
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
                "honor_labels": endpoint.get("honorLabels", False),
                "relabel_configs": [{"action": r.get("action", "replace"), "source_labels": r.get("sourceLabels", []),
                                     "target_label": r.get("targetLabel", "")}
                                    for r in endpoint.get("relabelings", [])],
                "scrape_interval": "5s", "scrape_timeout": "4s",
                "static_configs": endpoint_targets(namespaces, spec["selector"]["matchLabels"], endpoint["port"]),
            })
    return jobs


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str):
        self.url = url
        self.started = time.time()

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

    def query_range(self, expr: str, start: float, end: float, step: float = 5) -> list[dict]:
        return self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=str(step))["result"]

    def targets(self) -> list[dict]:
        return self.api("targets", state="active")["activeTargets"]

    def rules(self) -> list[dict]:
        return [r for g in self.api("rules")["groups"] for r in g["rules"]]

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.api("alerts")["alerts"] if a["state"] == "firing"}


@contextlib.contextmanager
def running_prometheus(work: Path, config: dict, host: str = "127.0.0.1"):
    """A Prometheus server with `config` on a free port of `host`, stopped on exit; yields its
    client. promtool checks the configuration first."""
    path = work / "prometheus.yml"
    path.write_text(json.dumps(config))
    check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port(host)
    log = (work / "prometheus.log").open("w")
    server = subprocess.Popen(
        [shutil.which("prometheus"), f"--config.file={path}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address={host}:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        p = Prometheus(f"http://{host}:{port}")
        wait_until("Prometheus to answer", p.answers, 60, lambda: (work / "prometheus.log").read_text())
        yield p
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()
