"""Power saving on the bed's node: Slurm knows a NodeSet's three nodes powered down before any pod
exists, a job given them gets exactly its pods, and once idle Slurm powers them down and their
pods go. A job no NodeSet can hold pends with Slurm's reason and makes no pod; a pod that cannot
start (an image that is not there) is given up at ResumeTimeout, its job requeued, and the job
runs once the image is back. Runs after test_bridge.py, on a cluster of its own."""

from __future__ import annotations

import json
import re
import time

import pytest

from harness import (FINISHED, HOST, NODESET, NS, OPERATOR_NS, RELEASE, cluster_state, get, helm, install_cluster,
                     install_operator, job_state, kubectl, slurm, submit, wait_until, workers)

PARTITION = "slinky"
SUSPEND_TIME = 30  # the least the annotation takes: Slurm looks for idle nodes every 30 s anyway
RESUME_TIMEOUT = 60
POWER_VALUES = {"nodesets": {"slinky": {
    "replicas": 3,
    "powerSaving": {"suspendTimeSeconds": SUSPEND_TIME, "resumeTimeoutSeconds": RESUME_TIMEOUT},
    # The size Slurm is told of each node before its pod exists; three fit the bed's two cores.
    "slurmd": {"resources": {"limits": {"cpu": "1", "memory": "512Mi"},
                             "requests": {"cpu": "100m", "memory": "64Mi"}}},
}}}
NODES = [f"{HOST}{i}" for i in range(3)]


def live_workers() -> list[str]:
    return sorted(p["spec"]["hostname"] for p in workers() if "deletionTimestamp" not in p["metadata"])


def slurm_nodes() -> dict[str, dict]:
    out = slurm("scontrol", "show", "node", "--json", check=False)
    return {n["name"]: n for n in json.loads(out or "{}").get("nodes", []) if n["name"].startswith(HOST)}


def powered_down() -> list[str]:
    return sorted(name for name, n in slurm_nodes().items() if "POWERED_DOWN" in n.get("state", []))


def state() -> str:
    # Slurm's view last: a long failure is shown by its head and its tail.
    return (cluster_state() + "\nslurm:\n" + slurm("sinfo", "-N", "-o", "%N %T %E", check=False)
            + slurm("squeue", "-t", "all", "-o", "%i %T %r %N %M", check=False))


def powered_down_in(messages: list[str]) -> set[str]:
    """The nodes whose pods DeletedPod events say went for power saving: one event a pod ("Slurm
    powered its node slinky-0 down"), or one for the pods of a reconcile ("...: 3 nodes
    slinky-[0-2]", "...: 2 nodes slinky-[0,2]")."""
    names = set()
    for m in messages:
        if (one := re.search(r"powered its node (\S+) down", m)):
            names.add(one.group(1))
        elif (many := re.search(r"nodes (\S+)\[([0-9,-]+)\]$", m)):
            for part in many.group(2).split(","):
                first, _, last = part.partition("-")
                names.update(f"{many.group(1)}{i}" for i in range(int(first), int(last or first) + 1))
        elif (single := re.search(r"nodes (\S+)$", m)):
            names.update(single.group(1).split(","))
    return names


def events(reason: str) -> list[dict]:
    return [e for e in get("events").get("items", []) if e.get("reason") == reason]


@pytest.fixture(scope="module")
def cluster():
    install_operator()
    # An earlier cluster's workers that are still terminating would reach this cluster's
    # slurmctld (the same Service name) with their preStop's DOWN; the operator resumes such a
    # powered-down node once no pod of it is left, but the test starts from a quiet namespace.
    wait_until("no worker of an earlier cluster", lambda: not workers(), 180)
    install_cluster("power", POWER_VALUES)
    yield
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)


def test_slurm_knows_every_node_powered_down_and_no_worker_runs(cluster):
    wait_until("Slurm to know the NodeSet's three nodes powered down", lambda: powered_down() == NODES, 300,
               state, period=5)
    assert live_workers() == [], state()
    conf = slurm("scontrol", "show", "config")
    assert f"SuspendTime             = {SUSPEND_TIME} sec" in conf, conf


def test_an_autoscaler_may_not_scale_a_power_saved_nodeset(cluster):
    # KEDA and the HPA write the scale subresource, as kubectl scale does.
    r = kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=2", check=False)
    assert r.returncode != 0 and "is power-saved" in r.stderr, r.stderr
    assert get("nodeset", NODESET)["spec"]["replicas"] == 3


def test_a_three_node_job_gets_three_pods_runs_and_they_go_once_idle(cluster):
    submitted = time.monotonic()
    job = submit("-p", PARTITION, "-N3", "--wrap", "srun hostname; sleep 5")
    wait_until("three pods for the job's nodes", lambda: live_workers() == NODES, 120, state, period=1)
    pods_at = time.monotonic() - submitted
    wait_until("the job to run", lambda: job_state(job) in ("RUNNING",) + FINISHED, 240, state, period=1)
    started = time.monotonic() - submitted
    wait_until("the job to end", lambda: job_state(job) in FINISHED, 120, state)
    assert job_state(job) == "COMPLETED", state()
    ended = time.monotonic()
    # Slurm powers the idle nodes down after SuspendTime (its pass every 30 s), then their pods go.
    wait_until("no worker pod once Slurm powered the nodes down",
               lambda: live_workers() == [] and powered_down() == NODES, SUSPEND_TIME + 180, state, period=2)
    gone = time.monotonic() - ended
    messages = [e["message"] for e in events("DeletedPod") if "powered" in e.get("message", "")]
    assert powered_down_in(messages) == set(NODES), messages
    print(f"\npower saving: submit -> 3 pods {pods_at:.0f} s, -> job running {started:.0f} s; "
          f"job end -> no pod {gone:.0f} s (SuspendTime {SUSPEND_TIME} s)")


def test_a_job_no_nodeset_can_hold_pends_with_slurms_reason_and_makes_no_pod(cluster):
    job = submit("-p", PARTITION, "-N4", "--wrap", "true")
    try:
        reason = wait_until("the job to pend with a reason",
                            lambda: slurm("squeue", "-h", "-j", job, "-o", "%T %r").strip(), 60, state)
        assert reason.startswith("PENDING") and reason.split()[1] in ("PartitionNodeLimit", "PartitionConfig",
                                                                      "Resources"), reason
        time.sleep(35)  # one power-saving pass of slurmctld
        assert live_workers() == [], state()
        print(f"\nunsatisfiable: squeue says {reason!r}, no pod")
    finally:
        slurm("scancel", job, check=False)


def set_image(image: str | None):
    kubectl("-n", NS, "patch", "nodeset", NODESET, "--type", "merge", "-p",
            json.dumps({"spec": {"slurmd": {"image": image}}}))


def test_a_pod_that_cannot_start_is_given_up_at_resume_timeout_and_its_job_runs_later(cluster):
    before = get("nodeset", NODESET)["spec"]["slurmd"].get("image")
    set_image("localhost/tightrope/slurmd:not-there")
    try:
        job = submit("-p", PARTITION, "-N1", "--wrap", "srun hostname")
        wait_until("a pod that cannot pull its image",
                   lambda: any(s.get("state", {}).get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")
                               for p in workers() for s in p.get("status", {}).get("containerStatuses", [])),
                   120, state)
        # Slurm's side says what the job waits for: the node's comment, beside the pod link.
        waiting = wait_until("the powering-up node to say why its pod waits",
                             lambda: next((json.loads(n["comment"])["waiting"] for n in slurm_nodes().values()
                                           if "waiting" in n.get("comment", "")), None), 30, state)
        assert "ErrImagePull" in waiting or "ImagePullBackOff" in waiting, waiting
        print(f"\nscontrol show node: comment waiting={waiting[:100]!r}")
        timed_out = wait_until("the operator to tell of Slurm's ResumeTimeout", lambda: events("ResumeTimedOut"),
                               RESUME_TIMEOUT + 120, state)
        message = timed_out[0]["message"]
        print(f"\nResumeTimedOut: {message}")
        assert "ResumeTimeout reached" in message and ("ImagePull" in message or "ErrImage" in message), message
        # The node is resumable again (no longer DOWN) and its job requeued: Slurm may give it
        # another node at once, whose pod then fails the same way until the image is back.
        node = message.split("powering up node ", 1)[1].split()[0]
        wait_until(f"{node} made resumable again",
                   lambda: "DOWN" not in slurm_nodes()[node].get("state", []), 60, state)
        assert job_state(job) in ("PENDING", "CONFIGURING"), state()
    finally:
        set_image(before)
    back = time.monotonic()
    wait_until("the requeued job to run once the image is back", lambda: job_state(job) in FINISHED, 420, state,
               period=5)
    assert job_state(job) == "COMPLETED", state()
    print(f"\nimage back -> requeued job done {time.monotonic() - back:.0f} s")
