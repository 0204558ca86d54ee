"""scripts/package-plugin: the Krew manifest names the tarball it wrote, by its sha256."""

import hashlib
import subprocess
import tarfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def test_the_manifest_carries_the_tarballs_sha256_and_address(tmp_path):
    binary = tmp_path / "kubectl-slurm"
    binary.write_text("#!/bin/sh\necho plugin\n")
    out = tmp_path / "krew"
    subprocess.run([str(REPO / "scripts/package-plugin"), "--binary", str(binary), "--uri",
                    "https://downloads.site.example/kubectl-slurm_linux_amd64.tar.gz", "--out", str(out)],
                   check=True, capture_output=True, text=True)
    archive = out / "kubectl-slurm_linux_amd64.tar.gz"
    manifest = yaml.safe_load((out / "slurm.yaml").read_text())
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "slurm"
    assert manifest["spec"]["version"].startswith("v")
    platform = manifest["spec"]["platforms"][0]
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"].endswith("kubectl-slurm_linux_amd64.tar.gz")
    assert platform["bin"] == "kubectl-slurm"
    with tarfile.open(archive) as tar:
        member = tar.getmember("kubectl-slurm")
        assert member.mode & 0o111 and member.mtime == 0


def test_it_refuses_to_guess_where_the_tarball_goes(tmp_path):
    r = subprocess.run([str(REPO / "scripts/package-plugin"), "--binary", "/bin/true", "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--uri" in r.stderr
