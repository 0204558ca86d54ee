#!/usr/bin/env python3
"""Writes <results>/compare-N.md from scale-N.json (Tightrope) and scale-N-slinky.json (Slinky),
one row per figure with the ratio Slinky / Tightrope, and puts the same table into the docs file
between the markers <!-- compare-N --> and <!-- /compare-N --> (appended when they are missing).

    compare.py RESULTS_DIR N [DOCS_FILE]
"""
import json
import platform
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table import get  # noqa: E402  (beside this script: a figure by its dotted key path)

# (key path, label, format). Every figure is one where less is better.
ROWS = [
    ("ready_phases_s.all_pods_created", "NodeSet of N created -> every pod created (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_scheduled", "  -> every pod scheduled (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_ready", "  -> every pod Ready (s)", "{:.1f}"),
    ("ready_phases_s.all_pods_show_slurm_idle", "  -> every pod shows its Slurm state (s)", "{:.1f}"),
    ("ready_phase_requests.kube", "  operator's Kubernetes requests meanwhile", "{:.0f}"),
    ("ready_phase_requests.slurm", "  operator's Slurm requests meanwhile", "{:.0f}"),
    ("ready_phase_requests.slurm_mib", "  Slurm's answers to them (MiB)", "{:.1f}"),
    ("ready_phase_cpu_s.operator", "  CPU meanwhile: the operator (s)", "{:.1f}"),
    ("ready_phase_cpu_s.kube-apiserver", "  CPU meanwhile: kube-apiserver (s)", "{:.1f}"),
    ("ready_phase_cpu_s.slurmctld", "  CPU meanwhile: slurmctld (s)", "{:.1f}"),
    ("ready_phase_cpu_s.slurmrestd", "  CPU meanwhile: slurmrestd (s)", "{:.1f}"),
    ("rss_steady_mib", "RSS at idle (MiB)", "{:.1f}"),
    ("rss_peak_mib", "RSS peak (MiB)", "{:.1f}"),
    ("cpu_s", "operator CPU, whole run (s)", "{:.1f}"),
    ("idle_cpu_s_per_min", "operator CPU at idle (s/min)", "{:.2f}"),
    ("kube_requests_per_min_idle", "Kubernetes requests/min at idle (Leases apart)", "{:.1f}"),
    ("lease_requests_per_min", "Lease requests/min (leader election)", "{:.1f}"),
    ("slurm_requests_per_min_idle", "Slurm REST requests/min at idle", "{:.1f}"),
    ("slurm_kib_per_min_idle", "  Slurm's answers to them (KiB/min)", "{:.0f}"),
    ("slurm_cpu_s_per_min_idle.slurmctld", "slurmctld CPU at idle (s/min)", "{:.3f}"),
    ("slurm_cpu_s_per_min_idle.slurmrestd", "slurmrestd CPU at idle (s/min)", "{:.3f}"),
    ("propagation_p50_s", "Slurm drain -> pod condition p50 (s)", "{:.2f}"),
    ("propagation_p99_s", "Slurm drain -> pod condition p99 (s)", "{:.2f}"),
    ("propagation.not_seen_within_30s", "  changes not seen within 30 s", "{:.0f}"),
    ("slurm_requests_per_min_churn", "  Slurm REST requests/min meanwhile", "{:.1f}"),
    ("slurm_kib_per_min_churn", "  Slurm's answers to them (KiB/min)", "{:.0f}"),
    ("propagation_phase_cpu_s.slurmctld", "  CPU meanwhile: slurmctld (s)", "{:.2f}"),
    ("propagation_phase_cpu_s.slurmrestd", "  CPU meanwhile: slurmrestd (s)", "{:.2f}"),
    ("cordon_drain_p50_s", "cordon -> Slurm DRAIN p50 (s)", "{:.2f}"),
    ("cordon_drain_p99_s", "cordon -> Slurm DRAIN p99 (s)", "{:.2f}"),
    ("cordon.not_seen_within_60s", "  Slurm nodes not drained/undrained within 60 s", "{:.0f}"),
    ("scale_in_all_s", "scale-in N -> 0 (s)", "{:.1f}"),
    ("scale_in_requests.kube", "  operator's Kubernetes requests meanwhile", "{:.0f}"),
    ("scale_in_cpu_s.operator", "  CPU meanwhile: the operator (s)", "{:.1f}"),
    ("scale_in_cpu_s.kube-apiserver", "  CPU meanwhile: kube-apiserver (s)", "{:.1f}"),
    ("jobs_killed", "jobs killed", "{:.0f}"),
]


def cell(value, fmt: str) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, (int, float)) and value < 0:
        return "not reached"
    return fmt.format(value)


def ratio(ours, theirs) -> str:
    """Slinky's figure over ours: above 1, Tightrope needs less."""
    if not isinstance(ours, (int, float)) or not isinstance(theirs, (int, float)):
        return ""
    if ours < 0 or theirs < 0:
        return ""
    if ours == 0:
        return "=" if theirs == 0 else "only Slinky"
    return f"{theirs / ours:.1f}x"


def table(ours: dict, theirs: dict, nodes: int) -> list[str]:
    lines = [f"| figure, {nodes} nodes | Tightrope | Slinky | Slinky / Tightrope |",
             "|---|---:|---:|---:|"]
    for key, label, fmt in ROWS:
        a, b = get(ours, key), get(theirs, key)
        lines.append(f"| {label} | {cell(a, fmt)} | {cell(b, fmt)} | {ratio(a, b)} |")
    return lines


def main() -> None:
    results, nodes = Path(sys.argv[1]), int(sys.argv[2])
    docs = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    ours = json.loads((results / f"scale-{nodes}.json").read_text())
    theirs = json.loads((results / f"scale-{nodes}-slinky.json").read_text())
    rows = table(ours, theirs, nodes)
    machine = (f"{ours.get('ready_phase_cpu_s', {}).get('machine_cores', '?')} cores, "
               f"{platform.machine()}, the whole bed on the same machine")
    page = [f"# bench/run compare --nodes {nodes}", "",
            "Written by bench/scale/compare.py from scale-{0}.json and scale-{0}-slinky.json "
            "(bench/run scale, same harness, same bed settings); less is better in every row; "
            "the last column above 1 means Tightrope needs less.".format(nodes), "",
            f"Machine: {machine}.", "", *rows]
    (results / f"compare-{nodes}.md").write_text("\n".join(page) + "\n")
    print("\n".join(page))
    if docs is None:
        return
    begin, end = f"<!-- compare-{nodes} -->", f"<!-- /compare-{nodes} -->"
    block = "\n".join([begin, *rows, end])
    text = docs.read_text()
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    docs.write_text(pattern.sub(lambda _: block, text) if pattern.search(text)
                    else text.rstrip("\n") + "\n\n" + block + "\n")


if __name__ == "__main__":
    main()
