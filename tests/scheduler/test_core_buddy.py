"""Buddy cell allocation: lazy binding, splitting and merging, safety of other VCs' cells."""

from core_helpers import check_invariants, job
from hive_scheduler import Scheduler

RACKS = {"nodes": 4, "gpus_per_node": 8, "gpu_type": "A100", "levels": ["pair", "socket"], "racks": 2,
         "vcs": {"big": {"cells": {"rack": 1}}, "small": {"cells": {"node": 2}}}}


def free_lists(s):
    return {lvl: sorted(c.address for c in d.values()) for lvl, d in s.state.buddies["A100-RACK"].free.items() if d}


def test_cells_bind_lazily_split_and_merge():
    s = Scheduler(RACKS)
    assert free_lists(s) == {5: ["A100-RACK-0", "A100-RACK-1"]}
    s.submit(job("s1", "small", 1), 0)  # binds one node: one rack splits
    assert free_lists(s) == {4: ["node-1"], 5: ["A100-RACK-1"]}
    s.submit(job("s2", "small", 8), 1)  # second node: the free node, not the other rack
    assert free_lists(s) == {5: ["A100-RACK-1"]}
    s.submit(job("s3", "small", 1), 1)  # packs into the used node
    assert s.job("s3").placement[0].node == s.job("s1").placement[0].node
    d = s.submit(job("b1", "big", 8, count=2, within="A100-RACK"), 2)[0]
    assert d.event == "started" and {p.node for p in d.placement} == {"node-2", "node-3"}
    for j in ("s1", "s3"):
        s.finish(j, 3)
    assert free_lists(s) == {4: ["node-0"]}  # node-0 unbound again, rack 0 still split (node-1 bound)
    s.finish("s2", 4)
    s.finish("b1", 4)
    assert free_lists(s) == {5: ["A100-RACK-0", "A100-RACK-1"]}
    check_invariants(s)


def test_a_split_never_takes_a_cell_owed_to_another_vc():
    s = Scheduler(RACKS)
    # opportunistic work everywhere but one node of rack 1
    s.submit(job("o", "small", 8, count=3, priority=-1), 0)
    assert {p.node for p in s.job("o").placement} == {"node-0", "node-1", "node-2"}
    # small's two nodes come from one rack (the second from the rack split by the first, even though
    # it runs opportunistic work and the other rack would have a clean node): big keeps a whole rack
    s.submit(job("s1", "small", 8), 1)
    s.submit(job("s2", "small", 8), 1)
    racks = {s.state.nodes[s.job(j).placement[0].node].cells[0].parent.address for j in ("s1", "s2")}
    assert len(racks) == 1
    d = s.submit(job("b", "big", 8, count=2), 2)
    assert d[0].event in ("started", "preempting")
    check_invariants(s)


def test_bad_gpu_keeps_cells_split_until_repaired():
    s = Scheduler(RACKS)
    s.set_gpu_health("node-3", 7, False, 0)
    fl = free_lists(s)
    assert fl[5] == ["A100-RACK-0"] and fl[4] == ["node-2"] and "node-3/0" in fl[3]
    assert s.vc_view()["big"]["doomed_gpus"] == 0  # rack 0 is whole and healthy
    s.submit(job("b", "big", 1), 1)
    # two nodes owed, one healthy free node left: the other binds around node-3's bad GPU (HiveD)
    assert s.vc_view()["small"]["doomed_gpus"] == 1
    s.set_gpu_health("node-3", 7, True, 2)
    assert free_lists(s) == {5: ["A100-RACK-1"]}
    assert s.vc_view()["small"]["doomed_gpus"] == 0
