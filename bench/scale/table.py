#!/usr/bin/env python3
"""Writes <dir>/scale.md: one column per bench/results/scale-N[-OPERATOR].json, the figures of
bench/run scale."""
import json
import sys
from pathlib import Path

ROWS = [
    ("operator", "operator", "{}"),
    ("ready_all_s", "NodeSet of N created -> every pod Ready (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_created", "  every pod created (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_scheduled", "  every pod scheduled (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_show_slurm_idle", "  every pod shows its Slurm state (s)", "{:.1f}"),
    ("ready_phase_requests.kube_per_s", "  operator's Kubernetes requests/s meanwhile", "{:.1f}"),
    ("ready_phase_requests.kube_refused", "  of its requests, refused (409 exists, 404 gone)", "{:.0f}"),
    ("ready_phase_cpu_s.kube-apiserver", "  CPU meanwhile: kube-apiserver (s)", "{:.1f}"),
    ("ready_phase_cpu_s.operator", "  CPU meanwhile: the operator (s)", "{:.1f}"),
    ("ready_phase_cpu_s.slurmrestd", "  CPU meanwhile: slurmrestd (s)", "{:.1f}"),
    ("rss_steady_mib", "RSS at idle (MiB)", "{:.1f}"),
    ("rss_peak_mib", "RSS peak (MiB)", "{:.1f}"),
    ("cpu_s", "CPU, whole run (s)", "{:.1f}"),
    ("idle_cpu_s_per_min", "CPU at idle (s/min)", "{:.2f}"),
    ("kube_requests_per_min_idle", "Kubernetes requests/min at idle (no Leases)", "{:.1f}"),
    ("lease_requests_per_min", "Lease requests/min (leader election)", "{:.1f}"),
    ("slurm_requests_per_min_idle", "Slurm REST requests/min at idle", "{:.1f}"),
    ("slurm_cpu_s_per_min_idle.slurmctld", "slurmctld CPU at idle (s/min)", "{:.3f}"),
    ("slurm_cpu_s_per_min_idle.slurmrestd", "slurmrestd CPU at idle (s/min)", "{:.3f}"),
    ("propagation_p50_s", "Slurm drain -> pod condition p50 (s)", "{:.2f}"),
    ("propagation_p99_s", "Slurm drain -> pod condition p99 (s)", "{:.2f}"),
    ("cordon_drain_p50_s", "cordon -> Slurm DRAIN p50 (s)", "{:.2f}"),
    ("cordon_drain_p99_s", "cordon -> Slurm DRAIN p99 (s)", "{:.2f}"),
    ("scale_in_all_s", "scale-in N -> 0 (s)", "{:.1f}"),
    ("scale_in_cpu_s.kube-apiserver", "  CPU meanwhile: kube-apiserver (s)", "{:.1f}"),
    ("scale_in_cpu_s.operator", "  CPU meanwhile: the operator (s)", "{:.1f}"),
    ("scale_in_requests.kube", "  operator's Kubernetes requests meanwhile", "{:.0f}"),
    ("scale_in_requests.kube_refused", "  of which refused (404 gone, 409 exists)", "{:.0f}"),
    ("jobs_killed", "jobs killed", "{}"),
]


def get(doc: dict, path: str):
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    runs = sorted((json.loads(p.read_text()) for p in out.glob("scale-*.json")),
                  key=lambda r: (r.get("operator", "") != "tightrope", r.get("nodes", 0)))
    if not runs:
        return
    lines = ["# bench/run scale", "",
             "Written by bench/scale/table.py from the scale-N.json next to it; -1 means not reached.",
             "", "| figure | " + " | ".join(f"{r['nodes']} nodes, {r.get('operator', '')}" for r in runs) + " |",
             "|---|" + "---:|" * len(runs)]
    for key, label, fmt in ROWS:
        cells = []
        for r in runs:
            v = get(r, key)
            cells.append("" if v is None else (fmt.format(v) if not isinstance(v, str) else v))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    (out / "scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
