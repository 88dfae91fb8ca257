"""Recurring jobs (issue 27) through a REAL Jupyter server with hive-lab (local launcher, real processes,
SQLite) whose clock the test sets: the server reads its time from a file (``HiveLabApp.clock``, set in
a ``jupyter_server_config.py``), so a schedule fires when the test moves the time, never by waiting.

Covered: a schedule fires twice, as its owner; the three policies on overlap; missed runs after a real
restart; what other users and admins may do (by attack); bad input."""

import os
import pathlib

import pytest

from waiting import wait_until

T0 = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC (any fixed instant)
USERS = {"ann": {}, "bob": {}, "carol": {}}


class FileClock:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.set(T0)

    def set(self, t: float) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(repr(float(t)))
        os.replace(tmp, self.path)  # the server never reads half a number


@pytest.fixture
def clock(tmp_path):
    return FileClock(tmp_path / "clock")


@pytest.fixture
def srv(tmp_path, clock):
    from fixtures.live_server import LiveServer

    server = LiveServer(tmp_path / "srv", users=USERS, vc_access={"ann": ["default"], "bob": ["default"]},
                        admin_users=["carol"], cluster_config={"nodes": 1, "gpus_per_node": 8, "gpu_type": "T4",
                                                               "vcs": {"default": 6, "other": 2}})
    (server.config_dir / "jupyter_server_config.py").write_text(
        f"c.HiveLabApp.clock = lambda: float(open({str(clock.path)!r}).read())\n")
    server.start()
    yield server
    server.close()


def create(srv, user, body, status=201):
    r = srv.request("POST", "schedules", user=user, json=body)
    assert r.status_code == status, r.text
    return r.json()


def runs_when(srv, sid, user, predicate, what):
    def check():
        sched = srv.request("GET", f"schedules/{sid}", user=user).json()
        return sched if predicate(sched["runs"]) else None
    return wait_until(check, what, timeout=60)


JOB = {"command": "echo tick", "tasks": [{"gpus": 1}]}


def test_a_schedule_fires_twice_as_its_owner(srv, clock):
    sched = create(srv, "ann", {"name": "nightly", "cron": "*/10 * * * *", "timezone": "Europe/Berlin", "job": JOB})
    assert sched["next_run_at"] == "2026-09-21T14:20:00.000Z" and sched["runs"] == [] and sched["user"] == "ann"
    clock.set(T0 + 6 * 60 + 45)  # 14:20:05, then 14:30:05
    first = runs_when(srv, sched["id"], "ann", lambda runs: len(runs) == 1, "the first run")["runs"][0]
    assert first["outcome"] == "submitted" and first["due_at"] == "2026-09-21T14:20:00.000Z"
    job = srv.wait_for_job(first["job_id"], "succeeded", user="ann")
    assert job["user"] == "ann" and job["name"] == "nightly" and job["vc"] == "default"
    clock.set(T0 + 16 * 60 + 45)
    runs = runs_when(srv, sched["id"], "ann", lambda runs: len(runs) == 2, "the second run")["runs"]
    assert [r["due_at"] for r in runs] == ["2026-09-21T14:30:00.000Z", "2026-09-21T14:20:00.000Z"]
    assert runs[0]["job_id"] != runs[1]["job_id"]
    srv.wait_for_job(runs[0]["job_id"], "succeeded", user="ann")
    listed = srv.request("GET", "schedules", user="ann").json()["schedules"]
    assert [s["id"] for s in listed] == [sched["id"]] and listed[0]["next_run_at"] == "2026-09-21T14:40:00.000Z"


def test_overlap_policies(srv, clock, tmp_path):
    gate = tmp_path / "gate"
    slow = {"command": f"while [ ! -e {gate} ]; do sleep 0.02; done", "tasks": [{"gpus": 1}]}
    ids = {p: create(srv, "ann", {"cron": "0 * * * *", "policy": p, "job": slow})["id"]
           for p in ("skip", "queue_one", "run_all")}
    clock.set(T0 + 3600)  # 15:13:20: the 15:00 runs
    first = {p: runs_when(srv, sid, "ann", lambda r: len(r) == 1, f"{p}'s first run")["runs"][0]["job_id"]
             for p, sid in ids.items()}
    for job_id in first.values():
        srv.wait_for_job(job_id, "running", user="ann")
    clock.set(T0 + 2 * 3600)  # 16:13:20: the 16:00 runs, while the 15:00 ones still run
    got = {p: runs_when(srv, sid, "ann", lambda r: len(r) == 2, f"{p}'s second run")["runs"][0]
           for p, sid in ids.items()}
    assert got["skip"]["outcome"] == "skipped" and got["skip"]["reason"] == \
        f"the previous run {first['skip']} is still running"
    waiting = srv.request("GET", f"jobs/{got['queue_one']['job_id']}", user="ann").json()
    assert waiting["state"] == "queued" and waiting["reason"] == f"waiting for {first['queue_one']} to end"
    assert srv.wait_for_job(got["run_all"]["job_id"], "running", user="ann")
    clock.set(T0 + 3 * 3600)  # 17:13:20: queue_one has one waiting already
    third = runs_when(srv, ids["queue_one"], "ann", lambda r: len(r) == 3, "queue_one's third run")["runs"][0]
    assert third["outcome"] == "skipped" and third["reason"] == f"a run already waits: {waiting['id']} (queued)"
    gate.touch()
    srv.wait_for_job(waiting["id"], "succeeded", user="ann")


def test_missed_runs_after_a_restart_follow_the_policy_and_schedules_survive(srv, clock):
    ids = {p: create(srv, "ann", {"cron": "0 * * * *", "policy": p, "job": JOB})["id"]
           for p in ("skip", "queue_one", "run_all")}
    paused = create(srv, "ann", {"cron": "0 * * * *", "job": JOB, "paused": True})["id"]
    srv.stop()
    clock.set(T0 + 3 * 3600)  # down over 15:00, 16:00 and 17:00
    srv.start()
    runs = {p: runs_when(srv, sid, "ann", lambda r: len(r) == 3, f"{p}'s runs after the restart")["runs"]
            for p, sid in ids.items()}
    hours = ["2026-09-21T17:00:00.000Z", "2026-09-21T16:00:00.000Z", "2026-09-21T15:00:00.000Z"]
    for p, rs in runs.items():
        assert [r["due_at"] for r in rs] == hours, p
    assert [r["outcome"] for r in runs["run_all"]] == ["submitted"] * 3
    assert [r["outcome"] for r in runs["skip"]] == ["submitted", "skipped", "skipped"]
    assert runs["skip"][1]["reason"] == "missed (the server was not running then)"
    assert [r["outcome"] for r in runs["queue_one"]] == ["submitted", "skipped", "skipped"]
    assert runs["queue_one"][2]["reason"] == "missed; merged into the run due at 2026-09-21T17:00:00.000Z"
    for rs in runs.values():
        for r in rs:
            if r["job_id"]:
                srv.wait_for_job(r["job_id"], "succeeded", user="ann")
    still = srv.request("GET", f"schedules/{paused}", user="ann").json()
    assert still["paused"] and still["runs"] == [] and still["next_run_at"] is None
    resumed = srv.request("POST", f"schedules/{paused}/resume", user="ann").json()
    assert resumed["next_run_at"] == "2026-09-21T18:00:00.000Z" and resumed["runs"] == []  # missed times not run


def test_other_users_cannot_see_pause_or_delete_a_schedule_admins_can(srv, clock):
    sid = create(srv, "ann", {"cron": "@daily", "job": JOB})["id"]
    assert srv.request("GET", "schedules", user="bob").json()["schedules"] == []
    assert srv.request("GET", "schedules?user=ann", user="bob").status_code == 403
    for method, path in (("GET", f"schedules/{sid}"), ("DELETE", f"schedules/{sid}"),
                         ("POST", f"schedules/{sid}/pause"), ("POST", f"schedules/{sid}/resume")):
        r = srv.request(method, path, user="bob")
        assert r.status_code == 404 and sid in r.json()["error"], (method, path, r.text)
    assert srv.request("GET", f"schedules/{sid}", user="ann").json()["paused"] is False  # untouched
    assert [s["id"] for s in srv.request("GET", "schedules", user="carol").json()["schedules"]] == [sid]
    assert srv.request("POST", f"schedules/{sid}/pause", user="carol").json()["paused"] is True
    assert srv.request("DELETE", f"schedules/{sid}", user="carol").status_code == 204
    assert srv.request("GET", f"schedules/{sid}", user="ann").status_code == 404
    assert srv.request("GET", "schedules", headers={"Authorization": "token nope"}).status_code in (401, 403)


BAD = [
    ({"cron": "61 * * * *", "job": JOB}, "cron"),
    ({"cron": "0 2 * *", "job": JOB}, "cron"),
    ({"cron": "@daily", "timezone": "Mars/Olympus", "job": JOB}, "timezone"),
    ({"cron": "@daily", "policy": "sometimes", "job": JOB}, "policy"),
    ({"cron": "@daily"}, "job"),
    ({"cron": "@daily", "job": {"command": "x", "tasks": [{"gpus": -1}]}}, "job.tasks[0].gpus"),
    ({"cron": "@daily", "job": {**JOB, "after": ["j-000001"]}}, "job.depends_on"),
    ({"cron": "@daily", "job": JOB, "every": "day"}, "every"),
    (["@daily"], None),
]


def test_bad_input_is_a_400_naming_the_field_and_nothing_is_stored(srv):
    for body, field in BAD:
        r = srv.request("POST", "schedules", user="ann", json=body)
        assert r.status_code == 400 and r.json()["field"] == field, (body, r.text)
    r = srv.request("POST", "schedules", user="bob", json={"cron": "@daily", "job": {**JOB, "vc": "other"}})
    assert r.status_code == 403 and r.json()["field"] == "job.vc", r.text  # what POST jobs would refuse bob
    r = srv.request("POST", "schedules", user="ann", json={"cron": "@daily", "job": {**JOB, "tasks": [{"gpus": 2}]}})
    assert r.status_code == 400 and r.json()["field"] == "job.tasks[0].gpus", r.text  # can never be placed
    assert srv.request("GET", "schedules", user="carol").json()["schedules"] == []


def test_a_run_passes_the_owners_limits_of_now_and_a_refusal_is_recorded(srv, clock):
    sid = create(srv, "ann", {"cron": "0 * * * *", "job": {"command": "true", "tasks": [{"gpus": 1}]}})["id"]
    r = srv.request("PUT", "vcs/default/limits", user="carol", json={"users": {"ann": {"max_gpus": 0}}})
    assert r.status_code == 200, r.text
    clock.set(T0 + 3600)
    run = runs_when(srv, sid, "ann", lambda runs: len(runs) == 1, "the refused run")["runs"][0]
    assert run["outcome"] == "refused" and run["job_id"] is None
    refused = srv.request("POST", "jobs", user="ann", json={"command": "true", "tasks": [{"gpus": 1}]})
    assert refused.status_code == 403 and run["reason"] == refused.json()["error"], refused.text  # as POST jobs


def test_a_schedule_of_the_same_name_replaces_the_first(srv, clock):
    """Issue 40, 5: re-running a ``%%submit --cron`` cell (the same name) replaced nothing; both fired."""
    first = create(srv, "ann", {"name": "nightly", "cron": "0 0 * * *", "job": JOB})
    assert first["replaced"] is False
    again = create(srv, "ann", {"name": "nightly", "cron": "30 1 * * *", "timezone": "Europe/Berlin",
                                "job": {**JOB, "command": "echo tock"}}, status=200)
    assert again["replaced"] is True and again["id"] == first["id"]
    assert again["cron"] == "30 1 * * *" and again["job"]["command"] == "echo tock"
    mine = srv.request("GET", "schedules", user="ann").json()["schedules"]
    assert [(s["id"], s["name"]) for s in mine] == [(first["id"], "nightly")]  # one schedule, not two
    # names are per owner: bob's "nightly" is his own; it must not replace ann's (her runs would be his job)
    bobs = create(srv, "bob", {"name": "nightly", "cron": "0 0 * * *", "job": {**JOB, "command": "echo bob"}})
    assert bobs["replaced"] is False and bobs["id"] != first["id"] and bobs["user"] == "bob"
    hers = srv.request("GET", f"schedules/{first['id']}", user="ann").json()
    assert hers["user"] == "ann" and hers["job"]["command"] == "echo tock" and hers["cron"] == "30 1 * * *"
    unnamed = [create(srv, "ann", {"cron": "@hourly", "job": JOB}) for _ in range(2)]  # no name: its id
    assert [s["name"] for s in unnamed] == [s["id"] for s in unnamed]
    clock.set(T0 + 12 * 3600)  # 2026-09-22 02:13:20 UTC: past 01:30 Berlin (23:30 UTC) once
    runs = runs_when(srv, first["id"], "ann", lambda r: len(r) == 1, "the replaced schedule's run")["runs"]
    job = srv.wait_for_job(runs[0]["job_id"], "succeeded", user="ann")
    assert job["spec"]["command"] == "echo tock"  # the replacement ran, once


def test_times_are_shown_in_the_schedules_own_zone(srv):
    """Issue 40, 5: ``0 0 * * *`` in Europe/Berlin was shown only as 23:00 UTC."""
    sched = create(srv, "ann", {"name": "midnight", "cron": "0 0 * * *", "timezone": "Europe/Berlin", "job": JOB})
    assert sched["when"] == "every day at 00:00"
    assert sched["next_run_local"] == "2026-09-22T00:00:00+02:00"  # T0 is 21 Sep 16:13 in Berlin (CEST)
    assert sched["next_run_at"] == "2026-09-21T22:00:00.000Z"


def test_a_script_that_is_not_staged_is_refused(srv):
    """Issue 40, 5: ``schedules add -- python grade.py`` took a script that no run would find."""
    body = {"name": "grade", "cron": "@daily", "job": {"command": "python3 grade.py --all", "tasks": [{"gpus": 1}]}}
    r = srv.request("POST", "schedules", user="ann", json=body)
    assert r.status_code == 400 and r.json()["field"] == "job.command", r.text
    assert r.json()["error"].startswith("job.command: grade.py is not staged with the job") and \
        "--file grade.py" in r.json()["error"]
    assert srv.request("GET", "schedules", user="ann").json()["schedules"] == []
    tasks = {**body, "job": {"tasks": [{"gpus": 1, "command": "cd . && bash ./run.sh"}]}}
    r = srv.request("POST", "schedules", user="ann", json=tasks)
    assert r.status_code == 400 and r.json()["field"] == "job.tasks[0].command", r.text
    staged = {**body["job"], "files": {"grade.py": "print('graded')\n"}}
    assert create(srv, "ann", {**body, "job": staged})["name"] == "grade"
    inside = {**staged, "working_dir": "sub", "files": {"sub/grade.py": "print('graded')\n"}}
    assert create(srv, "ann", {**body, "name": "grade-sub", "job": inside})["name"] == "grade-sub"
    for command in ("python3 -c 'print(1)'", "python3 -m http.server --help", "python3 /opt/grade.py", "echo hi"):
        create(srv, "ann", {"cron": "@daily", "job": {"command": command, "tasks": [{"gpus": 1}]}})
