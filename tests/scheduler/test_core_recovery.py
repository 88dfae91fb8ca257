"""Bad hardware (doomed cells), reconfiguration and adoption."""

import pytest

from core_helpers import SMALL, check_invariants, events, job
from hive_scheduler import ConfigError, JobRequest, RequestError, Scheduler, TaskGroup

FLAT = {"nodes": 4, "gpus_per_node": 8, "gpu_type": "A100", "levels": ["pair", "socket"], "vcs": {"a": 16, "b": 16}}


def test_bad_hardware_is_never_given_out_and_doomed_cells_make_reasons_honest():
    s = Scheduler(FLAT)
    s.submit(job("a1", "a", 8), 0)
    s.set_node_health("node-1", False, 1)
    s.set_node_health("node-2", False, 1)
    assert s.vc_view()["b"]["doomed_gpus"] == 8  # b is owed 2 nodes; 1 healthy node is free
    ds = s.submit(job("b1", "b", 8, count=2), 2)
    assert ds[0].reason == ("VC b has 16 free guaranteed GPUs but 8 of them are on bad hardware (doomed); "
                            "the job needs 16")
    s.submit(job("a2", "a", 8), 2)
    assert s.vc_view()["b"]["doomed_gpus"] == 16
    assert {p.node for j in ("a1", "a2") for p in s.job(j).placement} == {"node-0", "node-3"}
    # a GPU going bad under a running job: the job keeps running (the driver decides)
    assert s.set_gpu_health("node-3", 5, False, 3) == []
    assert s.job("a2").state == "running" and s.vc_view()["a"]["doomed_gpus"] == 1
    assert s.free_gpu_count() == 0
    s.set_node_health("node-2", True, 4)
    assert s.job("b1").state == "waiting"
    assert events(s.set_node_health("node-1", True, 5)) == [("started", "b1", False)]
    check_invariants(s)
    s.set_gpu_health("node-3", 5, True, 6)
    for j in ("a1", "a2", "b1"):
        s.finish(j, 7)
    assert s.free_gpu_count() == 32
    assert [len(d) for d in s.state.buddies["A100-NODE"].free.values()] == [0, 0, 0, 4]


def test_bad_gpu_in_a_free_node_splits_it_and_opportunistic_work_avoids_it():
    s = Scheduler(FLAT)
    s.set_gpu_health("node-0", 0, False, 0)
    d = s.submit(job("o", "a", 8, count=4, priority=-1), 1)
    assert events(d) == [("queued", "o")]
    s.submit(job("o2", "a", 7, priority=-1), 1)
    o2 = s.job("o2")
    assert o2.state == "running"
    assert ("node-0", 0) not in {(p.node, g) for p in o2.placement for g in p.gpus}
    with pytest.raises(RequestError):
        s.set_gpu_health("node-0", 99, True, 2)
    with pytest.raises(RequestError):
        s.set_node_health("nope", True, 2)


def test_reconfigure_keeps_running_jobs_and_demotes_what_no_longer_fits():
    s = Scheduler(SMALL)
    s.submit(job("a1", "a", 8, count=2), 0)
    s.submit(job("b1", "b", 4), 0)
    s.submit(job("o1", "c", 2, priority=-1), 0)
    s.submit(job("w", "a", 1), 0)
    new = dict(SMALL, vcs={"a": 8, "b": 16, "c": {"cells": {"socket": 2}}})
    ds = s.reconfigure(new, 1)
    assert events(ds)[0] == ("demoted", "a1")
    assert s.job("a1").state == "running" and s.job("a1").opportunistic
    assert s.job("b1").state == "running" and not s.job("b1").opportunistic
    assert s.job("o1").state == "running"
    assert s.vc_view()["b"]["guaranteed_gpus"] == 16
    check_invariants(s)


def test_reconfigure_keeps_jobs_on_removed_nodes_and_refuses_only_invalid_configs():
    # behaviour changed on purpose (issue 12): removing a busy node no longer refuses the config
    s = Scheduler(SMALL)
    s.submit(job("b1", "b", 4), 0)
    node = s.job("b1").placement[0].node
    smaller = {"nodes": 2, "gpus_per_node": 8, "gpu_type": "A100", "levels": ["pair", "socket"], "vcs": {"b": 8}}
    if node in ("node-0", "node-1"):
        smaller["nodes"] = ["node-2", "node-3"]
    s.reconfigure(smaller, 1)
    b1 = s.job("b1")
    assert b1.state == "running" and b1.placement[0].node == node and not b1.opportunistic
    check_invariants(s)
    before = (s.vc_view(), s.cluster_view())
    with pytest.raises(ConfigError):
        s.reconfigure({"nodes": 0}, 1)
    # shrinking the CPUs under running tasks is still refused, and nothing changes
    s.submit(job("c", "b", 1, cpus=16), 2)
    before = (s.vc_view(), s.cluster_view(), [v.to_dict() for v in s.jobs()])
    at = s.job("c").placement[0].node
    with pytest.raises(ConfigError, match=f"nodeResources.{at}"):
        s.reconfigure(dict(smaller, cpus_per_node=8), 3)
    assert (s.vc_view(), s.cluster_view(), [v.to_dict() for v in s.jobs()]) == before


def test_reconfigure_rejects_waiting_jobs_that_became_invalid():
    s = Scheduler(SMALL)
    s.submit(job("c1", "c", 4, count=2), 0)
    s.submit(job("c2", "c", 4), 0)
    ds = s.reconfigure(dict(SMALL, vcs={"a": 16, "b": 8, "c2": 8}), 1)
    assert ("rejected", "c2") in events(ds)
    assert s.job("c1").state == "running" and s.job("c1").opportunistic


def test_adopt_puts_back_running_jobs_exactly():
    s = Scheduler(SMALL)
    s.submit(job("a1", "a", 4, count=2), 0)
    s.submit(job("o1", "c", 2, priority=-1), 0)
    s.submit(job("p", "c", 4), 0)
    views = {v.id: v for v in s.jobs()}
    reqs = {"a1": job("a1", "a", 4, count=2), "o1": job("o1", "c", 2, priority=-1), "p": job("p", "c", 4)}
    s2 = Scheduler(SMALL)
    for jid in ("a1", "o1", "p"):
        v = views[jid]
        assert s2.adopt(reqs[jid], [p.to_dict() for p in v.placement], v.opportunistic, 0) == []
    for jid in ("a1", "o1", "p"):
        assert s2.job(jid).placement == views[jid].placement
        assert s2.job(jid).opportunistic == views[jid].opportunistic
    assert s2.vc_view() == s.vc_view()
    check_invariants(s2)
    # conflicting placement: RequestError, nothing changed
    with pytest.raises(RequestError) as e:
        s2.adopt(job("x", "a", 2), [{"task": "w-0", "node": views["a1"].placement[0].node,
                                     "gpus": list(views["a1"].placement[0].gpus[:2])}], False, 1)
    assert e.value.field == "placement[0].gpus"
    with pytest.raises(RequestError):
        s2.adopt(job("x", "a", 2), [{"task": "w-0", "node": "nope", "gpus": [0, 1]}], False, 1)


def test_adopt_outside_the_guarantee_runs_opportunistic():
    s = Scheduler(SMALL)
    s.submit(job("b1", "b", 8), 0)
    node = s.job("b1").placement[0].node
    other = next(n for n in ("node-0", "node-1", "node-2", "node-3") if n != node)
    ds = s.adopt(JobRequest("b2", "b", tasks=(TaskGroup("w", 1, 2),)), [{"task": "w-0", "node": other, "gpus": [0, 1]}],
                 False, 1)
    assert events(ds) == [("demoted", "b2")]
    assert s.job("b2").opportunistic and s.job("b2").state == "running"
