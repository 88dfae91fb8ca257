"""How a queued job's ``estimated_start`` reads in the CLI's ``starts`` column and the status line that
``%%submit``, ``hive-lab jobs ID`` and a Job's repr print."""

from __future__ import annotations

from datetime import datetime, timezone

from hive_lab.format import estimate_text, short_estimate, status_line
from hive_lab.tables import jobs_table
from hive_lab.widgets.shaping import job_rows

NOW = datetime(2026, 1, 2, 10, 0, 0, tzinfo=timezone.utc)
BASE = {"id": "j-000002", "name": "eval", "state": "queued", "gpus": 1, "vc": "a", "user": "ann", "priority": 0,
        "submitted_at": "2026-01-02T09:59:00Z", "reason": "VC a is using 4/4 guaranteed GPUs and the job needs 1"}
KNOWN = dict(BASE, estimated_start="2026-01-02T12:03:00Z",
             estimated_start_basis="when j-000001 ends (its time limit of 2h)")
UNKNOWN = dict(BASE, estimated_start=None, estimated_start_basis="running jobs have no time limit")


def test_status_line_says_when_and_why():
    assert status_line(KNOWN, NOW) == (
        "j-000002 eval: queued for 1 min 00 s — VC a is using 4/4 guaranteed GPUs and the job needs 1; "
        "starts in ~2 h 03 min (when j-000001 ends (its time limit of 2h))")
    assert status_line(UNKNOWN, NOW).endswith("; start unknown (running jobs have no time limit)")
    # an older server (no estimate fields) and a running job: nothing added
    assert status_line(BASE, NOW) == "j-000002 eval: queued for 1 min 00 s — " + BASE["reason"]
    assert estimate_text(dict(KNOWN, state="running"), NOW) == ""


def test_starts_column():
    assert short_estimate(KNOWN, NOW) == "in ~2 h 03 min"
    assert short_estimate(UNKNOWN, NOW) == "unknown"
    assert [r["estimate"] for r in job_rows([KNOWN, UNKNOWN, BASE], now=NOW)] == ["in ~2 h 03 min", "unknown", ""]
    table = jobs_table([KNOWN])
    headers = [c.header for c in table.columns]
    assert headers[8:10] == ["limit", "starts"]  # the time limit, then the estimated start


def test_job_ids_are_never_cut_in_an_80_column_terminal():
    """Issue 26: `hive-lab jobs` in 80 columns showed `j-0000…`: the id is what people copy."""
    from rich.console import Console

    jobs = [dict(KNOWN, id=f"j-00000{i}", name="a-rather-long-sweep-name-lr0.001", reason=BASE["reason"] * 2)
            for i in range(3)]
    console = Console(width=80, record=True, color_system=None)
    console.print(jobs_table(jobs))
    text = console.export_text()
    assert all(f"j-00000{i}" in text for i in range(3)), text
