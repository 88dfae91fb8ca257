"""Scenarios for three places where the core used to decide differently from HiveD (issue 25), on
HiveD's design configuration (hived_configs/design.yaml, MIT; see test_hived_algorithm_port.py for the
port of HiveD's own algorithm test).

1. Victim choice in a preemption: HiveD's intra-VC scheduler retries with preemption at the job's
   priority over nodes sorted by total used GPUs, most used first (cross-priority packing, stable), and
   inside a node uses free GPUs before preemptible ones. So among equal-priority holders of a pinned
   cell the victim is the one on the fullest node, not the first node that could be freed. And a job
   being stopped for a preemptor keeps its priority for the GPUs that preemptor did not take: a second
   preemptor of higher priority may take them (it used to wait until the job was gone).
2. Reconfiguration: a running guaranteed job whose cells its VC no longer has is demoted to
   opportunistic (HiveD lazy-preempts it), so a new job of that VC takes the freed cells or preempts it.
3. cellNumber 0 in a VC's virtual cells is accepted (none of that type), as HiveD accepts it.
"""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml

from hive_scheduler import JobRequest, Scheduler, TaskGroup, load_cluster_config

HERE = pathlib.Path(__file__).parent
DESIGN = yaml.safe_load((HERE / "hived_configs" / "design.yaml").read_text())
PIN = "VC1-YQW-DGX2"  # two DGX-2 nodes, 0.0.3.0 and 0.0.3.1, pinned to VC1


def job(jid, priority, gpus, vc="VC1", pinned=PIN, lazy=True, count=1, gpu_type="DGX2-V100"):
    return JobRequest(id=jid, vc=vc, user="u", priority=priority, pinned_cell=pinned, lazy_preemption=lazy,
                      tasks=(TaskGroup("w", count, gpus, gpu_type),))


def nodes_of(core, jid):
    return [(p.node, p.gpus) for p in core.job(jid).placement]


@pytest.mark.parametrize("lazy", [True, False])
def test_the_victim_among_equal_priorities_is_the_holder_of_the_fullest_node(lazy):
    core = Scheduler(DESIGN)
    core.submit(job("b", 1, 8, lazy=lazy), 0)    # half of 0.0.3.0
    core.submit(job("a", 1, 16, lazy=lazy), 0)   # all of 0.0.3.1
    assert nodes_of(core, "b")[0][0] == "0.0.3.0" and nodes_of(core, "a")[0][0] == "0.0.3.1"
    out = core.submit(job("p", 2, 16), 0)
    assert [(d.event, d.job, d.victims) for d in out if d.event == "preempting"] == [("preempting", "p", ("a",))]
    assert nodes_of(core, "p") == [("0.0.3.1", tuple(range(16)))]
    assert core.job("b").state == "running" and not core.job("b").opportunistic


@pytest.mark.parametrize("lazy", [True, False])
def test_a_smaller_preemptor_packs_onto_the_fullest_node_too(lazy):
    # 0.0.3.0: x (4 GPUs) + y (8 GPUs), 4 free; 0.0.3.1: z (16 GPUs); an 8-GPU job of priority 2
    # preempts z (HiveD: the node with the most used GPUs whose GPUs free at its priority fit it)
    core = Scheduler(DESIGN)
    for jid, gpus in (("x", 4), ("y", 8), ("z", 16)):
        core.submit(job(jid, 1, gpus, lazy=lazy), 0)
    out = core.submit(job("p", 2, 8), 0)
    assert [(d.job, d.victims) for d in out if d.event == "preempting"] == [("p", ("z",))]
    assert nodes_of(core, "p") == [("0.0.3.1", tuple(range(8)))]


def test_equally_used_nodes_are_taken_in_order():
    core = Scheduler(DESIGN)
    core.submit(job("a", 1, 16), 0)
    core.submit(job("b", 1, 16), 0)
    out = core.submit(job("p", 2, 16, lazy=False), 0)
    assert [(d.job, d.victims) for d in out if d.event == "preempting"] == [("p", ("a",))]
    assert nodes_of(core, "p")[0][0] == "0.0.3.0"


def test_a_second_preemptor_takes_the_other_node_of_a_gang_being_stopped():
    # HiveD's stateful preemption (pod28, pod29, pod31): a 2-node gang of priority 1 that does not allow
    # lazy preemption, two 1-node jobs of priority 2; the second preempts it on the node the first left
    core = Scheduler(DESIGN)
    core.submit(job("gang", 1, 16, count=2, lazy=False), 0)
    out1 = core.submit(job("p1", 2, 16), 0)
    out2 = core.submit(job("p2", 2, 16), 0)
    assert [(d.event, d.victims) for d in out1 + out2] == [("preempting", ("gang",))] * 2
    assert {nodes_of(core, "p1")[0][0], nodes_of(core, "p2")[0][0]} == {"0.0.3.0", "0.0.3.1"}
    # a third of priority 2 waits (nothing left), one of priority 1 too (equal priorities never preempt)
    assert [d.event for d in core.submit(job("p3", 2, 16), 0)] == ["queued"]
    assert [d.event for d in core.submit(job("q", 1, 16), 0)] == ["queued"]
    # withdrawing one preemptor frees its node for the next one of higher priority than the gang
    out = core.cancel("p2", 0)
    assert [(d.event, d.job) for d in out if d.event != "finished"] == [("preempting", "p3")]
    out = core.preemption_done("gang", 0, requeue=False)
    assert sorted(d.job for d in out if d.event == "started") == ["p1", "p3"]


def vc2_with_one_node_cell():
    cfg = copy.deepcopy(DESIGN)
    cfg["virtualClusters"]["VC2"]["virtualCells"][0]["cellNumber"] = 1  # was 2 DGX-1 node cells
    return cfg


def test_a_reconfiguration_that_takes_a_vcs_cells_demotes_the_job_in_them():
    core = Scheduler(DESIGN)
    # VC2's 7- and 5-GPU tasks each need one of its two DGX-1 node cells (HiveD's pod8/pod9)
    group9 = JobRequest(id="group9", vc="VC2", user="u", priority=1,
                        tasks=(TaskGroup("a", 1, 7), TaskGroup("b", 1, 5)))
    core.submit(group9, 0)
    out = core.reconfigure(vc2_with_one_node_cell(), 1)
    assert [(d.event, d.job) for d in out] == [("demoted", "group9")]
    v = core.job("group9")
    assert v.state == "running" and v.opportunistic and v.demoted
    assert core.vc_view()["VC2"]["used_gpus"] == 0  # no longer counted in VC2's guarantee
    # a new job of VC2 takes the node cell it still has ...
    out = core.submit(job("n1", 1, 8, vc="VC2", pinned=None, gpu_type="DGX1-P100"), 2)
    assert [(d.event, d.job) for d in out] == [("started", "n1")]
    # ... and its sockets, preempting the demoted job where it runs
    out = core.submit(job("n2", 1, 4, vc="VC2", pinned=None, gpu_type="DGX1-P100", count=2), 2)
    assert [(d.event, d.job, d.victims) for d in out] == [("preempting", "n2", ("group9",))]


def test_a_job_whose_cells_still_fit_its_vc_keeps_its_guarantee():
    core = Scheduler(DESIGN)
    core.submit(job("g", 1, 8, vc="VC2", pinned=None, gpu_type="DGX1-P100"), 0)
    out = core.reconfigure(vc2_with_one_node_cell(), 1)
    assert [d for d in out if d.event == "demoted"] == []
    assert not core.job("g").opportunistic


def test_a_vcs_cell_number_may_be_zero():
    cfg = copy.deepcopy(DESIGN)
    cfg["virtualClusters"]["VC1"]["virtualCells"][0]["cellNumber"] = 0
    loaded = load_cluster_config(cfg)
    assert loaded.vc_gpus("VC1") == load_cluster_config(DESIGN).vc_gpus("VC1") - 2 * 16
