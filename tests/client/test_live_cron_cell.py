"""A ``%%submit --cron`` cell run twice in a REAL kernel (ipykernel, started by jupyter_client) against a
REAL server, sent as JupyterLab sends it: the execute request carries the cell's id (``metadata.cellId``)
and the kernel runs with the notebook's session name (``JPY_SESSION_NAME``). Issue 40, 5: each run added
a schedule (both fired) and the cell's saved output was the raw schedule dict."""

from __future__ import annotations

import sys

import pytest
from jupyter_client.manager import KernelManager

from hive_lab import Client

CELL = "%%submit --cron '0 0 * * *' --tz Europe/Berlin\nprint('grading')\n"


@pytest.fixture
def kernel(hive_server):
    km = KernelManager(kernel_name="python3")
    km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    env = {"HIVE_LAB_URL": hive_server.url, "HIVE_LAB_TOKEN": hive_server.tokens["ann"],
           "JPY_SESSION_NAME": "course/grading.ipynb", "PATH": "/usr/bin:/bin"}
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run_cell(kc, code: str, cell_id: str) -> list[dict]:
    """Execute ``code`` as JupyterLab does (with its cell id); the outputs the notebook would save."""
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                         metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    outputs = []
    while True:
        reply = kc.get_iopub_msg(timeout=120)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind = reply["msg_type"]
        if kind == "status" and reply["content"]["execution_state"] == "idle":
            return outputs
        if kind in ("stream", "execute_result", "display_data", "error"):
            outputs.append(reply)


def text_of(outputs: list[dict]) -> str:
    parts = []
    for out in outputs:
        content = out["content"]
        parts.append(content.get("text") or content.get("data", {}).get("text/plain") or
                     "\n".join(content.get("traceback") or []))
    return "".join(parts)


def test_a_cron_cell_run_twice_in_a_kernel_is_one_schedule_shown_as_one_line(kernel, hive_server):
    ann = Client(hive_server.url, hive_server.tokens["ann"])
    try:
        assert run_cell(kernel, "%load_ext hive_lab", "cell-load") == []
        first = run_cell(kernel, CELL, "3f2a9c1e-0000-4000-8000-000000000001")
        again = run_cell(kernel, CELL, "3f2a9c1e-0000-4000-8000-000000000001")  # the same cell, run again
        schedules = ann.schedules()
        assert [s["name"] for s in schedules] == ["grading.ipynb cell 3f2a9c1e"], schedules
        line = text_of(first)
        assert len(first) == 1 and line.count("\n") == 0, first  # one line: not the dict, no env, no wrapper
        assert line.startswith("schedule grading.ipynb cell 3f2a9c1e: every day at 00:00 Europe/Berlin (next: ")
        assert line.endswith(" 00:00 CET)") or line.endswith(" 00:00 CEST)"), line  # midnight there, not UTC
        assert text_of(again) == line + "; replaced the previous one"
        other = run_cell(kernel, CELL, "9b1d0000-0000-4000-8000-000000000002")  # another cell: its own
        assert "replaced" not in text_of(other) and len(ann.schedules()) == 2
    finally:
        for s in ann.schedules():
            ann.delete_schedule(s["id"])
