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

from core_helpers import HIVED_EXAMPLE, SMALL, WORKSTATION, job
from group_commit_replay import decisions, replay
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
    return (s.cluster_view(), s.vc_view(), s.free_gpu_count(), jobs, queues, list(s.state.opp_queue), s.next_seq,
            s.state.dirty_snapshot())


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=5, max_size=50),
       policy=st.sampled_from(["fifo", "priority", "drf", "fair_share"]), limited=st.booleans(),
       backfill=st.booleans())
def test_submit_if_waiting_is_submit_or_nothing_and_withdraw_leaves_no_trace(cluster, steps, policy, limited, backfill):
    config, vcs = CLUSTERS[cluster]
    grouped, plain = Scheduler(config, policy=policy), Scheduler(config, policy=policy)
    replay(grouped, plain, steps, vcs, limited=limited, backfill=backfill, fingerprint=fingerprint)


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
