"""The fault campaign: on a bed of three Kubernetes Nodes with the operator and a Slurm cluster
installed with Helm (the control plane on the first Node, 5-6 workers over all three), each run
takes one random workload step on the worker NodeSet while real jobs run on every worker, injects
one random fault at a random moment (a killed or cut-off component, a whole Node losing power
or its network, or a worker whose health check starts failing), and then checks what the
operator promises a site:

  no job ended by the operator   every job of the run ends COMPLETED, never requeued; a job on a
                                 Node that was lost ends COMPLETED after Slurm's requeue
  no orphan                      every worker pod has its Slurm node and every Slurm node its
                                 pod; no reservation, no finalizer, no operator drain is left
  convergence                    the desired state is reached within --bound seconds of the
                                 fault clearing (the time it took is the run's figure)

Run i of a campaign draws from random.Random(f"{seed}:{i}"), so `--seed S --only i` replays it.
Results go to --out (bench/results/chaos.json), rewritten after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("TESTBED_NAME", "chaos")
sys.path.insert(0, str(REPO / "test/e2e"))
# The e2e harness reads the bed named by TESTBED_NAME when it is imported: main() imports it
# once it knows a bed is needed, so `--table` works with no bed up.
h = None

STEPS = ("scale_out", "scale_in", "rolling_update", "scheduled_update", "cordon", "nodeset_deletion")
FAULTS = ("kill_operator", "kill_webhook", "kill_slurmctld", "kill_slurmrestd", "slurmrestd_away",
          "apiserver_restart", "etcd_compaction", "lease_stolen", "slurmrestd_dropped",
          "node_power_loss", "node_cutoff", "health_failing")
# Faults of a whole Kubernetes Node (the bed's `node power-off`/`cut`): a worker Node, never the
# one the cluster's control plane runs on (INFRA), for 60-120 s, longer than either side takes to
# call it lost (SlurmdTimeout 30 s, the node lifecycle's 50 s).
NODE_FAULTS = ("node_power_loss", "node_cutoff")
INFRA_LABEL = ("tightrope.test/role", "infra")
SLURMD_TIMEOUT = 30
IMAGES = ("localhost/tightrope/slurmd:26.05", "localhost/tightrope/slurmd:26.05-b")
MIN_WORKERS, MAX_WORKERS = 5, 6  # over three Nodes: several workers share each
# Job states a run's jobs may pass through; any other end is a violation.
LIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"}
NFT_TABLE = "tightrope_chaos"
# health_failing: a site check (docs/health.md) that fails in a worker whose container holds the
# marker. The remediation is the convergence: drained, its job ends, the pod replaced (the new
# container has no marker), checked, undrained. A Node is never quarantined (quarantineAfter out
# of reach): a campaign's repeated faults would taint every Node and leave no room.
HEALTH_MARKER = "/run/chaos-fan-stopped"
HEALTH_SCRIPT = f'#!/bin/sh\nif [ -e {HEALTH_MARKER} ]; then echo "fan 3 stopped"; exit 1; fi\n'


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- What runs where ---------------------------------------------------------------------------


def pods(label_name: str, ns: str) -> list[dict]:
    return [p for p in h.get("pods", ns=ns).get("items", [])
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == label_name
            and "deletionTimestamp" not in p["metadata"]]


def pod(label_name: str, ns: str) -> dict:
    found = pods(label_name, ns)
    if not found:
        raise AssertionError(f"no {label_name} pod in {ns}")
    return found[0]


def operators() -> list[dict]:
    return pods("slurm-operator", h.OPERATOR_NS)


def lease() -> dict:
    return h.get("lease", "slurm-operator", h.OPERATOR_NS).get("spec", {})


def holding(spec: dict, ops: list[dict]) -> dict | None:
    """The operator pod the Lease names (a holder's identity begins with its pod's name)."""
    holder = spec.get("holderIdentity", "")
    return next((op for op in ops if holder.startswith(op["metadata"]["name"])), None)


def leader() -> dict:
    spec = lease()
    p = holding(spec, operators())
    if p is None:
        raise AssertionError(f"no operator pod holds the Lease (held by {spec.get('holderIdentity')!r})")
    return p


def pod_pids(uid: str) -> list[int]:
    """The host PIDs of a pod's processes: those whose cgroup is under the pod's."""
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text()
        except OSError:
            continue
        if any(m in cgroup for m in marks):
            pids.append(int(entry.name))
    return pids


def program_of(pid: int) -> str:
    try:
        argv0 = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""
    return argv0.rsplit("/", 1)[-1]


def kill_program(p: dict, program: str) -> str:
    """kill -9 of the program's main process in pod p (not a helper it forked: the one whose
    parent is not the same program). The kubelet restarts the container."""
    ns = p["metadata"]["namespace"]
    pids = [pid for pid in pod_pids(p["metadata"]["uid"]) if program_of(pid) == program]
    parents = {pid: int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
               for pid in pids}
    main = [pid for pid in pids if parents[pid] not in pids]
    assert main, f"no {program} process in {p['metadata']['name']}"
    restarts, _ = containers_of(p)
    os.kill(main[0], signal.SIGKILL)
    # The fault clears once Kubernetes has seen the death (a container restarted or not ready):
    # until then the pod's status still says Ready, and convergence would be read from it.
    name = p["metadata"]["name"]
    seen = lambda: (q := h.get("pod", name, ns)) and containers_of(q) != (restarts, True)  # noqa: E731
    h.wait_until(f"{name}'s kill seen", seen, 60, period=0.5)
    return f"{program} pid {main[0]} in {name}"


def containers_of(p: dict) -> tuple[int, bool]:
    """A pod's container restarts in all, and whether every container is ready."""
    statuses = p.get("status", {}).get("containerStatuses", [])
    return sum(c.get("restartCount", 0) for c in statuses), all(c.get("ready") for c in statuses)


def bed_pid(process: str) -> int:
    state = json.loads((Path(h.ENV["TESTBED_DIR"]) / "state.json").read_text())
    return int(state["procs"][process]["pid"])


def bed_up() -> None:
    """scripts/testbed up again: it starts whatever of the bed is not running."""
    h.bed_command("up")


def etcd(path: str, body: dict) -> dict:
    import urllib.request
    req = urllib.request.Request(h.ENV["ETCD_URL"] + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def nft_in_pod(uid: str, *script: str) -> None:
    """nft commands in the pod's network namespace (its sandbox's, kept across container
    restarts): nothing outside it is touched."""
    pid = pod_pids(uid)[0]
    h.run("nsenter", "-t", str(pid), "-n", "nft", *script)


# ---- Faults ------------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    duration: float = 0.0  # how long it lasts, for those that last
    detail: str = ""
    injected_at: float = 0.0
    cleared_at: float = 0.0
    error: str = ""
    node: str = ""  # a Node fault's Node
    pod: str = ""  # the pod of a killed program
    hosts: set = field(default_factory=set)  # the Slurm nodes whose pods ran there when it struck
    uid: str = ""  # health_failing: the failing pod, which must be replaced for the run to converge


def nodes() -> list[str]:
    return h.ENV["TESTBED_NODES"].split(",")


def infra_node() -> str:
    return nodes()[0]


def node_fault(f: Fault, rng: random.Random) -> None:
    """A worker Node loses power, or its cable, for f.duration; then it is back."""
    placement = h.placement()
    candidates = sorted({n for n in placement.values() if n and n != infra_node()})
    if not candidates:
        raise AssertionError(f"no worker on a Node other than {infra_node()}: {placement}")
    f.node = rng.choice(candidates)
    f.hosts = {host for host, n in placement.items() if n == f.node}
    off, on = ("power-off", "power-on") if f.kind == "node_power_loss" else ("cut", "reconnect")
    h.bed_command("node", off, f.node)
    try:
        time.sleep(f.duration)
    finally:
        h.bed_command("node", on, f.node)
    f.detail = f"{f.node} ({', '.join(sorted(f.hosts))}): {off} for {f.duration:.0f} s"


def inject(f: Fault, rng: random.Random) -> None:
    """Injects the fault and returns once it has cleared (f.cleared_at set)."""
    f.injected_at = time.monotonic()
    if f.kind in NODE_FAULTS:
        node_fault(f, rng)
    elif f.kind == "kill_operator":
        f.detail = kill_program(leader(), "slurm-operator")
    elif f.kind == "kill_webhook":
        f.detail = kill_program(pod("slurm-operator-webhook", h.OPERATOR_NS), "slurm-operator-webhook")
    elif f.kind == "kill_slurmctld":
        victim = pod("slurmctld", h.NS)
        f.pod = victim["metadata"]["name"]
        f.detail = kill_program(victim, "slurmctld")
    elif f.kind == "kill_slurmrestd":
        f.detail = kill_program(pod("slurmrestd", h.NS), "slurmrestd")
    elif f.kind == "slurmrestd_away":
        restapi = h.get("restapis")["items"][0]["metadata"]["name"]
        h.kubectl("-n", h.NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":0}}')
        try:
            time.sleep(f.duration)
        finally:
            h.kubectl("-n", h.NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":1}}')
        f.detail = f"RestApi {restapi} at 0 replicas for {f.duration:.0f} s"
    elif f.kind == "slurmrestd_dropped":
        uid = leader()["metadata"]["uid"]
        nft_in_pod(uid, "add", "table", "inet", NFT_TABLE)
        try:
            nft_in_pod(uid, "add", "chain", "inet", NFT_TABLE, "out",
                       "{ type filter hook output priority 0 ; }")
            nft_in_pod(uid, "add", "rule", "inet", NFT_TABLE, "out", "tcp", "dport", "6820", "drop")
            time.sleep(f.duration)
        finally:
            nft_in_pod(uid, "delete", "table", "inet", NFT_TABLE)
        f.detail = f"the operator's packets to port 6820 dropped for {f.duration:.0f} s"
    elif f.kind == "apiserver_restart":
        os.kill(bed_pid("kube-apiserver"), signal.SIGKILL)
        bed_up()
        f.detail = "kube-apiserver killed and started again"
    elif f.kind == "etcd_compaction":
        # Compacted at the newest revision, then kube-apiserver restarted: its watch cache starts
        # over, and every watch the operator resumes names a revision etcd no longer has (410).
        revision = etcd("/v3/kv/range", {"key": "AA=="})["header"]["revision"]
        etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        os.kill(bed_pid("kube-apiserver"), signal.SIGKILL)
        bed_up()
        f.detail = f"etcd compacted at revision {revision}, kube-apiserver started again"
    elif f.kind == "health_failing":
        candidates = sorted((p for p in h.workers() if "deletionTimestamp" not in p["metadata"] and
                             h.pod_condition(p, "Ready") == "True"), key=lambda p: p["metadata"]["name"])
        if not candidates:
            raise AssertionError("no Ready worker to fail a check on")
        victim = rng.choice(candidates)
        f.pod = victim["metadata"]["name"]
        f.uid = victim["metadata"]["uid"]
        f.hosts = {victim["spec"]["hostname"]}
        h.kubectl("-n", h.NS, "exec", f.pod, "-c", "slurmd", "--", "touch", HEALTH_MARKER)
        f.detail = f"the site's check fails on {f.pod} ({victim['spec']['hostname']})"
    elif f.kind == "lease_stolen":
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        h.kubectl("-n", h.OPERATOR_NS, "patch", "lease", "slurm-operator", "--type=merge", "-p", json.dumps(
            {"spec": {"holderIdentity": "chaos-intruder", "acquireTime": now, "renewTime": now,
                      "leaseDurationSeconds": 15}}))
        f.detail = "Lease slurm-operator taken by chaos-intruder, never renewed"
    f.cleared_at = time.monotonic()


# ---- The workload ------------------------------------------------------------------------------


@dataclass
class World:
    """What the cluster should become: the campaign's own record of the desired state."""
    replicas: int = MIN_WORKERS
    image: str = IMAGES[0]
    cordoned: str = ""  # the Node the cordon step holds
    operator_replicas: int = 1
    manifest: dict = field(default_factory=dict)


def nodeset() -> dict:
    return h.get("nodeset", h.NODESET)


def nodeset_gone() -> bool:
    """Gone as the API server says it (NotFound), not as an API server that is away would seem."""
    r = h.kubectl("-n", h.NS, "get", "nodeset", h.NODESET, "-o", "name", check=False)
    return r.returncode != 0 and "NotFound" in r.stderr


def persist(what: str, *kubectl_args: str, stdin: str | None = None, timeout: float = 180) -> None:
    """A write the campaign must make even while a fault has the API server or the webhook
    away: tried again every 2 s until it is taken."""
    h.wait_until(what, lambda: h.kubectl(*kubectl_args, stdin=stdin, check=False).returncode == 0, timeout,
                 period=2)


def patch_nodeset(patch: dict) -> None:
    persist("the NodeSet patched", "-n", h.NS, "patch", "nodeset", h.NODESET, "--type=merge", "-p",
            json.dumps(patch))


def step(kind: str, world: World, rng: random.Random) -> str:
    """Starts the workload step; what it waits for is part of convergence."""
    if kind == "scale_out":
        world.replicas += 1
        patch_nodeset({"spec": {"replicas": world.replicas}})
        return f"replicas {world.replicas - 1} -> {world.replicas}"
    if kind == "scale_in":
        world.replicas -= 1
        patch_nodeset({"spec": {"replicas": world.replicas}})
        return f"replicas {world.replicas + 1} -> {world.replicas}"
    if kind == "rolling_update":
        world.image = IMAGES[1 - IMAGES.index(world.image)]
        patch_nodeset({"spec": {"slurmd": {"image": world.image},
                                "updateStrategy": {"type": "RollingUpdate"}}})
        return f"slurmd image -> {world.image}"
    if kind == "scheduled_update":
        world.image = IMAGES[1 - IMAGES.index(world.image)]
        start = (datetime.now(timezone.utc) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch_nodeset({"spec": {"slurmd": {"image": world.image},
                                "updateStrategy": {"type": "ScheduledUpdate",
                                                   "scheduledUpdate": {"startTime": start, "duration": "15m"}}}})
        return f"slurmd image -> {world.image} in a window from {start}"
    if kind == "cordon":
        hold = rng.uniform(10, 30)
        node = world.cordoned = rng.choice(nodes())
        h.kubectl("cordon", node)
        threading.Timer(hold, lambda: persist("the node uncordoned", "uncordon", node)).start()
        return f"{node} cordoned for {hold:.0f} s"
    if kind == "nodeset_deletion":
        doc = nodeset()
        meta = doc["metadata"]
        world.manifest = {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "spec": doc["spec"],
                          "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}}
        h.kubectl("-n", h.NS, "delete", "nodeset", h.NODESET, "--wait=false")
        return "NodeSet deleted, made again once gone"
    raise ValueError(kind)


def finish_step(kind: str, world: World, deadline: float) -> None:
    """What the campaign itself does after a step: a deleted NodeSet is applied again once it
    is gone (with its jobs ended, as the operator must wait for them)."""
    if kind == "nodeset_deletion":
        h.wait_until("the NodeSet to be gone", nodeset_gone, max(10.0, deadline - time.monotonic()),
                     h.cluster_state, period=2)
        # create, not apply: an apply would also "succeed" on the old NodeSet still terminating.
        persist("the NodeSet made again", "create", "-f", "-", stdin=json.dumps(world.manifest))
    if kind == "scheduled_update":
        h.wait_until("every pod at the new image", lambda: pods_at(world.image),
                     max(10.0, deadline - time.monotonic()), h.cluster_state, period=2)
        patch_nodeset({"spec": {"updateStrategy": {"type": "RollingUpdate"}}})


def pods_at(image: str) -> bool:
    return all(p["spec"]["containers"][0]["image"] == image for p in h.workers())


# ---- Jobs --------------------------------------------------------------------------------------


class JobWatch:
    """Every job of the run, as slurmctld last showed it (polled in the background, so a job
    that has ended and been purged keeps its last state)."""

    def __init__(self) -> None:
        self.seen: dict[str, dict] = {}
        self.host: dict[str, str] = {}  # the Slurm node each job was sent to (sbatch -w)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.wait(3):
            self.poll()

    def poll(self) -> None:
        try:
            out = h.slurm("scontrol", "show", "job", "-o", check=False, timeout=20)
        except Exception:  # slurmctld or the login pod away: the next poll sees it
            return
        for line in out.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields.get("JobId") in self.seen:
                self.seen[fields["JobId"]] = fields

    def watch(self, job: str, host: str) -> None:
        self.seen[job] = {}
        self.host[job] = host

    def live(self) -> list[str]:
        return [j for j, f in self.seen.items() if not f or f.get("JobState") in LIVE_STATES]


def submit_jobs(rng: random.Random, jobs: JobWatch) -> None:
    """A job on every worker, 10-30 s each, running before the step begins."""
    for host in h.node_states():
        job = h.submit("-w", host, "--time=3", "--wrap", f"sleep {rng.randint(10, 30)}")
        jobs.watch(job, host)
    jobs.poll()
    h.wait_until("every job running", lambda: (jobs.poll(), all(
        f.get("JobState") == "RUNNING" for f in jobs.seen.values()))[1], 60, h.cluster_state, period=1)


# ---- The desired state -------------------------------------------------------------------------


def divergence(world: World) -> str:
    """What keeps the cluster from its desired state; "" once it is there."""
    ops = operators()
    if len(ops) != world.operator_replicas:
        return f"{len(ops)} operator pods, want {world.operator_replicas}"
    # An operator leads: a Ready pod holds the Lease and renews it. With more than one replica
    # a killed one may still be in the kubelet's back-off; the standby leading is what counts.
    spec = lease()
    leading = holding(spec, ops)
    if leading is None:
        return f"Lease held by {spec.get('holderIdentity')!r}"
    if h.pod_condition(leading, "Ready") != "True":
        return f"{leading['metadata']['name']} (holding the Lease) not Ready"
    renewed = datetime.strptime(spec.get("renewTime", "1970-01-01T00:00:00.000000Z"), "%Y-%m-%dT%H:%M:%S.%fZ")
    silent = (datetime.now(timezone.utc) - renewed.replace(tzinfo=timezone.utc)).total_seconds()
    if silent > spec.get("leaseDurationSeconds", 15):
        return f"Lease not renewed for {silent:.0f} s"
    if not nodeset():
        return "no NodeSet"
    workers = h.workers()
    if len(workers) != world.replicas:
        return f"{len(workers)} worker pods, want {world.replicas}"
    for p in workers:
        if "deletionTimestamp" in p["metadata"]:
            return f"{p['metadata']['name']} terminating"
        if h.pod_condition(p, "Ready") != "True":
            return f"{p['metadata']['name']} not Ready"
        if p["spec"]["containers"][0]["image"] != world.image:
            return f"{p['metadata']['name']} at {p['spec']['containers'][0]['image']}"
    for node in nodes():
        doc = h.get("node", node, ns="")
        if doc.get("spec", {}).get("unschedulable"):
            return f"{node} cordoned"
        ready = [c for c in doc.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        if not ready or ready[0]["status"] != "True":
            return f"{node} not Ready"
    states = h.node_states()
    hosts = sorted(p["spec"]["hostname"] for p in workers)
    if sorted(states) != hosts:
        return f"Slurm nodes {sorted(states)}, pods {hosts}"
    bad = {n: s for n, s in states.items() if s.rstrip("*") not in ("idle", "alloc", "mix")}
    if bad:
        return f"Slurm node states {bad}"
    if "No reservations" not in h.slurm("scontrol", "show", "reservation", check=False):
        return "a reservation is left"
    return ""


def orphans() -> list[str]:
    """What must never be left once the cluster has converged and the jobs have ended."""
    found = []
    for kind in ("pods", "nodesets"):
        for o in h.get(kind).get("items", []):
            if "deletionTimestamp" in o["metadata"]:
                found.append(f"{kind}/{o['metadata']['name']} stuck terminating "
                             f"(finalizers {o['metadata'].get('finalizers')})")
    reasons = h.slurm("sinfo", "-h", "-N", "-o", "%N|%E", check=False)
    # sinfo -N shows a node once per partition it is in.
    for line in dict.fromkeys(reasons.splitlines()):
        name, _, reason = line.partition("|")
        if "slurm-operator" in reason:
            found.append(f"Slurm node {name} still drained by the operator: {reason}")
    return found


# ---- A run -------------------------------------------------------------------------------------


def choose_step(rng: random.Random, world: World) -> str:
    steps = [s for s in STEPS if not (s == "scale_out" and world.replicas >= MAX_WORKERS)
             and not (s == "scale_in" and world.replicas <= MIN_WORKERS)]
    return rng.choice(steps)


def operator_restarts() -> int:
    """How often the kubelet has started the operators' containers again."""
    return sum(containers_of(p)[0] for p in operators())


def choose_fault(rng: random.Random) -> Fault:
    kind = rng.choice(FAULTS)
    duration = rng.uniform(30, 120) if kind in ("slurmrestd_away", "slurmrestd_dropped") else \
        rng.uniform(60, 120) if kind in NODE_FAULTS else 0.0
    return Fault(kind, duration)


def one_run(seed: str, index: int, world: World, bound: float, force_step: str = "", force_fault: str = "") -> dict:
    rng = random.Random(f"{seed}:{index}")
    kind = choose_step(rng, world)
    fault = choose_fault(rng)
    kind = force_step or kind
    if force_fault:
        fault.kind = force_fault
        fault.duration = fault.duration or (90.0 if force_fault in NODE_FAULTS else 30.0)
    delay = rng.uniform(0, 15)
    record = {"run": index, "seed": seed, "step": kind, "fault": fault.kind, "fault_delay_s": round(delay, 1),
              "violations": []}
    restarts_before = operator_restarts()
    jobs = JobWatch()
    submit_jobs(rng, jobs)
    jobs.thread.start()
    started = time.monotonic()
    record["step_detail"] = step(kind, world, rng)

    def fault_thread():
        time.sleep(delay)
        try:
            # Its own draws: the step's, in this thread meanwhile, stay as a replay makes them.
            inject(fault, random.Random(f"{seed}:{index}:fault"))
        except Exception as e:  # the fault itself failed: recorded, the run goes on
            fault.error = str(e)[-500:]
            fault.cleared_at = time.monotonic()

    t = threading.Thread(target=fault_thread, daemon=True)
    t.start()
    try:
        finish_step(kind, world, started + bound)
    except AssertionError as e:
        record["violations"].append(f"step did not finish: {str(e)[:300]}")
    t.join(timeout=max(1.0, started + bound + 150 - time.monotonic()))
    record["fault_detail"], record["fault_error"] = fault.detail, fault.error
    cleared = fault.cleared_at or time.monotonic()

    # Convergence: from the later of the fault's clearing and the step's start.
    since = max(cleared, started)
    last = "?"
    while time.monotonic() < since + bound:
        try:
            last = divergence(world)
            # The marker lives in the failing container: the run converges only once its pod is
            # replaced (drained, its job ended, a new pod checked and undrained).
            if not last and fault.uid and any(p["metadata"]["uid"] == fault.uid for p in h.workers()):
                last = f"{fault.pod} (failing its check) not replaced yet"
        except (AssertionError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
            last = f"not readable: {str(e)[:200]}"
        if not last:
            break
        time.sleep(2)
    if last:
        record["violations"].append(f"not converged {bound:.0f} s after the fault cleared: {last}")
    else:
        record["convergence_s"] = round(time.monotonic() - since, 1)

    # Every job of the run ends on its own (each sleeps at most 30 s), then is checked. One
    # requeued from a lost Node waits for its begin time first (Slurm holds a requeued job back
    # for a while): it gets longer.
    lost_jobs = fault.kind in NODE_FAULTS and any(jobs.host.get(j) in fault.hosts for j in jobs.seen)
    deadline = time.monotonic() + (360 if lost_jobs else 120)
    while jobs.live() and time.monotonic() < deadline:
        time.sleep(2)
    jobs.stop.set()
    jobs.poll()
    forgotten = jobs_slurmctld_forgot(fault)
    kept_hosts = {p["spec"].get("hostname", "") for p in h.workers()}
    for job, f in jobs.seen.items():
        state, restarts = f.get("JobState", "unknown"), f.get("Restarts", "0")
        # A job on a Node that was lost is Slurm's to requeue (JobRequeue): it must still end
        # COMPLETED, after its restart.
        lost = fault.kind in NODE_FAULTS and jobs.host.get(job) in fault.hosts
        if state != "COMPLETED" or (restarts != "0" and not lost):
            what = f"job {job} ended {state} (restarts {restarts}, reason {f.get('Reason', '?')}, " \
                   f"node {f.get('NodeList', '?')})"
            if job in forgotten:
                record.setdefault("slurm_forgot", []).append(what)
            elif lost and state == "PENDING" and f.get("Reason") == "BadConstraints" and \
                    jobs.host.get(job) not in kept_hosts:
                # Requeued by Slurm from the lost Node, pinned (-w) to a node the run's scale-in
                # or deletion has removed since: it can run nowhere, and Slurm says so.
                record.setdefault("pinned_to_removed", []).append(what)
            else:
                record["violations"].append(what)
    record["jobs"] = len(jobs.seen)
    # Only a kill of the operator should restart it: a lost Lease or an unreachable server
    # is lived through in the process.
    record["operator_restarts"] = operator_restarts() - restarts_before
    record["violations"] += orphans()
    record["duration_s"] = round(time.monotonic() - started, 1)
    return record


def settle(world: World) -> None:
    """Before the first run: the cluster as the campaign's World describes it."""
    doc = nodeset()
    world.replicas = doc["spec"].get("replicas", 1)
    world.replicas = min(max(world.replicas, MIN_WORKERS), MAX_WORKERS)
    if doc["spec"].get("replicas") != world.replicas:
        patch_nodeset({"spec": {"replicas": world.replicas}})
    world.image = doc["spec"]["slurmd"]["image"]
    h.wait_until("the cluster's desired state", lambda: not divergence(world), 300,
                 lambda: divergence(world) + "\n" + h.cluster_state(), period=3)


def install(operator_replicas: int) -> None:
    """The operator at its replicas, and the cluster unless a campaign installed it already: its
    own writes (replicas, images, a NodeSet applied again) own fields a Helm upgrade would
    conflict on. The operator's chart has no such writes."""
    key, value = INFRA_LABEL
    h.kubectl("label", "node", infra_node(), f"{key}={value}", "--overwrite")
    selector = {"kubernetes.io/os": "linux", key: value}
    h.install_operator(f"replicas={operator_replicas}",
                       *[f"nodeSelector.{k.replace('.', chr(92) + '.')}={v}" for k, v in selector.items()])
    if h.helm("status", h.RELEASE, "-n", h.NS, check=False).returncode != 0:
        # The control plane on the first Node, MIN_WORKERS workers wherever they fit (several on
        # a Node), Slurm's verdict on a silent node in SLURMD_TIMEOUT.
        h.install_cluster("chaos", {
            "controller": {"podSpec": {"nodeSelector": selector},
                           "extraConf": "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                                        f"SlurmdTimeout={SLURMD_TIMEOUT}\n"},
            "restapi": {"podSpec": {"nodeSelector": selector}},
            "loginsets": {"slinky": {"podSpec": {"nodeSelector": selector}}},
            "nodesets": {"slinky": {"replicas": MIN_WORKERS}},
        })
    h.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chaos-health", "namespace": h.NS},
         "data": {"fans": HEALTH_SCRIPT}},
        {"apiVersion": "tightrope.slurm.net/v1alpha1", "kind": "HealthCheck",
         "metadata": {"name": "chaos", "namespace": h.NS},
         "spec": {"nodeSetSelector": {},
                  "passive": {"intervalSeconds": 10, "timeoutSeconds": 5,
                              "scripts": {"configMapRef": {"name": "chaos-health"}}},
                  "remediation": {"maxUnhealthy": 1, "replace": True, "quarantineAfter": 1000}}}]}))


def jobs_slurmctld_forgot(fault: Fault) -> set[str]:
    """The jobs a slurmctld killed by `fault` had not saved: slurmctld saves a change at most 5 s
    after its last save, batched, and one killed with -9 sooner recovers the state before it
    (Slurm's FAQ: a crash loses what was not yet saved). A job whose end it had logged
    ("_job_complete: JobId=N done") comes back as running, then is requeued or cancelled when its
    node does not show it; a job submitted since the save is not recovered at all, and its node
    reports it as an orphan ("Orphan JobId=N"), which slurmctld kills. Such a job's fate is
    Slurm's state, not the operator's doing: counted apart."""
    if fault.kind != "kill_slurmctld" or not fault.pod:
        return set()
    killed = h.kubectl("-n", h.NS, "logs", fault.pod, "-c", "slurmctld", "--previous", check=False).stdout
    restarted = h.kubectl("-n", h.NS, "logs", fault.pod, "-c", "slurmctld", check=False).stdout
    return set(re.findall(r"_job_complete: JobId=(\d+) done", killed)) | \
        set(re.findall(r"Orphan JobId=(\d+) ", restarted))


def summary(records: list[dict], seed: str, bound: float, operator_replicas: int) -> dict:
    conv = sorted(r["convergence_s"] for r in records if "convergence_s" in r)

    def pct(p: float) -> float | None:
        return conv[min(len(conv) - 1, int(p * len(conv)))] if conv else None

    by_fault: dict[str, list[float]] = {}
    for r in records:
        if "convergence_s" in r:
            by_fault.setdefault(r["fault"], []).append(r["convergence_s"])
    return {
        "seed": seed, "runs": len(records), "bound_s": bound, "operator_replicas": operator_replicas,
        "faults": {k: sum(r["fault"] == k for r in records) for k in FAULTS},
        "steps": {k: sum(r["step"] == k for r in records) for k in STEPS},
        "violations": [{"run": r["run"], "step": r["step"], "fault": r["fault"], "what": v}
                       for r in records for v in r["violations"]],
        "runs_with_violations": sum(bool(r["violations"]) for r in records),
        "jobs_slurmctld_forgot": [{"run": r["run"], "what": w} for r in records for w in r.get("slurm_forgot", [])],
        "jobs_pinned_to_removed": [{"run": r["run"], "what": w} for r in records
                                   for w in r.get("pinned_to_removed", [])],
        # Runs the campaign itself could not carry out (a step or fault that failed to start):
        # counted apart, not as the operator's.
        "harness_errors": sum("harness_error" in r for r in records),
        "jobs": sum(r.get("jobs", 0) for r in records),
        "operator_restarts": {k: sum(r.get("operator_restarts", 0) for r in records if r["fault"] == k)
                              for k in FAULTS},
        "convergence_s": {"p50": pct(0.5), "p90": pct(0.9), "max": conv[-1] if conv else None,
                          "median_by_fault": {k: median(v) for k, v in sorted(by_fault.items())}},
        "records": records,
    }


def median(times: list[float]) -> float:
    """The median to the hundredth: the mean of two tenths is a binary fraction (31.549999...)."""
    return round(statistics.median(times), 2)


def markdown(s: dict) -> str:
    """The campaign as docs/reliability.md shows it."""
    by_fault: dict[str, list[float]] = {}
    for r in s["records"]:
        if "convergence_s" in r:
            by_fault.setdefault(r["fault"], []).append(r["convergence_s"])
    c = s["convergence_s"]
    replicas = s.get("operator_replicas", 1)
    lines = [f"Seed {s['seed']}" + (f", {replicas} operator replicas" if replicas > 1 else "") +
             f": {s['runs']} runs, {s['jobs']} jobs, "
             f"{len(s['violations'])} violations in {s['runs_with_violations']} runs, "
             f"{s['harness_errors']} runs the harness could not carry out. Convergence after the fault "
             f"cleared: p50 {c['p50']} s, p90 {c['p90']} s, max {c['max']} s.", "",
             "| fault | runs | convergence median (s) | max (s) | operator restarts |",
             "|---|---|---|---|---|"]
    for kind in FAULTS:
        times = sorted(by_fault.get(kind, []))
        med = median(times) if times else "-"
        restarts = s.get("operator_restarts", {}).get(kind, "-")
        lines.append(f"| {kind} | {s['faults'][kind]} | {med} | {times[-1] if times else '-'} | {restarts} |")
    lines += ["", "| step | runs |", "|---|---|"] + [f"| {k} | {v} |" for k, v in s["steps"].items()]
    if s["violations"]:
        lines += ["", "Violations:", ""] + [f"- run {v['run']} ({v['step']} + {v['fault']}): {v['what']}"
                                            for v in s["violations"]]
    if s.get("jobs_slurmctld_forgot"):
        lines += ["", "Jobs whose end a killed slurmctld had logged but not saved (Slurm's state, "
                  "not the operator's):", ""] + [f"- run {j['run']}: {j['what']}" for j in s["jobs_slurmctld_forgot"]]
    if s.get("jobs_pinned_to_removed"):
        lines += ["", "Jobs Slurm requeued from a lost Node, pinned to a node the run removed since "
                  "(pending, BadConstraints: Slurm's verdict, not the operator's):", ""] + \
            [f"- run {j['run']}: {j['what']}" for j in s["jobs_pinned_to_removed"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", default=str(int(time.time())))
    ap.add_argument("--only", type=int, help="replay run I of the seed's campaign alone")
    ap.add_argument("--bound", type=float, default=300, help="seconds to converge after a fault clears")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/chaos.json")
    ap.add_argument("--no-install", action="store_true", help="the cluster is installed already")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs of --out made with the same seed and go on from the next")
    ap.add_argument("--step", choices=STEPS, default="", help="this step in every run (a check of one path)")
    ap.add_argument("--fault", choices=FAULTS, default="", help="this fault in every run")
    ap.add_argument("--table", action="store_true", help="only write --out's table (.md) again")
    ap.add_argument("--operator-replicas", type=int, default=2,
                    help="operator replicas (the chart's default, 2: a standby takes the Lease over)")
    args = ap.parse_args()
    if args.table:
        args.out.with_suffix(".md").write_text(markdown(json.loads(args.out.read_text())))
        return 0

    global h
    import harness as h  # noqa: E402
    if not args.no_install:
        install(args.operator_replicas)
    world = World(operator_replicas=args.operator_replicas)
    settle(world)
    records = []
    if args.resume and args.out.exists():
        kept = json.loads(args.out.read_text())
        records = [r for r in kept.get("records", []) if r.get("seed") == args.seed]
    indices = [args.only] if args.only is not None else range(len(records), args.runs)
    for i in indices:
        # A replay draws the same step only from the same desired state; runs before it are
        # not replayed, so `--only` shows the fault and moment, not necessarily the step.
        log(f"run {i}: seed {args.seed}")
        try:
            r = one_run(args.seed, i, world, args.bound, args.step, args.fault)
        except Exception as e:  # the campaign's own step failed (not a finding about the operator)
            r = {"run": i, "seed": args.seed, "step": "?", "fault": "?", "violations": [],
                 "harness_error": str(e)[-800:]}
            log(f"run {i}: harness error, settling: {e}")
            try:
                settle(world)
            except AssertionError as e2:
                r["violations"].append(f"did not settle after a harness error: {str(e2)[:300]}")
        if r["violations"] and "harness_error" not in r:
            # The next run starts from the desired state, or says it could not.
            try:
                settle(world)
            except AssertionError as e:
                r["violations"].append(f"did not settle after the run: {str(e)[:300]}")
        records.append(r)
        verdict = "ok" if not r["violations"] else f"VIOLATION (replay: --seed {args.seed} --only {i}): " + \
            "; ".join(r["violations"])
        log(f"run {i}: {r.get('step')} + {r.get('fault')} after {r.get('fault_delay_s')} s: "
            f"converged in {r.get('convergence_s')} s, {r.get('jobs', 0)} jobs, {verdict}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        done = summary(records, args.seed, args.bound, args.operator_replicas)
        args.out.write_text(json.dumps(done, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(markdown(done))
    s = summary(records, args.seed, args.bound, args.operator_replicas)
    log(f"{s['runs']} runs, {s['jobs']} jobs, faults {s['faults']}, "
        f"{len(s['violations'])} violations; convergence p50 {s['convergence_s']['p50']} s, "
        f"p90 {s['convergence_s']['p90']} s, max {s['convergence_s']['max']} s -> {args.out}")
    return 1 if s["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
