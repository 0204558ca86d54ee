"""End to end on a real node: the operator and a Slurm cluster installed with Helm, slurmd in real
pods under a real kubelet, jobs run from the login pod.

The bed (scripts/testbed --name $TESTBED_NAME up --with-node) is brought up and destroyed by
CTest's fixture around this file. The steps build on each other and run in file order; each waits
with a bounded loop and, when it gives up, prints what the cluster showed last.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness import (ENV, HOST, NODESET, NS, OPERATOR_NS, RELEASE, REPO, VALUES, cluster_state, get, helm,
                     install_operator, job_state, kubectl, leaked_secrets, login_pod, node_states, nodeset_condition, nodeset_ready,
                     operator_metrics, pod_condition, privilege_findings, run, secret_needles, slurm, submit, wait_until,
                     workers)


# --------------------------------------------------------------------------------------------


def test_operator_installs_with_helm():
    install_operator()
    dep = get("deployment", "slurm-operator", OPERATOR_NS)
    assert dep["status"].get("availableReplicas") == 2  # the chart's default: a leader and a standby


def test_an_invalid_value_is_refused_with_its_path():
    r = helm("install", "bad", str(REPO / "deploy/helm/slurm"), "-n", NS, "--create-namespace",
             "--dry-run=server", "--set", "nodesets.slinky.replicas=-2", check=False)
    assert r.returncode != 0
    assert "nodesets.slinky.replicas" in r.stderr or "/nodesets/slinky/replicas" in r.stderr, r.stderr


def test_cluster_comes_up_with_two_idle_workers():
    kubectl("create", "namespace", NS, check=False)
    # The JWT key of a release made by Slinky v1.0's chart, under its name then: the chart must
    # find it and keep it rather than make a new one.
    legacy_jwt = f"{RELEASE}-auth-jwths256"
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": legacy_jwt, "namespace": NS,
                     "labels": {"app.kubernetes.io/managed-by": "Helm"},
                     "annotations": {"meta.helm.sh/release-name": RELEASE,
                                     "meta.helm.sh/release-namespace": NS}},
        "stringData": {"jwt_hs256.key": "k" * 64}}))
    helm("upgrade", "--install", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "--create-namespace",
         "-f", str(VALUES), timeout=120)
    spec = get("controller", RELEASE)["spec"]
    secrets = [x["metadata"]["name"] for x in get("secrets").get("items", [])]
    assert spec["jwtKeyRef"] == {"name": legacy_jwt, "key": "jwt_hs256.key"}, (spec["jwtKeyRef"], secrets)
    assert spec["slurmKeyRef"] == {"name": f"{RELEASE}-auth-slurm", "key": "slurm.key"}, spec["slurmKeyRef"]

    def two_idle():
        states = node_states()
        return states if len(states) == 2 and all(s == "idle" for s in states.values()) else None

    states = wait_until("sinfo to show 2 idle workers", two_idle, 420, cluster_state, period=5)
    assert sorted(states) == [f"{HOST}0", f"{HOST}1"]
    # single-node.yaml runs Slurm without cgroups; the NodeSet says so, and what the host offers.
    confined = wait_until("JobsConfined to report both hosts",
                          lambda: (c := nodeset_condition(NODESET, "JobsConfined")) and
                          "2 nodes: cgroup" in c.get("message", "") and c, 60, cluster_state)
    assert (confined["status"], confined["reason"]) == ("False", "NotConfigured"), confined


def test_srun_and_sbatch_run_on_the_workers():
    out = slurm("srun", "-N2", "hostname", timeout=60)
    assert sorted(out.split()) == [f"{HOST}0", f"{HOST}1"]
    job = submit("-N1", "--wrap", "hostname")
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60,
               lambda: slurm("scontrol", "show", "job", job, check=False))


def test_replacing_the_operator_disturbs_no_job_and_no_pod():
    """The operator is uninstalled and installed again under a running job, as a move from
    another operator does: the CRDs and the cluster's resources stay (resource-policy keep), the
    new operator adopts every pod as it is, and the job completes."""
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in get("pods").get("items", [])}
    job = submit("-w", f"{HOST}0", "--time=3", "--wrap", "sleep 40")
    wait_until(f"job {job} running", lambda: job_state(job) == "RUNNING", 60, cluster_state)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180)
    assert not get("deployment", "slurm-operator", OPERATOR_NS)
    kubectl("get", "crd", "nodesets.slinky.slurm.net")  # kept: deleting it would delete the cluster
    assert get("nodeset", NODESET)
    install_operator()
    # The new operator has read the cluster once its NodeSet reports again, and would have
    # started any replacement by the time the job ends.
    wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 120, cluster_state)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in get("pods").get("items", [])}
    assert after == before, f"pods replaced: before {before}, after {after}"
    assert nodeset_ready(NODESET).get("status") == "True", cluster_state()


AUTOSCALER_MARKS = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "karpenter.sh/do-not-disrupt": "true"}


def test_scale_in_condemns_the_worker_whose_job_ends_first():
    # The long job on the higher ordinal: Slinky's last tie-break (higher ordinal first) would
    # pick it, so only the jobs' deadlines (their time limits) make the right choice.
    long_job = submit("-w", f"{HOST}1", "--time=10", "--wrap", "sleep 50")
    short_job = submit("-w", f"{HOST}0", "--time=2", "--wrap", "sleep 30")
    wait_until("both jobs running",
               lambda: job_state(long_job) == job_state(short_job) == "RUNNING", 60)
    # The operator chooses with what its Slurm feed has shown it: it knows both deadlines once it
    # has written them on the pods.
    wait_until("both deadlines on the pods", lambda: all(
        "nodeset.slinky.slurm.net/pod-deadline" in p["metadata"].get("annotations", {}) for p in workers()), 30,
        cluster_state)
    # In the same patch, the Node autoscalers' marks: no consolidation takes a busy worker's Node.
    for p in workers():
        marks = {k: v for k, v in p["metadata"]["annotations"].items() if k in AUTOSCALER_MARKS}
        assert marks == AUTOSCALER_MARKS, p["metadata"]["annotations"]
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=1")

    def victim():
        draining = [h for h, s in node_states().items() if s in ("drng", "drain")]
        return draining if draining else None

    assert wait_until("one worker to drain", victim, 60, cluster_state) == [f"{HOST}0"]
    assert job_state(short_job) == "RUNNING"  # drained, not killed
    wait_until(f"job {short_job} to complete", lambda: job_state(short_job) == "COMPLETED", 90,
               cluster_state)
    wait_until("the short job's pod to go",
               lambda: [p["spec"]["hostname"] for p in workers()] == [f"{HOST}1"], 90, cluster_state)
    assert job_state(long_job) == "RUNNING"
    wait_until(f"job {long_job} to complete", lambda: job_state(long_job) == "COMPLETED", 90,
               cluster_state)
    wait_until("the idle worker's autoscaler marks to go", lambda: not any(
        k in p["metadata"].get("annotations", {}) for p in workers() for k in AUTOSCALER_MARKS), 30, cluster_state)


def test_scale_in_holds_the_victim_while_slurmrestd_is_away():
    """Fail-closed: without slurmrestd the operator cannot see the victim's job end, so the pod
    stays, the NodeSet says why, and it goes only after slurmrestd is back."""
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=2")
    wait_until("2 idle workers", lambda: list(node_states().values()) == ["idle"] * 2, 300,
               cluster_state)
    jobs = {host: submit("-w", host, "--time=3", "--wrap", "sleep 45") for host in node_states()}
    wait_until("both jobs running", lambda: all(job_state(j) == "RUNNING" for j in jobs.values()), 60)
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=1")

    def victim():
        draining = [h for h, s in node_states().items() if s in ("drng", "drain")]
        return draining[0] if len(draining) == 1 else None

    condemned = wait_until("one worker to drain", victim, 60, cluster_state)
    restapi = get("restapis")["items"][0]["metadata"]["name"]
    kubectl("-n", NS, "patch", "restapi", restapi, "--type=merge", "-p", '{"spec":{"replicas":0}}')
    try:
        def blocked():
            conditions = {c["type"]: c for c in get("nodeset", NODESET)["status"]["conditions"]}
            c = conditions.get("DeletionBlocked", {})
            return c if c.get("status") == "True" and c.get("reason") == "SlurmUnreachable" else None

        why = wait_until("the NodeSet to say why nothing is deleted", blocked, 120, cluster_state)
        assert "slurmrestd" in why["message"]
        wait_until(f"job {jobs[condemned]} to complete",
                   lambda: job_state(jobs[condemned]) == "COMPLETED", 90, cluster_state)
        # The job has ended, but the operator cannot know it: the pod is still there.
        assert condemned in [p["spec"]["hostname"] for p in workers()]
        assert blocked()
    finally:
        kubectl("-n", NS, "patch", "restapi", restapi, "--type=merge", "-p",
                '{"spec":{"replicas":1}}')
    (keeper,) = set(jobs) - {condemned}
    wait_until("the victim's pod to go once slurmrestd is back",
               lambda: [p["spec"]["hostname"] for p in workers()] == [keeper], 180, cluster_state)
    wait_until(f"job {jobs[keeper]} to complete", lambda: job_state(jobs[keeper]) == "COMPLETED",
               90, cluster_state)


def test_cordon_drains_in_slurm_and_shows_on_the_pods():
    node = ENV["TESTBED_NODE"]
    kubectl("cordon", node)
    try:
        def drained():
            states = node_states()
            pods = workers()
            return (states and all(s in ("drain", "drng") for s in states.values())
                    and all(pod_condition(p, "SlurmNodeStateDrain") == "True" for p in pods))

        wait_until("every Slurm node drained and its pod's condition", drained, 60, cluster_state)
    finally:
        kubectl("uncordon", node)

    def undrained():
        return all(s == "idle" for s in node_states().values()) and \
            all(pod_condition(p, "SlurmNodeStateDrain") in ("", "False") for p in workers())

    wait_until("the drain to lift after uncordon", undrained, 60, cluster_state)


# Slinky's user guide (docs/usage/nodeset-operations.md) and 1.3's release notes: each
# documented operation with the guide's own commands, as a site's runbook types them.
POD_CORDON = "nodeset.slinky.slurm.net/pod-cordon"


def jsonpath(kind: str, name: str, path: str) -> str:
    return kubectl("-n", NS, "get", kind, name, "-o", f"jsonpath={path}").stdout


def slurm_reason(host: str) -> str:
    out = slurm("scontrol", "show", "node", host)
    return out.split("Reason=", 1)[1].split(" [", 1)[0].strip() if "Reason=" in out else ""


def two_idle_workers():
    return sorted(node_states().items()) == [(f"{HOST}0", "idle"), (f"{HOST}1", "idle")]


def drain_status(pod: str) -> str:
    return jsonpath("pod", pod, '{.status.conditions[?(@.type=="SlurmNodeStateDrain")].status}')


def test_guide_querying_slurm_state_from_kubernetes():
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=2")
    wait_until("2 idle workers", two_idle_workers, 300, cluster_state)
    pod = f"{NODESET}-0"
    wait_until("the pod to show its node idle", lambda: jsonpath(
        "pod", pod, '{.status.conditions[?(@.type=="SlurmNodeStateIdle")].status}') == "True", 60, cluster_state)
    busy = jsonpath("pod", pod, '{range .status.conditions[?(@.status=="True")]}{.type}{"\\n"}{end}')
    assert not any(t in busy for t in ("SlurmNodeStateAllocated", "SlurmNodeStateMixed",
                                       "SlurmNodeStateCompleting")), busy


def test_guide_cordoning_pods():
    pod = f"{NODESET}-0"
    kubectl("-n", NS, "annotate", "pod", pod, f"{POD_CORDON}=true")
    wait_until("the drain to show on the pod", lambda: drain_status(pod) == "True", 60, cluster_state)
    message = jsonpath("pod", pod, '{.status.conditions[?(@.type=="SlurmNodeStateDrain")].message}')
    assert message == f"slurm-operator: Pod ({NS}/{pod}) was cordoned", message
    time.sleep(5)  # a reconcile or two later the person's annotation is still there
    assert get("pod", pod)["metadata"]["annotations"].get(POD_CORDON) == "true"
    kubectl("-n", NS, "annotate", "pod", pod, f"{POD_CORDON}-")
    wait_until("the drain to lift", lambda: drain_status(pod) in ("", "False") and two_idle_workers(), 60,
               cluster_state)


def test_guide_a_health_check_requests_a_drain():
    pod = f"{NODESET}-1"
    kubectl("-n", NS, "annotate", "pod", pod, "nodeset.slinky.slurm.net/pod-cordon-requested=true")
    wait_until("the requested drain", lambda: slurm_reason(f"{HOST}1") ==
               f"slurm-operator: Pod ({NS}/{pod}) cordon was requested", 60, cluster_state)
    kubectl("-n", NS, "annotate", "pod", pod, "nodeset.slinky.slurm.net/pod-cordon-requested-")
    wait_until("the drain to lift", two_idle_workers, 60, cluster_state)


def test_guide_override_with_node_annotation():
    node = ENV["TESTBED_NODE"]
    kubectl("annotate", "node", node, "nodeset.slinky.slurm.net/node-cordon-reason=GPU ECC error detected")
    kubectl("cordon", node)
    try:
        wait_until("the node's reason in Slurm", lambda: slurm_reason(f"{HOST}0") ==
                   "slurm-operator: GPU ECC error detected", 60, cluster_state)
    finally:
        kubectl("uncordon", node)
        kubectl("annotate", "node", node, "nodeset.slinky.slurm.net/node-cordon-reason-")
    wait_until("the drain to lift", two_idle_workers, 60, cluster_state)


def test_guide_external_drain_preservation():
    """An administrator's drain, the Node cordoned a moment later: neither the cordon nor the
    uncordon touches it."""
    node = ENV["TESTBED_NODE"]
    slurm("scontrol", "update", f"nodename={HOST}1", "state=drain", "reason=admin maintenance")
    kubectl("cordon", node)
    try:
        wait_until("the other node drained for the cordon", lambda: slurm_reason(f"{HOST}0").startswith(
            "slurm-operator: Node ("), 60, cluster_state)
        assert slurm_reason(f"{HOST}1") == "admin maintenance"
    finally:
        kubectl("uncordon", node)
    wait_until("the cordon's drain to lift", lambda: node_states().get(f"{HOST}0") == "idle", 60, cluster_state)
    assert node_states().get(f"{HOST}1") == "drain" and slurm_reason(f"{HOST}1") == "admin maintenance"
    slurm("scontrol", "update", f"nodename={HOST}1", "state=resume")
    wait_until("2 idle workers", two_idle_workers, 60, cluster_state)


def operator_series(name: str) -> float:
    """The sum of a series of the leading operator's for this cluster's namespace."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in operator_metrics().splitlines()
               if line.startswith(name + "{") and f'namespace="{NS}"' in line)


def test_at_rest_slurm_is_read_each_hinted_period_and_a_drain_still_shows_at_once():
    """docs/slurm.md: the operator follows slurmctld's log, and at rest its feed polls Slurm each
    hinted period (30 s) instead of each second; an administrator's drain is a line in that log,
    and the pod shows it a poll later."""
    wait_until("slurmctld's log followed", lambda: operator_series("tightrope_slurm_log_followed") == 1, 90,
               cluster_state)
    wait_until("2 idle workers", two_idle_workers, 60, cluster_state)
    time.sleep(12)  # the feed stays busy for 10 s after the last change it read
    before, started = operator_series("tightrope_slurm_requests_total"), time.monotonic()
    time.sleep(60)
    per_minute = (operator_series("tightrope_slurm_requests_total") - before) * 60 / (time.monotonic() - started)
    print(f"\nat rest: {per_minute:.1f} Slurm requests a minute")
    assert per_minute <= 12, f"{per_minute:.1f} a minute: polled each second (60 and more) {cluster_state()}"
    pod = f"{NODESET}-1"
    drained = time.monotonic()
    slurm("scontrol", "update", f"nodename={HOST}1", "state=drain", "reason=hinted")
    try:
        # Not a timing bound: without the hint the next poll would be up to 30 s away.
        wait_until("the pod to show the drain", lambda: drain_status(pod) == "True", 15, cluster_state, period=0.2)
        print(f"scontrol drain -> the pod's SlurmNodeStateDrain: {time.monotonic() - drained:.1f} s")
    finally:
        slurm("scontrol", "update", f"nodename={HOST}1", "state=resume")
    wait_until("2 idle workers", two_idle_workers, 60, cluster_state)


def test_guide_node_features_become_constraints():
    node = ENV["TESTBED_NODE"]
    kubectl("annotate", "node", node, "features.slinky.slurm.net/spec=switch-a")
    try:
        wait_until("the feature in Slurm", lambda: "k8s/switch-a" in slurm("scontrol", "show", "node", f"{HOST}0"),
                   60, cluster_state)
        job = submit("--constraint=k8s/switch-a", "--wrap", "true")
        wait_until(f"job {job} to complete", lambda: job_state(job) == "COMPLETED", 60, cluster_state)
    finally:
        kubectl("annotate", "node", node, "features.slinky.slurm.net/spec-")
    wait_until("the feature gone", lambda: "k8s/switch-a" not in slurm("scontrol", "show", "node", f"{HOST}0"),
               60, cluster_state)


def test_guide_workload_disruption_protection_and_pod_deletion_cost():
    busy_pod = f"{NODESET}-1"
    job = submit("-w", f"{HOST}1", "--time=2", "--wrap", "sleep 600")
    protect = r"{.metadata.labels.nodeset\.slinky\.slurm\.net/pod-protect}"
    wait_until("the busy pod protected", lambda: jsonpath("pod", busy_pod, protect) == "true", 60, cluster_state)
    slurm("scancel", job)
    wait_until("the idle pod unprotected", lambda: jsonpath("pod", busy_pod, protect) == "", 60, cluster_state)
    # Slinky's order would take the higher ordinal; a lower deletion cost goes first.
    kubectl("-n", NS, "annotate", "pod", f"{NODESET}-0", "nodeset.slinky.slurm.net/pod-deletion-cost=-100")
    kubectl("-n", NS, "scale", "nodeset", NODESET, "--replicas=1")
    wait_until("the cheaper pod to go", lambda: [p["spec"]["hostname"] for p in workers()] == [f"{HOST}1"], 120,
               cluster_state)
    wait_until("1 idle worker", lambda: list(node_states().values()) == ["idle"], 60, cluster_state)


def test_a_missing_image_is_reported_and_disturbs_nothing():
    bad = "slurm-worker-badimage"
    nodeset = get("nodeset", NODESET)
    doc = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
           "metadata": {"name": bad, "namespace": NS},
           "spec": {"controllerRef": nodeset["spec"]["controllerRef"], "replicas": 1,
                    "slurmd": {"image": "localhost/tightrope/slurmd:does-not-exist"},
                    "logfile": nodeset["spec"].get("logfile", {}),
                    "partition": {"enabled": False}, "oversubscribeNode": True}}
    kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    ready = wait_until("the NodeSet to say why its pods fail",
                       lambda: (c := nodeset_ready(bad)) and c.get("reason") == "PodsFailing" and c,
                       180, cluster_state)
    assert "does-not-exist" in ready["message"], ready
    events = kubectl("-n", NS, "get", "events", "--field-selector",
                     f"involvedObject.kind=NodeSet,involvedObject.name={bad},reason=PodsFailing",
                     "-o", "name").stdout
    assert events.strip(), "no PodsFailing event"
    assert list(node_states().values()) == ["idle"]  # the good NodeSet's node is untouched
    kubectl("-n", NS, "delete", "nodeset", bad, "--wait=true", "--timeout=120s", timeout=150)


GPU_NODESET = f"{RELEASE}-worker-gpu"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"  # as GPU Feature Discovery labels a Node
GPU_TYPE = "nvidia_h100_80gb_hbm3"  # what Slurm's autodetection would call it
DCGM_DIR = Path(ENV["TESTBED_DIR"]) / "node" / "dcgm-job-mapping"


def gpu_values(tmp: Path) -> Path:
    """The cluster's values plus a NodeSet whose slurmd asks for every stand-in GPU of the node
    (the bed's test device plugin serves them as /dev/nvidia0..3), typed from the Node's product
    label, and DCGM's job mapping. The first NodeSet keeps what the tests above made of it."""
    values = {
        "nodesets": {
            "slinky": {"replicas": 1},
            "gpu": {
                "replicas": 1,
                "oversubscribeNode": True,
                "pruneSlurmNodeRecords": "NodeNotFound",
                "partition": {"enabled": True, "configMap": {"State": "UP", "MaxTime": "UNLIMITED"}},
                "slurmd": {"resources": {"limits": {"nvidia.com/gpu": 4}}},
                "podSpec": {"nodeSelector": {"nvidia.com/gpu.product": GPU_PRODUCT}},
                # The stand-ins are not NVIDIA devices autodetection could find: name them.
                "gres": {"conf": "Name=gpu File=/dev/nvidia[0-3]\n"},
            },
        },
        "vendor": {"nvidia": {"dcgm": {"enabled": True, "jobMappingDir": str(DCGM_DIR)}}},
    }
    path = tmp / "gpu-values.yaml"
    path.write_text(json.dumps(values))  # JSON is YAML
    return path


def gpu_node_line() -> str:
    return slurm("scontrol", "show", "node", "gpu-0", "-o", check=False)


def test_a_gpu_nodeset_registers_the_gpus_its_pods_get(tmp_path):
    node = ENV["TESTBED_NODE"]
    capacity = json.loads(kubectl("get", "node", node, "-o", "json").stdout)["status"]["capacity"]
    assert capacity.get("nvidia.com/gpu") == "4", capacity  # the bed's stand-in device plugin
    kubectl("label", "node", node, f"nvidia.com/gpu.product={GPU_PRODUCT}", "--overwrite")
    helm("upgrade", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(gpu_values(tmp_path)), timeout=120)
    wait_until("gpu-0 idle with its GPUs", lambda: node_states().get("gpu-0") == "idle" and
               f"Gres=gpu:{GPU_TYPE}:4" in gpu_node_line(), 300,
               lambda: cluster_state() + "\n" + gpu_node_line(), period=5)
    (pod,) = [p for p in workers() if p["spec"]["hostname"] == "gpu-0"]
    devices = kubectl("-n", NS, "exec", pod["metadata"]["name"], "-c", "slurmd", "--",
                      "sh", "-c", "ls /dev/nvidia*").stdout.split()
    assert devices == [f"/dev/nvidia{i}" for i in range(4)], devices
    # The CPU NodeSet's node offers no GPU.
    (cpu,) = [p["spec"]["hostname"] for p in workers() if p["spec"]["hostname"].startswith(HOST)]
    assert "gpu:" not in slurm("scontrol", "show", "node", cpu, "-o")


def test_a_job_gets_the_gpus_it_asks_for_and_dcgm_sees_whose_they_are():
    out = slurm("srun", "-p", "gpu", "--gres=gpu:2", "printenv", "CUDA_VISIBLE_DEVICES", timeout=60)
    assert out.strip() == "0,1", out
    # Three held by a batch job: a second job gets the fourth, and DCGM's mapping names the first.
    # Memory asked for: without it a job takes the whole node's, and the second would wait.
    held = submit("-p", "gpu", "--gres=gpu:3", "--mem=100M", "--time=2", "--wrap", "sleep 60")
    wait_until(f"job {held} running", lambda: job_state(held) == "RUNNING", 60, cluster_state)
    # The operator counts them as the dashboard shows them: four GPUs, three allocated.
    gpus = f'nodeset="{GPU_NODESET}",state='
    wait_until("the operator's metrics to count the held job's GPUs",
               lambda: f'{gpus}"allocated"}} 3\n' in (text := operator_metrics()) and f'{gpus}"configured"}} 4\n' in text,
               30, lambda: "\n".join(line for line in operator_metrics().splitlines() if "tightrope_slurm_gpus" in line))
    out = slurm("srun", "-p", "gpu", "--gres=gpu:1", "--mem=100M", "printenv", "CUDA_VISIBLE_DEVICES",
                timeout=60)
    assert out.strip() == "3", out
    # The srun's own epilog may still be clearing GPU 3.
    def mapping():
        return {f.name: f.read_text().strip() for f in DCGM_DIR.iterdir()} if DCGM_DIR.is_dir() else {}

    wait_until("DCGM's mapping to name the held job's GPUs",
               lambda: mapping() == {"0": held, "1": held, "2": held}, 30, lambda: str(mapping()))
    r = kubectl("-n", NS, "exec", login_pod(), "-c", "login", "--", "srun", "-p", "gpu", "--gres=gpu:5",
                "true", check=False, timeout=60)
    assert r.returncode != 0 and "Requested node configuration is not available" in r.stderr, r.stderr
    slurm("scancel", held)
    wait_until("the epilog to clear DCGM's mapping", lambda: not any(DCGM_DIR.iterdir()), 60,
               lambda: str(sorted(DCGM_DIR.iterdir())))


def test_an_nvlink_clique_becomes_a_block_of_the_clusters_topology():
    """The Node labelled as GPU Feature Discovery labels a multi-node NVLink domain: the operator
    writes topology.yaml, slurmctld reads it (in-place reconfigure), and the Slurm nodes on the
    Node join its block."""
    clique = "5e1f0c2a-7d3b-4c8e-9a61-0b2d4f6e8a10.1"
    kubectl("label", "node", ENV["TESTBED_NODE"], f"nvidia.com/gpu.clique={clique}", "--overwrite")

    def topology() -> str:
        return kubectl("-n", NS, "exec", "slurm-controller-0", "-c", "slurmctld", "--",
                       "scontrol", "show", "topology", "nvlink", check=False).stdout

    out = wait_until("gpu-0 in the clique's block", lambda: (t := topology()) and
                     f"BlockName={clique}" in t and "gpu-0" in t and t, 180,
                     lambda: topology() + cluster_state(), period=5)
    assert "BlockSize=1" in out, out  # one Node in the clique
    assert f"Topology=nvlink:{clique}" in gpu_node_line()


IMEX_NODESET = f"{RELEASE}-worker-imex"
IMEX_CHANNELS = f"{IMEX_NODESET}-imex-channel"  # the claim template NVIDIA's controller makes
IMEX_MAJOR = 238  # an unused character major: slurmstepd makes the job's channel with it


def imex_values(tmp: Path) -> Path:
    """The cluster so far, plus a NodeSet with its own ComputeDomain. slurmd is told the IMEX
    channel major (there is no driver to list it in /proc/devices)."""
    values = json.loads(gpu_values(tmp).read_text())
    values["nodesets"]["imex"] = {
        "replicas": 1, "oversubscribeNode": True, "computeDomain": True,
        "pruneSlurmNodeRecords": "NodeNotFound",
        "partition": {"enabled": True, "configMap": {"State": "UP", "MaxTime": "UNLIMITED"}},
    }
    values["controller"] = {"extraConf": "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                                         f"SwitchParameters=imex_dev_major={IMEX_MAJOR}\n"}
    path = tmp / "imex-values.yaml"
    path.write_text(json.dumps(values))
    return path


def test_a_compute_domain_nodeset_waits_for_its_domain_then_claims_its_channels(tmp_path):
    """NVIDIA's DRA driver is stood in for: the ComputeDomain CRD written from its documented
    fields, the test playing its controller (DeviceClass, claim template), the bed's test DRA
    kubelet plugin preparing the claims. The kubelet, scheduler and resourceclaim controller
    are real."""
    kubectl("apply", "-f", str(REPO / "test/integration/testdata/computedomain-crd.yaml"))
    kubectl("wait", "--for=condition=Established", "crd/computedomains.resource.nvidia.com",
            "--timeout=60s")
    node = ENV["TESTBED_NODE"]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
         "metadata": {"name": "compute-domain-default-channel.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'compute-domain.nvidia.com'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": f"{node}-compute-domain"},
         "spec": {"driver": "compute-domain.nvidia.com", "nodeName": node,
                  "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "channel-0",
                               "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}]}}]}))
    helm("upgrade", RELEASE, str(REPO / "deploy/helm/slurm"), "-n", NS, "-f", str(VALUES),
         "-f", str(imex_values(tmp_path)), timeout=120)
    waiting = wait_until("the NodeSet to wait for its ComputeDomain",
                         lambda: (c := nodeset_ready(IMEX_NODESET)) and
                         c.get("reason") == "WaitingForComputeDomain" and c, 120, cluster_state)
    assert IMEX_CHANNELS in waiting["message"], waiting
    domain = get("computedomain", f"{IMEX_NODESET}-imex")
    assert domain["spec"] == {"numNodes": 0, "channel": {
        "allocationMode": "All", "resourceClaimTemplate": {"name": IMEX_CHANNELS}}}, domain
    assert not [p for p in workers() if p["spec"]["hostname"].startswith("imex-")]

    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": IMEX_CHANNELS, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "channel", "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}]}}}}))
    wait_until("imex-0 idle", lambda: node_states().get("imex-0") == "idle", 300, cluster_state, period=5)
    claims = get("resourceclaims").get("items", [])
    assert [c["status"].get("allocation", {}).get("devices", {}).get("results", [{}])[0].get("device")
            for c in claims] == ["channel-0"], claims
    assert "SwitchType=switch/nvidia_imex" in kubectl(
        "-n", NS, "get", "configmap", f"{RELEASE}-config", "-o", "jsonpath={.data.slurm\\.conf}").stdout
    # slurmctld reads the new slurm.conf (its partition, SwitchType) once the kubelet has
    # synced the ConfigMap into its pod and the in-place reconfigure has run.
    wait_until("slurmctld to reconfigure with the imex partition and switch/nvidia_imex",
               lambda: "switch/nvidia_imex" in slurm("scontrol", "show", "config", check=False) and
               "PartitionName=imex" in slurm("scontrol", "show", "partition", "imex", check=False),
               180, cluster_state, period=5)


def imex_channels(*args: str) -> list[str]:
    """The IMEX channels a job step sees: slurmstepd makes its job's in a private mount."""
    return slurm("srun", "-p", "imex", "--mem=100M", *args, "ls", "/dev/nvidia-caps-imex-channels",
                 timeout=60).split()


def test_each_job_gets_its_own_imex_channel():
    # The slurmds take SwitchType from the reconfigure a moment after slurmctld.
    wait_until("a job to get IMEX channel 1", lambda: imex_channels() == ["channel1"], 90,
               cluster_state, period=5)
    held = submit("-p", "imex", "--mem=100M", "--time=2", "--wrap", "sleep 60")
    wait_until(f"job {held} running", lambda: job_state(held) == "RUNNING", 60, cluster_state)
    # The held job has channel 1 (channel 0 is reserved): the next job gets another.
    assert imex_channels() == ["channel2"]
    slurm("scancel", held)


# What the operator's and the webhook's service accounts need, asked of the API server
# (SubjectAccessReview through kubectl auth can-i --as). Each line's reason is the rule's comment in
# deploy/helm/slurm-operator/templates/rbac.yaml. (verb, resource[:subresource][/name], namespace;
# "" is cluster-wide)
NEEDED = {
    "operator": [("list", "pods", NS), ("watch", "pods", NS), ("create", "pods", NS), ("delete", "pods", NS),
                 ("patch", "pods", NS), ("patch", "pods:status", NS), ("list", "nodes", ""),
                 ("patch", "nodes", ""), ("patch", "nodes:status", ""), ("patch", "nodesets.slinky.slurm.net", NS),
                 ("patch", "nodesets.slinky.slurm.net:status", NS), ("create", "secrets", NS),
                 ("get", "secrets", NS), ("create", "events", NS), ("create", "statefulsets.apps", NS),
                 ("create", "poddisruptionbudgets.policy", NS), ("get", "leases.coordination.k8s.io/slurm-operator", OPERATOR_NS),
                 ("update", "leases.coordination.k8s.io/slurm-operator", OPERATOR_NS)],
    # With webhook.podsBinding, also get and patch of pods and get of nodes.
    "webhook": [("get", "configmaps", NS)],
}
# Broader than any of it needs: each must be refused.
REFUSED = {
    "operator": [("*", "*", NS), ("*", "*", ""), ("update", "nodesets.slinky.slurm.net", NS),
                 ("delete", "nodesets.slinky.slurm.net", NS), ("create", "pods:exec", NS),
                 ("create", "pods:eviction", NS), ("delete", "nodes", ""), ("update", "nodes", ""),
                 ("update", "secrets", NS), ("create", "serviceaccounts:token", NS),
                 ("create", "clusterrolebindings.rbac.authorization.k8s.io", ""),
                 ("escalate", "clusterroles.rbac.authorization.k8s.io", ""),
                 ("bind", "clusterroles.rbac.authorization.k8s.io", ""), ("impersonate", "users", ""),
                 ("delete", "namespaces", ""), ("create", "customresourcedefinitions.apiextensions.k8s.io", ""),
                 ("update", "leases.coordination.k8s.io/another-lease", OPERATOR_NS),
                 ("delete", "persistentvolumeclaims", NS),
                 ("create", "mutatingwebhookconfigurations.admissionregistration.k8s.io", "")],
    "webhook": [("list", "secrets", NS), ("get", "secrets", NS), ("list", "pods", NS), ("create", "pods", NS),
                ("delete", "pods", NS), ("patch", "nodes", ""), ("list", "configmaps", NS),
                ("create", "events", NS), ("*", "*", "")],
}


def service_accounts() -> dict[str, str]:
    """operator / webhook -> the service account its Deployment runs as."""
    out = {}
    for d in get("deployments", ns=OPERATOR_NS).get("items", []):
        name = d["metadata"]["name"]
        role = "webhook" if name.endswith("-webhook") else "operator"
        out[role] = f"system:serviceaccount:{OPERATOR_NS}:{d['spec']['template']['spec']['serviceAccountName']}"
    return out


def can(subject: str, verb: str, resource: str, ns: str) -> bool:
    scope = ["-n", ns] if ns else []
    resource, _, subresource = resource.partition(":")
    if subresource:
        scope += ["--subresource", subresource]
    r = kubectl("auth", "can-i", verb, resource, "--as", subject, *scope, check=False)
    return r.stdout.strip() == "yes"


def test_each_service_account_may_do_what_it_needs_and_nothing_broader():
    accounts = service_accounts()
    assert set(accounts) == {"operator", "webhook"}, accounts
    for role, subject in accounts.items():
        missing = [x for x in NEEDED[role] if not can(subject, *x)]
        broader = [x for x in REFUSED[role] if can(subject, *x)]
        assert not missing and not broader, (role, "missing:", missing, "broader than needed:", broader)
        # No wildcard anywhere in what it may do (discovery's non-resource URLs apart).
        listed = kubectl("auth", "can-i", "--list", "--as", subject, "-n", NS).stdout.splitlines()[1:]
        wild = [line for line in listed if line.split() and not line.split()[0].startswith("[/")
                and ("*" in line.split()[0] or "*" in line[line.rindex("["):])]
        assert not wild, (role, wild)


def test_every_container_keeps_only_the_privileges_it_needs():
    """The operator, the webhook and Slurm's daemons run without privilege escalation or any
    capability, on a read-only root filesystem, as a user other than root; only slurmd and the
    login container's sshd keep what they need (harness.PRIVILEGED_BY_NEED says what and why)."""
    apps = {p["metadata"].get("labels", {}).get("app.kubernetes.io/name") for ns in (NS, OPERATOR_NS)
            for p in get("pods", ns=ns).get("items", [])}
    assert {"slurmctld", "slurmrestd", "slurmd", "login", "slurm-operator"} <= apps, apps
    assert privilege_findings((NS, OPERATOR_NS)) == []


def test_no_secret_is_ever_shown():
    """After every step above: Slurm's auth key, the JWT key, the tokens minted with it and the
    webhook's private key appear in no log, event, ConfigMap, status or pod environment."""
    assert len(secret_needles((NS, OPERATOR_NS))) >= 2, "the chart's key Secrets are looked for"
    assert leaked_secrets((NS, OPERATOR_NS)) == []


def test_deleting_the_cluster_leaves_nothing_behind():
    kubectl("-n", NS, "delete", "nodesets", "--all", "--wait=true", "--timeout=180s", timeout=200)
    wait_until("no Slurm node records", lambda: slurm("sinfo", "-h", "-N", "-o", "%N").strip() == "",
               60, cluster_state)
    helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200)

    # The chart keeps the Slurm and JWT keys across uninstalls (helm.sh/resource-policy: keep), so
    # a reinstall talks to the same slurmdbd data with the same keys; nothing else may stay.
    kept = {f"secret/{s['metadata']['name']}" for s in get("secrets").get("items", [])
            if s["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep"}

    def empty():
        left = kubectl("-n", NS, "get", "all,configmaps,secrets,pvc,pdb,serviceaccounts", "-o", "name").stdout.split()
        left = [x for x in left if x not in kept | {"configmap/kube-root-ca.crt", "serviceaccount/default"}]
        return not left or None

    wait_until("every object of the cluster garbage-collected", empty, 180,
               lambda: kubectl("-n", NS, "get", "all,configmaps,secrets", check=False).stdout)
    helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=150)
