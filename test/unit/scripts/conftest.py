import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "testbed"


@pytest.fixture()
def testbed(tmp_path, monkeypatch):
    """scripts/testbed as a module, with its cache and beds in a temporary directory."""
    monkeypatch.setenv("TIGHTROPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TIGHTROPE_BEDS", str(tmp_path / "beds"))
    loader = importlib.machinery.SourceFileLoader("testbed", str(SCRIPT))
    spec = importlib.util.spec_from_loader("testbed", loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "testbed", module)  # dataclasses look their module up
    loader.exec_module(module)
    return module
