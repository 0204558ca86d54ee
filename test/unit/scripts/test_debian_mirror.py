"""scripts/debian_mirror.py: the mirror comes from the machine's apt sources, or the variable."""
from pathlib import Path

import pytest

DEBIAN_SOURCES = """Types: deb
# a comment
URIs: http://mirror.test/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test/debian-security
Suites: bookworm-security
Components: main
"""


def machine(tmp_path: Path, files: dict[str, str], releases: dict[str, str] | None = None,
            codename: str = "bookworm") -> dict:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (etc / name).write_text(text)
    lists = tmp_path / "lists"
    lists.mkdir()
    for name, origin in (releases or {}).items():
        (lists / name).write_text(f"Origin: {origin}\nSuite: stable\n")
    os_release = tmp_path / "os-release"
    os_release.write_text(f'NAME="Debian GNU/Linux"\nVERSION_CODENAME={codename}\n')
    return dict(environ={}, etc=etc, lists=lists, os_release=os_release)


def test_the_first_plain_suite_of_a_deb822_file(debian_mirror, tmp_path):
    where = machine(tmp_path, {"sources.list.d/debian.sources": DEBIAN_SOURCES})
    assert debian_mirror.find_mirror(**where) == "http://mirror.test/debian"


def test_a_one_line_source_with_options(debian_mirror, tmp_path):
    where = machine(tmp_path, {"sources.list": (
        "# deb http://old.test/debian bookworm main\n"
        "deb-src http://src.test/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.test/debian/ bookworm main\n")})
    assert debian_mirror.find_mirror(**where) == "http://mirror.test/debian"


def test_security_updates_and_other_suites_are_not_the_archive(debian_mirror, tmp_path):
    where = machine(tmp_path, {"sources.list": (
        "deb http://security.test/debian-security bookworm-security main\n"
        "deb http://vendor.test/apt nodistro main\n"
        "deb http://mirror.test/debian bookworm main\n")})
    assert debian_mirror.find_mirror(**where) == "http://mirror.test/debian"


def test_a_third_party_archive_of_the_same_suite_is_passed_over_by_its_origin(debian_mirror,
                                                                              tmp_path):
    where = machine(
        tmp_path,
        {"sources.list.d/a-vendor.list": "deb https://vendor.test/linux/debian bookworm stable\n",
         "sources.list.d/debian.sources": DEBIAN_SOURCES},
        releases={"vendor.test_linux_debian_dists_bookworm_InRelease": "Vendor",
                  "mirror.test_debian_dists_bookworm_InRelease": "Debian"})
    assert debian_mirror.find_mirror(**where) == "http://mirror.test/debian"


def test_disabled_stanzas_and_other_files_are_skipped(debian_mirror, tmp_path):
    disabled = DEBIAN_SOURCES.replace("Types: deb\n# a", "Types: deb\nEnabled: no\n# a", 1)
    where = machine(tmp_path, {"sources.list.d/debian.sources": disabled,
                               "sources.list.d/old.list.disabled": "deb http://x.test/d bookworm main\n",
                               "sources.list.d/sid.list": "deb http://sid.test/debian sid main\n"})
    assert debian_mirror.find_mirror(**where) == "http://sid.test/debian"


def test_the_variable_wins(debian_mirror, tmp_path):
    where = machine(tmp_path, {"sources.list.d/debian.sources": DEBIAN_SOURCES})
    where["environ"] = {"TIGHTROPE_DEBIAN_MIRROR": "https://site.test/debian/"}
    assert debian_mirror.find_mirror(**where) == "https://site.test/debian"


def test_no_archive_names_the_variable_to_set(debian_mirror, tmp_path):
    where = machine(tmp_path, {"sources.list": "deb file:/media/cdrom bookworm main\n"})
    with pytest.raises(debian_mirror.MirrorError, match="TIGHTROPE_DEBIAN_MIRROR"):
        debian_mirror.find_mirror(**where)
