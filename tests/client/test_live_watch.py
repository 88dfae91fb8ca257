"""What a cell and ``submit --wait`` are told while a quiet job runs (issue 37, 4): its progress as it
changes (no state change), and the running time ticking on, against a real server."""

from __future__ import annotations

import sys
import threading

from hive_lab.format import status_line
from hive_lab.watch import watch_job
from hive_lab.widgets.job_monitor import status_html
from waiting import wait_until

QUIET = (
    "import os, pathlib, time\n"
    "from hive_lab import progress\n"
    "go = pathlib.Path(os.environ['GO'])\n"
    "for step in (1, 2):\n"
    "    progress(step, total=3)\n"
    "    while not (go.parent / f'{go.name}{step}').exists():\n"
    "        time.sleep(0.05)\n"
    "progress(3, total=3)\n"
)


def test_a_quiet_jobs_progress_and_running_time_reach_the_watcher(ann, tmp_path):
    go = tmp_path / "go"
    script = tmp_path / "quiet.py"
    script.write_text(QUIET)
    job = ann.submit({"name": "quiet", "command": f"{sys.executable} {script}", "env": {"GO": str(go)},
                      "tasks": [{"gpus": 1}]})
    told: list[dict] = []
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: told.append(
        watch_job(ann, job["id"], on_status=told.append, stop=stop, tick_s=0.0)), daemon=True)
    watcher.start()
    try:
        def steps_told():
            return [(j.get("progress") or {}).get("steps") for j in told if j.get("state") == "running"]

        wait_until(lambda: 1 in steps_told(), "step 1 told while running")
        running = next(j for j in told if (j.get("progress") or {}).get("steps") == 1)
        assert "step 1 of 3" in status_line(running) and "<progress" in status_html(running)
        # nothing changes while it waits: the watcher is still told (its line's running time ticks on)
        seen = len(told)
        wait_until(lambda: len(told) >= seen + 2, "the running job told again with nothing changed")
        (tmp_path / "go1").touch()
        wait_until(lambda: 2 in steps_told(), "step 2 told while running (no state change)")
        (tmp_path / "go2").touch()
        watcher.join(timeout=120)
        final = told[-1]
        assert final["state"] == "succeeded" and final["progress"]["steps"] == 3, final  # the last step kept
    finally:
        stop.set()
