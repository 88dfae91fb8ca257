"""A two-step pipeline from a notebook (issue 27): ``%%submit --after`` in a real IPython shell and
``hive-lab submit --after`` as a subprocess, against a REAL Jupyter server with hive-lab."""

import json
import pathlib
import subprocess
import sys

import pytest

from hive_lab import Client

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")



def test_train_then_evaluate_only_if_training_succeeded(shell, tmp_path, ann_env):
    gate = tmp_path / "go"
    train = shell.run_cell_magic("submit", "--name train-27", f"import pathlib, time\n"
                                 f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
                                 f"raise SystemExit(int(pathlib.Path({str(gate)!r}).read_text()))\n")
    evaluate = shell.run_cell_magic("submit", "--name evaluate-27 --after train-27", "print('evaluating')\n")
    assert evaluate.info["state"] == "queued"
    assert evaluate.info["reason"] == f"waiting for {train.id} to succeed"
    shell.user_ns["trained"] = train  # a variable holding the Job works too, with what it must do
    report = shell.run_cell_magic("submit", "--name report-27 --after trained:failed", "print('report')\n")
    assert report.info["reason"] == f"waiting for {train.id} to fail"
    gate.write_text("0")
    assert evaluate.wait(60).state == "succeeded" and "evaluating" in evaluate.logs()
    assert report.wait(60).state == "cancelled"
    assert report.info["reason"] == f"dependency never met: {train.id} succeeded, so it will never fail"


def test_cli_submit_after(ann_env):
    def cli(*args, check=True):
        out = subprocess.run([HIVE_LAB, "submit", "--url", ann_env.url, "--token", ann_env.tokens["ann"], *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 or not check, out.stderr
        return out

    first = json.loads(cli("--json", "--name", "first-27", "-c", "exit 1").stdout)
    second = json.loads(cli("--json", "--wait", "--after", "first-27:ended", "-c", "echo second").stdout)
    assert second["spec"]["depends_on"] == [{"job": first["id"], "when": "ended"}]
    assert second["state"] == "succeeded"
    out = cli("--after", f"{first['id']}:soon", "-c", "true", check=False)
    assert out.returncode != 0 and "after the colon use ok, failed or ended" in out.stderr
    out = cli("--after", "no-such-job-27", "-c", "true", check=False)
    assert out.returncode != 0 and "no job of yours has that id or name" in out.stderr


def test_python_client_after_takes_job_handles(ann):
    from hive_lab.job import Job

    first = Job(ann, ann.submit({"command": "true", "name": "py-27"}))
    second = ann.submit({"command": "true"}, after=[first])
    assert ann.job(second["id"])["spec"]["depends_on"] == [{"job": first.id, "when": "succeeded"}]
    assert Job(ann, second).wait(60).state == "succeeded"


def test_a_cell_becomes_a_recurring_job(shell, capsys, ann_env):
    """``%%submit --cron``: the cell's spec is a schedule's job (issue 27: schedules from %%submit too)."""
    schedule = shell.run_cell_magic("submit", "--name nightly-27 --cron '0 0 * * *' --tz Europe/Berlin",
                                    "print('grading')\n")
    try:
        assert schedule["id"].startswith("s-") and schedule["cron"] == "0 0 * * *"
        assert schedule["timezone"] == "Europe/Berlin" and schedule["job"]["name"] == "nightly-27"
        from datetime import datetime
        from zoneinfo import ZoneInfo

        at = datetime.fromisoformat(schedule["next_run_at"].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Berlin"))
        assert (at.hour, at.minute) == (0, 0)  # midnight in Berlin, whatever the date and its offset
        zone = at.tzname()  # CET or CEST, as the date has it
        line = f"schedule nightly-27: every day at 00:00 Europe/Berlin (next: {at:%Y-%m-%d} 00:00 {zone})"
        assert repr(schedule) == line and capsys.readouterr().out == ""  # the cell's output: that one line
        from IPython.core.error import UsageError

        with pytest.raises(UsageError, match="--cron makes a schedule"):
            shell.run_cell_magic("submit", "--cron '* * * * *' --wait", "print(1)\n")
    finally:
        Client(ann_env.url, ann_env.tokens["ann"]).delete_schedule(schedule["id"])


def test_a_cron_cell_run_twice_keeps_one_schedule(shell, ann_env):
    """Issue 40, 5: running a ``%%submit --cron`` cell again added a second schedule (both fired). The cell
    names its schedule (after --name, else the notebook and cell; here, a terminal shell: its code)."""
    ann = Client(ann_env.url, ann_env.tokens["ann"])
    try:
        for args in ("--cron '0 0 * * *'", "--cron '0 0 * * *' --tz Europe/Berlin"):  # the same cell, run twice
            schedule = shell.run_cell_magic("submit", args, "print('grading')\n")
        assert repr(schedule).endswith("; replaced the previous one") and schedule["timezone"] == "Europe/Berlin"
        assert [s["id"] for s in ann.schedules()] == [schedule["id"]]
        other = shell.run_cell_magic("submit", "--cron '0 0 * * *'", "print('another cell')\n")
        assert other["id"] != schedule["id"] and not repr(other).endswith("replaced the previous one")
        assert len(ann.schedules()) == 2
    finally:
        for s in ann.schedules():
            ann.delete_schedule(s["id"])
