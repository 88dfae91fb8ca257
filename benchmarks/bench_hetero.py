"""Gavel's figures side by side with hive-lab's round-based simulator, and its whole-process run time.

    .venv/bin/python benchmarks/bench_hetero.py [--trace PATH] [--cluster v100:8,p100:16,k80:24] [--runs 3]

For each policy with a Gavel figure (Gavel's simulator at its defaults, seed 0, makespan of
``minimize_makespan.trace`` on 8 V100 + 16 P100 + 24 K80), runs ``hive-lab simulate --json`` as a
separate process ``--runs`` times and prints our makespan, Gavel's, and the median wall and CPU
seconds of the whole process (start-up and imports included). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "scheduler", "hive_scheduler", "hetero", "data")
GAVEL_MAKESPAN_S = {  # minimize_makespan.trace, 8 V100 + 16 P100 + 24 K80, Gavel's defaults, seed 0
    "fifo": 274_228,
    "gandiva": 75_994,
    "min_total_duration": 76_635,
    "min_total_duration_perf": 64_721,
}


def one_run(cmd: list[str]) -> tuple[dict, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out), wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=os.path.normpath(os.path.join(DATA, "minimize_makespan.trace")))
    ap.add_argument("--cluster", default="v100:8,p100:16,k80:24")
    ap.add_argument("--policies", default=",".join(GAVEL_MAKESPAN_S))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    load1, _, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load1:.1f} (wall times are only comparable on a quiet machine)")
    print(f"{'policy':<26}{'ours (s)':>12}{'Gavel (s)':>12}{'wall median':>13}{'cpu median':>12}")
    for policy in args.policies.split(","):
        cmd = [sys.executable, "-m", "hive_lab.cli", "simulate", "--trace", args.trace, "--cluster", args.cluster,
               "--policy", policy, "--json"]
        walls, cpus, doc = [], [], None
        for _ in range(args.runs):
            doc, wall, cpu = one_run(cmd)
            walls.append(wall)
            cpus.append(cpu)
        ours = doc["policies"][policy]["makespan_s"]
        same_setup = os.path.basename(args.trace) == "minimize_makespan.trace" and args.cluster == "v100:8,p100:16,k80:24"
        gavel = GAVEL_MAKESPAN_S.get(policy) if same_setup else None
        print(f"{policy:<26}{ours:>12,.0f}{'-' if gavel is None else format(gavel, ','):>12}"
              f"{statistics.median(walls):>12.2f}s{statistics.median(cpus):>11.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
