"""The JupyterLab panel's job-state vocabulary is generated from the service's (one source, Python):
``labextension/src/jobStates.ts`` is exactly what ``python -m hive_lab_server.wire.job_state`` writes, and
no other TypeScript file lists states by hand (a list of two or more state names, or a union type)."""

from __future__ import annotations

import pathlib
import re

from hive_lab_server.wire.job_state import STATE_NAMES, typescript

REPO = pathlib.Path(__file__).resolve().parents[3]
SRC = REPO / "labextension" / "src"
GENERATED = SRC / "jobStates.ts"

_STATE = "(?:" + "|".join(STATE_NAMES) + ")"
# 'queued', 'running' (in an array or a Set) or | 'queued' | 'running' (a union type)
HAND_LIST = re.compile(rf"""['"]{_STATE}['"]\s*(?:,|\|)\s*['"]{_STATE}['"]|\|\s*['"]{_STATE}['"]\s*$""", re.M)


def test_the_typescript_states_are_the_generated_ones():
    assert GENERATED.read_text() == typescript(), (
        "labextension/src/jobStates.ts is out of date; run: python -m hive_lab_server.wire.job_state "
        "labextension/src/jobStates.ts")


def test_no_typescript_file_copies_the_states_by_hand():
    copies = [f"{path.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0).strip()}"
              for path in sorted(SRC.rglob("*.ts")) if path != GENERATED
              for text in [path.read_text()] for m in HAND_LIST.finditer(text)]
    assert not copies, "import the state sets from ./jobStates instead:\n" + "\n".join(copies)


def test_the_generated_sets_follow_the_lifecycle():
    text = typescript()
    assert "export const WAITING_STATES: ReadonlySet<string> = new Set<JobState>(['submitted', 'queued']);" in text
    assert "'paused'" in text.split("export const ACTIVE_STATES")[1].split(";")[0]  # a paused job is unfinished
