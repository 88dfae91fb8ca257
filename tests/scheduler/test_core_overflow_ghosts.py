"""The overflow wrapper's ghosts (``hold_private_time``, the simulator's default): a job that ran T seconds
outside its VC ends earlier than on its private cluster, so its VC's cells stay held T seconds longer, and
the VC's next jobs start when and where they would on the private cluster (issue 25)."""

from __future__ import annotations

import pytest

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.overflow import OverflowScheduler

TWO = {"nodes": 2, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}}


def req(job_id, vc="a", gpus=2, priority=0, lazy=True):
    return JobRequest(id=job_id, vc=vc, user="u", priority=priority, tasks=(TaskGroup("w", 1, gpus),),
                      lazy_preemption=lazy)


def events(decisions):
    return [(d.event, d.job, bool(d.opportunistic)) for d in decisions]


def wrapper(hold=True, lazy=True):
    """VC a busy with a1 from 0; a2 (``lazy``: may be demoted rather than stopped by a preemptor) queued at 1
    and running outside VC a (in b's idle node) since 1."""
    s = OverflowScheduler(Scheduler(TWO, private_placement=True), keep_place=True, hold_private_time=hold)
    s.submit(req("a1"), 0)
    assert events(s.submit(req("a2", lazy=lazy), 1))[-1] == ("started", "a2", True)
    return s


def test_a_job_that_moved_in_holds_its_cells_as_long_as_it_ran_outside():
    s = wrapper()
    assert events(s.complete("a1", 10)) == [("finished", "a1", False), ("preempted", "a2", False),
                                            ("started", "a2", False)]  # its turn: it moves into VC a
    assert events(s.complete("a2", 15)) == [("finished", "a2", False)]  # 9 s outside: it ends 9 s early
    [(t, job, generation)] = s.take_timers()
    assert (t, job) == (24.0, "a2") and s.take_timers() == []
    assert events(s.submit(req("a3"), 16)) == [("queued", "a3", False), ("started", "a3", True)]
    assert s.ghost_end("a2", generation + 1, t) == []  # a stale end changes nothing
    assert events(s.ghost_end("a2", generation, t)) == [("preempted", "a3", False), ("started", "a3", False)]
    assert s.held_gpu_s == 2 * 9
    with pytest.raises(Exception):
        s.inner.job("a2")  # the ghost is gone from the core


def test_a_job_that_ended_outside_leaves_a_ghost_in_its_place():
    s = wrapper()
    assert events(s.complete("a2", 5)) == [("finished", "a2", False)]  # it ran all 4 s outside
    assert s.take_timers() == []  # its ghost waits for a2's turn in VC a, behind a1
    assert events(s.submit(req("a3"), 6)) == [("queued", "a3", False), ("started", "a3", True)]
    assert events(s.complete("a1", 10)) == [("finished", "a1", False)]  # the ghost's turn, not a3's
    [(t, job, generation)] = s.take_timers()
    assert (t, job) == (14.0, "a2")
    assert events(s.ghost_end("a2", generation, t)) == [("preempted", "a3", False), ("started", "a3", False)]


def test_a_ghost_is_preempted_at_once_and_resumes_its_hold_later():
    s = wrapper(lazy=False)
    s.complete("a1", 10)
    s.complete("a2", 15)
    [(_, _, first)] = s.take_timers()
    # a higher priority of VC a displaces the ghost: it starts at once, nobody is shown as its victim
    assert events(s.submit(req("a9", priority=5), 17)) == [("started", "a9", False)]
    assert s.take_timers() == []
    assert events(s.complete("a9", 20)) == [("finished", "a9", False)]
    [(t, job, generation)] = s.take_timers()
    assert (t, job) == (27.0, "a2") and generation != first  # 7 s of its hold were left
    assert s.ghost_end("a2", first, 24.0) == []
    s.ghost_end("a2", generation, t)
    assert s.held_gpu_s == 2 * (17 - 15) + 2 * (27 - 20)


def test_a_ghost_demoted_by_a_lazy_preemption_is_gone():
    s = wrapper(lazy=True)
    s.complete("a1", 10)
    s.complete("a2", 15)
    [(t, _, generation)] = s.take_timers()
    assert events(s.submit(req("a9", priority=5), 17)) == [("started", "a9", False)]
    assert s.ghost_end("a2", generation, t) == [] and s.held_gpu_s == 2 * (17 - 15)
    with pytest.raises(Exception):
        s.inner.job("a2")


def test_a_cancel_or_a_job_that_never_ran_outside_leaves_no_ghost():
    s = wrapper()
    assert events(s.finish("a2", 5)) == [("finished", "a2", False)]  # a cancel: privately it ends too
    s.complete("a1", 10)
    assert s.take_timers() == [] and s.held_gpu_s == 0
    with pytest.raises(Exception):
        s.inner.job("a2")


def test_without_it_an_early_end_frees_the_cells_at_once():
    s = wrapper(hold=False)
    s.complete("a1", 10)
    assert events(s.complete("a2", 15)) == [("finished", "a2", False)]
    assert s.take_timers() == [] and s.held_gpu_s == 0
    assert events(s.submit(req("a3"), 16)) == [("started", "a3", False)]  # in VC a at once


def test_it_needs_keep_place():
    with pytest.raises(ValueError):
        OverflowScheduler(Scheduler(TWO), hold_private_time=True)


def test_a_lent_job_keeps_its_place_in_its_vc_and_lends_its_gpus():
    """``Scheduler.lend``, which a ghost uses: its VC's cells stay held, their GPUs run opportunistic work
    meanwhile, and that work is preempted when the VC takes them back."""
    from core_helpers import check_invariants

    s = Scheduler(TWO, private_placement=True)
    s.submit(req("b1", vc="b"), 0)  # VC b's node busy: the only GPUs to lend are a1's
    s.submit(req("a1"), 0)
    assert events(s.lend("a1", 1)) == []  # nobody waits for them yet
    check_invariants(s)
    assert events(s.submit(req("o1", priority=-1), 2)) == [("started", "o1", True)]  # on a1's GPUs
    assert s.job("o1").placement[0].node == s.job("a1").placement[0].node
    assert events(s.submit(req("a2"), 3)) == [("queued", "a2", False)]  # VC a's cells are a1's
    check_invariants(s)
    out = s.finish("a1", 4)
    assert [(d.event, d.job, d.victims) for d in out] == [("finished", "a1", None), ("preempting", "a2", ("o1",))]
    assert events(s.preemption_done("o1", 5)) == [("preempted", "o1", False), ("queued", "o1", False),
                                                   ("started", "a2", False)]
    check_invariants(s)
    assert s.lend("o1", 6) == [] and not s._jobs["o1"].lent  # an opportunistic job has nothing to lend
