"""benchmarks/compare.py, the benchmark gate: the same benchmark run against this tree and another commit
in one run (each side importing its own packages), ratios printed, a worse figure flagged."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def gate():
    spec = importlib.util.spec_from_file_location("compare", ROOT / "benchmarks" / "compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_worse_and_better_beyond_the_tolerance_by_the_figures_direction():
    g = gate()
    time, rate = g.Figure("t", "", "ms"), g.Figure("r", "", "/s", lower_is_better=False)
    assert [g.verdict(time, x, 0.15) for x in (1.2, 1.1, 0.8)] == ["WORSE", "same", "better"]
    assert [g.verdict(rate, x, 0.15) for x in (0.8, 0.9, 1.2)] == ["WORSE", "same", "better"]


def test_each_side_imports_its_own_tree(tmp_path):
    g = gate()
    base = g.unpack("HEAD", tmp_path / "base")
    g.check_imports(base)  # raises when the packages would come from elsewhere
    g.check_imports(ROOT)


def test_the_gate_runs_a_benchmark_on_both_sides_and_prints_the_ratio():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare.py"), "HEAD", "--only", "replay",
                          "--rounds", "1", "--tolerance", "100"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("simulate philly-dev"))
    assert row.split()[-1] == "same" and " s " in row, out.stdout
