"""``hive-lab schedules`` (subprocess) and the Python client's schedule calls against a REAL server
(firing on an injected clock is tests/server/jobs/pipelines/test_schedules_live.py)."""

import json
import pathlib
import subprocess
import sys

from hive_lab import Client
from hive_lab.errors import HiveLabError

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


def cli(srv, *args, user="ann", check=True, cwd=None):
    action, *rest = args  # the server options go before a command given after --
    out = subprocess.run([HIVE_LAB, "schedules", action, "--url", srv.url, "--token", srv.tokens[user], *rest],
                         capture_output=True, text=True, timeout=60, cwd=cwd)
    assert out.returncode == 0 or not check, out.stderr
    return out


def test_cli_add_list_pause_resume_delete(hive_server, tmp_path):
    (tmp_path / "grade.py").write_text("print('graded')\n")
    out = cli(hive_server, "add", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--name", "grade",
              "--policy", "queue_one", "--gpus", "1", "--file", "grade.py", "--json", "--", "python3", "grade.py",
              "--all", cwd=tmp_path)
    created = json.loads(out.stdout)
    sid = created["id"]
    assert created["job"]["command"] == "python3 grade.py --all" and created["job"]["tasks"][0]["gpus"] == 1
    assert created["job"]["files"] == {"grade.py": "print('graded')\n"}
    assert created["policy"] == "queue_one" and created["next_run_at"].endswith(":30:00.000Z")
    table = cli(hive_server, "list").stdout
    assert sid in table and "grade" in table and "Europe/Berlin" in table
    assert json.loads(cli(hive_server, "pause", sid, "--json").stdout)["paused"] is True
    assert "paused" in cli(hive_server, "show", sid).stdout
    assert json.loads(cli(hive_server, "resume", sid, "--json").stdout)["next_run_at"]
    other = cli(hive_server, "delete", sid, user="bob", check=False)  # not bob's: as if it did not exist
    assert other.returncode == 1 and f"schedule {sid} does not exist" in other.stderr
    assert "deleted" in cli(hive_server, "delete", sid).stdout
    missing = cli(hive_server, "add", "--cron", "@daily", "--", "python3", "grade.py", check=False)  # not staged
    assert missing.returncode == 1 and "grade.py is not staged with the job" in missing.stderr, missing.stderr
    bad = cli(hive_server, "add", "--cron", "every day", "-c", "true", check=False)
    assert bad.returncode == 1 and "is not a cron expression" in bad.stderr


def test_python_client(ann, hive_server):
    created = ann.add_schedule("@hourly", {"command": "echo hi", "tasks": [{"gpus": 1}]}, name="hourly",
                               policy="run_all", paused=True)
    assert created["paused"] and created["next_run_at"] is None and created["job"]["environment"]  # this env
    assert [s["id"] for s in ann.schedules()] == [created["id"]]
    bob = Client(hive_server.url, hive_server.tokens["bob"])
    assert bob.schedules() == []
    try:
        bob.pause_schedule(created["id"])
        raise AssertionError("bob paused ann's schedule")
    except HiveLabError as exc:
        assert "does not exist" in str(exc)
    assert ann.resume_schedule(created["id"])["next_run_at"].endswith(":00:00.000Z")
    ann.delete_schedule(created["id"])
    assert ann.schedules() == []


def test_cli_add_again_replaces_and_says_so_in_the_schedules_zone(hive_server, tmp_path):
    """Issue 40, 5: the same ``schedules add`` twice is one schedule (named after its script), and the
    line shows the time in the schedule's zone, not in UTC."""
    (tmp_path / "grade.py").write_text("print('graded')\n")
    add = ("add", "--cron", "0 0 * * *", "--tz", "Europe/Berlin", "--file", "grade.py", "--", "python3", "grade.py")
    first = cli(hive_server, *add, cwd=tmp_path).stdout.strip()
    second = cli(hive_server, *add, cwd=tmp_path).stdout.strip()
    assert first.startswith("schedule grade: every day at 00:00 Europe/Berlin (next: ") and " 00:00 CE" in first
    assert second == first + "; replaced the previous one"
    ann = Client(hive_server.url, hive_server.tokens["ann"])
    assert [s["name"] for s in ann.schedules()] == ["grade"]
    ann.delete_schedule(ann.schedules()[0]["id"])
