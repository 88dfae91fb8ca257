"""Accounting and fair share against a REAL server with several users (issue 14).

Times are the server's own clock: the tests assert relations (a job's GPU-seconds equal its GPUs
times the span between its stored ``scheduled`` and ``succeeded`` events), never wall-clock figures.
Exact arithmetic (windows, days, decay) is tested on the pure functions in test_accounting.py.
"""

import datetime as dt

import pytest

COURSE = {"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"course": 2}}
# CPU time that does not depend on the machine's speed (it burns until it has used 0.3 s), and 64 MiB touched
BURN = ("python3 -c \"import time; b = bytearray(64 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
        "t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')\"")
STUDENTS = {"ann": {"groups": ["students"]}, "bob": {"groups": ["students"]}, "dan": {"groups": ["students"]},
            "eve": {"groups": ["students"]}, "carol": {"groups": ["staff"]}}


def _course(factory, **config):
    return factory(cluster_config=COURSE, users=STUDENTS, vc_access={"@students": ["course"]},
                   admin_users=["carol"], config={"HiveLabApp": config} if config else None)


def _submit(srv, user, command, gpus=1):
    r = srv.request("POST", "jobs", user=user, json={"command": command, "tasks": [{"gpus": gpus}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _at(job, state):
    iso = next(h["at"] for h in job["history"] if h["state"] == state)
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One server for the read-only tests: ann ran a 2-GPU job, bob a 1-GPU job, dan a 1-GPU job that
    burns 0.3 s of CPU and touches 64 MiB, all in the course VC; carol is the instructor (admin)."""
    from fixtures.live_server import LiveServer

    srv = LiveServer(tmp_path_factory.mktemp("usage-srv"), cluster_config=COURSE, users=STUDENTS,
                     vc_access={"@students": ["course"]}, admin_users=["carol"]).start()
    try:
        jobs = {"ann": _submit(srv, "ann", "true", gpus=2), "bob": _submit(srv, "bob", "true", gpus=1),
                "dan": _submit(srv, "dan", BURN, gpus=1)}
        done = {user: srv.wait_for_job(job_id, "succeeded", user="carol") for user, job_id in jobs.items()}
        yield srv, done
    finally:
        srv.close()


def test_usage_rows_after_jobs_ran(course):
    srv, done = course
    r = srv.request("GET", "usage", user="carol", params={"since": "7d", "by": "user"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["by"] == "user"
    rows = {row["user"]: row for row in report["rows"]}
    assert list(rows) == ["ann", "bob", "dan"]  # sorted by key; carol ran nothing
    for user, gpus in (("ann", 2), ("bob", 1)):
        job = done[user]
        held = gpus * (_at(job, "succeeded") - _at(job, "scheduled"))  # placed -> GPUs given back
        assert rows[user]["gpu_seconds"] == pytest.approx(held, abs=0.01)
        assert rows[user]["gpu_seconds_by_type"] == {"T4": rows[user]["gpu_seconds"]}
        assert rows[user]["jobs"] == 1
    by_vc = srv.request("GET", "usage", user="carol", params={"by": "vc"}).json()["rows"]
    assert [(row["vc"], row["jobs"]) for row in by_vc] == [("course", 3)]
    assert by_vc[0]["gpu_seconds"] == pytest.approx(sum(r["gpu_seconds"] for r in rows.values()), abs=0.01)
    by_job = srv.request("GET", "usage", user="carol", params={"by": "job"}).json()["rows"]
    assert {row["job"]: row["gpu_seconds"] for row in by_job} == {j["id"]: rows[u]["gpu_seconds"] for u, j in done.items()}
    by_day = srv.request("GET", "usage", user="carol", params={"by": "day", "since": "24h"}).json()["rows"]
    assert sum(row["gpu_seconds"] for row in by_day) == pytest.approx(by_vc[0]["gpu_seconds"], abs=0.01)
    assert all(len(row["day"]) == 10 for row in by_day)


def test_cpu_seconds_and_peak_memory_where_the_launcher_measures_them(course):
    """The local launcher records CPU time (its wrapper's ``times``) and, with cgroups, peak memory."""
    srv, _ = course
    rows = {row["user"]: row for row in srv.request("GET", "usage", user="carol").json()["rows"]}
    assert rows["dan"]["cpu_seconds"] >= 0.3  # it burned until it had used 0.3 s
    assert rows["ann"]["cpu_seconds"] < rows["dan"]["cpu_seconds"]  # `true` uses next to nothing
    from hive_lab_server.execution.isolation import cgroups

    if cgroups.detect("auto") == "off":
        assert rows["dan"]["peak_memory_mb"] is None  # not known without cgroups: null, not a made-up 0
    else:
        assert rows["dan"]["peak_memory_mb"] >= 64


def test_students_read_only_their_own_usage(course):
    srv, _ = course
    mine = srv.request("GET", "usage", user="ann").json()["rows"]
    assert [row["user"] for row in mine] == ["ann"]
    assert srv.request("GET", "usage", user="ann", params={"user": "me"}).json()["rows"] == mine
    r = srv.request("GET", "usage", user="ann", params={"user": "bob"})
    assert r.status_code == 403 and "only admins" in r.json()["error"]
    assert srv.request("GET", "usage", user="eve").json()["rows"] == []  # ran nothing
    only_bob = srv.request("GET", "usage", user="carol", params={"user": "bob"}).json()["rows"]
    assert [row["user"] for row in only_bob] == ["bob"]


@pytest.mark.parametrize("params, field", [
    ({"since": "seven days"}, "since"), ({"since": "-3d"}, "since"), ({"since": "2026-02-30"}, "since"),
    ({"since": "3 weeks"}, "since"), ({"by": "week"}, "by"),
])
def test_bad_usage_queries_are_400(course, params, field):
    r = course[0].request("GET", "usage", params=params)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field and r.json()["error"]


def test_usage_of_one_vc(course):
    """The instructor's table for a course: ``vc=`` keeps only usage in that VC; an unknown VC is a 404."""
    srv, _ = course
    everything = srv.request("GET", "usage", user="carol").json()["rows"]
    assert srv.request("GET", "usage", user="carol", params={"vc": "course"}).json()["rows"] == everything
    r = srv.request("GET", "usage", user="carol", params={"vc": "cv-999"})
    assert r.status_code == 404 and r.json()["field"] == "vc" and "course" in r.json()["error"]


def test_usage_accepts_iso_dates_and_hours(course):
    for since in ("24h", "90m", "2026-01-01", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00", "1900-01-01"):
        assert course[0].request("GET", "usage", params={"since": since}).status_code == 200
    empty = course[0].request("GET", "usage", params={"since": "2999-01-01"}).json()  # starts after now
    assert empty["rows"] == [] and empty["since"] > empty["until"]


def test_per_user_metrics_only_for_admins(live_server_factory):
    srv = _course(live_server_factory)
    running = _submit(srv, "ann", "sleep 60")
    srv.wait_for_job(running, "running", user="ann")
    admin = srv.request("GET", "metrics", user="carol")
    assert admin.status_code == 200
    assert 'hive_lab_user_gpus_held{user="ann"} 1.0' in admin.text
    assert 'hive_lab_user_gpu_seconds_total{user="ann"}' in admin.text
    student = srv.request("GET", "metrics", user="bob")
    assert student.status_code == 200
    assert "hive_lab_vc_gpus_used" in student.text  # the cluster's series, without anyone's usage
    assert "hive_lab_user_" not in student.text
    srv.request("DELETE", f"jobs/{running}", user="carol")


@pytest.mark.parametrize("policy, first", [("fifo", "ann"), ("fair_share", "bob")])
def test_fair_share_starts_the_lower_usage_student_first_across_a_restart(live_server_factory, policy, first):
    srv = _course(live_server_factory, queue_policy=policy)
    srv.wait_for_job(_submit(srv, "ann", "true", gpus=2), "succeeded", user="ann")  # ann has used GPUs, bob not
    srv.kill()  # the decayed usage must survive the restart (derived from the stored usage records)
    srv.start()
    blocker = _submit(srv, "dan", "sleep 60", gpus=2)  # the course VC is full
    srv.wait_for_job(blocker, "running", user="dan")
    waiting = {"ann": _submit(srv, "ann", "sleep 60", gpus=2), "bob": _submit(srv, "bob", "sleep 60", gpus=2)}
    for user, job_id in waiting.items():
        assert srv.request("GET", f"jobs/{job_id}", user=user).json()["state"] == "queued"
    assert srv.request("DELETE", f"jobs/{blocker}", user="carol").status_code == 200
    srv.wait_for_job(waiting[first], "scheduled", "running", user="carol")
    other = "bob" if first == "ann" else "ann"
    assert srv.request("GET", f"jobs/{waiting[other]}", user="carol").json()["state"] == "queued"
    for job_id in waiting.values():
        srv.request("DELETE", f"jobs/{job_id}", user="carol")


def test_usage_survives_a_restart(course):
    srv, _ = course
    before = srv.request("GET", "usage", user="carol", params={"since": "2026-01-01"}).json()["rows"]
    srv.kill()
    srv.start()
    after = srv.request("GET", "usage", user="carol", params={"since": "2026-01-01"}).json()["rows"]
    assert after == before and len(after) == 3


def test_group_of_a_job_comes_from_the_identity(course):
    """Fair share's group is the student's group from their identity (here the token map's groups)."""
    import sqlalchemy as sa

    srv, done = course
    engine = sa.create_engine(srv.db_url)
    with engine.connect() as conn:
        for table in ("jobs", "job_usage"):
            column = "id" if table == "jobs" else "job_id"
            group = conn.execute(sa.text(f"select user_group from {table} where {column} = :i"),
                                 {"i": done["ann"]["id"]}).scalar()
            assert group == "students"
    engine.dispose()
