"""The panel's types of the REST API's answers are generated from the server's response models (one
source, Python): ``labextension/src/wire.ts`` is exactly what ``python -m hive_lab_server.api.typescript``
writes, and ``api.ts`` declares none of them by hand."""

from __future__ import annotations

import pathlib
import re

from hive_lab_server.api.typescript import typescript, wire_models

REPO = pathlib.Path(__file__).resolve().parents[3]
SRC = REPO / "labextension" / "src"
GENERATED = SRC / "wire.ts"


def test_the_typescript_wire_types_are_the_generated_ones():
    assert GENERATED.read_text() == typescript(), (
        "labextension/src/wire.ts is out of date; run: python -m hive_lab_server.api.typescript "
        "labextension/src/wire.ts")


def test_no_typescript_file_declares_an_answer_by_hand():
    generated = {f"I{m.__name__}" for m in wire_models()}
    copies = [f"{path.relative_to(REPO)}: {m.group(1)}" for path in sorted(SRC.rglob("*.ts")) if path != GENERATED
              for m in re.finditer(r"^export (?:interface|type) (\w+)\b(?! =)", path.read_text(), re.M)
              if m.group(1) in generated]
    assert not copies, "import these from ./wire (generated) instead:\n" + "\n".join(copies)


def test_optional_and_nullable_follow_the_models():
    text = typescript()
    job = text.split("export interface IJob {")[1].split("\n}")[0]
    assert "\n  id: string;" in job and "\n  state: JobState;" in job       # always sent
    assert "\n  exit_code?: number | null;" in job                          # sent once set, may be null
    assert "\n  placement: IPlacement[];" in job
    usage = text.split("export interface IUsageRow {")[1].split("\n}")[0]
    assert "\n  cpu_seconds: number | null;" in usage                       # null where not measured
    element = text.split("export interface IArrayElement {")[1].split("\n}")[0]
    assert "state: JobState | 'pending';" in element                        # the states named, never copied
    progress = text.split("export interface IProgress {")[1].split("\n}")[0]
    assert "total_steps?: number | null;" in progress and "estimated_finish?: number | null;" in progress
