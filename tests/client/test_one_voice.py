"""One voice (issue 30): a job's numbers are said in the same words by every surface.

The CLI's table and the widgets (``hive_lab.widgets.shaping.job_rows``), the cell's status line
(``hive_lab.format.status_line``) and the kernel's notices speak through ``hive_lab.format``; the
panel, the cell views drawn by the extension and its notifications through ``labextension/src/
format.ts``. Here the same jobs, at the same instant, go through both, the TypeScript run by node from
the built extension, and every field must read the same: GPU counts, durations, ages, time limits, GPU
lists, states and reasons, estimates, progress, and the whole status line.

Issue 8 (one voice, still): dates (local time with zone, in several zones), the word for lent GPUs, the
GPU-list form and time limits are checked on both sides, against the server's and the core's sentences,
and a grep over the surfaces' sources finds none of the old forms.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from zoneinfo import ZoneInfo

from hive_lab import format as fmt
from hive_lab.widgets.shaping import job_rows

FORMAT_JS = pathlib.Path(__file__).resolve().parents[2] / "labextension" / "lib" / "format.js"
NOW = datetime(2026, 3, 2, 14, 0, 0, tzinfo=timezone.utc)  # an injected instant, never the clock


def iso(seconds_before_now: float) -> str:
    return (NOW - timedelta(seconds=seconds_before_now)).isoformat().replace("+00:00", "Z")


def ts(calls: list[list], tz: str = "UTC") -> list:
    """Each ``[function, *args]`` run by format.js under node, at NOW (milliseconds) where it takes one,
    in the time zone ``tz`` (the browser's local zone)."""
    node = shutil.which("node")
    if node is None or not FORMAT_JS.exists():
        pytest.fail(f"node and the built extension ({FORMAT_JS}) are needed: run ./scripts/setup.sh")
    script = (
        "const f = await import(process.argv[1]);"
        "let s = ''; for await (const c of process.stdin) s += c;"
        "const {now, calls} = JSON.parse(s);"
        "const withNow = new Set(['statusLine', 'estimateText', 'progressShort', 'timeLimitText']);"
        "console.log(JSON.stringify(calls.map(([fn, ...args]) => fn === 'const' ? f[args[0]] : withNow.has(fn) ?"
        " f[fn](args[0], now, ...args.slice(1)) : f[fn](...args))));"
    )
    out = subprocess.run([node, "--input-type=module", "-e", script, FORMAT_JS.as_uri()],
                         input=json.dumps({"now": NOW.timestamp() * 1000, "calls": calls}),
                         capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": tz})
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


# -- issue 8: dates, lent GPUs, GPU lists, time limits ----------------------------------------------------

ZONES = ["UTC", "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Kolkata",
         "Australia/Sydney", "America/St_Johns", "Asia/Tokyo"]
MOMENTS = ["2026-11-27T11:42:00.000Z", "2026-07-01T23:59:30Z", "2026-03-29T01:30:00+00:00", "2026-01-01T00:00:00Z"]


@pytest.mark.parametrize("zone", ZONES)
def test_dates_read_the_same_local_time_with_zone(zone):
    """``2026-11-27 12:42 CET``: the panel (the browser's zone) and the CLI, cells and widgets (the machine's
    zone) say a moment alike, never ISO with milliseconds, never ``11:42 UTC`` for a person in Berlin."""
    expected = [fmt.when_text(m, ZoneInfo(zone)) for m in MOMENTS] + [fmt.when_text(NOW.timestamp(), ZoneInfo(zone))]
    assert ts([["whenText", m] for m in MOMENTS] + [["whenText", NOW.timestamp()]], tz=zone) == expected
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d (UTC|[A-Z]{3,4}|UTC[+-]\d{1,2}(:\d\d)?)", e) for e in expected)


def test_the_date_form_names_the_zone():
    berlin, kolkata = ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Kolkata")
    assert fmt.when_text("2026-11-27T11:42:00.000Z", berlin) == "2026-11-27 12:42 CET"
    assert fmt.when_text("2026-07-01T11:42:00Z", berlin) == "2026-07-01 13:42 CEST"
    assert fmt.when_text("2026-11-27T11:42:00Z", kolkata) == "2026-11-27 17:12 UTC+5:30"
    assert fmt.when_text(None) == "-" and fmt.when_text("") == "-"
    # the surfaces that print moments use it: the cell's "as of", a schedule's next run, progress's finish
    from hive_lab.widgets.job_monitor import as_of_text

    at = datetime(2026, 11, 27, 11, 42, tzinfo=timezone.utc)
    assert as_of_text(at) == f"as of {fmt.when_text(at)}"
    line = fmt.schedule_line({"id": "s-000001", "name": "grade", "cron": "0 0 * * *", "timezone": "Europe/Berlin",
                              "next_run_at": "2026-11-27T23:00:00Z"})
    # (a schedule's times are in its own zone, whoever reads them)
    assert line == "schedule grade: 0 0 * * * Europe/Berlin (next: 2026-11-28 00:00 CET)"
    assert line.endswith(f"(next: {fmt.when_text('2026-11-27T23:00:00Z', berlin)})")


def test_gpu_lists_read_the_same_in_the_core_the_client_and_the_extension():
    """``node-0 GPU 0,1``: the server's 'placed: main-0 on ...' (hive_scheduler.words), the CLI and cells
    (placement_text), the panel and heatmap (format.ts), the widgets' GPU names."""
    from hive_scheduler.words import gpu_list_text as core_list

    cases = [("node-0", [0]), ("node-0", [1, 0]), ("node-0", [0, 1, 2, 3]), ("n1", [0, 2, 5]), ("node-1", []),
             ("node-0", [3, 3, 2])]
    expected = [fmt.gpu_list_text(n, g) for n, g in cases]
    assert [core_list(n, g) for n, g in cases] == expected
    assert ts([["gpuListText", n, g] for n, g in cases]) == expected
    assert expected[:3] == ["node-0 GPU 0", "node-0 GPU 0,1", "node-0 GPU 0-3"]
    assert ts([["gpuName", "node-0", 3]]) == [fmt.gpu_name("node-0", 3)] == ["node-0 GPU 3"]
    from hive_lab.widgets.gpu_usage import gpu_label
    from hive_lab.widgets.shaping import share_columns

    assert gpu_label({"node": "node-0", "index": 3}) == "node-0 GPU 3"
    cols = share_columns({"gpus": [{"node": "node-0", "index": 1, "shares": [{"job": "j-1", "slot": 0, "share": 0.5}]}]})
    assert cols["gpu"] == ["node-0 GPU 1"]


def test_time_limits_read_the_same_in_the_core_the_server_the_client_and_the_extension():
    """``3m``, never ``3 min`` beside it: the estimate's basis (the core), the server's refusals and
    'time limit 3m reached', the CLI's limit column and the panel say a limit as --time-limit takes it."""
    from hive_lab.durations import parse_duration
    from hive_lab_server.jobs.lifecycle.time_limit import limit_text as server_limit
    from hive_scheduler.estimates import Expected

    limits = [180, 7200, 5400, 90, 86460, 0.5, 3600 * 4]
    expected = [fmt.limit_text(s) for s in limits]
    assert [server_limit(s) for s in limits] == expected
    assert ts([["limitShort", s] for s in limits]) == expected
    assert expected[0] == "3m" and expected[2] == "1h30m"
    assert Expected(180.0, "limit").describe() == "its time limit of 3m"
    assert Expected(14400.0, "vc", kind="VC cv-101").describe() == "if it runs VC cv-101's default time limit of 4h"
    assert all(parse_duration(e) == s for e, s in zip(expected, limits) if s >= 1)  # it can be typed back


def test_one_word_for_lent_gpus():
    """Idle GPUs lent to other VCs' opportunistic work are 'opportunistic' in the panel, the CLI's vcs
    table, %hive_status (the widgets) and the cell views: the word the docs use."""
    from rich.console import Console

    from hive_lab.tables import vcs_table
    from hive_lab.widgets.shaping import vc_rows

    assert ts([["const", "LENT_GPUS"]]) == [fmt.LENT_GPUS] == ["opportunistic"]
    vc = {"name": "cv-101", "guaranteed_gpus": 4, "used_gpus": 2, "opportunistic_gpus": 3, "queue_length": 0,
          "running_jobs": 2}
    assert vc_rows([vc])[0]["summary"] == "2/4 guaranteed GPUs used, 3 opportunistic; 2 running, 0 queued"
    console = Console(width=140, record=True)
    console.print(vcs_table([vc]))
    assert fmt.LENT_GPUS in console.export_text() and "borrowed" not in console.export_text()


ROOT = pathlib.Path(__file__).resolve().parents[2]
SURFACES = [*ROOT.glob("hive_lab/**/*.py"), *ROOT.glob("labextension/src/*.ts"),
            *ROOT.glob("server_ext/hive_lab_server/**/*.py"), *ROOT.glob("scheduler/hive_scheduler/*.py")]
OLD_FORMS = {
    "a GPU list as a Python list (GPUs [0, 1])": re.compile(r"GPUs \{list\(|GPUs \[\{"),
    "a GPU as node #index": re.compile(r"\} #\$?\{(gpu\.index|g\.get\('index')"),
    "'borrowed' for lent GPUs in a string shown": re.compile(r"[`'\"][^`'\"\n]*(\sborrowed\b|\bborrowed\s)[^`'\"\n]*[`'\"]"),
    "a UTC-only or ISO timestamp made for people": re.compile(r"strftime\([^)]*UTC|toLocaleString\(|replace\('T', ' '\)"),
    "a time limit in 'min'/' h' words": re.compile(r"\{s / 3600:g\} h|\{s / 60:g\} min"),
}


@pytest.mark.parametrize("what", sorted(OLD_FORMS))
def test_no_surface_still_uses_an_old_form(what):
    pattern = OLD_FORMS[what]
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in SURFACES if "labextension/lib" not in str(p)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"{what}:\n" + "\n".join(found)


# -- the same words from a real server: a cell's job, its placement sentence, the CLI's and %hive_status's -----

def test_a_cell_job_speaks_the_one_voice_on_a_real_server(shell, ann_env, capsys, monkeypatch):
    """A cell without --name is named after its first comment (else the notebook: JPY_SESSION_NAME), the
    server's placement sentence lists its GPUs as every surface does, and the terminal %hive_status says
    'opportunistic' for lent GPUs."""
    from hive_lab import Client

    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ann/work/resnet-sweep.ipynb")
    job = shell.run_cell_magic("submit", "--gpus 2 --wait", "# train resnet on CIFAR\nprint('hi')\n")
    untitled = shell.run_cell_magic("submit", "--wait", "print('no comment')\n")
    client = Client(ann_env.url, ann_env.tokens["ann"])
    info = client.job(job.id)
    assert info["name"] == "train resnet on CIFAR", info
    assert client.job(untitled.id)["name"] == "resnet-sweep"
    placed = [h["reason"] for h in info["history"] if (h.get("reason") or "").startswith("placed:")]
    # The GPU list is said as every surface says it. Whether the job ran in its VC's own GPUs or overflowed
    # into idle ones depends on what the worker's shared server still runs for other tests (under xdist,
    # which tests ran before on this worker): the sentence then names the overflow, and nothing else.
    where = f"placed: main-0 on {fmt.placement_text(info['placement'])}"
    overflow = f" (running in idle GPUs outside VC {info['vc']} (overflow); preemptible)"
    assert placed in ([where], [where + overflow]), info["history"]
    if placed == [where + overflow]:
        assert info["opportunistic"] is True, info  # an overflowed job is preemptible, and says so
    assert re.fullmatch(r"placed: main-0 on node-0 GPU \d,\d( \(.*\(overflow\); preemptible\))?", placed[0]), placed
    capsys.readouterr()
    shell.run_line_magic("hive_status", "")
    out = capsys.readouterr().out
    assert fmt.LENT_GPUS in out and "borrowed" not in out, out


@pytest.mark.parametrize("width", [80, 120, 140, 220])
def test_the_cli_jobs_table_never_drops_a_reason(width):
    """With limit and starts filled, rich squeezed the 'reason / where' column out of 80 to 140 columns:
    every reason must still be printed (in its column, or under the table beside its job id)."""
    from rich.console import Console

    from hive_lab.tables import jobs_table

    console = Console(width=width, record=True, color_system=None)
    console.print(jobs_table(JOBS, me="ann"))
    text = " ".join(console.export_text().split())
    for row in job_rows(JOBS, "ann", now=NOW):
        if row["reason"]:
            assert " ".join(row["reason"].split()) in text, (width, row["id"], text)
