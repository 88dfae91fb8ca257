"""What the start estimates cost the event loop now that their replay runs on a worker thread: the copy of
the core's inputs taken on the loop (``estimates_snapshot``), against the replay itself (``run()``, what the
loop used to spend inline) and ``Scheduler.fork()`` (a replay twin: made once per config, kept).

    .venv/bin/python benchmarks/bench_estimates_snapshot.py [--waiting 500] [--running 200] [--samples 9]

Cluster: ``--running`` / 8 nodes x 8 GPUs, one VC; a 1-GPU job with a time limit on every GPU, then ``--waiting``
1-2 GPU jobs queued behind them. Prints the median of each over ``--samples`` calls (CPU time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "scheduler")]

from hive_scheduler import JobRequest, Scheduler, TaskGroup  # noqa: E402


def loaded(running: int, waiting: int) -> Scheduler:
    nodes = max(1, (running + 7) // 8)
    core = Scheduler({"nodes": nodes, "gpus_per_node": 8, "gpu_type": "GPU", "levels": ["pair"]})
    for i in range(nodes * 8):
        core.submit(JobRequest(f"r{i}", "default", tasks=(TaskGroup("w", 1, 1),), time_limit_s=60.0 + i), 0.0)
    for i in range(waiting):
        core.submit(JobRequest(f"w{i}", "default", tasks=(TaskGroup("w", 1, 1 + i % 2),), time_limit_s=30.0,
                               submit_time=1.0), 1.0)
    return core


def cpu_ms(fn) -> float:
    t0 = time.process_time()
    fn()
    return 1000 * (time.process_time() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--waiting", type=int, default=500)
    ap.add_argument("--running", type=int, default=200)
    ap.add_argument("--samples", type=int, default=9)
    args = ap.parse_args()
    core = loaded(args.running, args.waiting)
    estimator = core.new_estimator()
    snaps = []
    copy = [cpu_ms(lambda: snaps.append(core.estimates_snapshot(estimator, 2.0, max_waiting=500)))
            for _ in range(args.samples)]
    replay = [cpu_ms(snaps[i].run) for i in range(args.samples)]
    fork = [cpu_ms(lambda: core.fork(backfill=False, trusted=True)) for _ in range(args.samples)]
    assert snaps[-1].run() == core.estimate_starts(2.0, max_waiting=500)
    print(f"{len(core.job_table)} jobs ({args.waiting} waiting), {core.gpu_count()} GPUs; median CPU ms of "
          f"{args.samples}:")
    print(f"snapshot (on the loop) {statistics.median(copy):.2f} ms")
    print(f"replay (worker thread; inline before) {statistics.median(replay):.1f} ms")
    print(f"fork (a new twin, once per config) {statistics.median(fork):.1f} ms")


if __name__ == "__main__":
    main()
