import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def load_script(name: str, module_name: str, monkeypatch):
    """scripts/<name> (no .py) as a module named module_name."""
    loader = importlib.machinery.SourceFileLoader(module_name, str(SCRIPTS / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module_name, module)  # dataclasses look their module up
    loader.exec_module(module)
    return module


@pytest.fixture()
def testbed(tmp_path, monkeypatch):
    """scripts/testbed as a module, with its cache and beds in a temporary directory."""
    monkeypatch.setenv("TIGHTROPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TIGHTROPE_BEDS", str(tmp_path / "beds"))
    return load_script("testbed", "testbed", monkeypatch)


@pytest.fixture()
def images(tmp_path, monkeypatch):
    """scripts/images as a module, with its cache in a temporary directory."""
    monkeypatch.setenv("TIGHTROPE_CACHE", str(tmp_path / "cache"))
    return load_script("images", "images_script", monkeypatch)


@pytest.fixture()
def fresh_machine(monkeypatch):
    """scripts/fresh_machine.py (setup --check-fresh) as a module."""
    return load_script("fresh_machine.py", "fresh_machine", monkeypatch)


@pytest.fixture()
def debian_mirror(monkeypatch):
    """scripts/debian_mirror.py as a module."""
    return load_script("debian_mirror.py", "debian_mirror", monkeypatch)
