"""``hive-lab schedules`` (subprocess) and the Python client's schedule calls against a REAL server
(firing on an injected clock is tests/server/test_schedules_live.py)."""

import json
import pathlib
import subprocess
import sys

from hive_lab import Client
from hive_lab.errors import HiveLabError

HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


def cli(srv, *args, user="ann", check=True):
    action, *rest = args  # the server options go before a command given after --
    out = subprocess.run([HIVE_LAB, "schedules", action, "--url", srv.url, "--token", srv.tokens[user], *rest],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 or not check, out.stderr
    return out


def test_cli_add_list_pause_resume_delete(hive_server):
    out = cli(hive_server, "add", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--name", "grade",
              "--policy", "queue_one", "--gpus", "1", "--json", "--", "python3", "grade.py", "--all")
    created = json.loads(out.stdout)
    sid = created["id"]
    assert created["job"]["command"] == "python3 grade.py --all" and created["job"]["tasks"][0]["gpus"] == 1
    assert created["policy"] == "queue_one" and created["next_run_at"].endswith(":30:00.000Z")
    table = cli(hive_server, "list").stdout
    assert sid in table and "grade" in table and "Europe/Berlin" in table
    assert json.loads(cli(hive_server, "pause", sid, "--json").stdout)["paused"] is True
    assert "paused" in cli(hive_server, "show", sid).stdout
    assert json.loads(cli(hive_server, "resume", sid, "--json").stdout)["next_run_at"]
    other = cli(hive_server, "delete", sid, user="bob", check=False)  # not bob's: as if it did not exist
    assert other.returncode == 1 and f"schedule {sid} does not exist" in other.stderr
    assert "deleted" in cli(hive_server, "delete", sid).stdout
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
