"""The notebook heatmap's GPU charts (issue 15): utilisation and memory of the caller's GPUs over time,
node names on the heatmap, a small figure for a small machine. Offline with an injected clock, and
live against a real server whose GPU sampler reads the fake NVML backend (no GPU here)."""

from __future__ import annotations


from fixtures.fake_nvml import add_fault
from hive_lab.widgets import GpuUsageView, HeatmapView
from waiting import wait_until


def cluster(readings: dict[int, tuple], owner: dict[int, tuple[str, str]]) -> dict:
    """A ``GET cluster`` answer of a 4-GPU node ``ws``: ``owner`` GPU -> (job, user), ``readings`` GPU ->
    (utilization, memory_used_mb)."""
    gpus = []
    for i in range(4):
        job, user = owner.get(i, (None, None))
        util, mem = readings.get(i, (0, 0))
        gpus.append({"node": "ws", "index": i, "type": "A6000", "state": "used" if job else "free",
                     "vc": "default", "job": job, "user": user, "utilization": util, "memory_used_mb": mem,
                     "memory_total_mb": 49140, "path": ["ws", f"ws/{i // 2}"]})
    return {"gpus": gpus, "gpus_total": 4, "gpus_free": sum(1 for g in gpus if not g["job"])}


def test_the_chart_keeps_one_line_per_gpu_i_hold_and_follows_readings():
    view = GpuUsageView(None, me="ann", live=False, history=3)
    owners = {0: ("j-1", "ann"), 1: ("j-1", "ann"), 2: ("j-2", "bob")}
    view.add_cluster(cluster({0: (10, 1024), 1: (50, 2048), 2: (99, 4096)}, owners), at=100.0)
    view.add_cluster(cluster({0: (20, 1024), 1: (60, 2048), 2: (99, 4096)}, owners), at=105.0)
    data = view.util_source.data
    assert data["gpu"] == ["ws GPU 0", "ws GPU 1"]  # bob's GPU is not charted
    assert data["xs"] == [[100_000.0, 105_000.0]] * 2
    assert data["ys"] == [[10, 20], [50, 60]]
    assert view.mem_source.data["ys"] == [[1.0, 1.0], [2.0, 2.0]]
    assert view.mem_figure.y_range.end == 49140 / 1024
    assert "ws GPU 0</b> j-1: 20%, 1.0 / 48 GiB" in view.values.value
    # the history is bounded
    for t in (110.0, 115.0):
        view.add_cluster(cluster({0: (30, 1024), 1: (70, 2048)}, owners), at=t)
    assert view.util_source.data["xs"][0] == [105_000.0, 110_000.0, 115_000.0]
    # GPU 1 released, GPU 0 now runs another job of ann's: a new line for it, none for GPU 1
    view.add_cluster(cluster({0: (5, 512)}, {0: ("j-3", "ann")}), at=120.0)
    assert view.util_source.data["gpu"] == ["ws GPU 0"]
    assert view.util_source.data["job"] == ["j-3"]
    assert view.util_source.data["ys"] == [[5]]
    view.add_cluster(cluster({}, {}), at=125.0)
    assert view.util_source.data["gpu"] == []
    assert "hold no GPU" in view.title.value
    assert view.model.layout.display == "none"  # no empty charts
    view.add_cluster(cluster({1: (1, 1)}, {1: ("j-4", "ann")}), at=130.0)
    assert view.model.layout.display == ""


def test_unread_gpus_are_gaps_not_zeros():
    view = GpuUsageView(None, me="ann", live=False)
    view.add_cluster(cluster({0: (None, None)}, {0: ("j-1", "ann")}), at=1.0)
    assert view.util_source.data["ys"] == [[]]
    assert "ws GPU 0</b> j-1: —, —" in view.values.value


def test_the_heatmap_names_its_nodes_fits_a_small_machine_and_charts_my_gpus():
    small = cluster({0: (70, 3000)}, {0: ("j-1", "ann")})
    view = HeatmapView(None, cluster=small, live=False, me="ann")
    assert view.outlines.data["label"] == ["ws"]
    assert view.labels.visible
    assert view.figure.height < 200 and view.figure.width <= 400
    assert view.usage is not None and view.usage.widget in view.widget.children
    assert view.usage.util_source.data["ys"] == [[70]]
    # several nodes: each one's name over its outline
    gpus = [{"node": f"n{n}", "index": i, "state": "free", "path": ["rack", f"n{n}"]} for n in range(3) for i in range(4)]
    many = HeatmapView(None, cluster={"gpus": gpus, "gpus_total": 12, "gpus_free": 12}, live=False, usage=False)
    labels = [l for l in many.outlines.data["label"] if l]
    assert labels == ["n0", "n1", "n2"]
    assert many.usage is None


def test_the_heatmap_names_no_node_where_cells_are_tiny():
    gpus = [{"node": f"n{n}", "index": i, "state": "free", "path": [f"r{n // 40}", f"n{n}"]}
            for n in range(400) for i in range(8)]
    view = HeatmapView(None, cluster={"gpus": gpus, "gpus_total": 3200, "gpus_free": 3200}, live=False, usage=False)
    assert not any(view.outlines.data["label"])
    assert not view.labels.visible


def test_live_charts_follow_the_samplers_readings(live_server_factory, fake_hardware):
    from hive_lab import Client

    hw = fake_hardware("workstation-4")
    srv = live_server_factory(cluster_config=None, users={"ann": {}, "bob": {}},
                              vc_access={"ann": ["default"], "bob": ["default"]},
                              config={"HiveLabApp": {"nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2,
                                                     "stop_grace_s": 0.5}})
    ann = Client(srv.url, srv.tokens["ann"])
    job = ann.submit({"name": "train", "command": "sleep 120", "tasks": [{"name": "main", "count": 1, "gpus": 1}]})
    job = srv.wait_for_job(job["id"], "running")
    bobs = srv.request("POST", "jobs", user="bob", json={"command": "sleep 120", "tasks": [{"count": 1, "gpus": 1}]})
    assert bobs.status_code == 201, bobs.text
    gpu = job["placement"][0]["gpus"][0]
    add_fault(hw, {"at": 0, "gpu": gpu, "utilization": 64, "memory_used_mb": 6144})
    view = GpuUsageView(ann, interval_s=0.2)
    try:
        # both charts show the reading (each is updated on its own: wait for both, then look)
        wait_until(lambda: view.util_source.data["ys"] and view.util_source.data["ys"][0][-1:] == [64]
                   and view.mem_source.data["ys"][0][-1:] == [6.0], ignoring=(Exception,))
        assert view.me == "ann" and view.util_source.data["gpu"] == [f"ws GPU {gpu}"]
        assert view.util_source.data["job"] == [job["id"]]
        # no event happens now: the view polls, and the next reading shows up
        add_fault(hw, {"at": 0, "gpu": gpu, "utilization": 12, "memory_used_mb": 6144})
        wait_until(lambda: view.util_source.data["ys"][0][-1] == 12, ignoring=(Exception,))
        assert len(view.util_source.data["xs"][0]) >= 2
    finally:
        view.stop()
        ann.cancel(job["id"])
