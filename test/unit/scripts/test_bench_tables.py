"""bench/scale/compare.py and bench/parity/parity.py: the tables they write from the figures."""
import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ratio_is_slinkys_figure_over_ours():
    compare = load(BENCH / "scale/compare.py", "compare")
    assert compare.ratio(2.0, 6.0) == "3.0x"
    assert compare.ratio(0, 0) == "="
    assert compare.ratio(0, 4) == "only Slinky"
    assert compare.ratio(-1, 4) == "" and compare.ratio(2, -1) == ""
    assert compare.cell(-1, "{:.1f}") == "not reached"
    assert compare.cell(None, "{:.1f}") == "not measured"


def test_compare_writes_its_table_into_the_docs_between_its_markers(tmp_path, monkeypatch):
    compare = load(BENCH / "scale/compare.py", "compare")
    ours = {"nodes": 10, "operator": "tightrope", "rss_steady_mib": 20.0, "propagation_p99_s": 1.0}
    theirs = {"nodes": 10, "operator": "slinky", "rss_steady_mib": 60.0, "propagation_p99_s": -1}
    (tmp_path / "scale-10.json").write_text(json.dumps(ours))
    (tmp_path / "scale-10-slinky.json").write_text(json.dumps(theirs))
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# B\n\n<!-- compare-10 -->\nold\n<!-- /compare-10 -->\n\nafter\n")
    monkeypatch.setattr("sys.argv", ["compare.py", str(tmp_path), "10", str(docs)])
    compare.main()
    text = docs.read_text()
    assert "old" not in text and text.endswith("after\n")
    assert "| RSS at idle (MiB) | 20.0 | 60.0 | 3.0x |" in text
    assert "| Slurm drain -> pod condition p99 (s) | 1.00 | not reached |  |" in text
    assert (tmp_path / "compare-10.md").exists()


def test_parity_reads_the_measuring_scripts_lines():
    parity = load(BENCH / "parity/parity.py", "parity")
    out = "\n".join(["srun 100000 0", "srun 300000 0", "srun 200000 1", "sbatch_failed",
                     "throughput 5000000 20000000", "work 1500000 1900000", "work 1400000 1800000",
                     "work 1600000 2000000"])
    r = parity.parse(out)
    assert r["srun_n2_true"] == {"runs": 2, "failed": 2, "p50_s": 0.3, "p99_s": 0.3, "max_s": 0.3}
    assert r["sbatch"] == {"submitted_s": 5.0, "all_done_s": 20.0}
    assert r["work"]["loop_s_median"] == 1.5 and r["work"]["srun_s_median"] == 1.9
