#!/usr/bin/env python3
"""The Debian mirror that debootstrap uses: the site's own, never one written in this repository.

    python3 scripts/debian_mirror.py      prints it, or says which variable to set

TIGHTROPE_DEBIAN_MIRROR wins when set. Otherwise the machine's apt sources decide: the first `deb`
source (sources.list, then sources.list.d/*.list and *.sources in apt's order) of a plain release
suite (the host's codename, or stable/testing/unstable/sid; not -security, -updates or
-backports) over http(s). When apt has fetched that source's Release file, it must say
`Origin: Debian`, so that a third-party archive that names the same suite is passed over.
Standard library only; scripts/testbed and scripts/images import it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

VARIABLE = "TIGHTROPE_DEBIAN_MIRROR"
PLAIN_SUITES = {"stable", "testing", "unstable", "sid", "experimental"}


class MirrorError(Exception):
    pass


@dataclass(frozen=True)
class Source:
    uri: str
    suites: tuple[str, ...]


def parse_one_line(text: str) -> list[Source]:
    """`deb [options] uri suite [components]` lines; deb-src, comments and options skipped."""
    sources = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)  # [arch=amd64 signed-by=...]
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            sources.append(Source(words[1], (words[2],)))
    return sources


def parse_deb822(text: str) -> list[Source]:
    """Stanzas of Types/URIs/Suites (apt's .sources files); `Enabled: no` stanzas skipped."""
    sources = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:  # a continuation line
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        suites = tuple(fields.get("suites", "").split())
        for uri in fields.get("uris", "").split():
            sources.append(Source(uri, suites))
    return sources


def apt_sources(etc: Path) -> list[Source]:
    """Every deb source of the machine, in the order apt reads them."""
    sources = []
    main = etc / "sources.list"
    if main.is_file():
        sources += parse_one_line(main.read_text(errors="replace"))
    parts = etc / "sources.list.d"
    if parts.is_dir():
        for path in sorted(parts.iterdir()):
            if path.suffix == ".list":
                sources += parse_one_line(path.read_text(errors="replace"))
            elif path.suffix == ".sources":
                sources += parse_deb822(path.read_text(errors="replace"))
    return sources


def host_codename(os_release: Path) -> str:
    if os_release.is_file():
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return ""


def release_origin(lists: Path, uri: str, suite: str) -> str | None:
    """The Origin of the Release file apt keeps for uri/suite, None when apt has none."""
    host_path = re.sub(r"^[a-z+]+://([^@/]*@)?", "", uri).rstrip("/").replace("/", "_")
    for name in ("InRelease", "Release"):
        path = lists / f"{host_path}_dists_{suite}_{name}"
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("Origin:"):
                    return line.split(":", 1)[1].strip()
            return ""
    return None


def find_mirror(environ: dict[str, str] | None = None, etc: Path = Path("/etc/apt"),
                lists: Path = Path("/var/lib/apt/lists"),
                os_release: Path = Path("/etc/os-release")) -> str:
    environ = os.environ if environ is None else environ
    if environ.get(VARIABLE):
        return environ[VARIABLE].rstrip("/")
    plain = PLAIN_SUITES | ({host_codename(os_release)} - {""})
    for source in apt_sources(etc):
        if not source.uri.startswith(("http://", "https://")):
            continue
        for suite in source.suites:
            if suite not in plain:
                continue
            origin = release_origin(lists, source.uri, suite)
            if origin is None or origin == "Debian":
                return source.uri.rstrip("/")
    raise MirrorError(
        f"no Debian archive among this machine's apt sources ({etc}); set {VARIABLE} to the "
        "URL of a Debian mirror (the one your site uses for its Debian machines)")


if __name__ == "__main__":
    try:
        print(find_mirror())
    except MirrorError as e:
        print(f"debian_mirror: {e}", file=sys.stderr)
        sys.exit(1)
