"""The Scheduler's calls and queries: placement, gangs, reasons, errors, views."""

import pytest

from core_helpers import HIVED_EXAMPLE, SMALL, check_invariants, events, job, run_script
from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup


def test_submit_finish_and_queue():
    s = Scheduler("default")
    assert events(s.submit(job("a", "default", 2), 0)) == [("started", "a", False)]
    assert events(s.submit(job("b", "default", 1, count=2), 1)) == [("started", "b", False)]
    ds = s.submit(job("c", "default", 2), 2)
    assert events(ds) == [("queued", "c")]
    assert ds[0].reason == "VC default is using 4/4 guaranteed GPUs and the job needs 2"
    assert events(s.finish("a", 3)) == [("finished", "a"), ("started", "c", False)]
    assert s.free_gpu_count() == 0
    s.finish("b", 4)
    s.finish("c", 5)
    assert s.free_gpu_count() == s.gpu_count() == 4
    check_invariants(s)


def test_task_gpus_share_closest_common_ancestor_and_pack():
    s = Scheduler(SMALL)
    d = s.submit(job("p", "a", 2), 0)[0]
    assert d.placement[0].gpus in ((0, 1), (2, 3), (4, 5), (6, 7))  # one NVLink pair
    d = s.submit(job("q", "a", 4), 1)[0]
    socket = d.placement[0].gpus
    assert socket in ((0, 1, 2, 3), (4, 5, 6, 7))
    assert d.placement[0].node == s.job("p").placement[0].node  # packs onto the used node
    d = s.submit(job("r", "a", 1), 2)[0]
    assert d.placement[0].node == s.job("p").placement[0].node
    check_invariants(s)


def test_gang_is_all_or_nothing():
    s = Scheduler(SMALL)
    s.submit(job("x", "a", 8), 0)
    s.submit(job("y", "a", 4), 0)
    before = s.free_gpu_count()
    ds = s.submit(job("g", "a", 4, count=2), 1)  # only 4 guaranteed GPUs left in VC a
    assert events(ds) == [("queued", "g")]
    assert s.free_gpu_count() == before
    assert s.job("g").placement == ()
    s.finish("x", 2)
    started = [d for d in s.schedule(2)]
    assert events(started) == []  # finish already started it
    v = s.job("g")
    assert v.state == "running" and len(v.placement) == 2
    assert [p.task for p in v.placement] == ["w-0", "w-1"] and [p.rank for p in v.placement] == [0, 1]
    check_invariants(s)


def test_within_keeps_all_tasks_in_one_cell_and_reason():
    s = Scheduler(SMALL)
    s.submit(job("f1", "a", 4), 0)
    s.submit(job("f2", "a", 4), 0)
    s.submit(job("f3", "a", 4), 0)  # 3 sockets of 4 busy: 4 free, in another node than ...
    ds = s.submit(job("w", "a", 4, count=2, within="A100-NODE"), 1)
    assert events(ds) == [("queued", "w")]
    assert ds[0].reason == "VC a is using 12/16 guaranteed GPUs and the job needs 8"
    s.finish("f3", 2)
    v = s.job("w")
    assert v.state == "running"
    assert len({p.node for p in v.placement}) == 1


def test_no_head_of_line_blocking_in_a_vc():
    s = Scheduler(SMALL, starvation_after=None)
    s.submit(job("x", "a", 8), 0)
    s.submit(job("y", "a", 4), 0)
    assert events(s.submit(job("big", "a", 8), 1)) == [("queued", "big")]
    assert events(s.submit(job("small", "a", 2), 2)) == [("started", "small", False)]
    v = s.job("big")
    assert v.state == "waiting" and "1 job" not in (v.reason or "")


def test_a_starving_job_reserves_a_cell_and_later_jobs_start_outside_it():
    """Issue 38: ``big`` (8 GPUs), overtaken for more than ``starvation_after``, reserves the node of VC a
    with the most free GPUs (the 4-GPU ``y``'s); the 1-GPU ``s3`` still starts on the other node, and
    ``big`` starts as soon as its node drains. The old rule (``starvation_hold``) held ``s3`` back too,
    idling the free GPUs of the other node."""
    for hold in (False, True):
        s = Scheduler(SMALL, starvation_after=100, starvation_hold=hold)
        s.submit(job("x", "a", 6), 0)
        s.submit(job("y", "a", 4), 0)
        assert events(s.submit(job("big", "a", 8), 1)) == [("queued", "big")]
        assert events(s.submit(job("s1", "a", 2), 2)) == [("started", "s1", False)]  # overtakes big
        nodes = {p.node for p in s.job("y").placement}
        s.finish("s1", 50)
        ds = s.submit(job("s3", "a", 1), 200)  # big starves now
        if hold:
            assert events(ds) == [("queued", "s3")] and "held back so that big" in ds[0].reason
        else:
            assert events(ds) == [("started", "s3", False)]
            assert not nodes & {p.node for p in s.job("s3").placement}  # not in big's reserved node
            ds = s.submit(job("s4", "a", 2), 201)  # the other node is full: nothing free outside big's
            assert events(ds) == [("queued", "s4")]
            assert ds[0].reason.startswith("not enough free GPUs in VC a outside the cells reserved for big")
        s.finish("y", 210)
        assert s.job("big").state == "running" and {p.node for p in s.job("big").placement} == nodes
        assert s.job("s3").state == "running"


def test_starvation_guard_holds_back_later_jobs():
    """The rule before issue 38 (``starvation_hold``); with the default, ``big`` reserves the node that has
    ``y`` and ``s2`` (the other is full), so the same jobs wait, for another reason."""
    s = Scheduler(SMALL, starvation_after=100, starvation_hold=True)
    s.submit(job("x", "a", 8), 0)
    s.submit(job("y", "a", 4), 0)
    s.submit(job("big", "a", 8), 1)
    assert events(s.submit(job("s1", "a", 2), 2)) == [("started", "s1", False)]  # overtakes big at t=2
    s.finish("s1", 50)
    assert events(s.submit(job("s2", "a", 2), 60))[0] == ("started", "s2", False)
    ds = s.submit(job("s3", "a", 1), 200)  # big overtaken for >100 s: later jobs wait
    assert events(ds) == [("queued", "s3")]
    assert "held back so that big" in ds[0].reason
    s.finish("y", 210)
    assert s.job("big").state == "waiting"  # 4 + 2 free = 6 < 8; still held
    s.finish("s2", 220)
    assert s.job("big").state == "running"
    v = s.job("s3")
    assert v.state == "waiting" and v.reason.startswith("VC a is using 16/16")
    s.finish("x", 230)
    assert s.job("s3").state == "running"


def test_cpu_only_tasks_and_node_resources_never_overcommitted():
    s = Scheduler(SMALL)
    cpu = TaskGroup("ps", 1, 0, cpus=30, memory_mb=1000)
    d = s.submit(JobRequest("c1", "a", tasks=(cpu,)), 0)[0]
    assert d.event == "started" and d.placement[0].gpus == ()
    node = d.placement[0].node
    # a GPU task asking 8 CPUs cannot go to that node any more (32 CPUs)
    d2 = s.submit(job("g", "a", 8, cpus=8), 1)[0]
    assert d2.event == "started" and d2.placement[0].node != node
    for i in range(3):
        s.submit(JobRequest(f"c{i + 2}", "b", tasks=(cpu,)), 2)
    check_invariants(s)
    assert events(s.submit(JobRequest("c9", "b", tasks=(cpu,)), 3)) == [("queued", "c9")]


def test_a_job_waiting_for_cpus_starts_when_a_job_gives_them_back():
    """CPUs/memory that come back make every VC's pass run again (the bench_overload backlog: CPU-only
    jobs queued for CPUs waited until the next submit, and for ever once submits stopped)."""
    s = Scheduler("default")  # one node, 32 CPUs
    one_cpu = TaskGroup("main", 1, 0, cpus=1)
    for i in range(32):
        assert events(s.submit(JobRequest(f"c{i}", "default", tasks=(one_cpu,)), 0)) == [("started", f"c{i}", False)]
    assert events(s.submit(JobRequest("late", "default", tasks=(one_cpu,)), 1)) == [("queued", "late")]
    assert events(s.submit(job("g", "default", 1, cpus=1), 1)) == [("queued", "g")]  # a GPU job held by CPUs
    assert events(s.finish("c0", 2)) == [("finished", "c0"), ("started", "late", False)]
    assert events(s.finish("c1", 3)) == [("finished", "c1"), ("started", "g", False)]
    check_invariants(s)


@pytest.mark.parametrize("req, field", [
    (job("x", "nope"), "vc"),
    (job("x", "a", priority=1001), "priority"),
    (job("x", "a", priority=-2), "priority"),
    (job("x", "a", gpu_type="K80"), "tasks[0].gpu_type"),
    (job("x", "a", 9), "tasks[0].gpus"),
    (job("x", "a", 8, count=3), "tasks"),
    (job("x", "c", 8), "tasks[0].gpus"),
    (job("x", "a", within="A100-RACK", count=3, gpus=8), "within"),
    (job("x", "a", within="nope"), "within"),
    (job("x", "a", pinned_cell="p"), "pinned_cell"),
    (job("x", "a", cpus=1000), "tasks[0].cpus"),
    (job("x", "a", count=0), "tasks[0].count"),
])
def test_bad_requests_raise_request_error_and_change_nothing(req, field):
    s = Scheduler(SMALL)
    s.submit(job("keep", "a", 2), 0)
    before = (s.free_gpu_count(), [v.to_dict() for v in s.jobs()], s.vc_view())
    with pytest.raises(RequestError) as e:
        s.submit(req, 1)
    assert e.value.field == field, str(e.value)
    assert (s.free_gpu_count(), [v.to_dict() for v in s.jobs()], s.vc_view()) == before


def test_duplicate_id_and_unknown_job():
    s = Scheduler("default")
    s.submit(job("a", "default"), 0)
    with pytest.raises(RequestError) as e:
        s.submit(job("a", "default"), 1)
    assert e.value.field == "id"
    with pytest.raises(RequestError):
        s.finish("zzz", 1)
    with pytest.raises(RequestError):
        s.preemption_done("a", 1)


def test_decision_to_json_drops_none():
    s = Scheduler("default")
    d = s.submit(job("a", "default", 2), 5)[0]
    assert d.to_json() == {"t": 5.0, "job": "a", "event": "started",
                           "placement": [{"task": "w-0", "node": "node-0", "gpus": [0, 1]}],
                           "opportunistic": False}
    q = s.submit(job("b", "default", 4), 6)[0].to_json()
    assert set(q) == {"t", "job", "event", "reason"}


def test_views():
    s = Scheduler(HIVED_EXAMPLE)
    s.submit(job("a", "VC1", 2), 0)
    s.submit(job("p", "VC2", 2, pinned_cell="pin1"), 0)
    v = s.vc_view()
    assert v["VC1"]["guaranteed_gpus"] == 8 and v["VC1"]["used_gpus"] == 2
    assert v["VC2"]["guaranteed_gpus"] == 6 and v["VC2"]["guaranteed_cells"] == {"V100-SWITCH": 3}
    assert v["VC2"]["used_gpus"] == 2
    tree = s.cluster_view()
    rack = tree["cells"][0]
    assert rack["type"] == "V100-RACK" and [c["address"] for c in rack["children"]] == ["n1", "n2"]
    n2 = rack["children"][1]
    assert n2["children"][0]["pinned_cell"] == "pin1" and n2["children"][0]["vc"] == "VC2"
    assert n2["children"][0]["jobs"] == ["p"]
    leaf = n2["children"][0]["children"][0]
    assert leaf["state"] == "used" and leaf["gpu"] in (0, 1) and leaf["children"] == []
    assert s.gpu_count() == 16 and s.free_gpu_count() == 12
    assert [j.id for j in s.jobs()] == ["a", "p"]


def test_pinned_cells_only_for_jobs_naming_the_pin():
    s = Scheduler(HIVED_EXAMPLE)
    s.submit(job("v1", "VC2", 2, count=2), 0)  # VC2's 2 switches
    assert events(s.submit(job("v2", "VC2", 2), 1)) == [("queued", "v2")]  # pin not used
    assert events(s.submit(job("v3", "VC2", 2, pinned_cell="pin1"), 2)) == [("started", "v3", False)]
    assert s.job("v3").placement[0].node == "n2"


SCRIPT_PREEMPT = [
    {"op": "submit", "job": "lo", "vc": "b", "gpus": 8, "priority": 0, "lazy_preemption": False,
     "expect": [["started", "lo", False]]},
    {"op": "submit", "job": "hi", "vc": "b", "gpus": 4, "priority": 100,
     "expect": [["preempting", "hi", ["lo"]]]},
    # lo's other GPUs are being vacated, but a job of lo's own priority does not claim them while lo runs
    # (it would be preempting an equal priority, and keep lo's preemption going if hi were withdrawn)
    {"op": "submit", "job": "other", "vc": "b", "gpus": 4, "priority": 0, "expect": [["queued", "other"]]},
    {"op": "preemption_done", "job": "lo", "t": 1,
     "expect": [["preempted", "lo", "hi"], ["queued", "lo"], ["started", "hi", False], ["started", "other", False]]},
    {"op": "finish", "job": "hi", "t": 2, "expect": [["finished", "hi"]]},
    {"op": "finish", "job": "other", "t": 3, "expect": [["finished", "other"], ["started", "lo", False]]},
]


def test_script_preemption_of_own_lower_priority_job():
    s = Scheduler(SMALL)
    run_script(s, SCRIPT_PREEMPT)


def test_cluster_view_shows_reserved_and_bad_cells():
    s = Scheduler(SMALL)
    s.submit(job("lo", "b", 8, lazy_preemption=False), 0)
    s.submit(job("hi", "b", 2, priority=9), 1)
    v = s.job("hi")
    assert v.state == "preempting" and len(v.reserved_cells) == 2 and v.waiting_for == ("lo",)
    node = s.job("lo").placement[0].node
    s.set_gpu_health(node, 7, False, 2)
    cells = {}

    def walk(c):
        cells[c["address"]] = c
        for ch in c["children"]:
            walk(ch)

    for c in s.cluster_view()["cells"]:
        walk(c)
    for addr in v.reserved_cells:
        assert cells[addr]["reserved_by"] == "hi" and cells[addr]["jobs"] == ["lo"]
    assert cells[f"{node}/gpu7"]["state"] == "bad"
    assert cells[node]["vc"] == "b" and cells[node]["jobs"] == ["lo"]
    s.preemption_done("lo", 3)
    assert s.job("hi").state == "running" and s.job("hi").reserved_cells == ()


def test_core_uses_no_clock_or_randomness():
    import pathlib
    import re

    import hive_scheduler

    root = pathlib.Path(hive_scheduler.__file__).parent
    for path in sorted(root.glob("*.py")):
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(time|random|datetime|uuid|secrets)\b", text, re.M), path.name
