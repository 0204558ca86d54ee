#!/usr/bin/env python3
"""Bare-metal parity: the same Slurm 26.05, jobs through slurmd in pods against slurmd on the host.

    bench/parity/parity.py [--runs 200] [--jobs 1000] [--work 2000000] [--keep]

On a node bed of its own (bench-parity) with two host slurmd (the bed's slurmctld, partition tb),
it installs the operator and the slurm chart (deploy/helm/values/single-node.yaml: slurmctld,
two slurmd pods, a login pod) and runs one measuring script in both places: in the bed's root
against the host cluster, and in the login pod against the pod cluster:

  1. `srun -N2 true`, --runs times: latency of each, from the command's start to its end;
  2. --jobs `sbatch --wrap=true` one after another, then until squeue is empty: jobs/s;
  3. a fixed work loop (bash arithmetic, --work iterations) as `srun -N1`, five times: the
     loop's own time inside the job, and srun's whole time.

Writes bench/results/parity.json and bench/results/parity.md (ratios pod / host; 1.0 is parity),
with the scheduling settings in which the two slurm.conf differ. Nothing here asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BED = "bench-parity"
NS, OPERATOR_NS = "slurm", "slinky"
LOGIN = "deploy/slurm-login-slinky"

# Runs in bash where srun/sbatch/squeue reach one cluster; prints one "key value..." line a figure.
# Times are microseconds from date +%s%N, taken in the same place as the commands run.
MEASURE = r"""
set -u
part=$1 runs=$2 jobs=$3 work=$4
now() { date +%s%N; }
for i in $(seq "$runs"); do
  t0=$(now); srun -N2 -p "$part" true; rc=$?; t1=$(now)
  echo "srun $(( (t1 - t0) / 1000 )) $rc"
done
t0=$(now)
for i in $(seq "$jobs"); do
  sbatch -Q -p "$part" -N1 -o /dev/null -e /dev/null --chdir=/tmp --wrap=true || echo "sbatch_failed"
done
t1=$(now)
for i in $(seq 6000); do
  [ "$(squeue -h -p "$part" -o %i | wc -l)" = 0 ] && break
  sleep 0.1
done
t2=$(now)
echo "throughput $(( (t1 - t0) / 1000 )) $(( (t2 - t0) / 1000 ))"
for i in 1 2 3 4 5; do
  t0=$(now)
  inner=$(srun -N1 -p "$part" bash -c "s=\$(date +%s%N); i=0; while [ \$i -lt $work ]; do i=\$((i+1)); done; e=\$(date +%s%N); echo \$(( (e - s) / 1000 ))")
  t1=$(now)
  echo "work $inner $(( (t1 - t0) / 1000 ))"
done
"""

# slurm.conf settings that decide how fast jobs start and end.
SCHEDULING = ("SchedulerType", "SchedulerParameters", "SelectType", "SelectTypeParameters",
              "ProctrackType", "TaskPlugin", "JobAcctGatherType", "PrologFlags", "LaunchParameters",
              "MessageTimeout", "MinJobAge", "AccountingStorageType", "JobCompType")


def say(what: str) -> None:
    print(f"[parity {time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def run(cmd: list[str], timeout: int = 1800, env: dict | None = None, check: bool = True) -> str:
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


def bed_env() -> dict:
    out = {}
    for line in run([str(REPO / "scripts/testbed"), "--name", BED, "env"]).splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            out[key] = shlex.split(value)[0] if value else ""
    return out


def parse(output: str) -> dict:
    srun, work, failures = [], [], 0
    throughput = None
    for line in output.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "srun" and len(parts) == 3:
            if parts[2] == "0":
                srun.append(int(parts[1]) / 1e6)
            else:
                failures += 1
        elif parts[0] == "throughput":
            throughput = (int(parts[1]) / 1e6, int(parts[2]) / 1e6)
        elif parts[0] == "work" and len(parts) == 3:
            work.append((int(parts[1]) / 1e6, int(parts[2]) / 1e6))
        elif parts[0] == "sbatch_failed":
            failures += 1
    srun.sort()

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else -1

    return {"srun_n2_true": {"runs": len(srun), "failed": failures, "p50_s": pct(srun, 0.5),
                             "p99_s": pct(srun, 0.99), "max_s": srun[-1] if srun else -1},
            "sbatch": {"submitted_s": throughput[0] if throughput else -1,
                       "all_done_s": throughput[1] if throughput else -1},
            "work": {"loop_s_median": statistics.median(w[0] for w in work) if work else -1,
                     "srun_s_median": statistics.median(w[1] for w in work) if work else -1,
                     "loop_s": [w[0] for w in work]}}


def config(lines: str) -> dict:
    out = {}
    for line in lines.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in SCHEDULING:
            out[key.strip()] = value.strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--work", type=int, default=2000000)
    ap.add_argument("--keep", action="store_true", help="leave the bed up")
    args = ap.parse_args()
    testbed = str(REPO / "scripts/testbed")
    say("images (built when missing)")
    run([str(REPO / "scripts/images"), "build"], timeout=3600)
    say(f"bed {BED}: a node and two host slurmd")
    run([testbed, "--name", BED, "up", "--with-node", "--nodes", "2", "--no-db"], timeout=900)
    try:
        env = bed_env()
        kubectl, helm = env["KUBECTL"], env["HELM"]
        say("operator and the slurm chart (two slurmd pods)")
        run([helm, "upgrade", "--install", "slurm-operator", "deploy/helm/slurm-operator", "-n",
             OPERATOR_NS, "--create-namespace", "--wait", "--timeout", "300s"], env=env)
        for _ in range(60):  # the webhook's Service may route a moment after --wait
            if subprocess.run([helm, "upgrade", "--install", "slurm", "deploy/helm/slurm", "-n", NS,
                               "--create-namespace", "-f", "deploy/helm/values/single-node.yaml"],
                              cwd=REPO, env={**os.environ, **env}, capture_output=True).returncode == 0:
                break
            time.sleep(3)
        login = [kubectl, "-n", NS, "exec", LOGIN, "-c", "login", "--"]
        for _ in range(200):
            idle = subprocess.run(login + ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                                  text=True, env={**os.environ, **env}).stdout
            if sum(1 for line in set(idle.splitlines()) if line.endswith(" idle")) >= 2:
                break
            time.sleep(3)
        else:
            raise RuntimeError("the pod cluster never showed two idle workers")
        pod_part = run(login + ["sinfo", "-h", "-o", "%P"], env=env).split()[0].rstrip("*")
        host_part = env["SLURM_PARTITION"]
        measure = [str(args.runs), str(args.jobs), str(args.work)]
        say(f"host slurmd: partition {host_part}")
        host_out = run([testbed, "--name", BED, "slurm", "bash", "-c", MEASURE, "measure",
                        host_part, *measure], timeout=7200)
        say(f"slurmd in pods: partition {pod_part}")
        pod_out = run(login + ["bash", "-c", MEASURE, "measure", pod_part, *measure], env=env,
                      timeout=7200)
        host_conf = config(run([testbed, "--name", BED, "slurm", "scontrol", "show", "config"]))
        pod_conf = config(run(login + ["scontrol", "show", "config"], env=env))
    finally:
        if not args.keep:
            run([testbed, "--name", BED, "destroy"], check=False)
    result = {"machine": {"cores": os.cpu_count(), "arch": platform.machine()},
              "runs": args.runs, "jobs": args.jobs, "work_iterations": args.work,
              "host": parse(host_out), "pods": parse(pod_out),
              "config_differences": {k: {"host": host_conf.get(k), "pods": pod_conf.get(k)}
                                     for k in SCHEDULING if host_conf.get(k) != pod_conf.get(k)}}
    out = REPO / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "parity.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "parity.md").write_text(table(result))
    print(table(result))


def table(r: dict) -> str:
    h, p = r["host"], r["pods"]
    rate = lambda x: r["jobs"] / x["sbatch"]["all_done_s"] if x["sbatch"]["all_done_s"] > 0 else -1
    rows = [
        (f"srun -N2 true p50 (s), {r['runs']} runs", h["srun_n2_true"]["p50_s"], p["srun_n2_true"]["p50_s"]),
        ("srun -N2 true p99 (s)", h["srun_n2_true"]["p99_s"], p["srun_n2_true"]["p99_s"]),
        (f"{r['jobs']} sbatch: submitted (s)", h["sbatch"]["submitted_s"], p["sbatch"]["submitted_s"]),
        (f"{r['jobs']} sbatch: all done (s)", h["sbatch"]["all_done_s"], p["sbatch"]["all_done_s"]),
        ("  jobs completed per second", rate(h), rate(p)),
        (f"work loop ({r['work_iterations']:,} iterations) inside the job, median of 5 (s)",
         h["work"]["loop_s_median"], p["work"]["loop_s_median"]),
        ("  srun -N1 of it, whole (s)", h["work"]["srun_s_median"], p["work"]["srun_s_median"]),
    ]
    lines = ["# bench/run parity", "",
             "Written by bench/parity/parity.py. The same Slurm 26.05 packages: slurmctld and two "
             "slurmd on the host (the test bed's root) against slurmctld, two slurmd and a login "
             "pod installed by the operator's charts on the bed's node; each measured from its own "
             "side (the bed's root, the login pod). Ratio pods / host: 1.0 is parity; above 1, "
             "the pods take longer (for jobs per second, below 1).", "",
             f"Machine: {r['machine']['cores']} cores, {r['machine']['arch']}; both clusters on it.",
             "", "| figure | host slurmd | slurmd in pods | pods / host |", "|---|---:|---:|---:|"]
    for label, a, b in rows:
        ratio = f"{b / a:.2f}" if a and a > 0 and b and b > 0 else ""
        lines.append(f"| {label} | {a:.3f} | {b:.3f} | {ratio} |")
    lines += ["", f"Failed sruns or submissions: host {h['srun_n2_true']['failed']}, "
              f"pods {p['srun_n2_true']['failed']}.", ""]
    if r["config_differences"]:
        lines += ["Where the two slurm.conf differ in scheduling settings:", "",
                  "| setting | host | pods |", "|---|---|---|"]
        lines += [f"| {k} | {v['host']} | {v['pods']} |" for k, v in r["config_differences"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
