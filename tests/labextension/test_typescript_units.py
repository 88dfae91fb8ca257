"""The labextension's pure TypeScript (heatmap layout, colours, the words numbers are said in) under node's
own test runner: ``labextension/test/*.test.mjs``, run against the build in ``labextension/lib`` (what
``./scripts/setup.sh`` makes). Run in three time zones, since ``whenText`` speaks the browser's local one.
Alone: ``cd labextension && node --test test/``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"
BUILT = [LABEXTENSION / "lib" / f"{name}.js" for name in ("layout", "colors", "format", "jobStates")]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "Asia/Kolkata"])
def test_pure_typescript_units(zone):
    node = shutil.which("node")
    missing = [str(p) for p in BUILT if not p.exists()]
    if node is None or missing:
        pytest.fail(f"node and the built extension ({', '.join(missing) or 'lib/'}) are needed: run ./scripts/setup.sh")
    tests = sorted(str(p.relative_to(LABEXTENSION)) for p in (LABEXTENSION / "test").glob("*.test.mjs"))
    assert len(tests) >= 3, tests
    out = subprocess.run([node, "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", "--test", *tests],
                         cwd=LABEXTENSION, capture_output=True, text=True, timeout=120,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TZ": zone})
    failed = [line for line in out.stdout.splitlines() if line.startswith("not ok")]
    assert out.returncode == 0 and not failed, f"{failed}\n{out.stdout[-4000:]}\n{out.stderr[-2000:]}"
    passed = next(line for line in out.stdout.splitlines() if line.startswith("# pass "))
    assert int(passed.split()[-1]) >= 26, passed
