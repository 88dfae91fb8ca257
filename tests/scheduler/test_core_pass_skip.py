"""A submit to a VC held back for an overtaken job skips the VC's pass when that pass would decide nothing
new (issue 40, ``Scheduler._pass_needed``): the VC is not due (nothing gave it room since its last pass,
which decided nothing), the overtaken job still waits first and reserves the same cells, and the new job
cannot start (no room by count and nobody to preempt, a waiting job of its shape ahead of it, or a hold
ahead of it). These tests replay random scripts with the skip and with every such pass run
(``pass_skip = False``) and require the same decisions and, after every call, the same view of every job
(its reason to wait included), and that the scripts reach the skip."""

from __future__ import annotations

import random

import pytest

from hive_scheduler import Scheduler

from core_helpers import SMALL, job


def script(seed: int, steps: int = 500) -> list[tuple]:
    """Submits (mostly to VC a, mixed sizes and priorities), finishes of running jobs and cancels of waiting
    ones (a cancel takes a job out of the queue without making its VC due), in time order."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(steps):
        t += rng.choice((0.0, 1.0, 5.0, 20.0))
        r = rng.random()
        if r < 0.55:
            vc = rng.choice(("a", "a", "a", "b", "c"))
            gpus = rng.choice((1, 1, 2, 4) if vc == "c" else (1, 1, 2, 4, 8))
            count = rng.choice((1, 1, 2)) if gpus <= 4 else 1
            out.append(("submit", t, job(f"j{i}", vc, gpus=gpus, count=count, priority=rng.choice((0, 0, 10)),
                                         cpus=rng.choice((0, 2)))))
        elif r < 0.62:
            out.append(("cancel", t, rng.random()))
        else:
            out.append(("finish", t, rng.random()))
    return out


def replay(steps: list[tuple], skip: bool, starvation_after: float, hold: bool, policy: str = "fifo",
           skipped: list | None = None):
    """Every call's decisions and every job's view after it."""
    s = Scheduler(SMALL, policy=policy, starvation_after=starvation_after, starvation_hold=hold)
    s.pass_skip = skip
    if skipped is not None:
        inner = s._queue_behind

        def counted(j, vc):
            skipped.append(j.req.id)
            return inner(j, vc)
        s._queue_behind = counted
    seen = []
    for op, t, arg in steps:
        if op == "submit":
            ds = s.submit(arg, t)
        else:
            state = "running" if op == "finish" else "waiting"
            ids = sorted(v.id for v in s.jobs() if v.state == state)
            if not ids:
                continue
            ds = s.finish(ids[int(arg * len(ids))], t)
        seen.append(([repr(d) for d in ds], s.jobs()))
    return seen


@pytest.mark.parametrize("policy", ["fifo", "priority"])
@pytest.mark.parametrize("hold", [False, True], ids=["fence", "hold"])
@pytest.mark.parametrize("seed", range(5))
def test_a_skipped_pass_decides_and_explains_as_the_pass(seed, hold, policy):
    steps = script(seed)
    skipped: list[str] = []
    fast = replay(steps, True, 30.0, hold, policy, skipped)
    full = replay(steps, False, 30.0, hold, policy)
    assert skipped, "the scripts must reach the skip, else this compares nothing"
    for i, (a, b) in enumerate(zip(fast, full)):
        assert a == b, f"call {i} differs"
    assert len(fast) == len(full)


def test_the_skip_is_reached_for_each_reason():
    """Over the scripts, jobs are queued without a pass behind a fence and behind a hold, and ahead of the
    overtaken job (failed by count or by a job of their shape ahead)."""
    reasons = set()
    for hold in (False, True):
        for seed in range(5):
            skipped: list[str] = []
            for _, views in replay(script(seed), True, 30.0, hold, "priority", skipped):
                for v in views:
                    if v.id in skipped and v.state == "waiting" and v.reason:
                        reasons.add("held" if v.reason.startswith("held") else
                                    "fenced" if "reserved for" in v.reason else "failed")
    assert reasons == {"held", "fenced", "failed"}, reasons


def test_a_new_overtaken_job_ahead_makes_the_pass_run():
    """VC b holds back for B (overtaken at t=10, starving from t=40); C, ahead of B in priority order and
    overtaken at t=20, starves from t=50: a submit at t=55 must run the pass, which now fences for C."""
    for skip in (True, False):
        s = Scheduler(SMALL, policy="priority", starvation_after=30.0)
        s.pass_skip = skip
        skipped: list[str] = []
        inner = s._queue_behind
        s._queue_behind = lambda j, vc: (skipped.append(j.req.id), inner(j, vc))
        for jid, gpus in (("X", 4), ("Y", 2), ("Z", 2)):
            s.submit(job(jid, "b", gpus=gpus, priority=5), 0)
        s.submit(job("B", "b", gpus=4), 1)
        s.finish("Y", 10)
        s.submit(job("S", "b", gpus=1, priority=5), 10)  # starts: B is overtaken at 10
        s.submit(job("C", "b", gpus=4, priority=5), 15)  # waits, ahead of B
        s.submit(job("T", "b", gpus=2, priority=5), 16)  # waits, behind C
        s.finish("Z", 20)  # T starts in the pass: C is overtaken at 20
        s.submit(job("D", "b", gpus=4), 45)  # B starves, C not yet: the pass fences for B
        assert "reserved for B" in s.job("D").reason, s.job("D").reason
        s.submit(job("F", "b", gpus=4), 46)  # nothing new: no pass, when skipping
        assert "reserved for B" in s.job("F").reason, s.job("F").reason
        s.submit(job("E", "b", gpus=4), 55)  # C starves now, ahead of B
        assert "reserved for C" in s.job("E").reason, (skip, s.job("E").reason)
        assert skipped == (["F"] if skip else []), skipped


@pytest.mark.parametrize("policy", ["fifo", "priority"])
@pytest.mark.parametrize("hold", [False, True], ids=["fence", "hold"])
@pytest.mark.parametrize("seed", range(3))
def test_a_pass_leaves_the_earliest_overtaken_time_of_its_queue(seed, hold, policy):
    """``_min_bypass`` reads the pass's own list of jobs, not the queue (issue 40: the lookups were a fifth of
    a pass over 10,000 waiting jobs): after every pass it is the earliest ``bypass_since`` of the jobs then in
    the VC's queue, as a walk of the queue finds it, and the passes reach overtaken jobs."""
    s = Scheduler(SMALL, policy=policy, starvation_after=30.0, starvation_hold=hold)
    inner, checked = s._pass_vc, []

    def pass_vc(vc, now, out):
        inner(vc, now, out)
        since = [b for _, jid in vc.queue if (b := s._jobs[jid].bypass_since) is not None]
        assert vc.min_bypass == (min(since) if since else None)
        checked.append(vc.min_bypass)
    s._pass_vc = pass_vc
    for op, t, arg in script(seed):
        if op == "submit":
            s.submit(arg, t)
        else:
            state = "running" if op == "finish" else "waiting"
            ids = sorted(v.id for v in s.jobs() if v.state == state)
            if ids:
                s.finish(ids[int(arg * len(ids))], t)
    assert any(b is not None for b in checked), "the scripts must overtake jobs, else this compares nothing"
