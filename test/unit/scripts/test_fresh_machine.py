"""scripts/fresh_machine.py (scripts/setup --check-fresh): the parts that need no apt and no dpkg."""
import datetime
import os
import subprocess
from pathlib import Path

HISTORY = """
Start-Date: 2026-09-22  04:52:54
Commandline: apt-get install -y valgrind
Install: valgrind:amd64 (1:3.19.0-1), libc6-dbg:amd64 (2.36-9, automatic)
End-Date: 2026-09-22  04:53:10

Start-Date: 2026-12-03  17:41:35
Commandline: apt-get install -y -qq --no-install-recommends podman netavark
Install: podman:amd64 (4.3.1), conmon:amd64 (2.1.6, automatic), netavark:amd64 (1.4.0-3), aardvark-dns:amd64 (1.4.0-3, automatic)
Upgrade: libc6:amd64 (2.36-9, 2.36-9+deb12u1)
End-Date: 2026-12-03  17:42:35
"""

STATUS = "\n\n".join(
    f"Package: {name}\nStatus: install ok installed\nVersion: 1\nArchitecture: amd64"
    for name in ("libc6", "valgrind", "libc6-dbg", "podman", "conmon", "netavark", "aardvark-dns")
) + "\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n"


def test_history_gives_each_run_and_what_it_installed(fresh_machine):
    runs = fresh_machine.parse_history(HISTORY)
    assert [r.start for r in runs] == [datetime.datetime(2026, 9, 22, 4, 52, 54),
                                       datetime.datetime(2026, 12, 3, 17, 41, 35)]
    assert runs[1].installed == ("podman", "conmon", "netavark", "aardvark-dns")


def test_only_packages_installed_after_the_machine_was_made_are_taken_away(fresh_machine):
    runs = fresh_machine.parse_history(HISTORY)
    later = fresh_machine.installed_since(runs, datetime.datetime(2026, 12, 3, 17, 37, 29))
    assert later == {"podman", "conmon", "netavark", "aardvark-dns"}
    fresh = fresh_machine.installed_packages(fresh_machine.status_without(STATUS, later))
    assert fresh == {"libc6", "valgrind", "libc6-dbg"}


def test_the_simulation_lists_what_apt_would_install(fresh_machine):
    out = ("NOTE: This is only a simulation!\n"
           "Inst conmon (2.1.6 Debian:12/stable [amd64])\n"
           "Inst podman (4.3.1 Debian:12/stable [amd64])\n"
           "Conf conmon (2.1.6 Debian:12/stable [amd64])\n")
    assert fresh_machine.parse_simulation(out) == {"conmon", "podman"}


def owners_of(fresh_machine, tmp_path: Path, lists: dict[str, list[str]]):
    info = tmp_path / "info"
    info.mkdir()
    for package, files in lists.items():
        (info / f"{package}.list").write_text("\n".join(files) + "\n")
    return fresh_machine.Owners(info)


def test_owners_know_merged_usr_and_multiarch_names(fresh_machine, tmp_path):
    owners = owners_of(fresh_machine, tmp_path, {
        "iproute2": ["/bin/ip", "/sbin/bridge"],
        "libc6:amd64": ["/usr/lib/x86_64-linux-gnu/libc.so.6"]})
    assert owners.owner("/usr/bin/ip") == "iproute2"
    assert owners.owner("/usr/sbin/../sbin/bridge") == "iproute2"
    assert owners.owner("/usr/lib/x86_64-linux-gnu/libc.so.6") == "libc6"
    assert owners.owner("/usr/bin/nobodys") is None


def test_a_podman_backend_named_only_in_a_config_is_caught(fresh_machine, tmp_path):
    """The case that broke a fresh machine: podman installed, its network backend not."""
    bin_dir, helper_dir = tmp_path / "usr/bin", tmp_path / "usr/lib/podman"
    for path in (bin_dir / "podman", bin_dir / "cat", helper_dir / "netavark"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    owners = owners_of(fresh_machine, tmp_path, {
        "podman": [str(bin_dir / "podman")], "netavark": [str(helper_dir / "netavark")],
        "coreutils": [str(bin_dir / "cat")]})
    commands = fresh_machine.executables((str(bin_dir), str(helper_dir)))
    texts = {"scripts/images": 'subprocess.run(["podman", "import"])\nnetwork_backend = "netavark"\n',
             "scripts/demo": "cat log\n"}
    uses = fresh_machine.used_commands(texts, commands, owners)
    after = {"coreutils"} | {"podman", "conmon"}  # fresh, plus what installing podman brings
    lacking = fresh_machine.missing(uses, after)
    assert list(lacking) == ["netavark"]
    assert lacking["netavark"][0].where == "scripts/images: netavark"


def test_an_image_named_in_a_test_is_no_host_command(fresh_machine):
    """busybox installed by hand once failed CI: tests name it only as an image."""
    texts = ['{"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}',
             '{"containers": [{"name": "c", "image": "busybox:1.37"}]}',
             "    image: registry.example.org/busybox:1.37\n",
             "      repository: registry.example.org/busybox\n"]
    for text in texts:
        assert "busybox" not in fresh_machine.host_words(text), text
    assert "busybox" in fresh_machine.host_words("busybox sh -c true\n")
    assert "podman" in fresh_machine.host_words('run(["podman", "image", "ls"])\n')


def test_a_word_that_is_two_commands_is_both(fresh_machine, tmp_path):
    first, second = tmp_path / "sbin", tmp_path / "cni"
    for d in (first, second):
        d.mkdir()
        (d / "bridge").write_text("")
        (d / "bridge").chmod(0o755)
    assert fresh_machine.executables((str(first), str(second)))["bridge"] == [
        str(first / "bridge"), str(second / "bridge")]


def test_setup_lists_its_packages_one_a_line():
    setup = Path(__file__).resolve().parents[3] / "scripts/setup"
    out = subprocess.run([str(setup), "--list-packages"], capture_output=True, text=True,
                         check=True, env=dict(os.environ)).stdout
    packages = out.splitlines()
    assert {"podman", "netavark", "aardvark-dns", "debootstrap", "containerd"} <= set(packages)
    assert all(p and " " not in p for p in packages)
    assert len(packages) == len(set(packages))
