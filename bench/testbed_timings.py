#!/usr/bin/env python3
"""Times the test bed's life cycle on this machine and writes the figures to a JSON file.

    fresh up      a new bed with the tools cached: PKI, MariaDB's datadir, slurmdbd's schema, ...
    restart up    `up` after `down`: state kept, processes started again
    no-op up      `up` when everything already runs
    down          stop everything (with nothing to cancel)
Each is run REPEAT times; min, median and max are reported. The bed is destroyed at the end.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TESTBED = str(Path(__file__).resolve().parent.parent / "scripts" / "testbed")
NAME = f"bench-{os.getpid()}"
REPEAT = int(os.environ.get("REPEAT", "3"))


def timed(*args):
    t0 = time.monotonic()
    subprocess.run([sys.executable, TESTBED, "--name", NAME, *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main(out: str) -> None:
    samples = {"fresh up": [], "restart up": [], "no-op up": [], "down": []}
    try:
        for _ in range(REPEAT):
            samples["fresh up"].append(timed("up"))
            samples["no-op up"].append(timed("up"))
            samples["down"].append(timed("down"))
            samples["restart up"].append(timed("up"))
            timed("destroy")
    finally:
        subprocess.run([sys.executable, TESTBED, "--name", NAME, "destroy"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = {"machine": {"cpus": os.cpu_count()}, "unit": "seconds", "repeat": REPEAT, "results": {}}
    for what, xs in samples.items():
        report["results"][what] = {"min": round(min(xs), 2), "median": round(statistics.median(xs), 2),
                                   "max": round(max(xs), 2)}
        print(f"{what:12} min {min(xs):6.2f} s  median {statistics.median(xs):6.2f} s  max {max(xs):6.2f} s")
    Path(out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/testbed.json")
