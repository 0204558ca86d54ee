"""End to end on three Kubernetes Nodes (scripts/testbed up --with-nodes 3): what a single Node
cannot show. Jobs across Nodes, a rolling update and a scale-in with a job on every Node,
`kubectl drain` against a running job, a Node that loses power with a job on it, a Node cut off
from the network and plugged back, a worker that fails its health checks healed on another Node,
DaemonSet mode and NVLink cliques made of real Nodes' labels.

The control plane of the cluster (the operator, its webhook, slurmctld, slurmrestd, the login
pod) runs on the first Node, labelled as a site labels its service nodes; the workers may run
anywhere. The Node faults (power-off, cut) are the bed's own (docs/testbed.md); CTest's fixture
brings the bed up and destroys it around this file. The steps build on each other in file order.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness import (ENV, HOST, NODESET, NS, OPERATOR_NS, bed_command, cluster_state, controllers_up, drain_reason,
                     get, health_report, helm, install_cluster, install_operator, job_state, kubectl, node_states,
                     nodeset_condition, placement, slurm, submit, wait_until, workers)

NODES = ENV["TESTBED_NODES"].split(",")
INFRA_NODE = NODES[0]
INFRA = {"kubernetes.io/os": "linux", "tightrope.test/role": "infra"}
# Slurm's verdict on a node it cannot reach, in 30 s rather than its default 300 s, as a site
# with short jobs sets it; the test waits on both sides' real timers.
CONTROLLER_CONF = "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSlurmdTimeout=30\n"


def node_of(pod: dict) -> str:
    return pod["spec"].get("nodeName", "")


def idle_workers(count: int):
    """A probe: the placement once `count` workers run on `count` different Nodes, all idle."""
    def probe():
        where = placement()
        states = node_states()
        if len(where) == count and len(set(where.values())) == count and \
                sorted(states) == sorted(where) and all(s == "idle" for s in states.values()):
            return where
        return None
    return probe


def values(replicas: int) -> dict:
    return {
        "controller": {"extraConf": CONTROLLER_CONF, "podSpec": {"nodeSelector": INFRA}},
        "restapi": {"podSpec": {"nodeSelector": INFRA}},
        "loginsets": {"slinky": {"podSpec": {"nodeSelector": INFRA}}},
        "nodesets": {"slinky": {"replicas": replicas, "oversubscribeNode": False}},
    }


def slurmd_tasks(hostname: str) -> dict[str, int]:
    """Kubernetes Node -> how many slurmd containers of the worker whose Slurm node is `hostname`
    run there, as each Node's containerd says (one powered off answers nothing)."""
    pod = f"{NODESET}-{hostname.removeprefix(HOST)}"
    out = {}
    for node, address in zip(NODES, ENV["CONTAINERD_ADDRESSES"].split(",")):
        ctr = ["ctr", "--address", address, "-n", "k8s.io"]
        tasks = subprocess.run(ctr + ["tasks", "ls"], capture_output=True, text=True, timeout=30)
        if tasks.returncode:
            continue
        running = {line.split()[0] for line in tasks.stdout.splitlines()[1:] if "RUNNING" in line}
        count = 0
        for cid in running:
            info = subprocess.run(ctr + ["containers", "info", cid], capture_output=True, text=True, timeout=30)
            labels = json.loads(info.stdout).get("Labels", {}) if info.returncode == 0 else {}
            if labels.get("io.kubernetes.container.name") == "slurmd" and \
                    labels.get("io.kubernetes.pod.name") == pod:
                count += 1
        if count:
            out[node] = count
    return out


def slurm_node_records(hostname: str) -> list[str]:
    out = slurm("scontrol", "show", "node", hostname, "-o", check=False)
    return [line for line in out.splitlines() if line.startswith(f"NodeName={hostname} ")]


# --------------------------------------------------------------------------------------------


def slurm_node_labels() -> dict[str, str]:
    out = kubectl("get", "nodes", "-o", "json").stdout
    return {n["metadata"]["name"]: n["metadata"]["labels"]["slinky.slurm.net/slurm-nodename"]
            for n in json.loads(out)["items"] if "slinky.slurm.net/slurm-nodename" in n["metadata"].get("labels", {})}


def test_three_workers_run_on_three_nodes_and_a_job_spans_them():
    assert len(NODES) == 3, NODES
    kubectl("label", "node", INFRA_NODE, "tightrope.test/role=infra", "--overwrite")
    install_operator(*[f"nodeSelector.{k.replace('.', chr(92) + '.')}={v}" for k, v in INFRA.items()])
    for p in get("pods", ns=OPERATOR_NS).get("items", []):
        assert node_of(p) == INFRA_NODE, (p["metadata"]["name"], node_of(p))
    install_cluster("nodes", values(3))
    where = wait_until("3 idle workers on 3 Nodes", idle_workers(3), 420, cluster_state, period=5)
    assert sorted(where.values()) == sorted(NODES), where
    out = slurm("srun", "-N3", "hostname", timeout=90)
    assert sorted(out.split()) == sorted(where), out
    # Each Node runs one worker: it carries that worker's Slurm name, as slurm-bridge reads it.
    wait_until("each Node labelled with its worker's Slurm node", lambda: slurm_node_labels() == {
        n: h for h, n in where.items()}, 30, cluster_state)


def test_a_rolling_update_with_a_job_on_every_node_kills_none():
    before = {p["metadata"]["uid"] for p in workers()}
    jobs = {host: submit("-w", host, "--time=3", "--wrap", "sleep 40") for host in placement()}
    wait_until("a job running on every worker", lambda: all(job_state(j) == "RUNNING" for j in jobs.values()),
               60, cluster_state)
    kubectl("-n", NS, "patch", "nodeset", NODESET, "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/slurmd/image", "value": "localhost/tightrope/slurmd:26.05-b"}]))

    def rolled():
        pods = workers()
        return len(pods) == 3 and not ({p["metadata"]["uid"] for p in pods} & before) and all(
            p["spec"]["containers"][0]["image"].endswith(":26.05-b") for p in pods) and idle_workers(3)()

    wait_until("every worker replaced with the new image, idle, one per Node", rolled, 420, cluster_state,
               period=5)
    assert {h: job_state(j) for h, j in jobs.items()} == {h: "COMPLETED" for h in jobs}


def test_a_scale_in_with_a_job_on_every_node_kills_none():
    jobs = {host: submit("-w", host, "--time=3", "--wrap", "sleep 30") for host in placement()}
    wait_until("a job running on every worker", lambda: all(job_state(j) == "RUNNING" for j in jobs.values()),
               60, cluster_state)
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=2")
    draining = wait_until("one worker to drain", lambda: [h for h, s in node_states().items()
                                                          if s in ("drng", "drain")], 60, cluster_state)
    assert len(draining) == 1, draining
    assert job_state(jobs[draining[0]]) == "RUNNING"  # drained, not killed
    wait_until("two workers left, idle", idle_workers(2), 240, cluster_state, period=5)
    assert {h: job_state(j) for h, j in jobs.items()} == {h: "COMPLETED" for h in jobs}
    # The Node of the worker that went no longer names it.
    wait_until("the gone worker's Node label to go", lambda: slurm_node_labels() == {
        n: h for h, n in placement().items()}, 30, cluster_state)


def test_kubectl_drain_waits_for_the_job_and_the_pod_comes_back_on_another_node():
    """kubectl drain evicts through the eviction API: the PodDisruptionBudget over pods with
    work refuses while the job runs, the cordon has drained the Slurm node first, and once the
    job is done the pod goes and comes back on the free Node."""
    where = placement()
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    job = submit("-w", host, "--time=3", "--wrap", "sleep 45")
    wait_until(f"job {job} running", lambda: job_state(job) == "RUNNING", 60, cluster_state)
    wait_until(f"{host}'s pod protected", lambda: any(
        p["metadata"].get("labels", {}).get("nodeset.slinky.slurm.net/pod-protect") == "true"
        for p in workers() if p["spec"]["hostname"] == host), 60, cluster_state)
    drain = subprocess.Popen([ENV["KUBECTL"], "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
                              "--timeout=240s"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(f"{host} drained in Slurm", lambda: node_states().get(host) in ("drng", "drain"), 60,
                   cluster_state)
        time.sleep(10)  # the eviction is retried meanwhile: the pod must still be there
        assert job_state(job) == "RUNNING"
        assert [p for p in workers() if p["spec"]["hostname"] == host and node_of(p) == node and
                "deletionTimestamp" not in p["metadata"]], cluster_state()
        wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 90, cluster_state)
        output, _ = drain.communicate(timeout=240)
        assert drain.returncode == 0, output
        assert "disruption budget" in output, output  # the eviction was refused while the job ran
        # The NodeSet makes its lowest missing ordinal again, which is the evicted one only if
        # the scale-in before took the highest (Slinky's order takes the earliest job deadline
        # first, and the jobs there end a second apart or not): two workers, none on the Node.
        wait_until("a worker back on another Node", lambda: (w := idle_workers(2)()) and
                   node not in w.values() and w, 240, cluster_state, period=5)
    finally:
        if drain.poll() is None:
            drain.kill()
        kubectl("uncordon", node)


def test_a_node_that_loses_power_has_its_job_requeued_and_its_pod_replaced_with_no_human():
    where = placement()
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    other = next(h for h in where if h != host)
    # Runs until its node dies; its second run (Slurm's requeue) ends at once.
    job = submit("-w", host, "--requeue", "--wrap",
                 'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 5; else sleep 900; fi')
    survivor = submit("-w", other, "--time=5", "--wrap", "sleep 90")  # outlives Slurm's verdict (30-50 s)
    wait_until("both jobs running", lambda: job_state(job) == job_state(survivor) == "RUNNING", 60,
               cluster_state)
    lost_uid = next(p["metadata"]["uid"] for p in workers() if p["spec"]["hostname"] == host)
    t0 = time.monotonic()
    bed_command("node", "power-off", node)
    try:
        wait_until(f"Slurm to mark {host} DOWN", lambda: node_states().get(host, "").startswith("down"), 150,
                   cluster_state, period=3)
        down_after = time.monotonic() - t0
        wait_until(f"the lost pod {host} replaced on another Node", lambda: (w := placement()).get(host) not in
                   (None, node) and lost_uid not in {p["metadata"]["uid"] for p in workers()}, 240,
                   cluster_state, period=3)
        replaced_after = time.monotonic() - t0
        events = kubectl("-n", NS, "get", "events", "--field-selector", "reason=NodeLost", "-o", "json").stdout
        assert any(host in e["message"] and node in e["message"] for e in json.loads(events)["items"]), events
        wait_until(f"job {job} requeued and completed", lambda: job_state(job) == "COMPLETED", 420,
                   lambda: slurm("scontrol", "show", "job", job, check=False) + cluster_state(), period=5)
        restarts = slurm("scontrol", "show", "job", job, "-o")
        assert "Restarts=1" in restarts, restarts
        returned = kubectl("-n", NS, "get", "events", "--field-selector", "reason=SlurmNodeReturned", "-o",
                           "json").stdout
        assert any(host in e["message"] for e in json.loads(returned)["items"]), returned
        # The operator resumed the node once, and no write of it failed on the way.
        failed = kubectl("-n", NS, "get", "events", "--field-selector", "type=Warning", "-o", "json").stdout
        assert not [e["message"] for e in json.loads(failed)["items"]
                    if e["reason"] in ("SlurmUpdateFailed", "SyncFailed", "DeleteFailed") and
                    host in e["message"]], failed
        assert job_state(survivor) in ("RUNNING", "COMPLETED")  # the other Node's job lived on
        print(f"power-off of {node}: Slurm DOWN after {down_after:.0f} s, pod replaced after "
              f"{replaced_after:.0f} s")
    finally:
        bed_command("node", "power-on", node)
    wait_until(f"{node} Ready again", lambda: "Ready=True" in bed_command("node", "list").splitlines()[NODES.index(node)],
               120, cluster_state)
    wait_until(f"job {survivor} to complete", lambda: job_state(survivor) == "COMPLETED", 240, cluster_state)
    assert slurmd_tasks(host).get(node, 0) == 0  # nothing of the old pod came back with the power


def test_a_node_cut_off_and_plugged_back_leaves_one_slurm_node_and_one_slurmd_per_name():
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    other = next(h for h in where if h != host)
    survivor = submit("-w", other, "--time=5", "--wrap", "sleep 120")
    wait_until(f"job {survivor} running", lambda: job_state(survivor) == "RUNNING", 60, cluster_state)
    bed_command("node", "cut", node)
    try:
        wait_until(f"{host} replaced on another Node", lambda: placement().get(host) not in (None, node), 300,
                   cluster_state, period=3)
        wait_until(f"{host} idle again", lambda: node_states().get(host) == "idle", 120, cluster_state)
        # The cut-off Node's kubelet cannot hear that its pod was deleted: its slurmd still runs.
        assert slurmd_tasks(host).get(node, 0) == 1, slurmd_tasks(host)
    finally:
        bed_command("node", "reconnect", node)
    wait_until(f"the kubelet of {node} to stop the old slurmd",
               lambda: slurmd_tasks(host).get(node, 0) == 0, 120, cluster_state, period=3)
    for _ in range(10):  # and it stays that way: one slurmd and one record for the name
        assert sum(slurmd_tasks(host).values()) == 1, slurmd_tasks(host)
        assert len(slurm_node_records(host)) == 1, slurm_node_records(host)
        assert node_states().get(host) == "idle", node_states()
        time.sleep(3)
    job = submit("-w", host, "--time=2", "--wrap", "hostname")
    wait_until(f"job {job} on {host} to complete", lambda: job_state(job) == "COMPLETED", 90, cluster_state)
    wait_until(f"job {survivor} to complete", lambda: job_state(survivor) == "COMPLETED", 240, cluster_state)
    wait_until(f"{node} Ready again", lambda: "Ready=True" in bed_command("node", "list").splitlines()[NODES.index(node)],
               120, cluster_state)


HEALTH_CHECK = "healthcheck.tightrope.slurm.net"
UNHEALTHY = "tightrope.slurm.net/unhealthy"


def events(reason: str) -> list[str]:
    out = kubectl("-n", NS, "get", "events", "--field-selector", f"reason={reason}", "-o", "json").stdout
    return [e["message"] for e in json.loads(out)["items"]]


def times(reason: str, about: str) -> int:
    """How many times an event of `reason` whose message names `about` was recorded (repeats of
    one event are counted in it, not listed)."""
    out = kubectl("-n", NS, "get", "events", "--field-selector", f"reason={reason}", "-o", "json").stdout
    return sum(e.get("count") or 1 for e in json.loads(out)["items"] if about in e["message"])


def tainted(node: str) -> bool:
    doc = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
    return any(t["key"] == UNHEALTHY for t in doc.get("spec", {}).get("taints") or [])


def test_a_worker_that_fails_its_checks_is_drained_replaced_on_another_node_checked_and_undrained():
    """docs/health.md, remediation: a site check fails on one Node's worker while slurmrestd is
    away (nothing happens until it is back), then the worker is drained with the check's words, its
    job finishes, its Node is quarantined (quarantineAfter 1), the pod comes back on the free Node,
    is checked there and undrained. Then a check broken everywhere stops at maxUnhealthy."""
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    other = next(h for h in where if h != host)
    script = '#!/bin/sh\nif [ -e /run/fan-stopped ]; then echo "fan 3 stopped"; exit 1; fi\n'
    scripts = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site-health", "namespace": NS},
               "data": {"fans": script}}
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "workers", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 10, "timeoutSeconds": 5,
                                                          "scripts": {"configMapRef": {"name": "site-health"}}},
                      "remediation": {"maxUnhealthy": 1, "replace": True, "quarantineAfter": 1}}}
    restapi = get("restapis")["items"][0]["metadata"]["name"]
    try:
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(scripts))
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        uid = get(HEALTH_CHECK, "workers")["metadata"]["uid"]  # each report of its checks names it
        wait_until("both workers' checks to pass", lambda: all(
            health_report(h).get("ok") and health_report(h).get("source") == uid for h in where) and
            nodeset_condition(NODESET, "WorkersHealthy").get("status") == "True", 240, cluster_state, period=5)
        (failing,) = [p for p in workers() if p["spec"]["hostname"] == host]

        # slurmrestd away: the failure reaches Slurm, but the operator cannot see it and acts on
        # nothing; a job still lands on the node.
        kubectl("-n", NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":0}}')
        try:
            wait_until("the NodeSet to lose Slurm", lambda: nodeset_condition(NODESET, "SlurmReachable").get(
                "status") == "False", 120, cluster_state)
            kubectl("-n", NS, "exec", failing["metadata"]["name"], "-c", "slurmd", "--", "touch", "/run/fan-stopped")
            wait_until(f"the failing check in {host}'s report", lambda: health_report(host).get("ok") is False, 60,
                       cluster_state, period=3)
            job = submit("-w", host, "--time=3", "--wrap", "sleep 60")
            wait_until(f"job {job} running", lambda: job_state(job) == "RUNNING", 60, cluster_state)
            time.sleep(10)
            assert node_states()[host] in ("alloc", "mix"), node_states()
            assert not tainted(node)
            assert failing["metadata"]["uid"] in {p["metadata"]["uid"] for p in workers()}
        finally:
            kubectl("-n", NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":1}}')

        # Back: drained with the check's words; the job runs on; the Node is quarantined.
        wait_until(f"{host} drained for its check", lambda: node_states().get(host) in ("drng", "drain"), 120,
                   cluster_state, period=3)
        reason = drain_reason(host)
        assert reason.endswith("is pending termination for healthcheck: script:fans: fan 3 stopped"), reason
        assert job_state(job) == "RUNNING"
        wait_until(f"{node} quarantined", lambda: tainted(node), 60, cluster_state)
        assert any(host in m and node in m for m in events("HealthCheckFailed")), events("HealthCheckFailed")
        assert any(node in m for m in events("NodeQuarantined")), events("NodeQuarantined")
        # The HealthCheck's status follows from the pod's drain condition, written a moment later.
        wait_until(f"the HealthCheck to show {host} replacing", lambda: any(
            r["node"] == host and r["phase"] == "Replacing"
            for r in get(HEALTH_CHECK, "workers").get("status", {}).get("remediations", [])), 30,
            lambda: get(HEALTH_CHECK, "workers").get("status", {}))

        # The job ends; the pod goes and comes back on the free Node, checked there, then undrained.
        wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 150, cluster_state, period=5)
        t0 = time.monotonic()
        wait_until(f"{host} back on another Node", lambda: (w := placement()).get(host) not in (None, node) and
                   failing["metadata"]["uid"] not in {p["metadata"]["uid"] for p in workers()}, 240,
                   cluster_state, period=3)
        wait_until(f"{host} undrained once its new pod's checks pass", lambda: node_states().get(host) == "idle" and
                   health_report(host).get("ok"), 240, cluster_state, period=3)
        print(f"health remediation: {host} back in service {time.monotonic() - t0:.0f} s after its job ended")
        assert any(host in m for m in events("HealthCheckPassed")), events("HealthCheckPassed")
        assert [k for k in get(HEALTH_CHECK, "workers").get("status", {}).get("kubeNodes", [])
                if k["name"] == node and k["quarantined"]], get(HEALTH_CHECK, "workers").get("status")
        assert nodeset_condition(NODESET, "WorkersHealthy").get("status") == "True"

        # A check broken everywhere (drain only, so that nothing churns): one node drained, the other
        # waits, and the NodeSet and the HealthCheck say why.
        kubectl("-n", NS, "patch", HEALTH_CHECK, "workers", "--type=merge", "-p",
                '{"spec":{"remediation":{"replace":false}}}')
        scripts["data"]["fans"] = '#!/bin/sh\necho "the check itself is broken"; exit 1\n'
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(scripts))
        wait_until("the budget to stop the drains", lambda: nodeset_condition(NODESET, "WorkersHealthy").get(
            "reason") == "BudgetExhausted", 180, cluster_state, period=5)
        for _ in range(3):
            drained = [h for h, s in node_states().items() if s in ("drng", "drain")]
            assert len(drained) == 1, node_states()
            time.sleep(4)
        healthy = next(c for c in get(HEALTH_CHECK, "workers")["status"]["conditions"]
                       if c["type"] == "WorkersHealthy")
        assert healthy["reason"] == "BudgetExhausted", healthy
    finally:
        kubectl("-n", NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":1}}')
        kubectl("-n", NS, "delete", HEALTH_CHECK, "workers", "--ignore-not-found", check=False)
        kubectl("-n", NS, "delete", "configmap", "site-health", "--ignore-not-found", check=False)
        for n in NODES:  # the broken check's drain may have quarantined another
            kubectl("taint", "node", n, f"{UNHEALTHY}-", check=False)
            kubectl("annotate", "node", n, "tightrope.slurm.net/health-failures-", check=False)
    # Without a HealthCheck the checks' drains go.
    wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)


def test_a_fault_that_follows_the_pod_is_not_chased_from_node_to_node():
    """docs/health.md, remediation: a check that fails in one pod wherever it runs (here a site
    script that fails for its hostname) fails its replacement too. The first failure quarantines
    its Node (quarantineAfter 1: nothing yet tells the pod from the Node); the replacement on the
    free Node fails the same check, so the plan keeps it drained, replaces it no more and charges
    that Node with nothing."""
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    script = f'#!/bin/sh\nif [ "$(hostname)" = {host} ]; then echo "license server refuses {host}"; exit 1; fi\n'
    scripts = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site-health", "namespace": NS},
               "data": {"license": script}}
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "follows", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 10, "timeoutSeconds": 5,
                                                          "scripts": {"configMapRef": {"name": "site-health"}}},
                      "remediation": {"maxUnhealthy": 1, "replace": True, "quarantineAfter": 1}}}
    try:
        (first,) = [p for p in workers() if p["spec"]["hostname"] == host]
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(scripts))
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        t0 = time.monotonic()
        wait_until(f"{node} quarantined for {host}'s failure", lambda: tainted(node), 180, cluster_state, period=3)
        wait_until(f"{host} replaced on another Node", lambda: placement().get(host) not in (None, node) and
                   first["metadata"]["uid"] not in {p["metadata"]["uid"] for p in workers()}, 240,
                   cluster_state, period=3)
        (second,) = [p for p in workers() if p["spec"]["hostname"] == host]
        elsewhere = node_of(second)
        wait_until(f"the replacement on {elsewhere} kept drained, the fault following it", lambda: any(
            host in m and elsewhere in m and "the fault follows the pod" in m for m in events("HealthCheckFailed")),
            240, cluster_state, period=3)
        print(f"health remediation: the fault that follows {host} found on a second Node "
              f"{time.monotonic() - t0:.0f} s after the HealthCheck")
        for _ in range(4):  # nothing more happens: no new pod, no taint on the second Node
            time.sleep(5)
            assert second["metadata"]["uid"] in {p["metadata"]["uid"] for p in workers()}, workers()
            assert not tainted(elsewhere)
            assert node_states().get(host) in ("drng", "drain"), node_states()
        reason = drain_reason(host)
        assert reason == f"slurm-operator: healthcheck: script:license: license server refuses {host}", reason
        doc = json.loads(kubectl("get", "node", elsewhere, "-o", "json").stdout)
        assert "tightrope.slurm.net/health-failures" not in doc["metadata"].get("annotations", {}), doc["metadata"]
    finally:
        kubectl("-n", NS, "delete", HEALTH_CHECK, "follows", "--ignore-not-found", check=False)
        kubectl("-n", NS, "delete", "configmap", "site-health", "--ignore-not-found", check=False)
        for n in NODES:
            kubectl("taint", "node", n, f"{UNHEALTHY}-", check=False)
            kubectl("annotate", "node", n, "tightrope.slurm.net/health-failures-", check=False)
    wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)


ACTIVE = "tightrope.slurm.net/health-active"


def check_reservations() -> list[str]:
    out = slurm("scontrol", "show", "reservation", "--json", check=False)
    return [r["name"] for r in json.loads(out or "{}").get("reservations", []) if r["name"].startswith("tightrope-check-")]


def test_active_checks_run_one_idle_worker_at_a_time_in_its_own_reservation_and_a_floor_drains():
    """docs/health.md, active checks: each idle worker gets a Slurm job in a reservation of its node
    alone, at most maxConcurrent at once, which measures the CPUs and the memory bandwidth and
    reports them; the reservation goes once the report is in. A floor no node reaches drains one
    worker with the figure, and the budget keeps the other."""
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "active", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 10, "timeoutSeconds": 5},
                      "active": {"intervalSeconds": 600, "timeoutSeconds": 60, "maxConcurrent": 1},
                      "remediation": {"maxUnhealthy": 1, "replace": False}}}
    try:
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        uid = get(HEALTH_CHECK, "active")["metadata"]["uid"]
        seen_at_once = 0
        t0 = time.monotonic()

        def all_checked():
            nonlocal seen_at_once
            seen_at_once = max(seen_at_once, len(check_reservations()))
            reports = {h: health_report(h, ACTIVE) for h in where}
            return all(r.get("source", "").startswith(f"{uid}/") and r.get("ok") for r in reports.values()) and reports

        reports = wait_until("both workers' active checks to pass", all_checked, 300, cluster_state, period=2)
        print(f"active checks: both workers checked {time.monotonic() - t0:.0f} s after the HealthCheck; "
              + "; ".join(f"{h}: {r['measured']}" for h, r in sorted(reports.items())))
        assert seen_at_once <= 1, f"{seen_at_once} check reservations at once (maxConcurrent 1)"
        for r in reports.values():
            assert r["measured"]["cpuGflops"] > 0 and r["measured"]["memoryBandwidthMBps"] > 0, r
            assert {"check": "active:nccl", "message": "no GPU on this node"} in r["skipped"], r
        wait_until("the check reservations to go", lambda: not check_reservations(), 60, cluster_state)
        assert len([m for m in events("ActiveCheckStarted") if "HealthCheck active" in m]) >= 2
        assert sum(any(h in m for h in where) for m in events("ActiveCheckPassed")) >= 2
        assert all(s == "idle" for s in node_states().values()), node_states()

        # A floor no node reaches, set on the same HealthCheck: its checks changed, so every
        # worker is due again at once; the first checked is drained with the figure, the second
        # waits at the budget.
        first = {h: r["source"] for h, r in reports.items()}
        floor = {"spec": {"active": {"minMemoryBandwidthMBps": 100000000}}}
        t0 = time.monotonic()
        kubectl("-n", NS, "patch", HEALTH_CHECK, "active", "--type=merge", "-p", json.dumps(floor))
        wait_until("the budget to stop the drains", lambda: nodeset_condition(NODESET, "WorkersHealthy").get(
            "reason") == "BudgetExhausted", 300, cluster_state, period=3)
        print(f"active checks: a changed floor drained a worker {time.monotonic() - t0:.0f} s after the change")
        drained = [h for h, s in node_states().items() if s in ("drng", "drain")]
        assert len(drained) == 1, node_states()
        reason = drain_reason(drained[0])
        assert "healthcheck: active:memory-bandwidth: " in reason and reason.endswith("MB/s, below 100000000"), reason
        assert health_report(drained[0], ACTIVE)["source"] != first[drained[0]], "found under the new checks"

        # The floor lifted again (replace: false): the failure was found under other checks, so
        # the drained worker is checked again, its check started before its undrain, and passes.
        floor["spec"]["active"]["minMemoryBandwidthMBps"] = 0
        t0 = time.monotonic()
        kubectl("-n", NS, "patch", HEALTH_CHECK, "active", "--type=merge", "-p", json.dumps(floor))
        wait_until(f"{drained[0]} checked again and undrained", lambda: node_states().get(drained[0]) == "idle" and
                   health_report(drained[0], ACTIVE).get("ok") and
                   health_report(drained[0], ACTIVE).get("source") == first[drained[0]], 180, cluster_state, period=2)
        print(f"active checks: the floor lifted, {drained[0]} checked and back {time.monotonic() - t0:.0f} s after")
    finally:
        kubectl("-n", NS, "delete", HEALTH_CHECK, "active", "--ignore-not-found", check=False)
        for n in NODES:  # the floor's failures are kept on the Nodes, and may have quarantined one
            kubectl("taint", "node", n, f"{UNHEALTHY}-", check=False)
            kubectl("annotate", "node", n, "tightrope.slurm.net/health-failures-", check=False)
    # Without a HealthCheck the checks' drains go, and so does the reservation of a check that ran
    # as the HealthCheck went, once its job has ended.
    wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    wait_until("no check reservation left", lambda: not check_reservations(), 60, cluster_state)


def node_condition(node: str, status: str):
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    patch = {"status": {"conditions": [{"type": "GpuXidError", "status": status, "reason": "XidError",
                                        "message": "GPU 0: Xid 79, fallen off the bus",
                                        "lastTransitionTime": now, "lastHeartbeatTime": now}]}}
    kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", json.dumps(patch))


def test_a_node_condition_named_as_a_signal_quarantines_its_node_at_once_and_the_worker_moves():
    """docs/health.md, signals from outside: a Node condition the HealthCheck names (as a node
    problem detector or NVSentinel sets it) fails the worker on that Node as a check would; the
    Node is tainted at once (quarantineAfter 5 notwithstanding), and the idle worker is replaced
    on the free Node."""
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "signals", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 10, "timeoutSeconds": 5},
                      "signals": {"nodeConditions": ["GpuXidError"]},
                      "remediation": {"maxUnhealthy": 1, "replace": True, "quarantineAfter": 5}}}
    assert not tainted(node)
    try:
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        (before,) = [p for p in workers() if p["spec"]["hostname"] == host]
        t0 = time.monotonic()
        node_condition(node, "True")
        wait_until(f"{node} quarantined", lambda: tainted(node), 60, cluster_state)
        print(f"signal: {node} quarantined {time.monotonic() - t0:.0f} s after its condition")
        assert any(node in m and "the Node itself reports node-condition:GpuXidError" in m
                   for m in events("NodeQuarantined")), events("NodeQuarantined")
        wait_until(f"{host} back on another Node", lambda: placement().get(host) not in (None, node) and
                   before["metadata"]["uid"] not in {p["metadata"]["uid"] for p in workers()}, 240,
                   cluster_state, period=3)
        assert any(host in m and "node-condition:GpuXidError: GPU 0: Xid 79" in m
                   for m in events("HealthCheckFailed")), events("HealthCheckFailed")
        wait_until(f"{host} idle on its new Node", lambda: node_states().get(host) == "idle", 180, cluster_state,
                   period=3)
        print(f"signal: {host} back in service {time.monotonic() - t0:.0f} s after its Node's condition")
    finally:
        node_condition(node, "False")
        kubectl("-n", NS, "delete", HEALTH_CHECK, "signals", "--ignore-not-found", check=False)
        kubectl("taint", "node", node, f"{UNHEALTHY}-", check=False)
        kubectl("annotate", "node", node, "tightrope.slurm.net/health-failures-", check=False)
    wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)


def gpu_slice(node: str, taints: list[dict] | None = None) -> dict:
    """A ResourceSlice of two GPUs on `node`, as a DRA driver publishes it (the bed has no GPUs;
    the test is the driver, and the API server, the operator and Slurm the real consumers)."""
    devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(2)]
    if taints:
        devices[1]["taints"] = taints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.example.com"},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def test_a_device_taint_named_as_a_signal_moves_the_worker_whether_its_driver_or_a_rule_set_it():
    """docs/health.md, signals from outside: a DRA device taint the HealthCheck names, on a device
    of a worker's Node, fails the worker; the Node is quarantined at once and the worker moves.
    First the driver's own taint in its ResourceSlice, then a DeviceTaintRule an administrator
    writes for one device of another Node."""
    where = wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)
    host, node = next((h, n) for h, n in sorted(where.items()) if n != INFRA_NODE)
    check = {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
             "metadata": {"name": "device-signals", "namespace": NS},
             "spec": {"nodeSetSelector": {}, "passive": {"intervalSeconds": 10, "timeoutSeconds": 5},
                      "signals": {"deviceTaints": ["gpu.example.com/xid", "example.com/maintenance"]},
                      "remediation": {"maxUnhealthy": 1, "replace": True, "quarantineAfter": 5}}}
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "gpu-1-hbm"},
            "spec": {"taint": {"key": "example.com/maintenance", "value": "hbm-row-remap", "effect": "None"}}}
    slices = [gpu_slice(n) for n in NODES]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
    moved: list[str] = []

    def moves(host: str, node: str, before_uid: str, t0: float, what: str) -> str:
        verified = times("HealthCheckPassed", f"Undrained {host} ")
        wait_until(f"{node} quarantined", lambda: tainted(node), 60, cluster_state)
        print(f"device signal ({what}): {node} quarantined {time.monotonic() - t0:.0f} s after the taint")
        moved.append(node)
        wait_until(f"{host} on another Node", lambda: placement().get(host) not in (None, node) and
                   before_uid not in {p["metadata"]["uid"] for p in workers()}, 240, cluster_state, period=3)
        wait_until(f"{host} idle on its new Node", lambda: node_states().get(host) == "idle", 180, cluster_state,
                   period=3)
        print(f"device signal ({what}): {host} back in service {time.monotonic() - t0:.0f} s after the taint")
        # The new pod was held until its own checks passed: the old pod's preStop kept the reason.
        assert times("HealthCheckPassed", f"Undrained {host} ") > verified, events("HealthCheckPassed")
        return placement()[host]

    try:
        kubectl("-n", NS, "apply", "-f", "-", stdin=json.dumps(check))
        # As at a site, where the HealthCheck is older than the fault: its checks are in the
        # ConfigMap a replacement mounts as it starts (one made before would wait for the
        # kubelet's refresh, up to a minute, to be checked).
        uid = get(HEALTH_CHECK, "device-signals")["metadata"]["uid"]
        wait_until("the checks in the NodeSet's ConfigMap", lambda: uid in get(
            "configmaps", f"{NODESET}-health").get("data", {}).get("checks.json", ""), 60, cluster_state)
        (before,) = [p for p in workers() if p["spec"]["hostname"] == host]
        t0 = time.monotonic()
        kubectl("apply", "-f", "-", stdin=json.dumps(gpu_slice(node, [
            {"key": "gpu.example.com/xid", "value": "79", "effect": "NoSchedule"}])))
        new_node = moves(host, node, before["metadata"]["uid"], t0, "the driver's")
        assert any(host in m and "device-taint:gpu.example.com/xid: gpu.example.com gpu-1: 79 (NoSchedule)" in m
                   for m in events("HealthCheckFailed")), events("HealthCheckFailed")
        # The first Node repaired: its taint and quarantine gone, it takes the worker back when a
        # rule taints a device of the worker's new Node.
        kubectl("apply", "-f", "-", stdin=json.dumps(gpu_slice(node)))
        kubectl("taint", "node", node, f"{UNHEALTHY}-", check=False)
        kubectl("annotate", "node", node, "tightrope.slurm.net/health-failures-", check=False)
        (before,) = [p for p in workers() if p["spec"]["hostname"] == host]
        rule["spec"]["deviceSelector"] = {"driver": "gpu.example.com", "pool": new_node, "device": "gpu-1"}
        t0 = time.monotonic()
        kubectl("apply", "-f", "-", stdin=json.dumps(rule))
        moves(host, new_node, before["metadata"]["uid"], t0, "a DeviceTaintRule's")
        assert any(host in m and "by DeviceTaintRule gpu-1-hbm" in m
                   for m in events("HealthCheckFailed")), events("HealthCheckFailed")
    finally:
        kubectl("-n", NS, "delete", HEALTH_CHECK, "device-signals", "--ignore-not-found", check=False)
        kubectl("delete", "devicetaintrule", "gpu-1-hbm", "--ignore-not-found", check=False)
        for s in slices:
            kubectl("delete", "resourceslice", s["metadata"]["name"], "--ignore-not-found", check=False)
        for n in moved:
            kubectl("taint", "node", n, f"{UNHEALTHY}-", check=False)
            kubectl("annotate", "node", n, "tightrope.slurm.net/health-failures-", check=False)
    wait_until("two idle workers", idle_workers(2), 240, cluster_state, period=5)


def test_daemonset_mode_runs_one_worker_on_every_node_and_cliques_become_blocks():
    # The scaling mode changed on the NodeSet (as kubectl edit would): its pods are replaced,
    # drained first, by one on each Node.
    kubectl("-n", NS, "patch", "nodeset", NODESET, "--type=merge", "-p", '{"spec":{"scalingMode":"DaemonSet"}}')
    where = wait_until("a worker on each of the 3 Nodes", idle_workers(3), 420, cluster_state, period=5)
    out = slurm("srun", "-N3", "hostname", timeout=90)
    assert sorted(out.split()) == sorted(where), out
    # Two Nodes in one NVLink domain, the third in another, as GPU Feature Discovery labels them.
    cliques = {NODES[0]: "c0ffee00-0000-4000-8000-000000000001.1", NODES[1]: "c0ffee00-0000-4000-8000-000000000001.1",
               NODES[2]: "c0ffee00-0000-4000-8000-000000000002.7"}
    for node, clique in cliques.items():
        kubectl("label", "node", node, f"nvidia.com/gpu.clique={clique}", "--overwrite")
    try:
        def topology() -> str:
            return kubectl("-n", NS, "exec", "slurm-controller-0", "-c", "slurmctld", "--",
                           "scontrol", "show", "topology", "nvlink", check=False).stdout

        def blocks() -> dict[str, set[str]] | None:
            """Block name -> its Slurm nodes, once both cliques are blocks."""
            out = {}
            for line in topology().splitlines():
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                if fields.get("BlockName") in cliques.values() and fields.get("Nodes"):
                    out[fields["BlockName"]] = set(
                        slurm("scontrol", "show", "hostnames", fields["Nodes"]).split())
            return out if set(out) == set(cliques.values()) else None

        got = wait_until("both cliques as blocks of their Nodes' workers", blocks, 180,
                         lambda: topology() + cluster_state(), period=5)
        wanted = {c: {h for h, n in where.items() if cliques[n] == c} for c in set(cliques.values())}
        assert got == wanted, (got, where)
    finally:
        for node in cliques:
            kubectl("label", "node", node, "nvidia.com/gpu.clique-", check=False)


SLURM_UID = 401  # the images' slurm user, which slurmctld runs as


def test_a_backup_slurmctld_on_another_node_takes_over_when_the_primarys_node_loses_power():
    """controller.ha across Nodes: the two slurmctld pods on Nodes 2 and 3 (one per Node, the
    chart's anti-affinity), their state on one ReadWriteMany volume. The bed has no NFS: the
    volume is a directory of the host that every Node mounts (hostPath), as every machine of a
    site mounts the same export. The primary's Node loses power; the backup takes over from the
    state on the volume; the running job lives on and clients reach the new primary."""
    helm("uninstall", "slurm", "-n", NS, "--wait", "--timeout", "180s", timeout=240)
    wait_until("no worker left", lambda: not workers(), 180, cluster_state)
    shared = Path(ENV["TESTBED_DIR"]) / "node" / "shared" / "slurm-state"
    shutil.rmtree(shared, ignore_errors=True)
    shared.mkdir(parents=True)
    os.chown(shared, SLURM_UID, SLURM_UID)
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{ENV['TESTBED_NAME']}-shared-state"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "shared",
                  "persistentVolumeReclaimPolicy": "Retain",
                  "hostPath": {"path": str(shared), "type": "Directory"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "slurm-state", "namespace": NS},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "shared",
                  "volumeName": f"{ENV['TESTBED_NAME']}-shared-state",
                  "resources": {"requests": {"storage": "1Gi"}}}}]}))
    for node in NODES[1:]:
        kubectl("label", "node", node, "tightrope.test/slurmctld=yes", "--overwrite")
    overlay = values(1)
    overlay["controller"]["ha"] = {"enabled": True, "backups": 1}
    overlay["controller"]["persistence"] = {"enabled": True, "existingClaim": "slurm-state"}
    overlay["controller"]["podSpec"] = {"nodeSelector": {"kubernetes.io/os": "linux", "tightrope.test/slurmctld": "yes"}}
    overlay["controller"]["extraConf"] = CONTROLLER_CONF + "SlurmctldTimeout=10\n"
    # The worker on the first Node: the job must outlive the primary's Node.
    overlay["nodesets"]["slinky"]["podSpec"] = {"nodeSelector": INFRA}
    install_cluster("nodes-ha", overlay)
    wait_until("both slurmctlds up", lambda: list(controllers_up().values()) == ["UP", "UP"], 300,
               lambda: slurm("scontrol", "ping", check=False) + cluster_state(), period=5)
    (worker,) = wait_until("the worker idle", lambda: (w := idle_workers(1)()) and w, 240, cluster_state)
    primary = get("pod", "slurm-controller-0")
    backup = get("pod", "slurm-controller-1")
    assert node_of(primary) != node_of(backup) and INFRA_NODE not in (node_of(primary), node_of(backup)), \
        (node_of(primary), node_of(backup))
    job = submit("-w", worker, "--time=5", "--wrap", "sleep 75")
    wait_until(f"job {job} running", lambda: job_state(job) == "RUNNING", 60, cluster_state)
    started = slurm("scontrol", "show", "job", job, "-o")
    time.sleep(15)  # slurmctld saves a change to its state within seconds, batched
    t0 = time.monotonic()
    bed_command("node", "power-off", node_of(primary))
    try:
        wait_until("the primary unreachable, the backup answering",
                   lambda: controllers_up().get("slurm-controller-1") == "UP" and
                   controllers_up().get("slurm-controller-0") != "UP", 180,
                   lambda: slurm("scontrol", "ping", check=False), period=5)
        # The client Service follows: its one endpoint is the backup in control.
        def service_on_backup():
            pods = get("pods", ns=NS)["items"]
            active = [p["metadata"]["name"] for p in pods
                      if p["metadata"].get("labels", {}).get("controller.slinky.slurm.net/active") == "true"]
            slices = get("endpointslices", ns=NS)["items"]
            ready = [a for s in slices if s["metadata"].get("labels", {}).get("kubernetes.io/service-name") ==
                     "slurm-controller" for e in s.get("endpoints") or [] if e.get("conditions", {}).get("ready")
                     for a in e["addresses"]]
            return active == ["slurm-controller-1"] and ready == [get("pod", "slurm-controller-1")["status"]["podIP"]]

        wait_until("the backup labelled active, the client Service on it", service_on_backup, 180, cluster_state)
        print(f"power-off of {node_of(primary)}: the client Service on the backup after {time.monotonic() - t0:.0f} s")
        # Clients find the new primary: a new job is taken (by the backup once it has taken
        # control, SlurmctldTimeout later) and runs beside the old one.
        second = submit("-w", worker, "--time=2", "--wrap", "true")
        print(f"power-off of {node_of(primary)}: a new job taken after {time.monotonic() - t0:.0f} s")
        wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 240, cluster_state, period=5)
        wait_until(f"job {second} to complete", lambda: job_state(second) == "COMPLETED", 120, cluster_state)
        start = next(f for f in started.split() if f.startswith("StartTime="))
        assert start in slurm("scontrol", "show", "job", job, "-o"), "the job ran again"
    finally:
        bed_command("node", "power-on", node_of(primary))
    wait_until("both slurmctlds up again", lambda: list(controllers_up().values()) == ["UP", "UP"], 300,
               lambda: slurm("scontrol", "ping", check=False) + cluster_state(), period=5)
    for node in NODES[1:]:
        kubectl("label", "node", node, "tightrope.test/slurmctld-", check=False)


def test_the_cluster_goes_and_leaves_no_pod_on_any_node():
    helm("uninstall", "slurm", "-n", NS, "--wait", "--timeout", "180s", timeout=240)
    wait_until("no worker left", lambda: not workers(), 180, cluster_state)
    kubectl("-n", NS, "delete", "pvc", "slurm-state", "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "pv", f"{ENV['TESTBED_NAME']}-shared-state", "--ignore-not-found", "--wait=false", check=False)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)
    kubectl("label", "node", INFRA_NODE, "tightrope.test/role-", check=False)
