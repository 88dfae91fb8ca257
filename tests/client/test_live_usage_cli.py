"""The instructor's CLI against a REAL server with several users: `admin usage` (table, CSV, JSON),
`jobs --user`, and `admin gpus` showing who holds each GPU."""

import csv
import io
import json

import pytest

from test_live_cli import HIVE_LAB

COURSE = {"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"course": 2}}


def cli(srv, *args, user, check=True):
    import subprocess

    command, *rest = args
    out = subprocess.run([HIVE_LAB, command, *rest, "--url", srv.url, "--token", srv.tokens[user]],
                         capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """ann and bob (students) each ran one job; ann's second job still runs on one GPU; carol is an admin."""
    from fixtures.live_server import LiveServer

    srv = LiveServer(tmp_path_factory.mktemp("usage-cli-srv"), cluster_config=COURSE,
                     users={"ann": {"groups": ["students"]}, "bob": {"groups": ["students"]}, "carol": {}},
                     vc_access={"@students": ["course"]}, admin_users=["carol"]).start()
    try:
        jobs = {}
        for user in ("ann", "bob"):
            r = srv.request("POST", "jobs", user=user, json={"command": "true", "tasks": [{"gpus": 1}]})
            jobs[user] = r.json()["id"]
            srv.wait_for_job(jobs[user], "succeeded", user=user)
        r = srv.request("POST", "jobs", user="ann", json={"command": "sleep 120", "tasks": [{"gpus": 1}]})
        jobs["running"] = r.json()["id"]
        srv.wait_for_job(jobs["running"], "running", user="ann")
        yield srv, jobs
    finally:
        srv.close()


def test_admin_usage_csv_and_table(course):
    srv, _ = course
    rows = list(csv.DictReader(io.StringIO(cli(srv, "admin", "usage", "--since", "7d", "--csv", user="carol").stdout)))
    assert [r["user"] for r in rows] == ["ann", "bob"]
    assert list(rows[0]) == ["user", "gpu_seconds", "gpu_seconds_T4", "cpu_seconds", "peak_memory_mb", "jobs"]
    assert rows[0]["jobs"] == "2" and rows[1]["jobs"] == "1"  # ann's running job counts up to now
    assert float(rows[0]["gpu_seconds"]) > 0 and rows[0]["gpu_seconds"] == rows[0]["gpu_seconds_T4"]
    table = cli(srv, "admin", "usage", "--since", "24h", user="carol").stdout
    assert "GPU-hours" in table and "ann" in table and "bob" in table
    days = list(csv.DictReader(io.StringIO(cli(srv, "admin", "usage", "--by", "day", "--csv", user="carol").stdout)))
    assert len(days) >= 1 and len(days[0]["day"]) == 10
    vcs = json.loads(cli(srv, "admin", "usage", "--by", "vc", "--json", user="carol").stdout)["rows"]
    assert [(r["vc"], r["jobs"]) for r in vcs] == [("course", 3)]


def test_students_see_only_their_own_usage_in_the_cli(course):
    srv, _ = course
    rows = list(csv.DictReader(io.StringIO(cli(srv, "admin", "usage", "--csv", user="bob").stdout)))
    assert [r["user"] for r in rows] == ["bob"]
    out = cli(srv, "admin", "usage", "--user", "ann", user="bob", check=False)
    assert out.returncode == 1 and "only admins" in out.stderr
    out = cli(srv, "admin", "usage", "--since", "fortnight", user="bob", check=False)
    assert out.returncode == 1 and "since" in out.stderr


def test_jobs_of_one_user(course):
    srv, jobs = course
    listed = json.loads(cli(srv, "jobs", "--user", "bob", "--json", user="carol").stdout)["jobs"]
    assert [j["id"] for j in listed] == [jobs["bob"]]
    assert jobs["bob"] in cli(srv, "jobs", "--user", "bob", user="carol").stdout
    out = cli(srv, "jobs", "--user", "bob", user="ann", check=False)
    assert out.returncode == 1 and "only admins" in out.stderr
    mine = json.loads(cli(srv, "jobs", "--user", "ann", "--json", user="ann").stdout)["jobs"]
    assert {j["user"] for j in mine} == {"ann"} and len(mine) == 2


def test_admin_gpus_shows_who_holds_each_gpu(course):
    srv, jobs = course
    gpus = json.loads(cli(srv, "admin", "gpus", "--json", user="carol").stdout)["gpus"]
    held = [(g["job"], g["user"]) for g in gpus if g["job"]]
    assert held == [(jobs["running"], "ann")]
    table = cli(srv, "admin", "gpus", user="carol").stdout
    assert "user" in table and "ann" in table
