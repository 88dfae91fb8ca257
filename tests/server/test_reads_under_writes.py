"""Reads are served while writes are shed (issue 40): writes have their own budget
(``api/load_shedding.WriteBudget``), so with ``max_requests_in_flight`` writes being served a new write is
answered 503 + Retry-After at once while ``GET jobs``, ``GET cluster``, ``GET vcs`` and ``GET jobs/{id}`` are
still answered; once the held writes are answered, writes are taken again. Through a real server process."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal

import pytest

from fixtures.live_server import LiveServer
from waiting import wait_until

HOLDS_TERM = "trap '' TERM; while true; do sleep 0.05; done"  # a pause waits for its stop (cancel_wait_s)


def end_tasks(srv: LiveServer) -> None:
    """SIGKILL the running tasks' process groups (the server reaps them and their cgroups, as after any exit;
    ``LiveServer.kill_tasks`` also removes the cgroups, which races with a server still running)."""
    for info in srv.jobs_root.glob(".*launcher/*/*.json"):
        try:
            os.killpg(int(json.loads(info.read_text())["pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


@pytest.fixture
def srv(tmp_path):
    server = LiveServer(tmp_path, config={"HiveLabApp": {
        "max_requests_in_flight": 2, "cancel_wait_s": 60.0, "stop_grace_s": 60.0}}).start()
    yield server
    server.close()


def test_reads_are_answered_while_writes_are_shed(srv):
    def reason(job_id: str) -> str:  # (a read: answered also while the writes are held)
        r = srv.request("GET", f"jobs/{job_id}")
        assert r.status_code == 200, f"GET jobs/{job_id} while writes are held: {r.status_code} {r.text}"
        return r.json()["reason"]

    ids = []
    for _ in range(2):
        r = srv.request("POST", "jobs", json={"command": HOLDS_TERM, "tasks": [{"gpus": 1}]})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    running = {job_id: srv.wait_for_job(job_id, "running")["reason"] for job_id in ids}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # two writes held: each pause waits for its task, which ignores SIGTERM (stop_grace_s 60)
        held = [pool.submit(srv.request, "POST", f"jobs/{job_id}/pause", timeout=120) for job_id in ids]
        wait_until(lambda: all(reason(j) != running[j] for j in ids),
                   "both pauses under way (the jobs' reasons say they are being stopped)", timeout=30)
        shed = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
        reads = {path: srv.request("GET", path) for path in ("jobs", "cluster", "vcs", f"jobs/{ids[0]}", "me")}
        end_tasks(srv)  # the tasks end: the pauses are answered
        answered = [f.result() for f in held]
    assert shed.status_code == 503, shed.text
    assert shed.headers["Retry-After"] == "1"
    assert "max_requests_in_flight" in shed.json()["error"] and "writes" in shed.json()["error"]
    assert {path: r.status_code for path, r in reads.items()} == dict.fromkeys(reads, 200)
    assert [r.status_code for r in answered] == [200, 200], [r.text for r in answered]
    after = srv.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 0}]})
    assert after.status_code == 201, after.text
