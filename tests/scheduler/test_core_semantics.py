"""HiveD semantics, each as a scenario: equal priorities never preempt each other, reservations are
taken over only by strictly higher priorities, a withdrawn preemptor cancels its preemption, and
reconfiguration preserves running work (also when the nodes it runs on are removed)."""

import pytest

from core_helpers import SMALL, check_invariants, events, job, run_script
from hive_scheduler import RequestError, Scheduler

# SMALL: 4 nodes x 8 GPUs in 2 racks; VC a = one rack (node-0, node-1), b = 1 node, c = 2 sockets.


def test_a_job_never_preempts_a_job_of_equal_priority():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "x", "vc": "b", "gpus": 8, "priority": 5, "lazy_preemption": False,
         "expect": [["started", "x", False]]},
        {"op": "submit", "job": "y", "vc": "b", "gpus": 8, "priority": 5, "t": 1, "expect": [["queued", "y"]]},
        {"op": "submit", "job": "lz", "vc": "c", "gpus": 4, "count": 2, "priority": 5, "t": 1,
         "expect": [["started", "lz", False]]},
        # lazy or not: an equal priority neither demotes nor stops it
        {"op": "submit", "job": "lz2", "vc": "c", "gpus": 4, "priority": 5, "t": 2, "expect": [["queued", "lz2"]]},
    ])
    assert s.job("x").state == "running" and not s.job("x").opportunistic
    assert s.job("lz").state == "running" and not s.job("lz").demoted


def _reservation_taken_over(policy="fifo"):
    s = Scheduler(SMALL, policy=policy)
    res = run_script(s, [
        {"op": "submit", "job": "keep", "vc": "b", "gpus": 4, "priority": 100, "expect": [["started", "keep", False]]},
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 4, "priority": 0, "lazy_preemption": False,
         "expect": [["started", "lo", False]]},
        {"op": "submit", "job": "mid", "vc": "b", "gpus": 4, "priority": 50, "t": 1,
         "expect": [["preempting", "mid", ["lo"]]]},
        # equal priority: no takeover
        {"op": "submit", "job": "same", "vc": "b", "gpus": 4, "priority": 50, "t": 2, "expect": [["queued", "same"]]},
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 4, "priority": 90, "t": 3,
         "expect": [["queued", "mid"], ["preempting", "hi", ["lo"]]]},
    ])
    return s, res


def test_a_reservation_is_taken_over_only_by_a_strictly_higher_priority_and_the_displaced_preemptor_waits():
    s, res = _reservation_taken_over()
    assert res[4]["decisions"][0].reason == "its reservation was taken over by hi (priority 90 > 50)"
    mid = s.job("mid")
    assert mid.state == "waiting" and not mid.reserved_cells and not mid.waiting_for
    # the displaced preemptor preempts nothing, also when something else changes meanwhile
    ds = s.submit(job("o", "a", 1, priority=-1), 4)
    assert events(ds) == [("started", "o", True)]
    assert s.job("keep").preempted_by is None and s.job("o").preempted_by is None
    ds = s.preemption_done("lo", 5)
    assert events(ds) == [("preempted", "lo", "hi"), ("queued", "lo"), ("started", "hi", False)]
    assert s.job("mid").state == "waiting" and s.job("keep").state == "running"
    check_invariants(s)


def test_a_displaced_preemptor_starts_once_the_takeover_is_settled():
    s, _ = _reservation_taken_over(policy="priority")
    s.submit(job("lo2", "a", 8, priority=0, lazy_preemption=False), 4)
    s.preemption_done("lo", 5)
    # b's GPUs: keep (100) and hi (90); mid (50) and same (50) wait for them, never preempting them
    assert s.job("mid").state == "waiting" and s.job("same").state == "waiting"
    ds = s.finish("keep", 6)
    assert events(ds) == [("finished", "keep"), ("started", "mid", False)]
    check_invariants(s)


def test_withdrawing_a_preemptor_cancels_its_preemption():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "v1", "vc": "b", "gpus": 4, "priority": 0, "lazy_preemption": False},
        {"op": "submit", "job": "v2", "vc": "b", "gpus": 4, "priority": 0, "lazy_preemption": False},
        {"op": "submit", "job": "p", "vc": "b", "gpus": 8, "priority": 10, "t": 1,
         "expect": [["preempting", "p", ["v1", "v2"]]]},
        # v1 is stopped; v2 not yet
        {"op": "preemption_done", "job": "v1", "t": 2, "expect": [["preempted", "v1", "p"], ["queued", "v1"]]},
        # the preemptor is withdrawn: its preemption is called off
        {"op": "finish", "job": "p", "t": 3, "expect": [["finished", "p"], ["started", "v1", False]]},
    ])
    v2 = s.job("v2")
    assert v2.state == "running" and v2.preempted_by is None and v2.reason is None
    assert not v2.opportunistic and not v2.demoted  # it holds its guaranteed cells again
    assert all(not c.reserved for c in s.state.roots)
    with pytest.raises(RequestError):
        s.preemption_done("v2", 4)  # nobody waits for it any more
    assert s.vc_view()["b"]["used_gpus"] == 8
    # a same-priority job of b waits for them
    assert events(s.submit(job("w", "b", 4, priority=0), 5)) == [("queued", "w")]
    check_invariants(s)


def test_an_equal_priority_job_does_not_ride_on_another_preemption():
    """x (priority 0, 8 GPUs) is stopped for p (priority 10, 4 GPUs). w (priority 0, queued before) may
    not claim x's other GPUs while x still runs: that would make w a preemptor of an equal priority
    (if p is withdrawn, x must run on with its guarantee). w starts once x is gone. (Found by the
    simulator's property test.)"""
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "x", "vc": "b", "gpus": 8, "priority": 0, "lazy_preemption": False,
         "expect": [["started", "x", False]]},
        {"op": "submit", "job": "w", "vc": "b", "gpus": 1, "priority": 0, "t": 1, "expect": [["queued", "w"]]},
        {"op": "submit", "job": "p", "vc": "b", "gpus": 4, "priority": 10, "t": 2,
         "expect": [["preempting", "p", ["x"]]]},
    ])
    assert s.job("w").state == "waiting" and not s.job("w").waiting_for
    check_invariants(s)
    ds = s.preemption_done("x", 3)
    assert events(ds)[:3] == [("preempted", "x", "p"), ("queued", "x"), ("started", "p", False)]
    assert ("started", "w", False) in events(ds)
    check_invariants(s)


def test_a_withdrawn_preemptor_leaves_no_equal_priority_claim_on_its_victim():
    s = Scheduler(SMALL)
    s.submit(job("x", "b", 8, priority=0, lazy_preemption=False), 0)
    s.submit(job("w", "b", 1, priority=0), 1)
    assert events(s.submit(job("p", "b", 4, priority=10), 2)) == [("preempting", "p", ["x"])]
    assert events(s.cancel("p", 3)) == [("finished", "p")]
    x = s.job("x")
    assert x.state == "running" and x.preempted_by is None and not x.opportunistic
    assert s.job("w").state == "waiting"
    check_invariants(s)


def test_cancel_is_finish_for_a_waiting_or_preempting_job():
    s = Scheduler(SMALL)
    s.submit(job("v", "b", 8, priority=0, lazy_preemption=False), 0)
    assert events(s.submit(job("p", "b", 8, priority=10), 1)) == [("preempting", "p", ["v"])]
    assert events(s.cancel("p", 2)) == [("finished", "p")]
    assert s.job("v").state == "running" and s.job("v").preempted_by is None
    assert not s.job("v").opportunistic
    check_invariants(s)


def _small_without(*nodes):
    keep = [n for n in ("node-0", "node-1", "node-2", "node-3") if n not in nodes]
    return dict(SMALL, nodes=keep, racks=None, vcs={"a": 8, "b": 8})


def test_reconfiguration_that_removes_busy_nodes_keeps_their_jobs_running_and_accounted():
    s = Scheduler(dict(SMALL, racks=None, vcs={"a": 16, "b": 8}))
    s.submit(job("a1", "a", 8), 0)
    s.submit(job("a2", "a", 8), 0)
    s.submit(job("b1", "b", 4), 0)
    s.submit(job("o1", "b", 2, priority=-1), 0)
    where = {j: s.job(j).placement[0].node for j in ("a1", "a2", "b1", "o1")}
    gone = where["a2"]
    assert gone != where["a1"]
    # the new config drops a2's node and halves VC a
    ds = s.reconfigure(_small_without(gone), 1)
    assert ("demoted", "a1") in events(ds) or ("demoted", "a2") in events(ds)
    for j in ("a1", "a2", "b1", "o1"):
        v = s.job(j)
        assert v.state == "running", j
        assert v.placement[0].node == where[j]
    # VC a now guarantees 8: one of its jobs keeps the guarantee, the other is demoted (still running)
    demoted = [j for j in ("a1", "a2") if s.job(j).demoted]
    assert len(demoted) == 1
    assert s.vc_view()["a"]["used_gpus"] == 8
    # the removed node takes no new work and a same-priority job of a waits for the running ones
    assert events(s.submit(job("a3", "a", 1), 2)) == [("queued", "a3")]
    assert gone not in s.state.nodes
    check_invariants(s)
    # finishing the job on the removed node works and frees what it held
    ds = s.finish("a2", 3)
    assert ds[0].event == "finished"
    check_invariants(s)


def test_reconfiguration_keeps_a_guaranteed_job_on_a_removed_node_accounted_to_its_vc():
    base = dict(SMALL, racks=None, vcs={"a": 8, "b": 8})
    s = Scheduler(base)
    s.submit(job("b1", "b", 8), 0)
    gone = s.job("b1").placement[0].node
    ds = s.reconfigure(_small_without(gone), 1)
    assert events(ds) == []  # b still guarantees 8 GPUs: b1 keeps its guarantee
    b1 = s.job("b1")
    assert b1.state == "running" and not b1.opportunistic and not b1.demoted
    assert b1.placement[0].node == gone
    assert s.vc_view()["b"]["used_gpus"] == 8
    # a same-priority job of b waits for b1 even though b's cell could be bound elsewhere
    assert events(s.submit(job("b2", "b", 8), 2)) == [("queued", "b2")]
    # a higher priority of b preempts it (b1's guarantee is real)
    ds = s.submit(job("b3", "b", 8, priority=5), 3)
    assert events(ds) == [("demoted", "b1"), ("started", "b3", False)]
    assert s.job("b1").state == "running" and s.job("b1").opportunistic
    check_invariants(s)
    # putting the node back: b1 is adopted on it again
    ds = s.reconfigure(base, 4)
    assert s.job("b1").state == "running" and s.job("b1").placement[0].node == gone
    check_invariants(s)
    s.finish("b1", 5)
    s.finish("b3", 5)
    check_invariants(s)
    assert s.job("b2").state == "running"


def test_putting_removed_cells_back_gives_the_guarantee_back():
    base = dict(SMALL, racks=None, vcs={"a": 8, "b": 8})
    s = Scheduler(base)
    s.submit(job("a1", "a", 8), 0)
    gone = s.job("a1").placement[0].node
    s.reconfigure(_small_without(gone), 1)
    assert not s.job("a1").opportunistic
    ds = s.reconfigure(base, 2)
    assert "demoted" not in [d.event for d in ds]
    a1 = s.job("a1")
    assert a1.state == "running" and not a1.opportunistic and a1.placement[0].node == gone
    assert s.state.nodes[gone].gpu_leaves[0].job == "a1"
    # the node is back: new work may land on its free GPUs, never on a1's
    s.submit(job("o", "b", 8, priority=-1, count=3), 3)
    check_invariants(s)


@pytest.mark.parametrize("policy", ["hived", "quota"])
@pytest.mark.parametrize("duration", [100, None])
def test_the_simulator_logs_a_preempted_job_as_queued_again(policy, duration):
    import json

    from hive_scheduler.sim import simulate
    from hive_scheduler.sim.events import parse_events

    def submit(t, jid, priority, count, duration=None):
        d = {"t": t, "op": "submit", "job": jid, "vc": "b", "priority": priority,
             "tasks": [{"name": "w", "count": count, "gpus": 8}]}
        if duration is not None:
            d["duration"] = duration
        return json.dumps(d)

    # an opportunistic gang on all 32 GPUs; b's guaranteed job needs 8 of them
    lines = [submit(0, "low", -1, 4, duration), submit(10, "high", 0, 1, 20)]
    r = simulate(SMALL, parse_events(lines), policy, grace=5)
    low = [(d["t"], d["event"]) for d in r.decisions if d["job"] == "low"]
    i = low.index((15, "preempted"))
    assert low[i + 1] == (15, "queued")
    assert low[i + 2] == (35, "started")  # once high's 20 s are over
    if duration is not None:
        assert low[-1] == (120, "finished")  # 15 s done, 85 s left
    else:
        assert len(low) == i + 3


def test_putting_a_removed_gpu_back_never_mixes_guaranteed_and_opportunistic_shares_on_it():
    """Shares of one GPU on a removed node: two keep their VC's guarantee, one is demoted (its VC's
    cells cover only the others). When the node comes back all three are adopted on that GPU again;
    a shared GPU is all guaranteed or all opportunistic, so its guaranteed shares run on as
    opportunistic beside the demoted one, each saying why (found by a differential replay)."""
    base = dict(SMALL, racks=None, vcs={"a": 16, "b": 8})
    s = Scheduler(base)
    b_node = None
    for jid, prio in (("s1", 50), ("s2", 50)):
        s.submit(job(jid, "b", 0.25, priority=prio), 0)
        b_node = s.job(jid).placement[0].node
    s.submit(job("f", "b", 1, count=6), 0)       # the rest of VC b, but for one GPU
    s.submit(job("d", "b", 0.25), 0)              # a third share, on the same GPU as s1 and s2
    assert {s.job(j).placement[0].node for j in ("s1", "s2", "f", "d")} == {b_node}
    assert s.job("d").placement[0].gpus == s.job("s1").placement[0].gpus
    # b_node is removed; VC b still guarantees 8 GPUs, each detached share holds one: d is left out
    ds = s.reconfigure(_small_without(b_node), 1)
    assert events(ds) == [("demoted", "d")]
    check_invariants(s)
    ds = s.reconfigure(base, 2)
    check_invariants(s)
    assert sorted(d.job for d in ds if d.event == "demoted") == ["s1", "s2"]
    assert all("opportunistic" in d.reason for d in ds if d.event == "demoted")
    for jid in ("s1", "s2", "d"):
        v = s.job(jid)
        assert v.state == "running" and v.opportunistic and v.placement[0].node == b_node
    assert not s.job("f").opportunistic
    for jid in ("s1", "s2", "d", "f"):
        s.finish(jid, 3)
        check_invariants(s)
