"""``Scheduler.what_if``: a query that answers what ``submit`` would decide, and changes nothing.

Property tests over random call sequences: (1) a core asked what-if questions before every call keeps
the same views as before each question and makes exactly the same decisions, call for call, as a twin
that is never asked; (2) what-if's answer is what a real submit of the same request then decides
(start on those GPUs / preempt those jobs / wait with that reason).
"""

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import MIXED, SMALL, WORKSTATION, check_invariants, job
from hive_scheduler import RequestError, Scheduler

CLUSTERS = {
    "small": (SMALL, ["a", "b", "c"], ["node-0", "node-1", "node-2", "node-3"], [None, "A100-NODE"]),
    "mixed": (MIXED, ["v", "k", "mix"], ["m1", "m2", "k1"], [None, "V100-NODE"]),
    "ws": (WORKSTATION, ["default"], ["ws"], [None]),
}

request = st.tuples(st.integers(0, 2), st.sampled_from([1, 1, 2, 3, 4, 8]), st.integers(1, 3),
                    st.sampled_from([-1, -1, 0, 0, 5, 50]), st.booleans(), st.integers(0, 1))
ops = st.one_of(
    st.tuples(st.just("submit"), request), st.tuples(st.just("submit"), request),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("stop"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("gpu"), st.integers(0, 3), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("probe"), request),
)


def _req(cluster, r, jid, t):
    _, vcs, _, withins = CLUSTERS[cluster]
    vi, g, count, prio, lazy, wi = r
    return job(jid, vcs[vi % len(vcs)], g, count, prio, user=f"u{vi}", lazy_preemption=lazy,
               within=withins[wi % len(withins)], submit_time=t)


def views(s):
    """Everything a caller can see of the core."""
    free = {c: {lvl: sorted(d) for lvl, d in b.free.items()} for c, b in s.state.buddies.items()}
    return (s.cluster_view(), s.vc_view(), [v.to_dict() for v in s.jobs()], s.free_gpu_count(), free,
            {n: v.queue[:] for n, v in s.state.vcs.items()}, list(s.state.opp_queue), s.next_seq, s.now,
            [(vc.dirty, vc.min_bypass) for vc in s.state.vcs.values()], s.state.opp_dirty, s.state.opp_leaves,
            s.usage_snapshot())


def _call(s, step, t, victims):
    op = step[0]
    if op == "finish":
        ids = list(s._jobs)
        return s.finish(ids[step[1] % len(ids)], t) if ids else []
    if op == "stop":
        pending = [v for v in victims if v in s._jobs and s._jobs[v].preempted_by is not None]
        return s.preemption_done(pending[step[1] % len(pending)], t, requeue=step[2]) if pending else []
    if op == "gpu":
        nodes = sorted(s.state.nodes)
        node = nodes[step[1] % len(nodes)]
        gpus = sorted(s.state.nodes[node].gpu_leaves)
        return s.set_gpu_health(node, gpus[step[2] % len(gpus)], step[3], t)
    raise AssertionError(op)


def _decided(ds):
    return [d.to_json() for d in ds]


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=5, max_size=30),
       policy=st.sampled_from(["fifo", "priority", "drf"]), probes=st.lists(request, min_size=30, max_size=30))
def test_what_if_changes_nothing_and_predicts_submit(cluster, steps, policy, probes):
    config = CLUSTERS[cluster][0]
    asked = Scheduler(config, policy=policy, starvation_after=5)
    twin = Scheduler(config, policy=policy, starvation_after=5)
    t = 0.0
    n = 0
    victims: list[str] = []
    for i, step in enumerate(steps):
        t += 1
        # a what-if question before every call: nothing the core shows or decides may change
        probe = _req(cluster, probes[i], "what-if", t)
        before = views(asked)
        try:
            asked.what_if(probe, t)
        except RequestError:
            pass
        assert views(asked) == before
        check_invariants(asked)
        if step[0] in ("submit", "probe"):
            n += 1
            req = _req(cluster, step[1], f"j{n}", t)
            answer = None
            opp_running = {v.id for v in asked.jobs() if v.opportunistic and v.state != "waiting"}
            if step[0] == "probe":
                try:
                    answer = asked.what_if(req, t)
                except RequestError:
                    pass
            try:
                ds = asked.submit(req, t)
            except RequestError:
                assert answer is None  # what-if refuses what submit refuses
                continue
            assert _decided(ds) == _decided(twin.submit(req, t))
            if answer is not None:
                _check_prediction(answer, req.id, ds, opp_running)
        else:
            ds = _call(asked, step, t, victims)
            assert _decided(ds) == _decided(_call(twin, step, t, victims))
        victims += [v for d in ds if d.event == "preempting" for v in d.victims]
    assert views(asked) == views(twin)


def _check_prediction(answer, jid, ds, opp_running):
    mine = [d for d in ds if d.job == jid]
    first = mine[0]
    if answer.outcome == "start":
        assert first.event == "started", (answer, mine)
        assert first.placement == answer.placement
    elif answer.outcome == "preempt" and answer.placement:
        assert first.event == "preempting", (answer, mine)
        assert list(first.victims) == list(answer.victims)
    elif answer.outcome == "preempt":
        # lower-priority victims: lazy ones are demoted (and may keep running), the others preempted (a
        # victim still preempting for someone else loses that reservation); opportunistic work on the
        # GPUs the job then takes is preempted too (which, the search decides then)
        assert first.event in ("preempting", "started"), (answer, mine)
        touched = {d.job for d in ds if d.event == "demoted"} | set(first.victims or ())
        requeued = {d.job for d in ds if d.event == "queued" and d.job != jid}
        assert touched <= set(answer.victims) | opp_running, (answer, ds)
        assert set(answer.victims) <= touched | requeued, (answer, ds)
    else:
        assert answer.outcome == "wait"
        assert first.event == "queued", (answer, mine)
        assert first.reason == answer.reason


def test_what_if_names_gpus_victims_and_reasons():
    s = Scheduler(WORKSTATION)
    a = s.what_if(job("x", "default", 2), 1)
    assert a.outcome == "start" and [(p.node, p.gpus) for p in a.placement] == [("ws", (0, 1))]
    assert s.jobs() == []
    s.submit(job("opp", "default", 2, priority=-1), 1)
    b = s.what_if(job("x", "default", 4), 2)
    assert b.outcome == "preempt" and b.victims == ("opp",) and b.placement[0].gpus == (0, 1, 2, 3)
    s.submit(job("low", "default", 4, priority=0), 2)
    s.preemption_done("opp", 3, requeue=False)
    assert s.job("low").state == "running"
    c = s.what_if(job("x", "default", 2, priority=0), 3)
    assert c.outcome == "wait" and c.reason.startswith("VC default is using 4/4 guaranteed")
    d = s.what_if(job("x", "default", 2, priority=10, lazy_preemption=False), 3)
    assert d.outcome == "preempt" and d.victims == ("low",) and "would preempt low" in d.reason
    assert [v.id for v in s.jobs()] == ["low"]
