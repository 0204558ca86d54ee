"""Metrics, scraped for real: a Prometheus server (Debian's) on the host scrapes the operator's,
the webhook's and slurmctld's endpoints, found through their ServiceMonitors' selectors, and
answers queries over what it scraped; every endpoint's exposition passes `promtool check
metrics`. The chart's PrometheusRule is loaded into the same Prometheus and its dashboard's
queries are asked of it after a workload: every panel shows series, every rule reads series that
exist, and alerts caused on purpose fire. Runs after test_site.py, on the bed's node."""

from __future__ import annotations

import json
import re
import time
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import dashboard_plot
from harness import (ENV, NODESET, NS, OPERATOR_NS, RELEASE, cluster_state, get, helm, install_cluster,
                     install_operator, job_state, kubectl, node_states, slurm, submit, wait_until)
from monitoring import monitoring_crd, running_prometheus, scrape_configs


MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")
# The operator's release with its ServiceMonitors, rules and dashboards; two alerts made to fire
# here: a drain held for 10 s, and a certificate (valid ten years) expiring within a hundred.
OPERATOR_VALUES = ("operator.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
                   "monitoring.dashboards.enabled=true", "monitoring.prometheusRule.drainStuckFor=10s",
                   "monitoring.prometheusRule.certificateExpiryDays=36500")

METRICS_VALUES = {"controller": {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True}}}}
SLURMCTLD_PATHS = ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler"]
# A HealthCheck the workers pass, so that the health rules' series exist (every step, 0 here).
HEALTH_CHECK = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
                "metadata": {"name": "metrics", "namespace": NS},
                "spec": {"nodeSetSelector": {}, "passive": {"checks": ["mounts"]},
                         "remediation": {"replace": False}}}


@pytest.fixture(scope="module")
def cluster():
    for kind in MONITORING_KINDS:
        kubectl("apply", "-f", "-", stdin=json.dumps(monitoring_crd(kind)))
        kubectl("wait", "--for=condition=Established", f"crd/{kind.lower()}s.monitoring.coreos.com",
                "--timeout=60s")
    install_operator(*OPERATOR_VALUES)
    install_cluster("metrics", METRICS_VALUES)
    kubectl("apply", "-f", "-", stdin=json.dumps(HEALTH_CHECK))
    wait_until("sinfo to show 2 idle workers",
               lambda: list(node_states().values()) == ["idle", "idle"], 420, cluster_state, period=5)
    yield
    kubectl("-n", NS, "delete", "healthcheck.tightrope.slurm.net", "metrics", "--ignore-not-found", check=False)
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)
    for kind in MONITORING_KINDS:
        kubectl("delete", "crd", f"{kind.lower()}s.monitoring.coreos.com", "--wait=true", timeout=120)


@pytest.fixture(scope="module")
def prometheus(cluster, tmp_path_factory):
    monitors = get("servicemonitors", ns=OPERATOR_NS).get("items", []) + get("servicemonitors").get("items", [])
    names = sorted(m["metadata"]["name"] for m in monitors)
    assert names == ["slurm-controller", "slurm-operator", "slurm-operator-webhook"], names
    work = tmp_path_factory.mktemp("prometheus")
    # The chart's PrometheusRule as the Prometheus Operator hands it over: its groups in a file.
    rule_objects = get("prometheusrules", ns=OPERATOR_NS).get("items", [])
    assert [r["metadata"]["name"] for r in rule_objects] == ["slurm-operator"], rule_objects
    rules = work / "rules.yml"
    rules.write_text(json.dumps({"groups": rule_objects[0]["spec"]["groups"]}))
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    config = {"global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
              "rule_files": [str(rules)], "scrape_configs": scrape_configs(monitors)}
    with running_prometheus(work, config) as p:
        yield p


def test_prometheus_finds_and_scrapes_every_endpoint_through_the_servicemonitors(prometheus):
    def all_up():
        targets = prometheus.targets()
        paths = sorted(urllib.parse.urlparse(t["scrapeUrl"]).path for t in targets)
        # Both operators (the leader and its standby) and the webhook.
        if paths == sorted(["/metrics"] * 3 + SLURMCTLD_PATHS) and all(t["health"] == "up" for t in targets):
            return targets
        return None

    targets = wait_until("Prometheus to scrape two operators, the webhook and slurmctld's four endpoints", all_up, 120,
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
    # Two operators (the leader and its standby), the webhook, slurmctld's four endpoints.
    assert series('sum(up) == 7'), prometheus.query("up")
    # The NodeSet as the operator counts it: 2 wanted, 2 ready, 2 idle Slurm nodes, Ready True.
    for expr in (f'tightrope_nodeset_desired_replicas{{nodeset="{NODESET}"}} == 2',
                 f'tightrope_nodeset_ready_replicas{{nodeset="{NODESET}"}} == 2',
                 f'tightrope_nodeset_slurm_nodes{{nodeset="{NODESET}",state="idle"}} == 2',
                 f'tightrope_nodeset_condition{{nodeset="{NODESET}",type="Ready",status="True"}} == 1',
                 f'tightrope_nodeset_condition{{nodeset="{NODESET}",type="JobsConfined",status="False"}} == 1'):
        wait_until(expr, lambda: series(expr), 60, lambda: json.dumps(prometheus.query(
            f'{{__name__=~"tightrope_nodeset_.*",nodeset="{NODESET}"}}'), indent=1))


# What a dashboard's variables stand for when its queries are asked directly.
DASHBOARD_VARIABLES = {"$namespace": ".*", "$__rate_interval": "1m", "$slurmctld_job": ".+-controller"}
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                "group_right", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside strings, label matchers,
    ranges and grouping lists that are not functions, keywords or numbers."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare):
        rest = bare[m.end():].lstrip()
        if rest.startswith("(") or m.group() in PROMQL_WORDS or bare[m.start() - 1:m.start()].isdigit():
            continue
        names.add(m.group())
    return names


def dashboards() -> list[dict]:
    """Every dashboard the operator's chart installed."""
    maps = get("configmaps", ns=OPERATOR_NS)["items"]
    found = [json.loads(text) for m in maps if m["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
             for text in m.get("data", {}).values()]
    assert found, "no ConfigMap labelled grafana_dashboard=1"
    return found


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, query) of every panel of every dashboard, with its variables filled in."""
    queries = []
    for dashboard in dashboards():
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"]
                for variable, value in DASHBOARD_VARIABLES.items():
                    expr = expr.replace(variable, value)
                assert "$" not in expr, f"{panel['title']}: a variable the test does not know: {expr}"
                queries.append((panel["title"], expr))
    return queries


def test_every_dashboard_panel_and_rule_reads_live_series_and_caused_alerts_fire(prometheus):
    worker = sorted(node_states())[0]
    # A workload that gives every panel something to show: a job running on each worker, one
    # waiting for Resources and one held, a drained node (the drain alert's 10 s pass).
    jobs = [submit("--exclusive", "-N1", "--wrap", "sleep 300") for _ in range(3)]
    jobs.append(submit("--hold", "--wrap", "true"))
    try:
        wait_until("two jobs running and two pending",
                   lambda: sorted(job_state(j) for j in jobs) == ["PENDING", "PENDING", "RUNNING", "RUNNING"],
                   60, cluster_state)
        slurm("scontrol", "update", f"nodename={worker}", "state=drain", "reason=metrics-e2e")

        def dead_panels():
            dead = [f"{title}: {expr}" for title, expr in dashboard_queries() if not prometheus.query(expr)]
            return None if dead else True

        wait_until("every dashboard panel to show series", dead_panels, 120,
                   lambda: "\n".join(f"{t}: {e}" for t, e in dashboard_queries() if not prometheus.query(e)))

        # Every rule is evaluated without error, and every metric it reads has series.
        # "0001-01-01..." is Prometheus' time of a rule never evaluated.
        rules = wait_until("Prometheus to evaluate every rule",
                           lambda: (r := prometheus.rules()) and all(
                               not x["lastEvaluation"].startswith("0001") for x in r) and r, 60)
        broken = [f"{r['name']}: {r.get('lastError')}" for r in rules if r["health"] != "ok"]
        assert not broken, broken
        missing = {f"{r['name']}: {name}" for r in rules for name in metric_names(r["query"])
                   if not prometheus.query(f'count({{__name__="{name}"}})')}
        assert not missing, sorted(missing)
        expected = {"SlurmNodeDrainStuck", "SlurmOperatorWebhookCertificateExpiring"}
        wait_until(f"alerts {sorted(expected)} to fire", lambda: prometheus.firing() >= expected, 90,
                   lambda: json.dumps(prometheus.api("alerts"), indent=1))
        # Nothing else fires on a healthy cluster.
        assert prometheus.firing() == expected, prometheus.firing()
        pending = prometheus.query(f'tightrope_slurm_jobs{{state="pending",namespace="{NS}"}}')
        reasons = {p["metric"]["reason"] for p in pending}
        # The job behind the two running ones waits for a node: Slurm's scheduler says Resources,
        # or Priority when its pass ranks the job behind another pending one (the held one).
        assert "JobHeldUser" in reasons and reasons & {"Resources", "Priority"}, pending
        # What the dashboard shows of this file's run, drawn from the same queries.
        picture = Path(ENV["TESTBED_DIR"]) / "dashboard.svg"
        picture.write_text(dashboard_plot.render(dashboards()[0], prometheus.query_range, prometheus.started,
                                                 time.time(), DASHBOARD_VARIABLES))
        print(f"\ndashboard drawn: {picture}")
    finally:
        slurm("scontrol", "update", f"nodename={worker}", "state=resume", check=False)
        slurm("scancel", *jobs, check=False)
