"""``submit_if_waiting`` and ``withdraw_waiting``: the calls that let the service decide several submits
before storing them in one transaction (group commit) and undo them if the store refuses.

Two schedulers get the same random calls; one submits through ``submit_if_waiting`` (falling back to
``submit`` when it declines), the other through ``submit`` only: their decisions and states must stay
identical. Batches that one of them submits tentatively and withdraws must leave no trace (the next
decisions of both stay identical too)."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import HIVED_EXAMPLE, SMALL, WORKSTATION, check_invariants, job
from hive_scheduler import RequestError, Scheduler

CLUSTERS = {"small": (SMALL, ["a", "b", "c"]), "hived": (HIVED_EXAMPLE, ["VC1", "VC2"])}

submit = st.tuples(st.just("submit"), st.integers(0, 2), st.sampled_from([1, 2, 4, 4, 8]), st.integers(1, 2),
                   st.sampled_from([-1, 0, 0, 0, 50]), st.booleans())
ops = st.one_of(
    submit, submit, submit,
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("stop"), st.integers(0, 50)),
    st.tuples(st.just("withdrawn batch"), st.lists(submit, min_size=1, max_size=4)),
)


def fingerprint(s: Scheduler):
    jobs = [(jid, j.seq, str(j.state), j.opp, j.fail, tuple(j.placement)) for jid, j in s._jobs.items()]
    queues = {name: list(vc.queue) for name, vc in s.state.vcs.items()}
    return (s.cluster_view(), s.vc_view(), s.free_gpu_count(), jobs, queues, list(s._opp_queue), s._seq,
            s.state.dirty_snapshot())


def decisions(ds):
    return [d.to_json() for d in ds]


def request(step, n, vcs):
    _, vi, g, count, prio, lazy = step
    return job(f"j{n}", vcs[vi % len(vcs)], g, count, prio, user=f"u{n % 3}", lazy_preemption=lazy)


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=5, max_size=50),
       policy=st.sampled_from(["fifo", "priority", "drf", "fair_share"]), limited=st.booleans(),
       backfill=st.booleans())
def test_submit_if_waiting_is_submit_or_nothing_and_withdraw_leaves_no_trace(cluster, steps, policy, limited, backfill):
    config, vcs = CLUSTERS[cluster]
    grouped, plain = Scheduler(config, policy=policy), Scheduler(config, policy=policy)
    for s in (grouped, plain):
        s.backfill = backfill
        if limited:  # per-user limits: a job over its owner's limit waits with that reason either way
            for vc in vcs:
                s.set_user_limits(vc, {"default": {"max_gpus": 4, "max_running_jobs": 2}}, 0.0)
    t, n = 0.0, 0
    for step in steps:
        t += 1
        op = step[0]
        if op == "submit":
            n += 1
            req = request(step, n, vcs)
            try:
                expected = plain.submit(req, t)
            except RequestError:
                with pytest.raises(RequestError):
                    grouped.submit_if_waiting(req, t)
                continue
            before = fingerprint(grouped)
            queued = grouped.submit_if_waiting(req, t)
            if queued is None:
                assert fingerprint(grouped) == before, "declining must change nothing"
                got = grouped.submit(req, t)
            else:
                got = [queued]
            assert decisions(got) == decisions(expected)
        elif op == "finish" and plain._jobs:
            jid = list(plain._jobs)[step[1] % len(plain._jobs)]
            assert decisions(grouped.finish(jid, t)) == decisions(plain.finish(jid, t))
        elif op == "stop":
            pending = [jid for jid, j in plain._jobs.items() if j.preempted_by is not None]
            if pending:
                jid = pending[step[1] % len(pending)]
                assert decisions(grouped.preemption_done(jid, t)) == decisions(plain.preemption_done(jid, t))
        elif op == "withdrawn batch":
            plain._tick(t)  # the batch's calls saw this time (fair-share usage is advanced by time)
            before = fingerprint(grouped)
            tentative = []
            for sub in step[1]:
                n += 1
                try:
                    queued = grouped.submit_if_waiting(request(sub, n, vcs), t)
                except RequestError:
                    continue
                if queued is None:
                    break  # the service stores the rest first, then submits them: never withdrawn
                tentative.append(queued.job)
            grouped.withdraw_waiting(tentative)
            assert fingerprint(grouped) == before, "a withdrawn batch must leave no trace"
        assert fingerprint(grouped) == fingerprint(plain)
        check_invariants(grouped)


def test_a_job_that_would_start_or_preempt_is_declined():
    s = Scheduler(WORKSTATION)
    assert s.submit_if_waiting(job("free", "default", 2), 1.0) is None  # it would start: submit it
    assert s.submit(job("free", "default", 2), 1.0)[0].event == "started"
    assert s.submit(job("low", "default", 2, priority=0), 2.0)[0].event == "started"
    queued = s.submit_if_waiting(job("same", "default", 2, priority=0), 3.0)
    assert queued is not None and queued.event == "queued" and s.job("same").state == "waiting"
    before = s.free_gpu_count()
    assert s.submit_if_waiting(job("high", "default", 2, priority=50), 4.0) is None  # it may preempt "low"
    assert "high" not in s._jobs and s.free_gpu_count() == before


def test_withdraw_refuses_a_job_no_longer_just_waiting_and_changes_nothing():
    s = Scheduler(WORKSTATION)
    s.submit(job("a", "default", 4), 1.0)
    assert s.submit_if_waiting(job("b", "default", 2), 2.0) is not None
    s.finish("a", 3.0)  # "b" starts
    with pytest.raises(RequestError):
        s.withdraw_waiting(["b"])
    assert s.job("b").state == "running"
    with pytest.raises(RequestError):
        s.withdraw_waiting(["nope"])


def test_a_job_over_its_owners_limit_is_queued_with_the_limit_as_reason():
    plain, grouped = Scheduler(WORKSTATION), Scheduler(WORKSTATION)
    for s in (plain, grouped):
        s.set_user_limits("default", {"default": {"max_gpus": 2}}, 0.0)
        assert s.submit(job("mine", "default", 2, user="ann"), 1.0)[0].event == "started"
    expected = plain.submit(job("more", "default", 2, user="ann"), 2.0)
    queued = grouped.submit_if_waiting(job("more", "default", 2, user="ann"), 2.0)
    assert queued is not None and decisions([queued]) == decisions(expected)
    assert "2 of your 2 GPUs" in queued.reason
