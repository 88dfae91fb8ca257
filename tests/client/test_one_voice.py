"""One voice (issue 30): a job's numbers are said in the same words by every surface.

The CLI's table and the widgets (``hive_lab.widgets.shaping.job_rows``), the cell's status line
(``hive_lab.format.status_line``) and the kernel's notices speak through ``hive_lab.format``; the
panel, the cell views drawn by the extension and its notifications through ``labextension/src/
format.ts``. Here the same jobs, at the same instant, go through both, the TypeScript run by node from
the built extension, and every field must read the same: GPU counts, durations, ages, time limits, GPU
lists, states and reasons, estimates, progress, and the whole status line.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from hive_lab import format as fmt
from hive_lab.widgets.shaping import job_rows

FORMAT_JS = pathlib.Path(__file__).resolve().parents[2] / "labextension" / "lib" / "format.js"
NOW = datetime(2026, 3, 2, 14, 0, 0, tzinfo=timezone.utc)  # an injected instant, never the clock


def iso(seconds_before_now: float) -> str:
    return (NOW - timedelta(seconds=seconds_before_now)).isoformat().replace("+00:00", "Z")


def ts(calls: list[list]) -> list:
    """Each ``[function, *args]`` run by format.js under node, at NOW (milliseconds) where it takes one."""
    node = shutil.which("node")
    if node is None or not FORMAT_JS.exists():
        pytest.fail(f"node and the built extension ({FORMAT_JS}) are needed: run ./scripts/setup.sh")
    script = (
        "const f = await import(process.argv[1]);"
        "let s = ''; for await (const c of process.stdin) s += c;"
        "const {now, calls} = JSON.parse(s);"
        "const withNow = new Set(['statusLine', 'estimateText', 'progressShort', 'timeLimitText']);"
        "console.log(JSON.stringify(calls.map(([fn, ...args]) => withNow.has(fn) ? f[fn](args[0], now, ...args.slice(1))"
        " : f[fn](...args))));"
    )
    out = subprocess.run([node, "--input-type=module", "-e", script, FORMAT_JS.as_uri()],
                         input=json.dumps({"now": NOW.timestamp() * 1000, "calls": calls}),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


JOBS = [
    {"id": "j-000001", "name": "train", "state": "running", "reason": "1 task started by the local launcher",
     "submitted_at": iso(4000), "started_at": iso(3725.4), "gpus": 2, "gpu_type": "A100", "opportunistic": False,
     "placement": [{"task": "main-0", "node": "node-0", "gpus": [2, 3]}],
     "time_limit_s": 7200, "time_left_s": 3474.6, "deadline": iso(-3474.6),
     "progress": {"steps": 40, "total_steps": 100, "gpu_type": "A100",
                  "rates": {"A100": {"steps_per_s": 4.0}}, "estimated_finish": NOW.timestamp() + 15.2}},
    {"id": "j-000002", "name": "sweep-lr0.001-very-long-name", "state": "queued",
     "reason": "waiting for 4 GPUs in VC cv-101 (2 free)", "submitted_at": iso(74.4), "gpus": 4, "gpu_type": None,
     "estimated_start": iso(-7385.2), "estimated_start_basis": "when j-000001 ends (its time limit of 2h)",
     "time_limit_s": 5400},
    {"id": "j-000003", "name": "soon", "state": "queued", "reason": "waiting", "submitted_at": iso(3.3),
     "gpus": 0.5, "estimated_start": iso(0.2), "estimated_start_basis": ""},
    {"id": "j-000004", "name": "nobody-knows", "state": "submitted", "reason": None, "submitted_at": iso(0.4),
     "gpus": 1, "estimated_start": None, "estimated_start_basis": "running jobs have no time limit"},
    {"id": "j-000005", "name": "done", "state": "succeeded", "reason": "all 2 tasks exited with code 0",
     "submitted_at": iso(90000), "started_at": iso(89000), "finished_at": iso(86000.4), "exit_code": 0, "gpus": 8,
     "placement": [{"task": "w-0", "node": "node-0", "gpus": list(range(8))},
                   {"task": "w-1", "node": "node-1", "gpus": list(range(8))}]},
    {"id": "j-000006", "name": "broken", "state": "failed", "reason": "task main-0 exited with code 3",
     "submitted_at": iso(100), "started_at": iso(95), "finished_at": iso(93.75), "exit_code": 3, "gpus": 1},
    {"id": "j-000007", "name": "paused", "state": "paused", "reason": "paused: by ann", "submitted_at": iso(30),
     "gpus": 1, "opportunistic": True},
    {"id": "j-000008", "name": "cpu", "state": "running", "reason": "", "submitted_at": iso(12), "started_at": iso(9.04),
     "gpus": 0, "opportunistic": True, "placement": [{"task": "main-0", "node": "node-1", "gpus": []}]},
]


@pytest.mark.parametrize("field", ["status line", "estimate", "progress", "time limit"])
def test_every_job_reads_the_same_in_python_and_in_the_extension(field):
    py, js = {
        "status line": (lambda j: fmt.status_line(j, NOW), "statusLine"),
        "estimate": (lambda j: fmt.estimate_text(j, NOW), "estimateText"),
        "progress": (lambda j: fmt.progress_short(j, NOW), "progressShort"),
        "time limit": (lambda j: fmt.time_limit_text(j), "timeLimitText"),
    }[field]
    assert ts([[js, job] for job in JOBS]) == [py(job) for job in JOBS]


def test_numbers_read_the_same():
    seconds = [0, 0.04, 3.24, 9.96, 12.3, 59.4, 60, 245.9, 3599, 3600, 7385.2, 90061, 3 * 86400 + 4000]
    gpus = [[0, None], [0.5, None], [0.125, "A100"], [1, None], [2, "A100"], [8, "T4"]]
    limits = [7200, 5400, 90, 0.5, 1, 86460, 0]
    placements = [[], [{"node": "node-0", "gpus": [2]}], [{"node": "node-0", "gpus": [3, 2]}],
                  [{"node": "node-0", "gpus": [0, 1, 2, 3]}, {"node": "node-1", "gpus": [0, 1, 2, 3]}],
                  [{"node": "node-1", "gpus": []}], [{"node": "n", "gpus": [0, 2, 5]}]]
    rates = [4.0, 1234.5, 0.25, 3.14159, 12.0]
    calls = ([["duration", s] for s in seconds] + [["ageText", s] for s in seconds] + [["gpusText", *g] for g in gpus]
             + [["limitShort", s] for s in limits] + [["placementText", p] for p in placements]
             + [["threeDigits", r] for r in rates])
    expected = ([fmt.duration(s) for s in seconds] + [fmt.age_text(s) for s in seconds]
                + [fmt.gpus_text(*g) for g in gpus] + [fmt.limit_text(s) for s in limits]
                + [fmt.placement_text(p) for p in placements] + [fmt.three_digits(r) for r in rates])
    assert ts(calls) == expected


def test_the_cli_and_widget_rows_use_the_same_words():
    """``hive-lab jobs`` and the widgets print job_rows; each cell is the format layer's word for it."""
    rows = {r["id"]: r for r in job_rows(JOBS, "ann", now=NOW)}
    got = ts([c for job in JOBS for c in (
        ["gpusText", job["gpus"], job.get("gpu_type")], ["timeLimitText", job],
        ["ageText", (NOW - fmt.parse_time(job["submitted_at"])).total_seconds()],
        ["placementText", job.get("placement")])])
    for i, job in enumerate(JOBS):
        gpus, limit, age, where = got[4 * i: 4 * i + 4]
        row = rows[job["id"]]
        assert (row["gpus"], row["limit"], row["age"]) == (gpus, limit, age), job["id"]
        # a running job's row says where it runs (its GPUs), as the panel's cell view does
        assert row["reason"] == (f"on {where}" if job["state"] == "running" and where else job.get("reason") or "")
