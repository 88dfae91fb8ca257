"""The ``private`` policy (each VC alone on a cluster of exactly its cells) and the sharing anomaly against it."""

from __future__ import annotations

import json

import pytest

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import simulate, simulate_policies
from hive_scheduler.sim.events import parse_events
from hive_scheduler.sim.private import private_cluster


def two_nodes(vcs: dict[str, int] | None = None) -> dict:
    """HiveD form: nodes n1, n2 of 4 GPUs in one rack; each VC guaranteed that many whole nodes."""
    vcs = vcs if vcs is not None else {"A": 1, "B": 1}
    return {
        "physicalCluster": {
            "cellTypes": {
                "G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True},
                "G-RACK": {"childCellType": "G-NODE", "childCellNumber": 2},
            },
            "physicalCells": [{"cellType": "G-RACK", "cellChildren": [{"cellAddress": "n1"}, {"cellAddress": "n2"}]}],
        },
        "virtualClusters": {
            vc: {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": n}]} for vc, n in vcs.items()
        },
    }


def submit(t, job, vc, gpus, count=1, priority=0, duration=None):
    d = {"t": t, "op": "submit", "job": job, "vc": vc, "priority": priority,
         "tasks": [{"name": "w", "count": count, "gpus": gpus}]}
    if duration is not None:
        d["duration"] = duration
    return json.dumps(d)


def of(result, job):
    return [d for d in result.decisions if d["job"] == job]


def test_private_cluster_keeps_the_hierarchy_of_each_virtual_cell():
    cfg = load_cluster_config({"nodes": 4, "gpus_per_node": 8, "levels": ["pair", "socket"], "racks": 2,
                               "cpus_per_node": 64, "memory_mb_per_node": 512000,
                               "vcs": {"big": 16 + 8 + 4, "small": 2}})
    big = private_cluster(cfg, "big")
    # 28 GPUs = a rack (2 nodes) + a node + a 4-GPU socket, which becomes a node of its own
    assert sorted(big.chains) == ["GPU-NODE", "GPU-RACK", "GPU-socket"]
    assert big.gpu_count() == cfg.vc_gpus("big") == 28
    assert sorted(n.gpu_count for n in big.nodes.values()) == [4, 8, 8, 8]
    socket_node = next(n for n in big.nodes.values() if n.gpu_count == 4)
    assert (socket_node.cpus, socket_node.memory_mb) == (32, 256000)  # its half of a node
    assert all(name.startswith("big-node-") for name in big.nodes)
    small = private_cluster(cfg, "small")
    assert small.gpu_count() == 2 and list(small.chains) == ["GPU-pair"]
    assert [v.number for v in small.virtual_clusters["small"].virtual_cells] == [1]


def test_private_cluster_copies_pinned_cells():
    cfg = load_cluster_config({
        "physicalCluster": {
            "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "G-NODE", "cellAddress": "n1", "pinnedCellId": "p1"},
                              {"cellType": "G-NODE", "cellAddress": "n2"}],
        },
        "virtualClusters": {"A": {"pinnedCells": [{"pinnedCellId": "p1"}]},
                            "B": {"virtualCells": [{"cellType": "G-NODE", "cellNumber": 1}]}},
    })
    a = private_cluster(cfg, "A")
    assert list(a.pinned_cells) == ["p1"] and a.virtual_clusters["A"].pinned_cells == ("p1",)
    assert a.gpu_count() == 4
    r = simulate(cfg, parse_events([json.dumps({"t": 0, "op": "submit", "job": "x", "vc": "A", "pinned_cell": "p1",
                                                "tasks": [{"name": "w", "count": 1, "gpus": 4}], "duration": 5})]),
                 "private")
    assert of(r, "x")[0]["event"] == "started" and of(r, "x")[0]["placement"][0]["node"] == "A-node-0"


def test_private_runs_each_vc_on_its_own_nodes_only():
    lines = [
        submit(0, "a1", "A", 4, duration=100),
        submit(1, "a2", "A", 2, duration=10),  # A's one node is full; B's node is idle but not A's
        submit(2, "b1", "B", 4, duration=10),
    ]
    r = simulate(two_nodes(), parse_events(lines), "private")
    assert of(r, "a1")[0]["placement"] == [{"task": "w-0", "node": "A-node-0", "gpus": [0, 1, 2, 3]}]
    assert of(r, "a2")[0]["event"] == "queued"
    assert of(r, "a2")[1]["event"] == "started" and of(r, "a2")[1]["t"] == 100
    assert of(r, "b1")[0]["placement"][0]["node"] == "B-node-0" and of(r, "b1")[0]["t"] == 2
    assert r.metrics.waits == {"a1": 0, "a2": 99, "b1": 0}
    assert r.metrics.sharing_anomaly_s == 0 and r.metrics.sharing_anomaly_jobs == 0
    assert r.metrics.by_vc["A"]["avg_queue_s"] == pytest.approx(99 / 2)


def test_unknown_vc_is_rejected_and_hardware_events_do_not_touch_private_clusters():
    lines = [
        submit(0, "x", "nope", 1, duration=5),
        json.dumps({"t": 1, "op": "node_down", "node": "n1"}),
        submit(2, "a", "A", 4, duration=5),
    ]
    r = simulate(two_nodes(), parse_events(lines), "private")
    assert of(r, "x")[0]["event"] == "rejected" and "unknown virtual cluster 'nope'" in of(r, "x")[0]["error"]
    assert of(r, "a")[0]["event"] == "started" and of(r, "a")[0]["t"] == 2


def test_fifo_head_of_line_blocking_is_an_anomaly_for_the_vc_behind():
    # one global queue: B's small job waits behind A's gang although B's own node is idle
    lines = [
        submit(0, "a1", "A", 4, duration=50),
        submit(1, "a2", "A", 4, duration=10),  # waits for a1 under every policy (A owns one node)
        submit(2, "b1", "B", 1, duration=10),
    ]
    results = simulate_policies(two_nodes(), parse_events(lines), ["fifo", "hived", "private"], overflow=False)
    fifo, hived, private = results
    assert private.metrics.waits == {"a1": 0, "a2": 49, "b1": 0}
    assert hived.metrics.waits == private.metrics.waits
    # fifo: a2 takes n2 at t=1 (no VCs); b1 (1 GPU) then fits nowhere until a2 ends at 11
    assert fifo.metrics.waits == {"a1": 0, "a2": 0, "b1": 9}
    assert fifo.metrics.sharing_anomaly_s == 9 and fifo.metrics.sharing_anomaly_jobs == 1
    assert fifo.metrics.by_vc["B"]["sharing_anomaly_s"] == 9 and fifo.metrics.by_vc["A"]["sharing_anomaly_s"] == 0
    assert hived.metrics.sharing_anomaly_s == 0
    # the private replay ran once and is shared
    assert fifo.private is private and hived.private is private


def test_anomaly_off_or_without_cells_is_none():
    events = parse_events([submit(0, "a", "A", 1, duration=5)])
    assert simulate(two_nodes(), events, "hived", anomaly=False).metrics.sharing_anomaly_s is None
    from hive_scheduler.sim.shape import cluster_shape

    assert simulate(cluster_shape(two_nodes()), events, "quota").metrics.sharing_anomaly_jobs is None
    with pytest.raises(ValueError, match="private policy needs the cluster's cells"):
        simulate(cluster_shape(two_nodes()), events, "private")


def test_reconfigure_rebuilds_the_private_clusters_and_running_jobs_keep_running():
    bigger = {
        "physicalCluster": {
            "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "G-NODE", "cellAddress": f"n{i}"} for i in (1, 2, 3)],
        },
        "virtualClusters": {"A": {"virtualCells": [{"cellType": "G-NODE", "cellNumber": 2}]},
                            "B": {"virtualCells": [{"cellType": "G-NODE", "cellNumber": 1}]}},
    }
    lines = [
        submit(0, "a1", "A", 4, duration=100),
        submit(1, "a2", "A", 4, duration=10),  # A has one node: waits
        json.dumps({"t": 5, "op": "reconfigure", "cluster": bigger}),  # A gets a second node
    ]
    r = simulate(two_nodes(), parse_events(lines), "private")
    assert of(r, "a2")[1]["event"] == "started" and of(r, "a2")[1]["t"] == 5
    assert of(r, "a2")[1]["placement"][0]["node"] == "A-node-1"
    assert of(r, "a1")[-1] == {"t": 100, "job": "a1", "event": "finished"}
