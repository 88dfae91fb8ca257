"""HiveD's own design configuration (microsoft/hivedscheduler example/config/design, MIT; a copy in
hived_configs/) and scenarios after its design request (example/request/design): accepted as is, its
private clusters built (a VC that pins a single GPU, leaf-level virtual cells, a node holding two
chains), and the simulator with its defaults (hived with overflow, the sharing anomaly against the
private replay) runs them through finishes, withdrawals, preemptions, hardware events and a
reconfiguration without a crash or a lost job."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from hive_scheduler import JobRequest, Scheduler, TaskGroup, load_cluster_config
from hive_scheduler.errors import ConfigError
from hive_scheduler.sim import simulate, simulate_policies
from hive_scheduler.sim.events import parse_events
from hive_scheduler.sim.private import private_cluster

HERE = pathlib.Path(__file__).parent
DESIGN_PATH = HERE / "hived_configs" / "design.yaml"
DESIGN = yaml.safe_load(DESIGN_PATH.read_text())
# the same cluster with a third VC made of two single CT1 GPUs (leaf-level virtual cells)
WITH_LEAF_VC = {**DESIGN, "virtualClusters": {**DESIGN["virtualClusters"],
                                              "VC3": {"virtualCells": [{"cellType": "CT1-NODE.CT1", "cellNumber": 2}]}}}


def sub(t, job, vc, tasks, duration=None, priority=0, **kw):
    d = {"t": t, "op": "submit", "job": job, "vc": vc, "priority": priority,
         "tasks": [{"name": n, "count": c, "gpus": g, **({"gpu_type": ty} if ty else {})} for n, c, g, ty in tasks],
         **kw}
    if duration is not None:
        d["duration"] = duration
    return d


# HiveD's design request (JOBX in VC1: a 44-GPU DGX2 gang, a 2 x 3 gang of any type, two 16-GPU tasks, a
# 2 x 3 gang in the pinned IB rack), VC2's jobs on its P100 and CT1 cells, then the event orders around
# overflowed and waiting jobs that crashed the overflow wrapper.
SCENARIO = [
    sub(0, "JOBX-ABC", "VC1", [("A", 1, 16, "DGX2-V100"), ("B", 3, 8, "DGX2-V100"), ("C", 1, 4, "DGX2-V100")], 100),
    sub(0, "JOBX-D", "VC1", [("D", 2, 3, None)], 50),
    sub(0, "JOBX-E0", "VC1", [("E", 1, 16, "DGX2-V100")], 80),
    sub(0, "JOBX-E1", "VC1", [("E", 1, 16, "DGX2-V100")], 80),
    sub(0, "JOBX-F", "VC1", [("F", 2, 3, None)], 60, pinned_cell="VC1-YQW-IB-DGX2"),
    sub(1, "ct1-pinned", "VC1", [("w", 1, 1, None)], 30, pinned_cell="VC1-YQW-CT1"),
    sub(2, "g1", "VC2", [("w", 2, 8, "DGX1-P100")], 100),
    sub(2, "g2", "VC2", [("w", 1, 4, "DGX1-P100")], 40),
    sub(3, "g3", "VC2", [("w", 1, 8, None)], 50),  # VC2's P100 cells are full: it waits, or overflows
    sub(3, "g4", "VC2", [("w", 1, 2, "CT1")], 40),
    sub(4, "g5", "VC2", [("w", 1, 2, "CT1")], 40),  # its CT1 node is taken: it waits, or overflows
    sub(4, "opp", "VC2", [("w", 1, 8, None)], 200, priority=-1),
    {"t": 5, "op": "finish", "job": "g5"},  # withdrawn while waiting (or while overflowed)
    {"t": 6, "op": "node_down", "node": "0.0.0.1"},
    sub(7, "g6", "VC2", [("w", 1, 8, None)], 30),
    {"t": 8, "op": "gpu_down", "node": "0.0.2.0", "gpu": 3},
    {"t": 9, "op": "finish", "job": "g3"},
    {"t": 10, "op": "reconfigure", "cluster": WITH_LEAF_VC},
    sub(11, "v3", "VC3", [("w", 1, 1, None)], 20),
    {"t": 12, "op": "node_up", "node": "0.0.0.1"},
    {"t": 13, "op": "gpu_up", "node": "0.0.2.0", "gpu": 3},
    {"t": 14, "op": "reconfigure", "cluster": DESIGN},
    sub(15, "g7", "VC2", [("w", 1, 2, "CT1")], 10),
]


def test_hiveds_design_configuration_loads_as_is():
    cfg = load_cluster_config(str(DESIGN_PATH))
    assert cfg.gpu_count() == 270
    assert {vc: cfg.vc_gpus(vc) for vc in cfg.virtual_clusters} == {"VC1": 193, "VC2": 26}
    assert cfg.pinned_cells["VC1-YQW-CT1"].type == "CT1"  # a VC pins a single GPU


def test_private_clusters_of_every_vc_incl_leaf_cells():
    cfg = load_cluster_config(WITH_LEAF_VC)
    for vc in cfg.virtual_clusters:
        assert private_cluster(cfg, vc).gpu_count() == cfg.vc_gpus(vc)
    vc3 = private_cluster(cfg, "VC3")
    assert sorted(n.gpu_count for n in vc3.nodes.values()) == [1, 1]  # each leaf cell a one-GPU node
    vc1 = private_cluster(cfg, "VC1")
    core = Scheduler(vc1)
    out = core.submit(JobRequest(id="x", vc="VC1", user="u", tasks=(TaskGroup("w", 1, 1),),
                                 pinned_cell="VC1-YQW-CT1"), 0)
    started = [d for d in out if d.event == "started"]
    assert started and vc1.nodes[started[0].placement[0].node].gpu_count == 1


def test_a_job_too_big_for_one_of_its_vcs_chains_is_told_why_it_waits():
    # VC2 owns 2-GPU CT1 nodes and 8-GPU DGX-1s; its 8-GPU job waits behind its own work, and the reason
    # is about the DGX-1 cells (the CT1 chain cannot hold the task at all)
    core = Scheduler(DESIGN)
    core.submit(JobRequest(id="a", vc="VC2", user="u", tasks=(TaskGroup("w", 2, 8, gpu_type="DGX1-P100"),)), 0)
    out = core.submit(JobRequest(id="b", vc="VC2", user="u", tasks=(TaskGroup("w", 1, 8),)), 1)
    assert [d.event for d in out] == ["queued"] and "VC2" in out[0].reason


def test_the_simulator_defaults_run_hiveds_design_scenario():
    hived, quota = simulate_policies(DESIGN, parse_events([json.dumps(e) for e in SCENARIO]), ["hived", "quota"])
    submitted = {e["job"] for e in SCENARIO if e["op"] == "submit"}
    for result in (hived, hived.private):
        last = {}
        for d in result.decisions:
            last[d["job"]] = d["event"]
        assert set(last) == submitted, f"{result.policy}: jobs without a decision"
        assert all(ev in ("finished", "rejected") for ev in last.values()), (result.policy, last)
    assert hived.metrics.sharing_anomaly_s is not None and hived.anomaly_note is None
    assert all("@overflow" not in json.dumps(d) for d in hived.decisions)
    # the pinned jobs ran in their pinned cells
    placements = {d["job"]: d["placement"] for d in hived.decisions if d["event"] == "started"}
    assert {p["node"] for p in placements["JOBX-F"]} <= {"0.1.0.0", "0.1.0.1"}
    assert placements["ct1-pinned"] == [{"task": "w-0", "node": "1.0.0.2", "gpus": [8]}]


def test_bare_core_and_overflow_agree_on_the_pinned_jobs():
    for overflow in (False, True):
        r = simulate(DESIGN, parse_events([json.dumps(e) for e in SCENARIO]), "hived", overflow=overflow)
        started = {d["job"] for d in r.decisions if d["event"] == "started"}
        assert {"JOBX-F", "ct1-pinned"} <= started


def test_hive_lab_simulate_with_its_defaults_on_hiveds_design_config(tmp_path):
    events = tmp_path / "design.jsonl"
    lines = []
    for e in SCENARIO:
        if e["op"] == "reconfigure":  # the event script names config files
            name = "leaf.yaml" if e["cluster"] is WITH_LEAF_VC else "design.yaml"
            (tmp_path / name).write_text(yaml.safe_dump(e["cluster"]))
            e = {**e, "cluster": name}
        lines.append(json.dumps(e))
    events.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, "-m", "hive_lab.cli", "simulate", "--cluster", str(DESIGN_PATH),
                           "--events", str(events), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["anomaly_reference"] == "private" and doc["anomaly_note"] is None
    assert doc["policies"]["hived"]["sharing_anomaly_jobs"] is not None


def test_an_assignment_the_cluster_cannot_satisfy_names_the_short_chain():
    # VC3 asks for one more DGX-1 P100 socket than the 3-DGX1-P100-NODE rack has left after VC2's cells
    cfg = {**DESIGN, "virtualClusters": {**DESIGN["virtualClusters"], "VC3": {"virtualCells": [
        {"cellType": "3-DGX1-P100-NODE.DGX1-P100-NODE.DGX1-P100-CPU-SOCKET", "cellNumber": 1}]}}}
    with pytest.raises(ConfigError) as err:
        load_cluster_config(cfg)
    assert "chain 3-DGX1-P100-NODE is short by 4" in str(err.value)
