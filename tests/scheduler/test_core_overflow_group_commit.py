"""Group commit through the overflow wrapper: ``OverflowScheduler.submit_if_waiting`` queues a job that
may overflow together with its shadow (when the core would only queue both) and ``withdraw_waiting``
undoes both exactly.

As in test_core_group_commit.py: two wrapped schedulers get the same random calls; one submits through
``submit_if_waiting`` (falling back to ``submit`` when it declines), the other through ``submit`` only:
their decisions and states (the core's and the wrapper's) must stay identical, and a batch submitted
tentatively and withdrawn must leave no trace."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import SMALL, job
from group_commit_replay import replay
from hive_scheduler import RequestError, Scheduler
from hive_scheduler.overflow import SHADOW_SUFFIX, OverflowScheduler

TWO = {"nodes": 2, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"a": 4, "b": 4}}
CLUSTERS = {"two": (TWO, ["a", "b"]), "small": (SMALL, ["a", "b", "c"])}

submit = st.tuples(st.just("submit"), st.integers(0, 2), st.sampled_from([1, 1, 2, 4, 8]), st.integers(1, 2),
                   st.sampled_from([-1, 0, 0, 0, 50]), st.booleans())
ops = st.one_of(
    submit, submit, submit,
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("stop"), st.integers(0, 50)),
    st.tuples(st.just("withdrawn batch"), st.lists(submit, min_size=1, max_size=4)),
)


def fingerprint(s: OverflowScheduler):
    core = s.inner
    jobs = [(jid, j.seq, str(j.state), j.opp, j.fail, tuple(j.placement)) for jid, j in core._jobs.items()]
    queues = {name: list(vc.queue) for name, vc in core.state.vcs.items()}
    wrapper = (sorted(s._req), sorted(s._g_waiting), sorted(s._shadow_waiting), sorted(s._overflowed),
               sorted(s._withdrawing), sorted(s._gone),
               {vc: (s._waiting_shadows(vc), s._waiting_shadows(vc, "u0")) for vc in core.state.vcs})
    return (core.cluster_view(), s.vc_view(), core.free_gpu_count(), jobs, queues, list(core.state.opp_queue), core.next_seq,
            core.state.dirty_snapshot(), wrapper)


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=5, max_size=50),
       policy=st.sampled_from(["fifo", "priority", "fair_share"]), limited=st.booleans(), backfill=st.booleans())
def test_overflow_submit_if_waiting_is_submit_or_nothing_and_withdraw_leaves_no_trace(cluster, steps, policy,
                                                                                       limited, backfill):
    config, vcs = CLUSTERS[cluster]
    grouped = OverflowScheduler(Scheduler(config, policy=policy))
    plain = OverflowScheduler(Scheduler(config, policy=policy))
    replay(grouped, plain, steps, vcs, limited=limited, backfill=backfill, fingerprint=fingerprint,
           core=lambda s: s.inner, finishable=lambda s: [v.id for v in s.jobs()],
           owner=lambda jid: jid.removesuffix(SHADOW_SUFFIX))


def test_a_job_that_may_overflow_is_queued_with_its_shadow_and_withdrawn_with_it():
    s = OverflowScheduler(Scheduler({"nodes": 2, "gpus_per_node": 2, "gpu_type": "T4", "vcs": {"a": 2, "b": 2}}))
    s.submit(job("a1", "a", 2), 0)
    s.submit(job("b1", "b", 2), 0)  # no idle GPUs anywhere: a job of a and its shadow can only wait
    d = s.submit_if_waiting(job("a2", "a", 2), 1)
    assert d is not None and d.event == "queued" and d.job == "a2"
    assert s.inner.job("a2@overflow").state == "waiting" and s._waiting_shadows("a") == 1
    s.withdraw_waiting(["a2"])
    assert s._waiting_shadows("a") == 0 and "a2" not in s._req and not s._g_waiting
    with pytest.raises(RequestError):
        s.inner.job("a2@overflow")
    with pytest.raises(RequestError):
        s.job("a2")
    s.finish("b1", 2)  # b's node idles: a job of a is no longer only queued (its shadow would start)
    assert s.submit_if_waiting(job("a3", "a", 2), 3) is None
    out = s.submit(job("a3", "a", 2), 3)
    assert [(x.job, x.opportunistic) for x in out if x.event == "started"] == [("a3", True)]
