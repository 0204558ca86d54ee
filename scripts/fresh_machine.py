#!/usr/bin/env python3
"""Would scripts/setup's packages be enough on a fresh machine? A rehearsal on a used one.

    scripts/setup --check-fresh [--since DATE] [--build DIR]

A machine that has run the scripts for a while holds packages that someone installed by hand, so
the scripts working here proves little. This check rebuilds the fresh machine on paper:

  1. fresh  = the dpkg status, less every package apt installed since the machine was made
              (/var/log/apt/history.log; the machine was made at its boot unless --since says);
  2. after  = fresh plus what `apt-get install --no-install-recommends` of setup's packages would
              install on it (apt-get -s against that status: nothing is installed or removed);
  3. used   = the Debian packages the repository uses: every command the tracked files name that
              is a dpkg-owned executable here (in PATH's system folders and the helper folders of
              podman and CNI, so a containers.conf naming "netavark" counts), every system header
              the dev build compiled against (ninja's deps) and every library it links;
  4. it fails naming each used package that `after` lacks, with the file and word that use it.

Standard library only. It changes nothing on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DPKG_STATUS = Path("/var/lib/dpkg/status")
DPKG_INFO = Path("/var/lib/dpkg/info")
APT_HISTORY = Path("/var/log/apt/history.log")
# Where the scripts' commands live: PATH's system folders, and the helpers that programs find
# on their own (podman's network backend, the kubelet's CNI plugins).
EXEC_DIRS = ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib/podman", "/usr/libexec/podman",
             "/usr/lib/cni", "/opt/cni/bin")
# Not scanned for commands: what runs inside the images (their own Debian), prose, and setup's
# own list (naming a package there is no proof that anything uses it).
NOT_SCANNED = ("images/", "docs/", "test/unit/helm/golden/", "scripts/setup")
WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
LINKED = re.compile(r"/usr/[^\s:;\"']+\.(?:so|a)(?:\.[0-9.]+)?")


@dataclass(frozen=True)
class Use:
    package: str
    path: str  # the file of the package that is used
    where: str  # who uses it: "scripts/images: netavark", "dev build: <header>"


@dataclass(frozen=True)
class AptRun:
    start: datetime.datetime
    installed: tuple[str, ...]


def parse_history(text: str) -> list[AptRun]:
    """apt's history log: each run's start and the packages it installed (arch suffix dropped)."""
    runs = []
    for block in re.split(r"\n\s*\n", text):
        start = None
        installed: list[str] = []
        for line in block.splitlines():
            key, _, value = line.partition(": ")
            if key == "Start-Date":
                start = datetime.datetime.strptime(value.strip(), "%Y-%m-%d  %H:%M:%S")
            elif key == "Install":
                # "name:arch (version[, automatic]), name:arch (version), ..."
                installed += [m.group(1) for m in re.finditer(r"([^\s,:()]+)(?::[a-z0-9]+)? \(",
                                                                value)]
        if start is not None:
            runs.append(AptRun(start, tuple(installed)))
    return runs


def installed_since(runs: list[AptRun], since: datetime.datetime) -> set[str]:
    return {p for run in runs if run.start >= since for p in run.installed}


def status_stanzas(text: str) -> list[tuple[str, str]]:
    """(package, stanza) of every stanza of a dpkg status file."""
    out = []
    for stanza in text.split("\n\n"):
        m = re.search(r"^Package: (\S+)", stanza, re.M)
        if m:
            out.append((m.group(1), stanza.strip("\n")))
    return out


def installed_packages(status_text: str) -> set[str]:
    return {name for name, stanza in status_stanzas(status_text)
            if re.search(r"^Status: install ok installed$", stanza, re.M)}


def status_without(status_text: str, removed: set[str]) -> str:
    """The status file a machine without `removed` would have."""
    kept = [stanza for name, stanza in status_stanzas(status_text) if name not in removed]
    return "\n\n".join(kept) + "\n"


def parse_simulation(output: str) -> set[str]:
    """Packages `apt-get -s install` says it would install ("Inst name ...")."""
    return {m.group(1).split(":")[0] for m in re.finditer(r"^Inst (\S+)", output, re.M)}


def simulate_install(status_text: str, packages: list[str]) -> set[str]:
    with tempfile.NamedTemporaryFile("w", prefix="fresh-status.", delete=False) as f:
        f.write(status_text)
    simulate = ["apt-get", "-s", "-o", f"Dir::State::status={f.name}", "-o", "Debug::NoLocking=1",
                "install", "--no-install-recommends", *packages]
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = subprocess.run(simulate, capture_output=True, text=True, env=env)
        if proc.returncode != 0 and os.geteuid() == 0:
            # A machine whose package lists were cleaned knows no package: read them again.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env)
            proc = subprocess.run(simulate, capture_output=True, text=True, env=env)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise SystemExit("fresh-machine: apt-get -s install of setup's packages failed (run "
                         f"apt-get update first?):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return parse_simulation(proc.stdout)


class Owners:
    """File → Debian package, from dpkg's file lists (as `dpkg -S`, all at once)."""

    def __init__(self, info: Path = DPKG_INFO) -> None:
        self.by_path: dict[str, str] = {}
        for lst in info.glob("*.list"):
            package = lst.name[:-len(".list")].split(":")[0]
            for line in lst.read_text(errors="replace").splitlines():
                self.by_path.setdefault(line, package)

    def owner(self, path: str) -> str | None:
        path = os.path.normpath(path)
        # /bin is /usr/bin on a merged-/usr system, and a package may list either; a link made by
        # update-alternatives is nobody's, its target is.
        alternatives = [path, path[4:] if path.startswith("/usr/") else "/usr" + path,
                        os.path.realpath(path)]
        for p in alternatives:
            if p in self.by_path:
                return self.by_path[p]
        return None


def executables(dirs: tuple[str, ...] = EXEC_DIRS) -> dict[str, list[str]]:
    """Command name → its files: "bridge" is iproute2's command and a CNI plugin."""
    found: dict[str, list[str]] = {}
    for d in dirs:
        if not os.path.isdir(d) or os.path.realpath(d) != d and os.path.realpath(d) in dirs:
            continue  # /bin is /usr/bin on a merged-/usr system
        for entry in sorted(os.listdir(d)):
            path = os.path.join(d, entry)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                found.setdefault(entry, []).append(path)
    return found


def tracked_texts(repo: Path) -> dict[str, str]:
    files = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    texts = {}
    for name in files:
        if name.startswith(NOT_SCANNED) or name.endswith(".md"):
            continue
        try:
            texts[name] = (repo / name).read_text()
        except (UnicodeDecodeError, OSError):
            continue  # binary, or a link to nothing
    return texts


# An image reference names what runs inside a container, never a host command: `"image":
# "busybox"` (JSON), `{"image", "busybox"}` (C++), `image: busybox` (YAML), and a chart's
# `repository:`.
IMAGE_REFERENCE = re.compile(
    r"""(?:["']image["']\s*[,:]\s*["'][^"'\n]*["'])|(?:\b(?:image|repository):[ \t]*[^\s#]+)""")


def host_words(text: str) -> set[str]:
    """The words of a file that may name a host command: all but those of image references."""
    return set(WORD.findall(IMAGE_REFERENCE.sub(" ", text)))


def used_commands(texts: dict[str, str], commands: dict[str, list[str]],
                  owners: Owners) -> list[Use]:
    """A use for each file that names a command (word for word) and each package owning it."""
    uses = []
    for name, text in sorted(texts.items()):
        for word in sorted(host_words(text) & commands.keys()):
            for path in commands[word]:
                package = owners.owner(path)
                if package:
                    uses.append(Use(package, path, f"{name}: {word}"))
    return uses


def used_by_build(build: Path, owners: Owners) -> list[Use]:
    """System headers the build compiled against (ninja's deps log) and libraries it links."""
    paths: dict[str, str] = {}
    deps = subprocess.run(["ninja", "-C", str(build), "-t", "deps"], capture_output=True,
                          text=True)
    for line in deps.stdout.splitlines():
        line = line.strip()
        if line.startswith("/usr/"):
            paths.setdefault(os.path.normpath(line), "header")
    ninja_file = build / "build.ninja"
    if ninja_file.is_file():
        for m in LINKED.finditer(ninja_file.read_text(errors="replace")):
            paths.setdefault(os.path.normpath(m.group(0)), "library")
    uses = []
    by_package: set[str] = set()
    for path, kind in sorted(paths.items()):
        package = owners.owner(path)
        if package and package not in by_package:
            by_package.add(package)
            uses.append(Use(package, path, f"dev build: {kind}"))
    return uses


def missing(uses: list[Use], after: set[str]) -> dict[str, list[Use]]:
    out: dict[str, list[Use]] = {}
    for use in uses:
        if use.package not in after:
            out.setdefault(use.package, []).append(use)
    return out


def boot_time() -> datetime.datetime:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return datetime.datetime.fromtimestamp(int(line.split()[1]))
    raise SystemExit("fresh-machine: no btime in /proc/stat: give --since")


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/setup --check-fresh")
    parser.add_argument("--packages", required=True, help="setup's packages, space-separated")
    parser.add_argument("--since", help="when the machine was made (YYYY-MM-DD[ HH:MM:SS], local "
                        "time as apt logs it; default: its boot)")
    parser.add_argument("--build", default=str(REPO / "build/dev"),
                        help="a configured and built CMake build folder (default build/dev)")
    args = parser.parse_args()
    since = datetime.datetime.fromisoformat(args.since) if args.since else boot_time()
    listed = args.packages.split()

    status_text = DPKG_STATUS.read_text()
    runs = parse_history(APT_HISTORY.read_text()) if APT_HISTORY.is_file() else []
    later = installed_since(runs, since) & installed_packages(status_text)
    fresh_status = status_without(status_text, later)
    fresh = installed_packages(fresh_status)
    added = simulate_install(fresh_status, listed)
    after = fresh | added
    print(f"fresh machine: {len(fresh)} packages (the dpkg status less {len(later)} installed "
          f"by apt since {since:%Y-%m-%d %H:%M:%S}, in "
          f"{sum(1 for r in runs if r.start >= since)} runs)")
    print(f"setup's {len(listed)} packages would install {len(added)} on it")

    owners = Owners()
    uses = used_commands(tracked_texts(REPO), executables(), owners)
    build = Path(args.build)
    if (build / "build.ninja").is_file():
        uses += used_by_build(build, owners)
    else:
        print(f"({build} is not built: headers and libraries not checked; build the dev preset)")
    print(f"the repository uses {len({u.package for u in uses})} Debian packages "
          "(commands it names, headers and libraries of the dev build)")
    lacking = missing(uses, after)
    if not lacking:
        print("ok: a fresh machine with setup's packages has every one")
        return 0
    print(f"FAIL: a fresh machine with setup's packages would lack {len(lacking)}; add them to "
          "scripts/setup:")
    for package, its in sorted(lacking.items()):
        shown = "; ".join(f"{u.path} ({u.where})" for u in its[:3])
        more = f"; and {len(its) - 3} more uses" if len(its) > 3 else ""
        print(f"  {package}: {shown}{more}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
