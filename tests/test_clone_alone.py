"""A clone of the repository alone runs its tests: nothing the tests, scripts, CI or benchmarks run reads
data from beside the clone (the directory above it is only there on the project's own machines)."""

from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
CHECKED = ("tests", "scripts", ".ci", "benchmarks")
# a path into the shared directory beside the clone, written out or joined from "..", "..", and its name
OUTSIDE = re.compile(r"\.\./" + "shared" + r"|['\"]\.\.['\"],\s*(['\"]\.\.['\"],\s*)?['\"]" + "shared" + r"['\"]")


def test_nothing_reads_beside_the_clone():
    offenders = []
    for top in CHECKED:
        for path in sorted((REPO / top).rglob("*")):
            if not path.is_file() or path.suffix not in {".py", ".sh", ".yml", ".yaml", ".toml", ".cfg", ""}:
                continue
            if any(part in {"node_modules", "__pycache__", ".venv"} for part in path.parts):
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "reads data beside the clone (ship it in the repository instead):\n" + "\n".join(offenders)
