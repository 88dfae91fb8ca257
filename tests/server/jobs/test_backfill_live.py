"""``c.HiveLabApp.backfill = True`` on a real Jupyter server: a queued gang holds a reservation; a job whose
time limit ends before it starts now, one that would still run then (or has no limit) waits and says why.
Overflow is off here: with it, the long job runs (preemptibly) in the GPU held for the reservation."""

from __future__ import annotations

import pytest

from fixtures.live_server import LiveServer
from test_start_estimates import estimated


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("backfill"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"], "vcs": {"a": 4}},
        users={"ann": {}}, vc_access={"ann": ["a"]}, config={"HiveLabApp": {"backfill": True, "overflow": False}},
    ).start()
    yield server
    server.close()


def submit(srv, body):
    r = srv.request("POST", "jobs", user="ann", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_short_job_backfills_long_job_waits(srv):
    holder = submit(srv, {"vc": "a", "command": "sleep 600", "time_limit_s": 3600, "tasks": [{"gpus": 2}]})
    srv.wait_for_job(holder["id"], "running", user="ann")
    gang = submit(srv, {"vc": "a", "command": "true", "time_limit_s": 600, "tasks": [{"count": 2, "gpus": 2}]})
    assert gang["state"] == "queued"
    short = submit(srv, {"vc": "a", "command": "sleep 600", "time_limit_s": 60, "tasks": [{"gpus": 1}]})
    long = submit(srv, {"vc": "a", "command": "sleep 600", "time_limit_s": 7200, "tasks": [{"gpus": 1}]})
    srv.wait_for_job(short["id"], "running", user="ann")
    got = srv.request("GET", f"jobs/{long['id']}", user="ann").json()
    assert got["state"] == "queued", got
    assert got["reason"].startswith(f"waits behind {gang['id']}'s reservation (needs 4 GPUs"), got["reason"]
    est = estimated(srv, gang["id"])
    assert est["estimated_start_basis"] == f"when {holder['id']} ends (its time limit of 1h)", est
    for job in (long, gang, short, holder):
        srv.request("DELETE", f"jobs/{job['id']}", user="ann")
    for job in (short, holder):
        srv.wait_for_job(job["id"], "cancelled", user="ann")
