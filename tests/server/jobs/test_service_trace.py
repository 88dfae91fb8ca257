"""benchmarks/service_trace.py is a differential check (a refactoring that keeps behaviour prints the same
trace as the code before, byte for byte): it is only useful while the trace depends on its seed alone."""

import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "service_trace.py"


def trace(seed: int) -> str:
    out = subprocess.run([sys.executable, str(SCRIPT), "--seed", str(seed), "--steps", "150"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_the_trace_depends_on_the_seed_alone():
    first = trace(5)
    assert first == trace(5)
    assert "| running |" in first and "| succeeded |" in first and "| cancelled |" in first
    assert first != trace(6)
