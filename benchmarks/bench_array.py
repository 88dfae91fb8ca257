"""Figures for job arrays (issue 27):

1. accept and store a 10,000-element array in one request, against a real ``jupyter server`` process
   (the client's wall time from sending ``POST arrays`` to the 201; the array is stored, its first
   elements released to the core, in that time): ``--arrays`` times, median and max;
2. the core's decision latency (one submit or finish, as bench_core.py times them) on the philly model
   filled to 85 %, with a 10,000-element array queued the way the service queues it: its pending
   elements stay in the service (arrays/feeder.py), the core holds at most the feeder's window of
   waiting elements (32) of the array's owner. For comparison, the same with every element a core
   queue entry (what the feeder avoids), unless ``--no-naive``.

    .venv/bin/python benchmarks/bench_array.py [--elements 10000] [--arrays 5] [--samples 2000] [--no-naive]

Targets: <= 1 s to accept and store 10,000 elements; decision p99 <= 1 ms with them queued. A measurement,
not a test: on a shared machine the wall-clock figures follow the other load (the CPU time of the core's
calls is printed beside them).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_core import Load, percentile  # noqa: E402
from hive_scheduler import JobRequest, TaskGroup  # noqa: E402

WINDOW = 32  # arrays.feeder.DEFAULT_WINDOW


def accept(elements: int, arrays: int) -> list[float]:
    from fixtures.live_server import LiveServer

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        srv = LiveServer(tmp, cluster_config={"nodes": 1, "gpus_per_node": 8, "gpu_type": "A100",
                                              "vcs": {"default": 8}}).start()
        try:
            body = {"command": "sleep 600", "tasks": [{"gpus": 1}], "array": f"0-{elements - 1}%4"}
            srv.request("POST", "arrays", json={**body, "array": "0-9%1"}).raise_for_status()  # warm up
            for _ in range(arrays):
                t0 = time.perf_counter()
                r = srv.request("POST", "arrays", json=body)
                out.append(time.perf_counter() - t0)
                r.raise_for_status()
                assert r.json()["count"] == elements
            for a in srv.request("GET", "arrays").json()["arrays"]:  # stop what they released
                srv.request("DELETE", f"arrays/{a['id']}")
        finally:
            srv.close()
    return out


def element(load: Load, i: int) -> JobRequest:
    vc = max(load.vcs, key=lambda v: load.guarantee[v])
    return JobRequest(id=f"a-1[{i}]", vc=vc, user="sweeper", tasks=(TaskGroup("main", 1, 1),), priority=0,
                      submit_time=load.now)


def decisions(elements_in_core: int, samples: int) -> tuple[list[tuple[float, float]], int]:
    load = Load("philly")
    load.fill(0.85)
    for i in range(elements_in_core):
        load.track(load.sched.submit(element(load, i), load.now))
    waiting = sum(1 for j in load.sched.jobs() if j.state == "waiting")
    times = load.measure(samples)
    return times["submit"] + times["finish"], waiting


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=10_000)
    ap.add_argument("--arrays", type=int, default=5)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--no-naive", action="store_true", help="skip the every-element-in-the-core comparison")
    args = ap.parse_args(argv)
    load1, _, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load1:.1f} (figures are only comparable on a quiet machine)")

    times = accept(args.elements, args.arrays)
    verdict = "meets" if statistics.median(times) <= 1.0 else "MISSES"
    print(f"\naccept and store a {args.elements}-element array in one POST (real server, n={len(times)}): "
          f"median {1000 * statistics.median(times):.0f} ms, max {1000 * max(times):.0f} ms; "
          f"target <= 1000 ms: {verdict}")

    cases = [("baseline: no array", 0), ("the service's way: at most the window in the core", min(WINDOW, args.elements))]
    if not args.no_naive:
        cases.append(("for comparison: every element a core queue entry", args.elements))
    for title, in_core in cases:
        pairs, waiting = decisions(in_core, args.samples)
        wall = [w for w, _ in pairs]
        cpu = [c for _, c in pairs]
        p99 = 1000 * percentile(wall, 99)
        p99_cpu = 1000 * percentile(cpu, 99)
        print(f"\ncore decisions on philly at 85 % with a {args.elements}-element array queued, {title} "
              f"({in_core} elements submitted to the core, {waiting} jobs waiting there), n={len(pairs)}:\n"
              f"  wall p50 {1000 * statistics.median(wall):.3f} ms  p99 {p99:.3f} ms   CPU p50 "
              f"{1000 * statistics.median(cpu):.3f} ms  p99 {p99_cpu:.3f} ms; target p99 <= 1 ms: wall "
              f"{'meets' if p99 <= 1.0 else 'MISSES'}, CPU time {'meets' if p99_cpu <= 1.0 else 'MISSES'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
