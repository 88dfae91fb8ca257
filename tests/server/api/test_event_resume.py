"""Events that cannot be missed: a real server is killed (SIGKILL) and stopped (SIGTERM) three times while
jobs run, end while it is down, queue and are submitted right after it is back; the Python client's event
stream reconnects with ``since=<last seq>`` each time and ends with exactly the stored history: every
state change of every job (final states included), each once, in ``seq`` order."""

import threading

import pytest

from fixtures.live_server import LiveServer
from hive_lab.client import Client
from waiting import wait_until

WAIT_FOR_GO = 'while [ ! -e "$GO" ]; do sleep 0.02; done; exit $CODE'


def exit_file(srv, job_id):
    infos = list(srv.jobs_root.glob(f".*launcher/{job_id}/*.json"))
    return infos[0].with_suffix(".exit") if infos else None


@pytest.mark.timeout(300)
def test_a_subscriber_reconnecting_across_restarts_reconstructs_the_stored_history(tmp_path):
    srv = LiveServer(tmp_path / "srv", cluster_config={"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4",
                                                       "vcs": {"default": 2}})
    seen, lock = [], threading.Lock()
    stream = None

    def on_message(message):
        if message.get("type") == "state":
            with lock:
                seen.append((message["seq"], message["job"], message["state"], message["reason"]))

    def submit(name, gpus=1, command=WAIT_FOR_GO, **env):
        r = srv.request("POST", "jobs", json={"name": name, "command": command, "tasks": [{"gpus": gpus}],
                                              "env": {k: str(v) for k, v in env.items()}})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    try:
        srv.start()
        stream = Client(srv.url, srv.token).subscribe(on_message, since=0)
        ids = []
        for round_, down in enumerate((srv.kill, srv.stop, srv.kill)):
            go = tmp_path / f"go-{round_}"
            ends = submit(f"ends-{round_}", GO=go, CODE=0)  # ends while the server is down
            fails = submit(f"fails-{round_}", GO=go, CODE=3)  # fails while the server is down
            waits = submit(f"waits-{round_}", gpus=2, GO=go, CODE=0)  # queued until both end
            quick = submit(f"quick-{round_}", gpus=1, command="true")  # queued behind the 2-GPU job
            ids += [ends, fails, waits, quick]
            for job in (ends, fails):
                srv.wait_for_job(job, "running")
            down()
            go.touch()
            for job in (ends, fails):
                wait_until(lambda job=job: exit_file(srv, job) and exit_file(srv, job).exists(),
                           f"{job}'s exit file")
            srv.start()
            ids.append(submit(f"after-{round_}", gpus=1, command="true"))  # while the stream reconnects
            for job in ids[-5:]:
                srv.wait_for_job(job, "succeeded", "failed", timeout=60)

        stored = []
        for job in ids:
            history = srv.request("GET", f"jobs/{job}").json()["history"]
            stored += [(h["seq"], job, h["state"], h["reason"]) for h in history]
        stored.sort()
        assert len({s[0] for s in stored}) == len(stored)  # one seq per state change

        def caught_up():
            with lock:
                return seen and seen[-1][0] >= stored[-1][0]

        wait_until(caught_up, lambda: f"the stream to reach seq {stored[-1][0]} (at {seen[-1:] or None})")
        with lock:
            assert seen == stored  # every state change, each once, in order
        finals = {job: state for _, job, state, _ in seen}
        assert sorted(finals.values()).count("failed") == 3 and all(
            state in ("succeeded", "failed") for state in finals.values()), finals
    finally:
        if stream is not None:
            stream.close()
        srv.close()
