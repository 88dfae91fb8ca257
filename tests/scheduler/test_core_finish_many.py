"""``finish_many``: jobs that end together finished in one call, the scheduling passes run once after the
last of them (the service's exit units, issue 40), on the core and on the overflow wrapper.

What it must keep: every job given is finished (a ``finished`` decision each, in the order given), the
core's invariants hold after it, its state is settled (a pass of every queue at the same instant decides
nothing more), one job is exactly ``finish``, and ids the core does not hold are skipped. What it may
change, and does on purpose: the jobs the one pass starts (the GPUs of all the ended jobs are free when it
runs)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import HIVED_EXAMPLE, SMALL, WORKSTATION, check_invariants, events, job
from hive_scheduler import RequestError, Scheduler
from hive_scheduler.overflow import OverflowScheduler

CLUSTERS = {"small": (SMALL, ["a", "b", "c"]), "hived": (HIVED_EXAMPLE, ["VC1", "VC2"])}

submit = st.tuples(st.just("submit"), st.integers(0, 2), st.sampled_from([1, 2, 4, 8]), st.integers(1, 2),
                   st.sampled_from([-1, 0, 0, 50]))
ops = st.one_of(submit, submit, submit,
                st.tuples(st.just("finish_many"), st.lists(st.integers(0, 60), min_size=1, max_size=5)))


def core_of(s):
    return getattr(s, "inner", s)


def holds(s, job_id: str) -> bool:
    try:
        return s.job(job_id) is not None
    except RequestError:
        return False


def settled(s, now: float) -> list:
    """What a pass of every queue decides at ``now`` (nothing, if the state is settled)."""
    core = core_of(s)
    for vc in core.state.vcs.values():
        vc.dirty = True
    core.state.opp_dirty = True
    return [e for e in events(core.schedule(now)) if e[0] in ("started", "preempting")]


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=5, max_size=40),
       policy=st.sampled_from(["fifo", "priority"]), overflow=st.booleans())
def test_jobs_finished_together_are_all_finished_and_leave_a_settled_core(cluster, steps, policy, overflow):
    config, vcs = CLUSTERS[cluster]
    s = Scheduler(config, policy=policy)
    if overflow:
        s = OverflowScheduler(s)
    submitted: list[str] = []
    for t, step in enumerate(steps, start=1):
        if step[0] == "submit":
            _, vi, gpus, count, prio = step
            jid = f"j{len(submitted)}"
            try:
                s.submit(job(jid, vcs[vi % len(vcs)], gpus, count, prio, user=f"u{t % 3}"), float(t))
            except Exception:  # (a gang that can never fit is refused: not this test's business)
                continue
            submitted.append(jid)
            continue
        held = [j for j in submitted if holds(s, j)]
        picked = list(dict.fromkeys(held[i % len(held)] for i in step[1])) if held else []
        out = s.finish_many(picked + ["nobody"], float(t))
        assert [e[1] for e in events(out) if e[0] == "finished"] == picked
        for jid in picked:
            assert not holds(s, jid), f"{jid} still held after finish_many"
        check_invariants(core_of(s))
        assert settled(s, float(t)) == [], "a pass right after finish_many still had work to do"
        check_invariants(core_of(s))


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")) // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(submit, min_size=3, max_size=25), pick=st.integers(0, 100), overflow=st.booleans())
def test_finishing_one_job_is_finish(steps, pick, overflow):
    config, vcs = CLUSTERS["hived"]
    one, many = Scheduler(config), Scheduler(config)
    if overflow:
        one, many = OverflowScheduler(one), OverflowScheduler(many)
    ids = []
    for t, (_, vi, gpus, count, prio) in enumerate(steps, start=1):
        req = job(f"j{t}", vcs[vi % len(vcs)], gpus, count, prio)
        try:
            a = one.submit(req, float(t))
        except Exception:
            continue
        assert events(many.submit(req, float(t))) == events(a)
        ids.append(req.id)
    if not ids:
        return
    jid = ids[pick % len(ids)]
    now = float(len(steps) + 1)
    assert [d.to_json() for d in many.finish_many([jid], now)] == [d.to_json() for d in one.finish(jid, now)]
    assert many.cluster_view() == one.cluster_view() and many.vc_view() == one.vc_view()


def test_the_gpus_of_jobs_that_end_together_go_to_the_job_at_the_head_of_the_queue():
    """Two 1-GPU jobs end together; a 2-GPU job waits ahead of a 1-GPU job. One at a time, the first
    finish's pass gives its GPU to the 1-GPU job behind (the 2-GPU job does not fit in one): together,
    the head of the queue gets both."""
    def loaded() -> Scheduler:
        s = Scheduler(WORKSTATION)  # 4 GPUs in 2 pairs
        s.submit(job("a", "default", 1), 1.0)
        s.submit(job("b", "default", 1), 1.0)  # (a and b share a pair, buddy allocation)
        s.submit(job("pair", "default", 2), 1.0)
        s.submit(job("wide", "default", 2), 2.0)
        s.submit(job("narrow", "default", 1), 3.0)
        return s

    apart = loaded()
    started_apart = [e[1] for d in (apart.finish("a", 4.0), apart.finish("b", 4.0))
                     for e in events(d) if e[0] == "started"]
    assert started_apart == ["narrow"]  # the head was overtaken
    together = loaded()
    started = [e[1] for e in events(together.finish_many(["a", "b"], 4.0)) if e[0] == "started"]
    assert started == ["wide"]
    check_invariants(together)


def test_ids_the_core_does_not_hold_are_skipped():
    s = Scheduler(WORKSTATION)
    s.submit(job("a", "default", 1), 1.0)
    assert events(s.finish_many(["ghost", "a", "a"], 2.0)) == [("finished", "a")]
    assert s.finish_many([], 3.0) == []
