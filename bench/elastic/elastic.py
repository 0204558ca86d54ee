"""Elastic workers two ways on the same bed: Slurm's power saving (docs/power-saving.md) against
KEDA scaling each NodeSet on its partition's pending and running jobs (docs/monitoring.md).

One cluster of two NodeSets, both empty at the start: `slinky` (CPU, at most 3 workers) and
`gpu` (one worker holding the bed's four stand-in GPUs). The same burst of mixed jobs (1- to 3-node CPU jobs
and 1-node GPU jobs, each `sleep --work` seconds) is submitted at once in each mode; the run
lasts until every job has ended and no worker pod is left (or --bound seconds). Measured:

  start     each job's start minus its submission by Slurm's clock: p50, p99, max
  pods      pod-seconds of worker pods while Running, and of those idle (their Slurm node IDLE,
            no job on it): what elasticity costs in held capacity
  makespan  first submission to last job end

Writes --out (bench/results/elastic.json) and prints a table; docs/benchmarks.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("TESTBED_NAME", "elastic")
sys.path.insert(0, str(REPO / "test/e2e"))

import yaml  # noqa: E402

from harness import (FINISHED, NS, OPERATOR_NS, RELEASE, VALUES, get, helm, install_cluster,  # noqa: E402
                     install_operator, kubectl, slurm, submit, wait_until, workers)

# The burst: (partition, nodes, GPUs). Multi-node jobs first, as users send a campaign's big jobs.
BURST = [("slinky", 3, 0), ("gpu", 1, 1), ("slinky", 2, 0), ("slinky", 1, 0), ("gpu", 1, 1),
         ("slinky", 1, 0), ("slinky", 3, 0), ("gpu", 1, 1), ("slinky", 2, 0), ("slinky", 1, 0)]
MOST = {"slinky": 3, "gpu": 1}
SUSPEND_TIME = 30
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"


def values(power: bool) -> dict:
    """single-node.yaml with both NodeSets empty (KEDA) or at their most (power saving). The GPU
    worker holds all four of the bed's stand-in GPUs, named with their device files as a
    power-saved NodeSet needs (docs/power-saving.md)."""
    v = yaml.safe_load(VALUES.read_text())
    requests = {"cpu": "100m", "memory": "256Mi"}
    # The same node sizes either way: what Slurm is told of a power-saved node comes from its
    # limits, and a node that registers by itself says what it finds (the bed's two cores).
    cpu = {**v["nodesets"]["slinky"], "replicas": MOST["slinky"] if power else 0,
           "extraConf": "CPUs=1 RealMemory=1024",
           "slurmd": {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": requests}}}
    gpu = {"replicas": MOST["gpu"] if power else 0, "oversubscribeNode": True,
           "pruneSlurmNodeRecords": "NodeNotFound",
           "partition": {"enabled": True, "configMap": {"State": "UP", "MaxTime": "UNLIMITED"}},
           "gres": {"conf": "Name=gpu File=/dev/nvidia[0-3]\n"}, "extraConf": "CPUs=2 RealMemory=2048",
           "slurmd": {"resources": {"limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": 4},
                                    "requests": requests}},
           "podSpec": {"nodeSelector": {"nvidia.com/gpu.product": GPU_PRODUCT}}}
    if power:
        for n in (cpu, gpu):
            n["powerSaving"] = {"suspendTimeSeconds": SUSPEND_TIME, "resumeTimeoutSeconds": 180}
    v["nodesets"] = {"slinky": cpu, "gpu": gpu}
    return v


def slurm_nodes() -> dict[str, list[str]]:
    out = slurm("scontrol", "show", "node", "--json", check=False, timeout=60)
    return {n["name"]: n.get("state", []) for n in json.loads(out or "{}").get("nodes", [])}


def slurm_time(fields: dict, key: str) -> datetime | None:
    value = fields.get(key, "")
    return None if value in ("", "Unknown", "None", "N/A") else datetime.fromisoformat(value)


def job_states() -> dict[str, str]:
    """Every job Slurm still shows -> its state, in one call (a sample must not load the bed)."""
    out = slurm("scontrol", "show", "job", "-o", check=False, timeout=60)
    states = {}
    for line in out.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "JobId" in fields:
            states[fields["JobId"]] = fields.get("JobState", "")
    return states


def job_fields(job: str) -> dict:
    out = slurm("scontrol", "show", "job", job, "-o", check=False)
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_burst(mode: str, work: int, bound: float) -> dict:
    """Submits the burst and samples the workers until every job has ended and no worker is left."""
    jobs = []
    for partition, nodes, gpus in BURST:
        args = ["-p", partition, f"-N{nodes}", "--mem=100M", "--wrap", f"srun sleep {work}"]
        if gpus:
            args[0:0] = [f"--gres=gpu:{gpus}"]
        jobs.append(submit(*args))
    started = time.monotonic()
    running_s = idle_s = 0.0
    peak = 0
    last = started
    done_at = None
    while time.monotonic() - started < bound:
        live = [p for p in workers() if "deletionTimestamp" not in p["metadata"]]
        pods = [p for p in live if p.get("status", {}).get("phase") == "Running"]
        states = slurm_nodes()
        now = time.monotonic()
        dt, last = now - last, now
        peak = max(peak, len(pods))
        running_s += dt * len(pods)
        idle_s += dt * sum(1 for p in pods if "IDLE" in states.get(p["spec"]["hostname"], []))
        if done_at is None:
            jobs_now = job_states()
            if all(jobs_now.get(j) in FINISHED for j in jobs):
                done_at = now
        if done_at is not None and not live:
            break
        time.sleep(2)
    fields = {j: job_fields(j) for j in jobs}
    waits = [(slurm_time(f, "StartTime") - slurm_time(f, "SubmitTime")).total_seconds()
             for f in fields.values() if slurm_time(f, "StartTime") and f.get("JobState") in FINISHED]
    ends = [slurm_time(f, "EndTime") for f in fields.values() if slurm_time(f, "EndTime")]
    submits = [slurm_time(f, "SubmitTime") for f in fields.values() if slurm_time(f, "SubmitTime")]
    result = {
        "mode": mode, "jobs": len(jobs), "work_s": work,
        "completed": sum(1 for f in fields.values() if f.get("JobState") == "COMPLETED"),
        "states": sorted({f.get("JobState", "") for f in fields.values()}),
        "start_p50_s": percentile(waits, 0.5) if waits else None,
        "start_p99_s": percentile(waits, 0.99) if waits else None,
        "start_max_s": max(waits) if waits else None,
        "start_mean_s": round(statistics.mean(waits), 1) if waits else None,
        "makespan_s": (max(ends) - min(submits)).total_seconds() if ends and submits else None,
        "pod_seconds_running": round(running_s),
        "pod_seconds_idle": round(idle_s),
        "peak_workers": peak,
        "all_gone_s": round(time.monotonic() - started) if done_at else None,
        # Each job of the burst, in order: its wait for a start (null: it never started).
        "waits_s": [(slurm_time(f, "StartTime") - slurm_time(f, "SubmitTime")).total_seconds()
                    if slurm_time(f, "StartTime") and slurm_time(f, "SubmitTime") else None
                    for f in fields.values()],
    }
    print(json.dumps(result), flush=True)
    return result


def power_saving(work: int, bound: float) -> dict:
    install_cluster("elastic-power", values(power=True))
    try:
        wait_until("every node powered down", lambda: sum("POWERED_DOWN" in s for s in slurm_nodes().values())
                   == sum(MOST.values()), 420, period=5)
        return run_burst("power saving", work, bound)
    finally:
        helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200, check=False)


def keda(work: int, bound: float) -> dict:
    from test_autoscale import installed_keda, operator_prometheus, scaled_object  # noqa: PLC0415
    install_cluster("elastic-keda", values(power=False))
    try:
        wait_until("the login pod to answer sinfo", lambda: slurm("sinfo", "-h", "-o", "%P", check=False).strip(),
                   300, period=5)
        with installed_keda(), tempfile.TemporaryDirectory() as work_dir, \
                operator_prometheus(Path(work_dir)) as prometheus:
            for partition in MOST:
                so = scaled_object(prometheus.url, f"{RELEASE}-worker-{partition}", partition, MOST[partition])
                kubectl("apply", "-f", "-", stdin=json.dumps(so))
            for partition in MOST:
                wait_until(f"KEDA to take NodeSet {partition}", lambda p=partition: any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in get("scaledobject", f"{p}-workers").get("status", {}).get("conditions", [])), 120)
            try:
                return run_burst("KEDA", work, bound)
            finally:
                for partition in MOST:
                    kubectl("-n", NS, "delete", "scaledobject", f"{partition}-workers", "--ignore-not-found",
                            "--wait=true", timeout=120, check=False)
    finally:
        helm("uninstall", RELEASE, "-n", NS, "--wait", "--timeout", "180s", timeout=200, check=False)


def table(results: list[dict]) -> str:
    rows = ["| mode | jobs done | start p50 | start p99 | makespan | worker pod-s | of them idle | peak |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r['mode']} | {r['completed']}/{r['jobs']} | {r['start_p50_s']} s | {r['start_p99_s']} s | "
                    f"{r['makespan_s']} s | {r['pod_seconds_running']} | {r['pod_seconds_idle']} | "
                    f"{r['peak_workers']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=int, default=20, help="seconds each job sleeps")
    parser.add_argument("--bound", type=float, default=900, help="seconds a mode may take at most")
    parser.add_argument("--only", choices=("power", "keda"), help="one mode only")
    parser.add_argument("--out", default=str(REPO / "bench/results/elastic.json"))
    args = parser.parse_args()
    node = kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    kubectl("label", "node", node, f"nvidia.com/gpu.product={GPU_PRODUCT}", "--overwrite")
    install_operator()
    results = []
    try:
        if args.only in (None, "power"):
            results.append(power_saving(args.work, args.bound))
        if args.only in (None, "keda"):
            results.append(keda(args.work, args.bound))
    finally:
        helm("uninstall", "slurm-operator", "-n", OPERATOR_NS, "--wait", "--timeout", "120s", timeout=180,
             check=False)
    # --only keeps the other mode's figures from an earlier run of the same burst.
    out = Path(args.out)
    if args.only and out.exists():
        earlier = json.loads(out.read_text())
        if earlier.get("burst") == [list(b) for b in BURST]:
            ran = {r["mode"] for r in results}
            results = [r for r in earlier.get("results", []) if r["mode"] not in ran] + results
    out.write_text(json.dumps({"burst": BURST, "suspend_time_s": SUSPEND_TIME, "results": results},
                              indent=2) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
