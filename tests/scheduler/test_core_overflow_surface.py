"""The rest of the core's surface on ``OverflowScheduler`` (what the live server calls): views under the
jobs' own ids, group-commit submits, adopt after a restart, and settings passed to the core."""

from __future__ import annotations

import json

import pytest

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.errors import RequestError
from hive_scheduler.overflow import OverflowScheduler

TWO = {"nodes": 2, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}}


def req(job_id, vc, gpus=2, priority=0):
    return JobRequest(id=job_id, vc=vc, user="u", priority=priority, tasks=(TaskGroup("w", 1, gpus),))


def overflowing():
    """VC a full with a1; a2 overflowed into b's node."""
    s = OverflowScheduler(Scheduler(TWO))
    s.submit(req("a1", "a"), 0)
    out = s.submit(req("a2", "a"), 1)
    started = [d for d in out if d.event == "started"]
    assert [(d.job, d.opportunistic) for d in started] == [("a2", True)]
    assert "outside VC a (overflow)" in started[0].reason
    return s, started[0].placement


def test_views_show_the_jobs_own_ids():
    s, _ = overflowing()
    assert s.is_overflowed("a2") and not s.is_overflowed("a1")
    view = s.job("a2")
    assert view.id == "a2" and view.state == "running" and view.opportunistic and view.priority == 0
    assert sorted(v.id for v in s.jobs()) == ["a1", "a2"]
    assert "@overflow" not in json.dumps(s.cluster_view())
    assert s.free_gpu_count() == 0  # anything else is the core's


def test_a_job_that_may_overflow_is_group_committed_with_its_shadow():
    s, _ = overflowing()
    d = s.submit_if_waiting(req("a3", "a"), 2)  # no idle GPUs: it and its shadow can only wait
    assert d is not None and d.event == "queued" and d.job == "a3"
    assert s.inner.job("a3@overflow").state == "waiting"
    s.withdraw_waiting(["a3"])  # its shadow goes with it
    for gone in ("a3", "a3@overflow"):
        with pytest.raises(RequestError):
            s.inner.job(gone)
    d = s.submit_if_waiting(req("a4", "a", priority=-1), 2)  # an opportunistic job: the core's answer
    assert d is not None and d.event == "queued"
    s.withdraw_waiting(["a4"])
    with pytest.raises(RequestError):
        s.job("a4")


def test_settings_reach_the_core():
    s = OverflowScheduler(Scheduler(TWO))
    s.backfill = True
    assert s.inner.backfill is True and s.backfill is True


def test_adopt_puts_an_overflowed_job_back_as_its_shadow():
    before, placement = overflowing()
    own = before.job("a1").placement
    s = OverflowScheduler(Scheduler(TWO))  # a restarted server
    assert s.adopt(req("a1", "a"), list(own), False, 5) == []
    assert s.adopt(req("a2", "a"), list(placement), True, 5) == []
    assert s.is_overflowed("a2") and s.job("a2").opportunistic
    # b wants its node back: a2 is preempted (not a1), and queued again both ways once it stopped
    out = s.submit(req("b1", "b"), 6)
    assert [(d.event, d.job, d.victims) for d in out if d.event == "preempting"] == [("preempting", "b1", ("a2",))]
    out = s.preemption_done("a2", 7)
    assert ("started", "b1") in [(d.event, d.job) for d in out]
    assert s.job("a2").state == "waiting" and not s.is_overflowed("a2")
    # a's own node frees up: a2 starts there as guaranteed work, its shadow withdrawn
    out = s.finish("a1", 8)
    started = [d for d in out if d.event == "started"]
    assert [(d.job, d.opportunistic) for d in started] == [("a2", False)]
    assert sorted(v.id for v in s.jobs()) == ["a2", "b1"]
    assert "@" not in "".join(d.job for d in out)



def test_a_job_waiting_with_its_shadow_counts_once():
    s = OverflowScheduler(Scheduler(TWO))
    for job in ("a1", "a2", "a3"):  # a1 in a, a2 overflowed into b, a3 waits (with its shadow)
        s.submit(req(job, "a"), 0)
    assert s.job("a3").state == "waiting"
    assert s.vc_view()["a"]["queue_length"] == 1
    s.set_user_limits("a", {"default": {"max_queued_jobs": 2}}, 1)
    s.check_limits(req("a4", "a"))  # one waiting (not two): a second may queue
    with pytest.raises(RequestError):
        s.check_limits(req("a4", "a"), also_waiting=1)


def test_what_if_answers_what_submit_does():
    s = OverflowScheduler(Scheduler(TWO))
    s.submit(req("a1", "a"), 0)
    answer = s.what_if(req("a2", "a"), 1)
    assert answer.outcome == "start" and answer.opportunistic and "(overflow)" in answer.reason
    out = s.submit(req("a2", "a"), 1)
    assert [d.placement for d in out if d.event == "started"] == [answer.placement]
    assert s.what_if(req("a3", "a"), 2).outcome == "wait"  # no idle GPUs left


def test_start_estimates_treat_a_job_and_its_shadow_as_one():
    """a1 (VC a) ends at 100 and b1 (VC b) at 50; a2 and a3 wait in a, each with its shadow. a2 is
    estimated to start at 50 in b's idle GPUs (its shadow), which withdraws its guaranteed request, so
    a3 gets a's GPUs at 100; were both of a2's requests kept, a2 would take a's GPUs too and a3 would wait
    for one of them to end. No shadow id is shown."""
    from hive_scheduler.estimates import Expected

    s = OverflowScheduler(Scheduler(TWO))
    s.submit(req("a1", "a"), 0)
    s.submit(req("b1", "b"), 0)
    s.submit(req("a2", "a"), 0)
    s.submit(req("a3", "a"), 0)
    assert s.job("a2").state == "waiting" and s.job("a3").state == "waiting"
    expected = {"a1": Expected(100.0), "b1": Expected(50.0), "a2": Expected(100.0), "a3": Expected(100.0)}
    est = s.estimate_starts(0, expected)
    assert sorted(est) == ["a2", "a3"]
    assert est["a2"].start == 50.0
    assert est["a2"].basis == "when b1 ends (its time limit of 50s), in idle GPUs outside VC a (overflow)"
    assert est["a3"].start == 100.0 and est["a3"].basis.startswith("when a1 ends"), est["a3"]
    assert "@overflow" not in repr(est)
    # the core keeps both requests of each job waiting: the estimate changed nothing
    assert s.job("a2").state == "waiting" and s.free_gpu_count() == 0


def test_a_shadow_is_its_request_opportunistic_under_the_shadow_id():
    import dataclasses

    from hive_scheduler.overflow import SHADOW_SUFFIX, shadow_of

    req = JobRequest(id="j", vc="a", user="u", tasks=(TaskGroup("m", 2, 1, "K80", 1.5, 64),), priority=7,
                     within="K80-NODE", pinned_cell="p", lazy_preemption=False, submit_time=3.5, group="g",
                     groups=("g", "h"), kind="kernel", time_limit_s=60.0)
    assert all(getattr(req, f.name) != f.default for f in dataclasses.fields(JobRequest))  # every field is set
    assert shadow_of(req) == dataclasses.replace(req, id="j" + SHADOW_SUFFIX, priority=-1)
