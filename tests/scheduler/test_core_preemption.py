"""Preemption, reservations, lazy preemption, opportunistic jobs, as event scripts."""

from core_helpers import SMALL, check_invariants, run_script
from hive_scheduler import Scheduler

# SMALL: VC a = one rack (node-0, node-1), b = 1 node, c = 2 sockets; two racks of 2 nodes.


def test_opportunistic_uses_idle_gpus_and_is_preempted_by_guarantees():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "o1", "vc": "c", "gpus": 8, "count": 3, "priority": -1,
         "expect": [["started", "o1", True]]},
        # b's guaranteed node: a free node without opportunistic work exists -> no preemption
        {"op": "submit", "job": "b1", "vc": "b", "gpus": 8, "expect": [["started", "b1", False]]},
        # a needs a whole rack: every rack holds o1 -> o1 is preempted (gang-wide)
        {"op": "submit", "job": "a1", "vc": "a", "gpus": 8, "count": 2, "t": 1,
         "expect": [["preempting", "a1", ["o1"]]]},
        {"op": "submit", "job": "o2", "vc": "a", "gpus": 1, "priority": -1, "t": 2, "expect": [["queued", "o2"]]},
        {"op": "preemption_done", "job": "o1", "t": 3,
         "expect": [["preempted", "o1", "a1"], ["queued", "o1"], ["started", "a1", False], ["started", "o2", True]]},
    ])
    v = s.job("o1")
    assert v.state == "waiting" and v.opportunistic
    # opportunistic o2 avoided the nodes with guaranteed work
    guaranteed_nodes = {p.node for j in ("a1", "b1") for p in s.job(j).placement}
    assert s.job("o2").placement[0].node not in guaranteed_nodes


def test_opportunistic_jobs_never_preempt():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "a1", "vc": "a", "gpus": 8, "count": 2, "expect": [["started", "a1", False]]},
        {"op": "submit", "job": "b1", "vc": "b", "gpus": 8, "expect": [["started", "b1", False]]},
        {"op": "submit", "job": "c1", "vc": "c", "gpus": 4, "count": 2, "expect": [["started", "c1", False]]},
        {"op": "submit", "job": "o1", "vc": "c", "gpus": 8, "priority": -1, "expect": [["queued", "o1"]]},
    ])
    assert s.job("o1").reason.startswith("opportunistic: needs 1 x 8 GPUs; 0 GPUs are free")


def test_lazy_preemption_demotes_and_keeps_running_when_cells_not_needed():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 8, "priority": 0, "expect": [["started", "lo", False]]},
        # hi needs b's only node; lo is demoted first; b's cell is rebound to a free node: lo keeps running
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 8, "priority": 10, "t": 1,
         "expect": [["demoted", "lo"], ["started", "hi", False]]},
    ])
    lo = s.job("lo")
    assert lo.state == "running" and lo.opportunistic and lo.demoted
    assert s.job("hi").placement[0].node != lo.placement[0].node
    assert s.vc_view()["b"]["opportunistic_gpus"] == 8 and s.vc_view()["b"]["used_gpus"] == 8


def test_lazy_victim_preempted_when_its_cells_are_needed():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 4, "priority": 0, "expect": [["started", "lo", False]]},
        {"op": "submit", "job": "keep", "vc": "b", "gpus": 4, "priority": 20, "expect": [["started", "keep", False]]},
        # b's node stays bound (keep holds half): hi must land on lo's GPUs
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 4, "priority": 10, "t": 1,
         "expect": [["demoted", "lo"], ["preempting", "hi", ["lo"]]]},
        {"op": "submit", "job": "x", "vc": "a", "gpus": 1, "priority": -1, "t": 2},
        {"op": "preemption_done", "job": "lo", "t": 3,
         "expect": [["preempted", "lo", "hi"], ["queued", "lo"], ["started", "hi", False]]},
    ])
    assert s.job("lo").state == "waiting" and not s.job("lo").opportunistic


def test_strictly_higher_priority_takes_over_a_reservation():
    s = Scheduler(SMALL)
    res = run_script(s, [
        {"op": "submit", "job": "keep", "vc": "b", "gpus": 4, "priority": 100, "expect": [["started", "keep", False]]},
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 4, "priority": 0, "lazy_preemption": False,
         "expect": [["started", "lo", False]]},
        {"op": "submit", "job": "mid", "vc": "b", "gpus": 4, "priority": 50, "t": 1,
         "expect": [["preempting", "mid", ["lo"]]]},
        {"op": "submit", "job": "same", "vc": "b", "gpus": 4, "priority": 50, "t": 2, "expect": [["queued", "same"]]},
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 4, "priority": 90, "t": 3,
         "expect": [["queued", "mid"], ["preempting", "hi", ["lo"]]]},
        {"op": "preemption_done", "job": "lo", "t": 4, "expect": [["preempted", "lo", "hi"], ["queued", "lo"], ["started", "hi", False]]},
    ])
    queued = res[4]["decisions"][0]
    assert queued.reason == "its reservation was taken over by hi (priority 90 > 50)"
    assert s.job("mid").reason == "VC b is using 8/8 guaranteed GPUs and the job needs 4; 1 job ahead"  # lo
    check_invariants(s)


def test_no_guaranteed_job_of_another_vc_is_ever_a_victim():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "b1", "vc": "b", "gpus": 8, "priority": 0},
        {"op": "submit", "job": "c1", "vc": "c", "gpus": 4, "count": 2, "priority": 0},
        {"op": "submit", "job": "a1", "vc": "a", "gpus": 8, "count": 2, "priority": 0},
        {"op": "submit", "job": "a2", "vc": "a", "gpus": 1, "priority": 1000, "expect": [["demoted", "a1"],
                                                                                         ["preempting", "a2", ["a1"]]]},
        {"op": "submit", "job": "b2", "vc": "b", "gpus": 8, "priority": 1000, "t": 1},
    ])
    assert s.job("b1").state == "running" and s.job("c1").state == "running"


def test_preemption_done_without_requeue_removes_the_victim():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 8, "priority": 0, "lazy_preemption": False},
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 8, "priority": 5, "expect": [["preempting", "hi", ["lo"]]]},
        {"op": "preemption_done", "job": "lo", "requeue": False, "t": 1,
         "expect": [["preempted", "lo", "hi"], ["started", "hi", False]]},
    ])
    assert [j.id for j in s.jobs()] == ["hi"]


def test_finish_of_a_victim_or_a_preemptor():
    s = Scheduler(SMALL)
    run_script(s, [
        {"op": "submit", "job": "lo", "vc": "b", "gpus": 8, "priority": 0, "lazy_preemption": False},
        {"op": "submit", "job": "hi", "vc": "b", "gpus": 8, "priority": 5, "expect": [["preempting", "hi", ["lo"]]]},
        # the victim ended on its own: the preemptor starts
        {"op": "finish", "job": "lo", "t": 1, "expect": [["finished", "lo"], ["started", "hi", False]]},
        {"op": "submit", "job": "lo2", "vc": "b", "gpus": 8, "priority": 0, "t": 1},
        {"op": "finish", "job": "hi", "t": 2, "expect": [["finished", "hi"], ["started", "lo2", False]]},
        {"op": "submit", "job": "hi2", "vc": "b", "gpus": 8, "priority": 5, "lazy_preemption": False, "t": 3},
        {"op": "finish", "job": "hi2", "t": 4, "expect": [["finished", "hi2"]]},
    ])
    # lo2 was demoted lazily and is still running; the withdrawn preemptor left no reservation
    assert s.job("lo2").state == "running"
    assert all(not c.reserved for c in s.state.roots)
