"""Bad hardware (and drains, which use the same calls): HiveD semantics. A VC's virtual cell may bind
to a physical cell holding bad GPUs; only those GPUs are doomed, the rest stay usable, and no bind
ever costs another VC its cells once the hardware is repaired."""

from core_helpers import WORKSTATION, check_invariants, events, job
from hive_scheduler import JobRequest, Scheduler, TaskGroup

# 3 nodes x 4 GPUs in pairs; VC a owns two node cells, b one
THREE_NODES = {"nodes": 3, "gpus_per_node": 4, "gpu_type": "V100", "levels": ["pair"],
               "vcs": {"a": {"cells": {"node": 2}}, "b": {"cells": {"node": 1}}}}


def gpus_of(s, jid):
    return [(p.node, list(p.gpus)) for p in s.job(jid).placement]


def test_one_bad_gpu_does_not_stop_a_workstation():
    s = Scheduler(WORKSTATION)
    s.set_gpu_health("ws", 0, False, 1.0)  # a drain uses the same call
    assert s.vc_view()["default"]["doomed_gpus"] == 1
    d = s.submit(JobRequest(id="j1", vc="default", user="a", tasks=(TaskGroup(name="m", count=1, gpus=1),)), 2.0)
    assert events(d) == [("started", "j1", False)] and gpus_of(s, "j1") == [("ws", [1])]
    assert events(s.submit(job("pair", "default", 2), 3)) == [("started", "pair", False)]
    assert gpus_of(s, "pair") == [("ws", [2, 3])]
    check_invariants(s)
    s.finish("j1", 4)
    s.finish("pair", 4)
    d = s.submit(job("all", "default", 4), 5)
    assert events(d) == [("queued", "all")]
    assert d[0].reason == ("VC default has 4 free guaranteed GPUs but 1 of them is on bad hardware (doomed); "
                           "the job needs 4")
    view = s.vc_view()["default"]
    assert view["doomed_gpus"] == 1 and view["free_gpus"] == 4  # unbound again: nothing bound holds the bad GPU
    assert events(s.set_gpu_health("ws", 0, True, 6)) == [("started", "all", False)]
    assert s.vc_view()["default"]["doomed_gpus"] == 0
    check_invariants(s)


def test_within_binds_around_a_bad_gpu():
    s = Scheduler(WORKSTATION)
    s.set_gpu_health("ws", 2, False, 0)
    d = s.submit(job("w", "default", 1, count=3, within="A6000-NODE"), 1)
    assert events(d) == [("started", "w", False)]
    assert sorted(g for _, gs in gpus_of(s, "w") for g in gs) == [0, 1, 3]
    check_invariants(s)


def test_node_cells_prefer_healthy_nodes_and_bind_around_a_bad_gpu_when_none_is_left():
    s = Scheduler(THREE_NODES)
    s.set_gpu_health("node-0", 1, False, 0)
    assert {vc: v["doomed_gpus"] for vc, v in s.vc_view().items()} == {"a": 0, "b": 0}
    # whole-node jobs go to healthy nodes while the VC can bind one
    assert events(s.submit(job("a1", "a", 4), 1)) == [("started", "a1", False)]
    assert events(s.submit(job("a2", "a", 4), 1)) == [("started", "a2", False)]
    assert {n for j in ("a1", "a2") for n, _ in gpus_of(s, j)} == {"node-1", "node-2"}
    # b's node cell can only be the partly bad node-0: a whole-node job waits as doomed ...
    assert s.vc_view()["b"]["doomed_gpus"] == 1
    d = s.submit(job("b4", "b", 4), 2)
    assert events(d) == [("queued", "b4")] and "1 of them is on bad hardware (doomed)" in d[0].reason
    # ... and jobs small enough start on its healthy GPUs
    assert events(s.submit(job("b2", "b", 2), 3)) == [("started", "b2", False)]
    assert gpus_of(s, "b2") == [("node-0", [2, 3])]
    assert events(s.submit(job("b1", "b", 1), 3)) == [("started", "b1", False)]
    assert gpus_of(s, "b1") == [("node-0", [0])]
    assert s.vc_view()["b"]["doomed_gpus"] == 1
    check_invariants(s)
    # a whole-node job of a VC with a healthy bound node lands there once it is free
    s.finish("a1", 4)
    assert events(s.submit(job("a3", "a", 4), 5)) == [("started", "a3", False)]
    assert gpus_of(s, "a3")[0][0] in ("node-1", "node-2")
    check_invariants(s)


def test_binding_around_a_bad_gpu_never_takes_a_cell_owed_to_another_vc():
    # a owns two pairs, b one node; node-0 GPU 0 is bad. a's first pair takes node-0's healthy pair;
    # a second pair from node-1 would leave b no node once node-0 is repaired, so a's second pair binds
    # around the bad GPU (a 1-GPU job starts there) or, for a 2-GPU job, a waits.
    cfg = {"nodes": 2, "gpus_per_node": 4, "gpu_type": "V100", "levels": ["pair"],
           "vcs": {"a": {"cells": {"pair": 2}}, "b": {"cells": {"node": 1}}}}
    s = Scheduler(cfg)
    s.set_gpu_health("node-0", 0, False, 0)
    assert events(s.submit(job("a1", "a", 2), 1)) == [("started", "a1", False)]
    assert gpus_of(s, "a1") == [("node-0", [2, 3])]
    assert events(s.submit(job("a2", "a", 2), 1)) == [("queued", "a2")]
    assert events(s.submit(job("a3", "a", 1), 1)) == [("started", "a3", False)]
    assert gpus_of(s, "a3") == [("node-0", [1])]
    assert events(s.submit(job("b1", "b", 4), 2)) == [("started", "b1", False)]
    assert gpus_of(s, "b1") == [("node-1", [0, 1, 2, 3])]
    check_invariants(s)
    assert events(s.finish("a3", 3)) == [("finished", "a3")]  # a2 still cannot have a whole pair
    # repaired: node-0's first pair is whole again and a2 starts there
    assert events(s.set_gpu_health("node-0", 0, True, 4)) == [("started", "a2", False)]
    assert gpus_of(s, "a2") == [("node-0", [0, 1])]
    check_invariants(s)


def test_a_preemptor_whose_reserved_node_goes_down_is_placed_again():
    cfg = {"nodes": 4, "gpus_per_node": 4, "gpu_type": "V100", "levels": ["pair"],
           "vcs": {"A": {"cells": {"node": 2}}, "B": {"cells": {"node": 1}}, "C": {"cells": {"node": 1}}}}
    s = Scheduler(cfg)
    for j in (job("o1", "A", 1, priority=-1), job("o2", "A", 1, priority=-1),
              job("low", "A", 1, lazy_preemption=False)):
        assert events(s.submit(j, 0))[0][0] == "started"
    d = s.submit(job("high", "A", 4, count=2, priority=5, lazy_preemption=False), 0)
    assert events(d) == [("preempting", "high", ["low"])]
    node = s.job("low").placement[0].node
    assert any(c.startswith(node + "/") for c in s.job("high").reserved_cells)
    d = s.set_node_health(node, False, 0.5)
    assert events(d)[0] == ("queued", "high")
    assert d[0].reason.startswith(f"GPUs it reserved went bad ({node}/0")
    check_invariants(s)
    view = s.job("high")
    assert node not in {c.split("/")[0] for c in view.reserved_cells}
    assert node not in {p.node for p in view.placement}
    # the victim was told to stop and still reports it; nothing lands on the bad node
    d = s.preemption_done("low", 5)
    assert ("preempted", "low", "high") in events(d)
    for x in d:
        assert x.event != "started" or node not in {p.node for p in x.placement}
    assert s.job("high").state == "running" and node not in {p.node for p in s.job("high").placement}
    check_invariants(s)


def test_adopting_a_guaranteed_job_next_to_a_bad_gpu_keeps_its_guarantee():
    s = Scheduler(WORKSTATION)
    s.set_gpu_health("ws", 0, False, 0)
    ds = s.adopt(job("r", "default", 2), [{"task": "w-0", "node": "ws", "gpus": [2, 3]}], False, 1)
    assert ds == [] and not s.job("r").opportunistic
    assert events(s.submit(job("one", "default", 1), 2)) == [("started", "one", False)]
    assert gpus_of(s, "one") == [("ws", [1])]
    assert s.vc_view()["default"]["doomed_gpus"] == 1
    check_invariants(s)
