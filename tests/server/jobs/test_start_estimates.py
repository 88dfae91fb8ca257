"""``estimated_start`` on a real Jupyter server: a queued job behind a running job with a time limit gets
an estimate (the running job's start + its limit) and a basis naming it; behind a job without a limit it
gets null and says why."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from fixtures.live_server import LiveServer


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("estimates"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"], "vcs": {"a": 4}},
        users={"ann": {}}, vc_access={"ann": ["a"]},
    ).start()
    yield server
    server.close()


def submit(srv, body):
    r = srv.request("POST", "jobs", user="ann", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def estimated(srv, job_id: str, timeout: float = 30) -> dict:
    """The job object once it carries an estimate's basis (recomputed just after a change, not per GET)."""
    deadline = time.monotonic() + timeout
    while True:
        got = srv.request("GET", f"jobs/{job_id}", user="ann").json()
        if got.get("estimated_start_basis") is not None or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def when(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_queued_job_shows_estimate_from_time_limit(srv):
    running = submit(srv, {"vc": "a", "name": "holder", "command": "sleep 600", "time_limit_s": 7200,
                           "tasks": [{"gpus": 4}]})
    running = srv.wait_for_job(running["id"], "running", user="ann")
    waiting = submit(srv, {"vc": "a", "command": "true", "tasks": [{"gpus": 1}]})
    assert waiting["state"] == "queued"
    got = estimated(srv, waiting["id"])
    assert got["estimated_start_basis"] == f"when {running['id']} ends (its time limit of 2h)", got
    # the core's start (at the scheduling decision) + 2 h; the stored start is the launch, a moment later
    assert abs(when(got["estimated_start"]) - (when(running["started_at"]) + 7200)) < 30, (got, running)
    listed = srv.request("GET", "jobs", user="ann", params={"state": "queued"}).json()["jobs"]
    assert [j["estimated_start"] for j in listed] == [got["estimated_start"]]
    assert srv.request("GET", f"jobs/{running['id']}", user="ann").json()["estimated_start"] is None
    for job in (waiting, running):
        srv.request("DELETE", f"jobs/{job['id']}", user="ann")
    srv.wait_for_job(running["id"], "cancelled", user="ann")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A VC ``b`` of one GPU with a default time limit of 1 h (kernels get none)."""
    server = LiveServer(
        tmp_path_factory.mktemp("estimates-vc"),
        cluster_config={"nodes": 1, "gpus_per_node": 1, "gpu_type": "T4", "vcs": {"b": 1}},
        users={"ann": {}}, vc_access={"ann": ["b"]},
        config={"HiveLabApp": {"vc_time_limits": {"b": {"default_s": 3600}}}},
    ).start()
    yield server
    server.close()


def test_behind_a_kernel_without_a_limit_the_vcs_default_limit_gives_an_estimate(course):
    """A GPU kernel has no time limit of its own (a VC's default does not apply to kernels); a job queued
    behind it in a VC with a default time limit gets an estimate from that default, and says so."""
    srv = course
    kernel = submit(srv, {"vc": "b", "kind": "kernel", "command": "sleep 600", "tasks": [{"gpus": 1}]})
    srv.wait_for_job(kernel["id"], "running", user="ann")
    assert srv.request("GET", f"jobs/{kernel['id']}", user="ann").json().get("time_limit_s") is None
    told = submit(srv, {"vc": "b", "command": "true", "tasks": [{"gpus": 1}]})
    assert told["state"] == "queued"
    got = estimated(srv, told["id"])
    assert got["estimated_start_basis"] == (f"when {kernel['id']} ends (if it runs VC b's default time "
                                            f"limit of 1h)"), got
    assert got["estimated_start"] is not None
    for job in (told, kernel):
        srv.request("DELETE", f"jobs/{job['id']}", user="ann")


def test_no_estimate_to_give_says_nothing():
    """What waits behind jobs with no limit, no history and no VC default gets no estimate at all: no
    "start unknown (running jobs have no time limit)" on every queued job."""
    from types import SimpleNamespace

    from hive_lab_server.jobs.lifecycle.presentation import estimate_fields
    from hive_scheduler.estimates import NO_LIMIT, StartEstimate

    answers = {"j-1": StartEstimate(None, NO_LIMIT), "j-2": StartEstimate(7200.0, "when j-0 ends (its time limit of 2h)")}
    svc = SimpleNamespace(start_estimates=SimpleNamespace(get=lambda job_id, fresh=True: answers[job_id]))
    assert estimate_fields(svc, {"id": "j-1", "state": "queued"}) == {"estimated_start": None,
                                                                      "estimated_start_basis": None}
    told = estimate_fields(svc, {"id": "j-2", "state": "queued"})
    assert told["estimated_start_basis"] == "when j-0 ends (its time limit of 2h)" and told["estimated_start"]


def test_estimate_from_the_owners_last_runs_of_the_same_command(srv):
    """A running job without a time limit ends, in the forward simulation, after the median of its
    owner's last runs of the same command (learned from the store); the queued job behind it says so."""
    flag = srv.tmp / "go"
    command = f"while [ ! -e {flag} ]; do sleep 0.05; done"  # returns at once while the flag file exists
    flag.touch()
    done = submit(srv, {"vc": "a", "name": "trainer", "command": command, "tasks": [{"gpus": 1}]})
    srv.wait_for_job(done["id"], "succeeded", user="ann")
    flag.unlink()
    running = submit(srv, {"vc": "a", "name": "trainer", "command": command, "tasks": [{"gpus": 4}]})
    srv.wait_for_job(running["id"], "running", user="ann")
    waiting = submit(srv, {"vc": "a", "command": "true", "tasks": [{"gpus": 1}]})
    got = estimated(srv, waiting["id"])
    assert got["estimated_start_basis"] == f"when {running['id']} ends (from your last 1 run of trainer)", got
    assert got["estimated_start"] is not None
    for job in (waiting, running):
        srv.request("DELETE", f"jobs/{job['id']}", user="ann")
    srv.wait_for_job(running["id"], "cancelled", user="ann")


def test_live_views_are_told_when_a_queued_jobs_estimate_appears(srv):
    """A view that fetched a new queued job before its first estimate was computed learns it from an
    ``estimates`` message (the estimate is not a stored state change: the panel showed none until
    something else happened; issue 39's flaky panel test)."""
    import json

    import websocket

    ws = websocket.create_connection(srv.ws_url("events"), timeout=30,
                                     header=[f"Authorization: token {srv.tokens['ann']}"])
    jobs = []
    try:
        assert json.loads(ws.recv())["type"] == "hello"
        running = submit(srv, {"vc": "a", "name": "holder", "command": "sleep 600", "time_limit_s": 7200,
                               "tasks": [{"gpus": 4}]})
        jobs.append(running)
        srv.wait_for_job(running["id"], "running", user="ann")
        waiting = submit(srv, {"vc": "a", "command": "true", "tasks": [{"gpus": 1}]})
        jobs.append(waiting)
        told: list[str] = []
        while waiting["id"] not in told:  # (recv times out after 30 s: the test then fails)
            message = json.loads(ws.recv())
            if message["type"] == "estimates":
                told += message["jobs"]
        got = srv.request("GET", f"jobs/{waiting['id']}", user="ann").json()
        assert got["estimated_start_basis"] == f"when {running['id']} ends (its time limit of 2h)", got
    finally:
        ws.close()
        for job in reversed(jobs):
            srv.request("DELETE", f"jobs/{job['id']}", user="ann")
        if jobs:
            srv.wait_for_job(jobs[0]["id"], "cancelled", user="ann")
