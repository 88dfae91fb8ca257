"""The client against a real server that holds as many unfinished jobs as it takes
(``HiveLabApp.max_unfinished_jobs``, here 1): the submit beyond it is answered 503 with Retry-After and
the server's sentence; a client that may wait sends it again once a job has ended, and it is taken.
The client's pause is an injected sleep; the test waits on the job's state, not on time."""

from __future__ import annotations

import pytest

from fixtures.live_server import LiveServer
from hive_lab import Client
from hive_lab.errors import ServerError
from waiting import wait_until

SLEEPER = {"command": "sleep 600", "tasks": [{"gpus": 0}]}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("busy"), config={"HiveLabApp": {"max_unfinished_jobs": 1}})
    server.start()
    yield server
    server.close()


def test_a_submit_beyond_the_bound_is_sent_again_once_a_job_ended(srv):
    first = Client(srv.url, srv.token)
    held = first.submit(dict(SLEEPER))["id"]

    with pytest.raises(ServerError) as busy:  # a client that does not wait: the server's sentence
        Client(srv.url, srv.token, busy_retry_s=0).submit(dict(SLEEPER))
    assert busy.value.status == 503 and "max_unfinished_jobs" in str(busy.value)

    told: list = []

    def on_busy(pause: float, sentence: str) -> None:  # while the client waits, the held job ends
        told.append((pause, sentence))
        first.cancel(held)
        wait_until(lambda: first.job(held)["state"] == "cancelled", "the held job cancelled")

    patient = Client(srv.url, srv.token, on_busy=on_busy)
    patient._sleep = lambda pause: None
    taken = patient.submit(dict(SLEEPER))
    assert taken["state"] in ("queued", "running", "submitted", "scheduled")
    assert len(told) == 1 and told[0][0] == 5.0 and "max_unfinished_jobs" in told[0][1]
    first.cancel(taken["id"])
