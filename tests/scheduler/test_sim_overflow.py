"""The opportunistic overflow lever of ``hived`` in the simulator (``hive_scheduler.overflow``)."""

from __future__ import annotations

import json

from hive_scheduler.sim import simulate
from hive_scheduler.sim.events import parse_events


def two_nodes() -> dict:
    """Nodes n1, n2 of 4 GPUs; VC A owns one node, VC B the other."""
    return {
        "physicalCluster": {
            "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "G-NODE", "cellAddress": "n1"}, {"cellType": "G-NODE", "cellAddress": "n2"}],
        },
        "virtualClusters": {vc: {"virtualCells": [{"cellType": "G-NODE", "cellNumber": 1}]} for vc in ("A", "B")},
    }


def submit(t, job, vc, gpus, duration, priority=0):
    return json.dumps({"t": t, "op": "submit", "job": job, "vc": vc, "priority": priority,
                       "tasks": [{"name": "w", "count": 1, "gpus": gpus}], "duration": duration})


def events(result, job):
    return [(d["t"], d["event"], d.get("opportunistic"), d.get("by")) for d in result.decisions if d["job"] == job]


LINES = [
    submit(0, "a1", "A", 4, 100),  # fills A's node
    submit(10, "a2", "A", 4, 50),  # A is full: runs at once on B's idle node, as opportunistic work
    submit(30, "b1", "B", 4, 40),  # B wants its node back: a2 is preempted (20 s done, 30 s left)
]


def test_a_queued_guaranteed_job_overflows_into_idle_cells_and_gives_them_back():
    r = simulate(two_nodes(), parse_events(LINES), "hived", grace=5)
    assert events(r, "a2") == [
        (10, "queued", None, None),
        (10, "started", True, None),  # on B's idle node
        (35, "preempted", None, "b1"),  # after the 5 s grace, with 25 s done and 25 s left
        (35, "queued", None, None),  # waiting again (its place in A's queue was kept, and as a shadow)
        (75, "started", True, None),  # b1 is done: B's node is idle again before A's frees at 100
        (100, "preempted", None, "a2"),  # a1 frees A's node: a2's place comes and it moves there
        (100, "started", False, None),
        (100, "finished", None, None),  # (it had no time left: its completion at the same instant)
    ]
    assert [d["placement"][0]["node"] for d in r.decisions if d["job"] == "a2" and d["event"] == "started"] == \
        ["n2", "n2", "n1"]
    b1 = [(d["t"], d["event"]) for d in r.decisions if d["job"] == "b1"]
    assert b1 == [(30, "preempting"), (35, "started"), (75, "finished")]
    assert r.metrics.preemptions == 2  # b1's, and a2's move into its VC's cells
    assert not any("@" in d["job"] for d in r.decisions)  # the shadow copies never show
    # a2 waited 40 s (private: 90 s, behind a1); b1 waited the 5 s grace (private: 0): the anomaly
    assert r.metrics.waits == {"a1": 0, "a2": 40, "b1": 5}
    assert r.private.metrics.waits == {"a1": 0, "a2": 90, "b1": 0}
    assert r.metrics.sharing_anomaly_s == 5 and r.metrics.sharing_anomaly_jobs == 1


def test_without_grace_overflow_costs_the_owner_nothing_and_switches_off():
    on = simulate(two_nodes(), parse_events(LINES), "hived")
    assert on.metrics.waits == {"a1": 0, "a2": 40, "b1": 0}
    assert on.metrics.sharing_anomaly_s == 0
    off = simulate(two_nodes(), parse_events(LINES), "hived", overflow=False)
    assert events(off, "a2") == [(10, "queued", None, None), (100, "started", False, None), (150, "finished", None, None)]
    assert off.metrics.waits == {"a1": 0, "a2": 90, "b1": 0} == off.private.metrics.waits


def test_a_job_that_starts_in_its_vc_first_withdraws_its_shadow_and_finish_reaches_an_overflowed_job():
    lines = [
        submit(0, "a1", "A", 4, 100),
        submit(0, "b1", "B", 4, 100),  # both nodes full: a2's shadow waits too
        submit(1, "a2", "A", 2, 100),
        json.dumps({"t": 50, "op": "finish", "job": "a1"}),  # A's node frees first: a2 starts there
        submit(60, "a3", "A", 4, 1000),  # A's node has 2 free only: a3 waits (B's node is busy too)
        json.dumps({"t": 100, "op": "finish", "job": "b1"}),  # B's node frees: a3 overflows into it
        json.dumps({"t": 120, "op": "finish", "job": "a3"}),  # the script ends the overflowed job
    ]
    r = simulate(two_nodes(), parse_events(lines), "hived")
    assert events(r, "a2") == [(1, "queued", None, None), (50, "started", False, None), (150, "finished", None, None)]
    assert events(r, "a3") == [(60, "queued", None, None), (100, "started", True, None), (120, "finished", None, None)]
    assert not any("@" in d["job"] for d in r.decisions)
