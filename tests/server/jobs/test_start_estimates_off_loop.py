"""The start estimates' replay off the event loop (issue 40: up to ~1 s of blocked loop at 500 waiting jobs):
the loop copies the core's inputs, a worker thread replays them, and the loop publishes the answer only if the
core is still at the version the copy was taken at. A client reads what the inline recompute answers for the
same state; an answer computed from a state that changed meanwhile is dropped and computed again."""

from __future__ import annotations

import asyncio

from hive_lab_server.jobs.start_estimates import StartEstimates


def queued_behind_a_holder(api, wait_state, hive) -> tuple[str, str]:
    """A job holding every GPU for at most an hour and a 1-GPU job queued behind it."""
    gpus = hive.service.scheduler.gpu_count()
    code, holder = api("POST", "jobs", {"command": "sleep 600", "time_limit_s": 3600, "tasks": [{"gpus": gpus}]})
    assert code == 201, holder
    wait_state(holder["id"], "running")
    code, queued = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 1}]})
    assert code == 201 and queued["state"] == "queued", queued
    return holder["id"], queued["id"]


def inline_answer(service) -> dict:
    """What the inline recompute answers for the service's state now."""
    fresh = StartEstimates(service)
    fresh.recompute()
    return fresh._cache


def test_the_off_loop_answer_is_the_inline_answer(api, wait_state, hive, run):
    svc = hive.service
    holder, queued = queued_behind_a_holder(api, wait_state, hive)
    est = StartEstimates(svc)
    est._in_flight = True
    run(est._refresh_off_loop())
    assert est._version == svc.scheduler.version and est.stale == 0
    assert est._cache == inline_answer(svc)
    assert est._cache[queued].basis == f"when {holder} ends (its time limit of 1h)"


def test_an_answer_from_a_state_that_changed_meanwhile_is_dropped_and_computed_again(api, wait_state, hive, run):
    svc = hive.service
    holder, queued = queued_behind_a_holder(api, wait_state, hive)
    core = svc.scheduler
    node = sorted(core.state.nodes)[0]

    async def replay_while_a_gpu_fails(replay):
        # the core changes after the copy was taken, before its answer comes back (a GPU fails)
        core.set_gpu_health(node, 0, False, svc.now())
        return await asyncio.to_thread(replay)

    est = StartEstimates(svc, off_loop=replay_while_a_gpu_fails)
    before = core.version
    est._in_flight = True

    async def refresh_and_wait_for_the_next():
        await est._refresh_off_loop()
        dropped = (est.stale, est._version)
        est.off_loop = asyncio.to_thread
        while est._scheduled or est._in_flight:  # the recompute it scheduled for the changed state
            await asyncio.sleep(0.01)
        return dropped

    stale, version_then = run(refresh_and_wait_for_the_next())
    assert (stale, version_then) == (1, -1), "an answer for a state that is gone was published"
    assert est._version == core.version > before
    # the answer now is the inline one for the state with the failed GPU
    assert est._cache == inline_answer(svc)
    core.set_gpu_health(node, 0, True, svc.now())


def test_the_run_times_are_relearned_on_the_worker_not_the_loop(api, wait_state, hive, run):
    """``_learn`` reads the store (up to ~30 ms under a flood of short jobs, issue 40): the worker does it, and
    its replay reads what it learned."""
    import threading

    svc = hive.service
    holder, queued = queued_behind_a_holder(api, wait_state, hive)
    est = StartEstimates(svc)
    learned_on: list[threading.Thread] = []
    learn = est._learn

    def recorded() -> None:
        learned_on.append(threading.current_thread())
        learn()
    est._learn = recorded
    est._in_flight = True
    run(est._refresh_off_loop())
    assert learned_on and threading.main_thread() not in learned_on
    assert est._cache == inline_answer(svc)


def test_a_stopped_service_starts_no_recompute_and_cancels_the_one_in_flight(api, wait_state, hive, run):
    """``close`` (the service's stop): the recompute scheduled is dropped, none is scheduled after, and one in
    flight is cancelled, so nothing publishes after the stop or is left a task the stopped loop never ran."""
    svc = hive.service
    queued_behind_a_holder(api, wait_state, hive)
    never = asyncio.Event()

    async def replay_that_hangs(_replay):
        await never.wait()

    async def scenario():
        est = StartEstimates(svc)
        est.refresh_soon()
        timer = est._timer
        assert timer is not None and est._scheduled
        est.close()
        assert timer.cancelled() and not est._scheduled
        est.refresh_soon()
        assert est._timer is None and not est._scheduled
        assert est.get("nobody") is None and est._version == -1  # nor inline, on a read

        flying = StartEstimates(svc, off_loop=replay_that_hangs)
        flying._start_off_loop()
        task = flying._task
        await asyncio.sleep(0)  # (its first step: the copy, then the wait on the worker)
        assert flying._in_flight and not task.done()
        flying.close()
        await asyncio.wait({task}, timeout=10)
        return task.cancelled(), flying._in_flight, flying._version

    cancelled, in_flight, version = run(scenario())
    assert cancelled and not in_flight and version == -1
