"""A bounded number of requests in flight (issue 24): with max_requests_in_flight requests being served,
the next one is answered 503 + Retry-After at once, as JSON; GET me and GET metrics are still answered;
once the held requests are answered, requests are served again."""

import asyncio
import json

import pytest

from waiting import wait_until_async

HOLDS_TERM = "trap '' TERM; while true; do sleep 0.05; done"  # a DELETE waits for it (cancel_wait_s)


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["HiveLabApp"].update({"max_requests_in_flight": 2, "cancel_wait_s": 60.0, "stop_grace_s": 60.0})
    return jp_server_config


def test_requests_beyond_the_bound_are_shed_with_retry_after(api, hive, jp_fetch, run, wait_state):
    ids = []
    for _ in range(2):
        code, job = api("POST", "jobs", {"command": HOLDS_TERM, "tasks": [{"gpus": 0}]})
        assert code == 201, job
        ids.append(job["id"])
    for job_id in ids:
        wait_state(job_id, "running")

    def fetch(method, *path):
        return jp_fetch("hive_lab", "api", *path, method=method, raise_error=False)

    async def main():
        held = [asyncio.ensure_future(fetch("DELETE", "jobs", job_id)) for job_id in ids]  # wait for the stop
        await wait_until_async(lambda: hive.in_flight.count == 2, "both DELETEs in flight")
        shed = await fetch("GET", "jobs")
        alive = await fetch("GET", "me"), await fetch("GET", "metrics")
        for job_id in ids:  # the tasks end: the DELETEs are answered
            await hive.service.launcher.stop(job_id, 0)
        answered = await asyncio.gather(*held)
        after = await fetch("GET", "jobs")
        return shed, alive, answered, after

    shed, alive, answered, after = run(main())
    assert shed.code == 503 and shed.headers["Retry-After"] == "1"
    assert shed.headers["Content-Type"].startswith("application/json")
    assert "max_requests_in_flight" in json.loads(shed.body)["error"]
    assert [r.code for r in alive] == [200, 200]
    assert "hive_lab_requests_shed_total 1.0" in alive[1].body.decode()
    assert [r.code for r in answered] == [200, 200]
    assert after.code == 200 and hive.in_flight.count == 0
