"""A VC's scheduling pass stops trying jobs once every shape still ahead has failed in it (issue 40): the
jobs behind only get their failure, and the anti-starvation check still runs on them. These tests replay
the same random scripts with that shortcut and with every job walked (``pass_shortcut = False``) and
require the same decisions and, after every call, the same view of every job (its reason to wait
included: a failure, a hold or a fence set by an overtaken job in the shortcut's part)."""

from __future__ import annotations

import random

import pytest

from hive_scheduler import Scheduler

from core_helpers import SMALL, job


def script(seed: int, steps: int = 400) -> list[tuple]:
    """Submits (mostly to VC a, of mixed sizes and priorities) and finishes of started jobs, in time order."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(steps):
        t += rng.choice((0.0, 1.0, 5.0, 20.0))
        if rng.random() < 0.55:
            vc = rng.choice(("a", "a", "a", "b", "c"))
            gpus = rng.choice((1, 1, 2, 4) if vc == "c" else (1, 1, 2, 4, 8))  # (VC c: 4-GPU cells)
            count = rng.choice((1, 1, 2)) if gpus <= 4 else 1  # (at most 8 GPUs: VCs b and c have 8)
            out.append(("submit", t, job(f"j{i}", vc, gpus=gpus, count=count, priority=rng.choice((0, 0, 10)),
                                         cpus=rng.choice((0, 2)))))
        else:
            out.append(("finish", t, rng.random()))
    return out


def replay(steps: list[tuple], shortcut: bool, starvation_after: float, hold: bool, calls: list | None = None,
           policy: str = "fifo"):
    """Every call's decisions and every job's view after it."""
    s = Scheduler(SMALL, policy=policy, starvation_after=starvation_after, starvation_hold=hold)
    s.pass_shortcut = shortcut
    if calls is not None:
        inner = s._fail_rest

        def counted(jobs, start, *rest):
            calls.append(len(jobs) - start)
            return inner(jobs, start, *rest)
        s._fail_rest = counted
    seen = []
    for op, t, arg in steps:
        if op == "submit":
            ds = s.submit(arg, t)
        else:
            running = sorted(v.id for v in s.jobs() if v.state == "running")
            if not running:
                continue
            ds = s.finish(running[int(arg * len(running))], t)
        seen.append(([d.to_dict() if hasattr(d, "to_dict") else repr(d) for d in ds], s.jobs()))
    return seen


@pytest.mark.parametrize("policy", ["fifo", "priority"])  # (priority: overtaken jobs wait behind newer ones)
@pytest.mark.parametrize("hold", [False, True], ids=["fence", "hold"])
@pytest.mark.parametrize("seed", range(4))
def test_the_shortcut_decides_and_explains_as_the_full_walk(seed, hold, policy):
    steps = script(seed)
    calls: list[int] = []
    fast = replay(steps, True, 30.0, hold, calls, policy)
    full = replay(steps, False, 30.0, hold, policy=policy)
    assert sum(calls) > 0, "the scripts must reach the shortcut, else this compares nothing"
    for i, (a, b) in enumerate(zip(fast, full)):
        assert a == b, f"call {i} differs"
    assert len(fast) == len(full)


def test_the_shortcut_is_reached_while_an_overtaken_job_holds_the_vc_back():
    """The anti-starvation check in the shortcut's part is exercised: some waiting job's reason is a hold or
    a fence at some point in the fenced and the held runs."""
    reasons = set()
    for hold in (False, True):
        for seed in range(4):
            for _, views in replay(script(seed), True, 30.0, hold, policy="priority"):
                reasons.update(v.reason.split(" ")[0] for v in views if v.reason and "overtaken" in v.reason)
    assert reasons == {"held", "not"}, reasons


@pytest.mark.parametrize("hold", [False, True], ids=["fence", "hold"])
@pytest.mark.parametrize("shortcut", [True, False], ids=["shortcut", "full-walk"])
def test_an_overtaken_job_behind_a_failed_one_of_its_shape_still_holds_the_vc_back(shortcut, hold):
    """B (overtaken at t=10) waits behind A, a job of its shape that was preempted and queued again ahead
    of it: at t=60 A's failure resolves every shape in VC b's queue, so B is in the shortcut's part, where
    its anti-starvation check must still fence (or hold back) the VC for E behind it."""
    s = Scheduler(SMALL, starvation_after=30.0, starvation_hold=hold)
    s.pass_shortcut = shortcut
    for jid, gpus in (("A", 4), ("X", 3), ("Y", 1)):
        s.submit(job(jid, "b", gpus=gpus), 0)
    s.submit(job("B", "b", gpus=4), 1)
    s.submit(job("C", "b", gpus=1), 1)
    s.finish("Y", 10)  # C overtakes B
    s.submit(job("P", "b", gpus=4, priority=10), 20)  # preempts A ...
    s.preemption_done("A", 21)  # ... which waits again, ahead of B (its submit time is earlier)
    s.submit(job("E", "b", gpus=4), 60)
    assert [v.id for v in s.jobs() if v.state == "waiting"] == ["A", "B", "E"]
    want = ("held back so that B" if hold else "not enough free GPUs in VC b outside the cells reserved for B")
    assert s.job("E").reason.startswith(want), s.job("E").reason
