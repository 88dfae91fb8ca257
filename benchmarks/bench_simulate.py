"""Wall time of the simulator replaying the shipped philly-dev.csv (hive_scheduler/sim/data/) on the philly model.

    .venv/bin/python benchmarks/bench_simulate.py [--trace PATH] [--policies hived,quota,fifo] [--repeat 3]
        [--target S] [--anomaly] [--no-overflow]

    # the 100,000-job Philly-like replay (target <= 30 s on one core)
    .venv/bin/python benchmarks/gen_philly_trace.py --out /tmp/philly-100k.csv
    .venv/bin/python benchmarks/bench_simulate.py --trace /tmp/philly-100k.csv --policies hived --repeat 1 --target 30

Times ``simulate`` (trace already loaded; loading is timed separately) per policy, ``--repeat`` times,
and prints the wall and CPU-time medians and their ratio to the target (default: replay <= 5 s). The
sharing anomaly's private replay is left out unless ``--anomaly`` (it is a second replay, in worker
processes beside this one where it can be: the CPU figure then adds theirs). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import load_trace, simulate
from hive_scheduler.sim.samples import PHILLY_DEV

TARGET_S = 5.0
DEFAULT_TRACE = PHILLY_DEV


def workers_cpu() -> float:
    """CPU seconds of the ended child processes (the private replays' workers, ``sim/private_pool.py``)."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=os.path.normpath(DEFAULT_TRACE))
    ap.add_argument("--cluster", default="philly")
    ap.add_argument("--policies", default="hived,quota,fifo")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target", type=float, default=TARGET_S, help="seconds a replay should take at most")
    ap.add_argument("--anomaly", action="store_true", help="also replay private for the sharing anomaly")
    ap.add_argument("--no-overflow", action="store_true", help="hived without the overflow lever")
    args = ap.parse_args(argv)

    load1, _, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load1:.1f} (figures are only comparable on a quiet machine)")
    t0 = time.perf_counter()
    config = load_cluster_config(args.cluster)
    t1 = time.perf_counter()
    events = load_trace(args.trace, config)
    t2 = time.perf_counter()
    print(f"{args.trace}: {len(events)} jobs on {args.cluster}; config {t1 - t0:.2f} s, trace {t2 - t1:.2f} s")
    for policy in args.policies.split(","):
        walls, cpus, own = [], [], []
        for _ in range(args.repeat):
            c, w, t = time.process_time(), workers_cpu(), time.perf_counter()
            result = simulate(config, events, policy, anomaly=args.anomaly, overflow=not args.no_overflow)
            walls.append(time.perf_counter() - t)
            own.append(time.process_time() - c)
            cpus.append(own[-1] + workers_cpu() - w)
        med, cpu = statistics.median(walls), statistics.median(cpus)
        target = args.target
        note = (f"; target <= {target:g} s: {'meets' if med <= target else 'MISSES'} "
                f"(wall {med / target:.2f} of it, CPU {cpu / target:.2f})")
        parent = statistics.median(own)
        split = f" (this process {parent:.2f} s, the private replays' workers the rest)" if cpu - parent > 0.01 else ""
        print(f"  {policy:6s} wall median {med:6.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), CPU median "
              f"{cpu:6.2f} s{split} over {args.repeat} runs; {len(result.decisions)} decisions{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
