#!/usr/bin/env python3
"""Seeds the fuzz corpus (in the cache, never the repository) with a running bed's real answers.

    test/fuzz/seed_from_bed.py CORPUS_DIR     (in the environment of `scripts/testbed env`)

slurmrestd's answers (nodes, jobs, partitions, reservations, diag, ping, an error, a 304) go to
fuzz_slurm_answer (with the two leading bytes that target reads: status, then decoder) and
fuzz_slurm_codec (the body alone); the bed's token to fuzz_jwt; hostlists of the answers to
fuzz_hostlist; a short pod watch stream of the API server to fuzz_kube_watch. Talks only to the
bed's loopback addresses.
"""
from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

# The status table and decoder selector of test/fuzz/slurm_answer_fuzz.cpp.
STATUSES = [200, 304, 400, 401, 403, 404, 429, 500, 502, 503]
DECODER = {"nodes": 0, "jobs": 1}


def slurm(path: str, token: str | None = None) -> tuple[int, bytes]:
    url = os.environ["SLURMRESTD_URL"] + path
    req = urllib.request.Request(url, headers={
        "X-SLURM-USER-TOKEN": token if token is not None else os.environ["SLURM_JWT"],
        "X-SLURM-USER-NAME": "slurm"})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def write(corpus: Path, target: str, name: str, data: bytes) -> None:
    (corpus / target).mkdir(parents=True, exist_ok=True)
    (corpus / target / f"bed-{name}").write_bytes(data)


def main() -> None:
    corpus = Path(sys.argv[1])
    version = "v0.0.44"
    answers = {
        "nodes": slurm(f"/slurm/{version}/nodes"),
        "jobs": slurm(f"/slurm/{version}/jobs"),
        "partitions": slurm(f"/slurm/{version}/partitions"),
        "reservations": slurm(f"/slurm/{version}/reservations"),
        "diag": slurm(f"/slurm/{version}/diag"),
        "ping": slurm(f"/slurm/{version}/ping"),
        "missing-job": slurm(f"/slurm/{version}/job/999999999"),
        "bad-token": slurm(f"/slurm/{version}/nodes", token="not-a-token"),
        "not-modified": slurm(f"/slurm/{version}/nodes?update_time=4000000000"),
    }
    hostlists = set()
    for name, (status, body) in answers.items():
        selector = DECODER.get(name, 2)
        code = STATUSES.index(status) if status in STATUSES else 0
        write(corpus, "fuzz_slurm_answer", name, bytes([code, selector]) + body)
        if body:
            write(corpus, "fuzz_slurm_codec", name, body)
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            continue
        for job in doc.get("jobs", []):
            hostlists.add(job.get("nodes", ""))
        for reservation in doc.get("reservations", []):
            hostlists.add(reservation.get("node_list", ""))
    hostlists.add(os.environ.get("SLURM_NODES", ""))
    for i, expression in enumerate(sorted(h for h in hostlists if h)):
        write(corpus, "fuzz_hostlist", str(i), expression.encode())
    write(corpus, "fuzz_jwt", "token", os.environ["SLURM_JWT"].encode())
    # A pod watch, as an informer reads it (first byte: the chunk size the target cuts at).
    watch = subprocess.run([os.environ["KUBECTL"], "get", "--raw",
                            "/api/v1/pods?watch=1&timeoutSeconds=2"],
                           capture_output=True, timeout=30).stdout
    if watch:
        write(corpus, "fuzz_kube_watch", "pods", bytes([17]) + watch)
    print(f"seeded {corpus} from the bed {os.environ.get('TESTBED_NAME', '?')}")


if __name__ == "__main__":
    main()
