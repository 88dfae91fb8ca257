"""A poll that finds many exits applies them in units of at most ``MAX_EXIT_JOBS`` jobs, the event loop
turning between units (issue 40: one unit for every exit a poll found held the loop, and every read, for
up to 1.4 s), and nothing is lost on the way: every job ends as it would have. Reads see what a write that
was answered did (read-your-writes), as they are computed from the store and the core on each request."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from hive_lab_server.execution.launchers.base import TaskExit
from hive_lab_server.jobs.lifecycle.shell import MAX_EXIT_JOBS, exits_by_jobs


def test_exits_are_cut_by_jobs_and_a_jobs_exits_stay_together():
    exits = [TaskExit("a", "t0", 0), TaskExit("b", "t0", 0), TaskExit("c", "t0", 1), TaskExit("a", "t1", 0),
             TaskExit("d", "t0", 0), TaskExit("b", "t1", 0)]
    assert exits_by_jobs(exits, 2) == [[exits[0], exits[1], exits[3], exits[5]], [exits[2], exits[4]]]
    assert exits_by_jobs(exits, 16) == [exits]
    assert exits_by_jobs([], 16) == [[]]  # one (empty) unit still applies the facts left pending


def test_a_poll_of_many_exits_lets_the_loop_turn_between_its_units(api, wait_state, hive, run, tmp_path):
    svc = hive.service
    flag = tmp_path / "go"
    jobs = MAX_EXIT_JOBS + 8  # (the built-in cluster's CPUs run 32 CPU-only tasks at once)
    ids = []
    for _ in range(jobs):
        code, job = api("POST", "jobs", {"command": f"while [ ! -e {flag} ]; do sleep 0.05; done",
                                         "tasks": [{"gpus": 0}]})
        assert code == 201, job
        ids.append(job["id"])
    for job_id in ids:
        wait_state(job_id, "running", timeout=60)
    svc._loop_task.cancel()  # this test polls the launcher itself, once, after every task has ended
    with contextlib.suppress(asyncio.CancelledError):
        run(svc._loop_task)
    flag.touch()
    deadline = time.monotonic() + 60
    while set(ids) & set(run(svc.launcher.running())):
        assert time.monotonic() < deadline, "the tasks did not end"
        run(asyncio.sleep(0.05))

    async def poll_and_watch() -> list[int]:
        seen: list[int] = []
        done = asyncio.Event()

        async def watch() -> None:  # another callback of the loop: what it sees between turns
            while not done.is_set():
                seen.append(sum(1 for j in ids if j in svc.active))
                await asyncio.sleep(0)

        watcher = asyncio.ensure_future(watch())
        await asyncio.sleep(0)
        await svc.work.poll_launcher()
        done.set()
        await watcher
        return seen + [sum(1 for j in ids if j in svc.active)]

    seen = run(poll_and_watch())
    assert seen[0] == jobs and seen[-1] == 0, seen
    # the loop turned while the poll's exits were applied: it saw them applied in part
    assert any(0 < n < jobs for n in seen), seen
    for job_id in ids:
        code, job = api("GET", f"jobs/{job_id}")
        assert code == 200 and job["state"] == "succeeded", job


def test_a_read_after_an_answered_write_sees_it(api, hive):
    code, held = api("POST", "jobs", {"command": "sleep 600", "tasks": [{"gpus": 4}]})
    assert code == 201, held
    code, queued = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 1}]})
    assert code == 201 and queued["state"] == "queued", queued
    assert api("GET", f"jobs/{queued['id']}")[1]["state"] == "queued"
    assert queued["id"] in [j["id"] for j in api("GET", "jobs?limit=50")[1]["jobs"]]
    vcs = {v["name"]: v for v in api("GET", "vcs")[1]["vcs"]}
    assert vcs["default"]["queue_length"] >= 1 and vcs["default"]["used_gpus"] == 4, vcs
    code, cancelled = api("DELETE", f"jobs/{queued['id']}")
    assert code == 200, cancelled
    assert api("GET", f"jobs/{queued['id']}")[1]["state"] == "cancelled"
    assert queued["id"] not in [j["id"] for j in api("GET", "jobs?limit=50&state=queued")[1]["jobs"]]
    api("DELETE", f"jobs/{held['id']}")


def test_the_launches_of_one_placement_pass_are_prepared_one_per_turn_of_the_loop(api, wait_state, hive, run):
    """A holder of the 4 GPUs ends; one pass places the 4 jobs waiting behind it. Their launches' dirs are
    made one per turn of the loop (the loop turns, and reads are answered, between them), not all in one."""
    svc = hive.service
    code, held = api("POST", "jobs", {"command": "sleep 600", "tasks": [{"gpus": 4}]})
    assert code == 201, held
    wait_state(held["id"], "running")
    ids = []
    for _ in range(4):
        code, job = api("POST", "jobs", {"command": "sleep 600", "tasks": [{"gpus": 1}]})
        assert code == 201 and job["state"] == "queued", job
        ids.append(job["id"])
    logs = [svc.jobs_root / job_id / "logs" for job_id in ids]  # made by the launch's staging
    seen: list[int] = []  # how many were staged, at each turn where that changed
    give_up = threading.Event()

    async def watch() -> None:  # another callback of the loop, looking once per turn
        while not give_up.is_set() and (not seen or seen[-1] < len(ids)):
            staged = sum(1 for p in logs if p.exists())
            if not seen or staged != seen[-1]:
                seen.append(staged)
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch(), loop=run.__self__)
    try:
        assert api("DELETE", f"jobs/{held['id']}")[0] == 200
        for job_id in ids:
            wait_state(job_id, "running")
    finally:
        give_up.set()  # (the watcher stops by itself once all 4 are staged)
    run(watcher)
    assert seen[0] == 0 and seen[-1] == len(ids), seen
    assert {1, 2, 3} <= set(seen), seen  # each launch was staged in a turn of its own
    for job_id in ids:
        api("DELETE", f"jobs/{job_id}")


def test_a_lone_launch_is_started_in_the_turn_after_its_placement(api, hive, run):
    """Issue 40 (submit -> running): a job placed alone is staged, started and recorded ``running`` by its
    launch task's first step, the turn of the loop after the one that placed it: no turn given to other
    callbacks on the way (the 201's reply was one), no hop to a worker thread and back (each a wait for
    the GIL and the OS scheduler on a busy machine). A watcher counts the loop's turns; the state listeners
    hear each stored transition one turn after its commit, so the two are heard one turn apart."""
    svc = hive.service
    turns = [0]
    heard: dict[str, int] = {}
    svc.work.on_state_change(lambda job_id, state, reason: heard.setdefault(state, turns[0]))
    stop = asyncio.Event()

    async def count() -> None:
        while not stop.is_set():
            turns[0] += 1
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(count(), loop=run.__self__)
    code, job = api("POST", "jobs", {"command": "sleep 600", "tasks": [{"gpus": 1}]})
    assert code == 201, job
    deadline = time.monotonic() + 30
    while "running" not in heard:
        assert time.monotonic() < deadline, heard
        run(asyncio.sleep(0.01))
    stop.set()
    run(watcher)
    assert heard["running"] - heard["scheduled"] <= 1, heard
    api("DELETE", f"jobs/{job['id']}")


def test_the_local_launcher_starts_off_the_loop_while_the_loop_runs_behind(hive):
    """The server tells its local launcher when the loop runs behind (its lag over ON_LOOP_MAX_LAG_S), so a
    write flood's one-task starts go to a worker thread (tests/launchers: loop / thread by ``loop_busy``)."""
    from hive_lab_server.execution.launchers.local import ON_LOOP_MAX_LAG_S

    launcher = hive.service.launcher
    hive.loop_lag.lag_s = 0.0
    assert not launcher.loop_busy()
    hive.loop_lag.lag_s = 100 * ON_LOOP_MAX_LAG_S
    assert launcher.loop_busy()
    hive.loop_lag.lag_s = 0.0


def test_jobs_whose_exits_come_in_one_poll_give_their_gpus_back_together(api, wait_state, hive, run, tmp_path):
    """The finishes of one exit unit go to the core in one call (``finish_many``: its passes run once, after
    the last). Two 1-GPU jobs end in one poll, a 2-GPU job waits ahead of a 1-GPU job: the 2-GPU job gets
    their two GPUs. Finished one at a time, the first finish's pass gave its one GPU to the 1-GPU job
    behind (the 2-GPU job did not fit in one GPU) and the head of the queue was overtaken."""
    svc = hive.service
    flag = tmp_path / "go"
    ids = {}
    for name, gpus, command in (("a", 1, f"while [ ! -e {flag} ]; do sleep 0.05; done"),
                                ("b", 1, f"while [ ! -e {flag} ]; do sleep 0.05; done"),
                                ("pair", 2, "sleep 600")):
        code, job = api("POST", "jobs", {"name": name, "command": command, "tasks": [{"gpus": gpus}]})
        assert code == 201, job
        ids[name] = job["id"]
        wait_state(job["id"], "running")
    for name, gpus in (("wide", 2), ("narrow", 1)):
        code, job = api("POST", "jobs", {"name": name, "command": "sleep 600", "tasks": [{"gpus": gpus}]})
        assert code == 201 and job["state"] == "queued", job
        ids[name] = job["id"]
    svc._loop_task.cancel()  # this test polls the launcher itself, once, after both tasks have ended
    with contextlib.suppress(asyncio.CancelledError):
        run(svc._loop_task)
    flag.touch()
    deadline = time.monotonic() + 60
    while {ids["a"], ids["b"]} & set(run(svc.launcher.running())):
        assert time.monotonic() < deadline, "the tasks did not end"
        run(asyncio.sleep(0.05))
    run(svc.work.poll_launcher())
    assert api("GET", f"jobs/{ids['wide']}")[1]["state"] in ("scheduled", "running")
    assert api("GET", f"jobs/{ids['narrow']}")[1]["state"] == "queued"
    for name in ("pair", "wide", "narrow"):
        api("DELETE", f"jobs/{ids[name]}")
