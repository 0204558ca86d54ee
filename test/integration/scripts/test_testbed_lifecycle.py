"""scripts/testbed against the real thing: processes, ports, caches and addresses.

Runs as root with the tools built (scripts/testbed build). The CTest fixture's bed (TESTBED_NAME)
is up meanwhile, so every bed started here also proves that two beds run side by side.
"""
import ipaddress
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTBED = str(REPO / "scripts" / "testbed")
SHARED_BED = os.environ.get("TESTBED_NAME", "ctest")


def tb(*args, env=None, check=True):
    r = subprocess.run([sys.executable, TESTBED, *args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=600)
    if check and r.returncode:
        raise AssertionError(f"testbed {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def bed_env(name):
    lines = tb("--name", name, "env").stdout.splitlines()
    return dict(shlex.split(line)[1].split("=", 1) for line in lines)


def bed_state(name):
    return json.loads((Path(bed_env(name)["TESTBED_DIR"]) / "state.json").read_text())


def running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def pids_in(root):
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "root") == root:
                    out.add(int(p.name))
            except OSError:
                pass
    return out


def mounts_under(path):
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(path)]


@pytest.fixture(scope="module")
def own_bed():
    name = f"pytest-{os.getpid()}"
    tb("--name", name, "up")
    yield name
    tb("--name", name, "destroy", check=False)


def test_a_second_bed_runs_beside_the_shared_one(own_bed):
    mine, shared = bed_state(own_bed), bed_state(SHARED_BED)
    assert mine["base"] != shared["base"]
    assert tb("--name", own_bed, "status", check=False).returncode == 0
    assert tb("--name", SHARED_BED, "status", check=False).returncode == 0


def test_down_leaves_no_process_and_no_mount_behind(own_bed):
    env = bed_env(own_bed)
    # A running job puts a slurmstepd and the job's own processes into the bed too.
    tb("--name", own_bed, "slurm", "sbatch", "-n1", "--mem=100", "-D", env["SLURM_JOB_DIR"],
       "--wrap", "sleep 300")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
            "sleep" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
            for p in pids_in(env["SLURM_ROOT"]) if Path(f"/proc/{p}/cmdline").exists()):
        time.sleep(0.2)
    pids = {p["pid"] for p in bed_state(own_bed)["procs"].values()} | pids_in(env["SLURM_ROOT"])
    assert len(pids) >= 11  # etcd, 3 Kubernetes, mariadb, slurmdbd, slurmctld, 3 slurmd, slurmrestd
    tb("--name", own_bed, "down")
    assert [p for p in pids if running(p)] == []
    assert mounts_under(env["TESTBED_DIR"] + "/") == []
    # ... and it comes back from its saved state.
    tb("--name", own_bed, "up")
    assert tb("--name", own_bed, "status", check=False).returncode == 0


def test_ports_in_use_move_a_bed_to_free_ports(own_bed):
    before = bed_state(own_bed)["base"]
    tb("--name", own_bed, "down")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", before + 2))  # the API server's port
        squatter.listen()
        tb("--name", own_bed, "up")
        after = bed_state(own_bed)["base"]
        assert after != before
        assert tb("--name", own_bed, "status", check=False).returncode == 0


def test_nothing_listens_or_connects_outside_loopback():
    env = bed_env(SHARED_BED)
    pids = {p["pid"] for p in bed_state(SHARED_BED)["procs"].values()} | pids_in(env["SLURM_ROOT"])
    seen = 0
    for proto in ("-t", "-u"):
        out = subprocess.run(["ss", "-Hanp", proto], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
            if not owners & pids:
                continue
            seen += 1
            cols = line.split()
            local, peer = cols[3], cols[4]
            for addr in (local, peer):
                host = addr.rsplit(":", 1)[0].strip("[]")
                if host in ("*", "0.0.0.0") and addr is peer:
                    continue  # the peer column of a listening socket
                assert ipaddress.ip_address(host.split("%")[0]).is_loopback, line
    assert seen >= 11


def test_a_missing_build_names_the_command_that_builds_it(tmp_path):
    r = tb("--name", "never", "up", env={"TIGHTROPE_CACHE": str(tmp_path)}, check=False)
    assert r.returncode == 1
    assert re.search(r"scripts/testbed --kubernetes v1\.\d+\.\d+ build", r.stderr), r.stderr
    assert "Traceback" not in r.stderr


def cached(name):
    cache = Path(os.environ.get("TIGHTROPE_CACHE", Path.home() / ".cache" / "tightrope"))
    [found] = cache.glob(name)
    return found


def test_a_truncated_kubernetes_binary_is_detected_and_rebuilt(tmp_path):
    # The default release's (the cache may hold others).
    k8s = Path(tb("tool-path", "kubectl").stdout.strip()).parents[1]
    shutil.copytree(k8s, tmp_path / k8s.name)
    kubectl = tmp_path / k8s.name / "bin" / "kubectl"
    with open(kubectl, "r+b") as f:
        f.truncate(4096)
    r = tb("build", "--k8s-only", env={"TIGHTROPE_CACHE": str(tmp_path)})
    assert "truncated" in r.stderr
    assert "built in" in r.stderr
    assert kubectl.stat().st_size == (k8s / "bin" / "kubectl").stat().st_size
    again = tb("build", "--k8s-only", env={"TIGHTROPE_CACHE": str(tmp_path)})
    assert "verified" in again.stderr


def test_a_damaged_slurm_root_is_detected_and_repaired(tmp_path):
    root = cached("slurm-root-*")
    copy = tmp_path / root.name
    # Hard links: cheap, and dpkg replaces files by rename, so the original stays untouched.
    subprocess.run(["cp", "-al", str(root), str(copy)], check=True)
    sinfo = copy / "usr/bin/sinfo"
    data = sinfo.read_bytes()
    sinfo.unlink()
    sinfo.write_bytes(data[:1000])
    sinfo.chmod(0o755)
    r = tb("build", "--slurm-only", env={"TIGHTROPE_CACHE": str(tmp_path)})
    assert "usr/bin/sinfo" in r.stderr and "truncated" in r.stderr
    assert "reinstalling ['slurm-client']" in r.stderr
    assert sinfo.read_bytes() == (root / "usr/bin/sinfo").read_bytes()
    again = tb("build", "--slurm-only", env={"TIGHTROPE_CACHE": str(tmp_path)})
    assert "verified" in again.stderr
