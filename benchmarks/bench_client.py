"""Figures for the notebook side (hive_lab): heatmap shaping/update cost by cluster size, debounced
refetches under an event burst, and (with --live) cell submit-to-result time against a real server.

    .venv/bin/python benchmarks/bench_client.py [--live]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def synthetic_cluster(n_gpus: int, per_node: int = 8, nodes_per_rack: int = 32) -> dict:
    gpus = []
    for k in range(n_gpus):
        node, i = divmod(k, per_node)
        used = (node * 7 + i) % 3 == 0
        gpus.append({"node": f"node-{node}", "index": i, "type": "A100", "state": "used" if used else "free",
                     "vc": f"vc{node % 5}", "job": f"j-{node // 2:06d}" if used else None, "user": "ann",
                     "opportunistic": False, "bad": False, "drained": False,
                     "path": [f"rack-{node // nodes_per_rack}", f"node-{node}", f"socket-{i // 4}", f"pair-{i // 2}"]})
    return {"gpus_total": n_gpus, "gpus_free": 0, "gpus": gpus}


def median_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def bench_heatmap() -> None:
    from hive_lab.widgets.heatmap import HeatmapView
    from hive_lab.widgets.shaping import heatmap_columns

    print("heatmap (median of 5): GPUs | shape columns ms | view update ms | columns JSON KiB")
    for n in (16, 1_000, 10_000, 20_000):
        cluster = synthetic_cluster(n)
        shape = median_ms(lambda: heatmap_columns(cluster, "state"))
        view = HeatmapView(None, cluster=cluster, live=False)
        update = median_ms(lambda: view.set_cluster(cluster), repeat=3)
        size = len(json.dumps(heatmap_columns(cluster, "state"))) / 1024
        print(f"  {n:>6} | {shape:10.1f} | {update:10.1f} | {size:10.0f}")


def bench_debounce() -> None:
    from hive_lab.live import Debouncer

    runs = []
    d = Debouncer(lambda: runs.append(time.monotonic()), delay=0.3, min_interval=1.0, max_wait=2.0)
    start = time.monotonic()
    for _ in range(500):  # 500 events over ~1 s
        d.trigger()
        time.sleep(0.002)
    time.sleep(1.5)
    print(f"debounce: 500 events in {time.monotonic() - start - 1.5:.1f} s -> {len(runs)} refetches")


def bench_live() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures.live_server import LiveServer

    from hive_lab import Client
    from hive_lab.submission import cell_spec
    from hive_lab.widgets import QueueView

    srv = LiveServer(pathlib.Path(tempfile.mkdtemp()), users={"ann": {}}, vc_access={"ann": ["default"]})
    srv.start()
    try:
        client = Client(srv.url, srv.tokens["ann"])
        times = []
        for _ in range(5):
            t = time.perf_counter()
            job = client.handle(client.submit(cell_spec("print(1)", vc="default", gpus=1)))
            job.wait(timeout=60)
            assert job.logs() == "1\n"
            times.append((time.perf_counter() - t) * 1000)
        print(f"cell submit -> result (local launcher, python start included): median {statistics.median(times):.0f} ms"
              f" over 5")
        queue = QueueView(client)
        time.sleep(1.5)
        seen = []
        for _ in range(5):
            job = client.submit({"vc": "default", "command": "sleep 5", "tasks": [{"name": "main", "count": 1, "gpus": 0}]})
            t = time.perf_counter()
            while job["id"] not in {r["id"] for r in queue.rows}:
                time.sleep(0.002)
            seen.append((time.perf_counter() - t) * 1000)
            client.cancel(job["id"])
        queue.stop()
        print(f"submit -> row in the queue widget (event stream): median {statistics.median(seen):.0f} ms over 5")
    finally:
        srv.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--live", action="store_true", help="also measure against a real server")
    args = p.parse_args()
    bench_heatmap()
    bench_debounce()
    if args.live:
        bench_live()


if __name__ == "__main__":
    main()
