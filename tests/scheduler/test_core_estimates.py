"""Start-time estimates (``Scheduler.estimate_starts``): the core's forward simulation, solved by hand."""

from __future__ import annotations

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.estimates import NO_LIMIT, Expected, RuntimeHistory, StartEstimate

from core_helpers import recount

CFG = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"]}


def job(jid: str, gpus: int, limit: float | None = None, t: float = 0.0, user: str = "ann") -> JobRequest:
    return JobRequest(id=jid, vc="default", user=user, tasks=(TaskGroup("w", 1, gpus),), time_limit_s=limit,
                      submit_time=t)


def loaded(sched: Scheduler) -> None:
    """2 running jobs with limits (r1: 2 GPUs from t=0 for 100 s; r2: 2 GPUs from t=20 for 200 s), then 3
    waiting: w1 2 GPUs 50 s, w2 4 GPUs 60 s, w3 1 GPU 10 s."""
    assert sched.submit(job("r1", 2, 100), 0.0)[0].event == "started"
    assert sched.submit(job("r2", 2, 200, t=20), 20.0)[0].event == "started"
    for jid, gpus, limit in (("w1", 2, 50), ("w2", 4, 60), ("w3", 1, 10)):
        assert sched.submit(job(jid, gpus, limit, t=30), 30.0)[-1].event == "queued"


def test_estimates_solved_by_hand():
    # t=100 r1 ends: w1 (2 GPUs) starts, ends 150; w2 (4) and w3 (1) do not fit (r2 + w1 hold all 4).
    # t=150 w1 ends: 2 GPUs free; w2 still not, w3 (behind w2, skipping it) starts, ends 160.
    # t=220 r2 ends: w2 starts.
    s = Scheduler(CFG)
    loaded(s)
    before = [v.to_dict() for v in s.jobs()]
    est = s.estimate_starts(40.0)
    assert est == {
        "w1": StartEstimate(100.0, "when r1 ends (its time limit of 1m40s)"),
        "w2": StartEstimate(220.0, "when r2 ends (its time limit of 3m20s)"),
        "w3": StartEstimate(150.0, "when w1 ends (its time limit of 50s)"),
    }
    # a query: the live scheduler is as it was, and the twin came back empty
    assert [v.to_dict() for v in s.jobs()] == before
    recount(s)
    assert s.estimator.twin is not None and not s.estimator.twin.job_table and s.estimator.twin.free_gpu_count() == 4
    recount(s.estimator.twin)  # every counter of the twin is exact again after it was emptied
    # the same again (the twin is reused) and after real time passed: absolute times do not move
    assert s.estimate_starts(90.0) == est


def test_estimates_follow_the_real_schedule():
    s = Scheduler(CFG)
    loaded(s)
    est = s.estimate_starts(40.0)
    started = {}
    for t, jid in ((100.0, "r1"), (150.0, "w1"), (160.0, "w3"), (220.0, "r2")):
        for d in s.finish(jid, t):
            if d.event == "started":
                started[d.job] = d.t
    assert started == {k: v.start for k, v in est.items()}


def test_learned_duration_and_no_limit():
    hist = RuntimeHistory(keep=5)
    for secs in (500, 90, 100, 110, 120, 130):   # the oldest (500) falls out: median of the last 5 = 110
        hist.record("bob", "train.py", secs)
    exp = hist.expected("bob", "train.py")
    assert exp == Expected(110.0, "history", "bob", 5, "train.py")
    assert hist.expected("bob", "other.py") is None
    s = Scheduler(CFG)
    s.submit(JobRequest(id="r", vc="default", user="bob", tasks=(TaskGroup("w", 1, 4),)), 0.0)  # no limit
    s.submit(job("mine", 1, 10, t=5, user="bob"), 5.0)
    s.submit(job("theirs", 1, 10, t=5, user="ann"), 5.0)
    est = s.estimate_starts(10.0, {"r": exp})
    assert est["mine"] == StartEstimate(110.0, "when r ends (from your last 5 runs of train.py)")
    assert est["theirs"] == StartEstimate(110.0, "when r ends (from bob's last 5 runs of train.py)")
    # without a limit or a history the running job never ends: no estimate
    assert s.estimate_starts(10.0) == {"mine": StartEstimate(None, NO_LIMIT), "theirs": StartEstimate(None, NO_LIMIT)}


def test_waiting_behind_a_job_without_limit_has_no_estimate():
    s = Scheduler(CFG)
    s.submit(job("r", 2, 100), 0.0)
    s.submit(job("forever", 2), 0.0)         # runs, no limit
    s.submit(job("big", 4, 10, t=1), 1.0)     # needs the GPUs "forever" holds
    s.submit(job("small", 2, 10, t=1), 1.0)   # gets r's GPUs at t=100
    est = s.estimate_starts(1.0)
    assert est["small"].start == 100.0
    assert est["big"] == StartEstimate(None, NO_LIMIT)


def test_bad_time_limit_is_refused():
    import pytest

    from hive_scheduler import RequestError

    s = Scheduler(CFG)
    with pytest.raises(RequestError) as e:
        s.submit(job("x", 1, -5), 0.0)
    assert e.value.field == "time_limit_s"
    assert not s.jobs()


def test_max_waiting_replays_only_the_first_waiting_jobs():
    """``max_waiting`` bounds the replay (its cost grows with the square of the waiting jobs: each end
    in it passes over every waiting job): the first jobs get the estimates the whole replay gives them,
    the later ones none ("beyond the estimate's horizon")."""
    from hive_scheduler.estimates import BEYOND

    s = Scheduler(CFG)
    assert s.submit(job("r", 4, 100), 0.0)[0].event == "started"
    for i in range(6):
        assert s.submit(job(f"w{i}", 4, 10, t=1), 1.0)[-1].event == "queued"
    whole = s.estimate_starts(1.0)
    assert [whole[f"w{i}"].start for i in range(6)] == [100.0, 110.0, 120.0, 130.0, 140.0, 150.0]
    bounded = s.estimate_starts(1.0, max_waiting=2)
    assert {k: bounded[k] for k in ("w0", "w1")} == {k: whole[k] for k in ("w0", "w1")}
    assert all(bounded[f"w{i}"] == StartEstimate(None, BEYOND) for i in range(2, 6))
    assert s.estimate_starts(1.0, max_waiting=2) == bounded  # the twin came back empty
    assert s.estimate_starts(1.0) == whole


def test_max_waiting_counts_a_job_and_its_overflow_shadow_once():
    from hive_scheduler.overflow import OverflowScheduler

    s = OverflowScheduler(Scheduler({**CFG, "vcs": {"a": 2, "b": 2}}))
    for vc in ("a", "b"):  # every GPU busy: the jobs below wait, each with its shadow
        assert s.submit(JobRequest(f"r{vc}", vc, tasks=(TaskGroup("w", 1, 2),), time_limit_s=100), 0.0)[0].event == "started"
    for i in range(4):
        s.submit(JobRequest(f"w{i}", "a", tasks=(TaskGroup("w", 1, 2),), time_limit_s=10, submit_time=1), 1.0)
    est = s.estimate_starts(1.0, max_waiting=2)
    assert [est[f"w{i}"].start is not None for i in range(4)] == [True, True, False, False], est
