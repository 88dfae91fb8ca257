"""Backfill's effect on queueing: the Philly sample replayed under the core's three ways of queueing.

    .venv/bin/python benchmarks/bench_backfill.py [--trace scheduler/hive_scheduler/sim/data/philly-dev.csv] [--time-scale 0.03]
                                                   [--cluster philly] [--overflow]

Rows: ``skip`` (the default: jobs that fit pass one that does not), ``strict`` (reservations, nobody
passes), ``backfill`` with time limits = the trace's durations (exact) and = 2x them (users overestimate).
Columns: average / p95 queueing of all jobs, of 1-GPU jobs and of gangs (more than one GPU), the
largest wait of a gang, JCT and the replay's run time. The bare core (no opportunistic overflow) unless
``--overflow``. A measurement, not a test; the same figures come from ``hive-lab simulate ... --json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import load_trace, simulate
from hive_scheduler.sim.samples import PHILLY_DEV


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return 0.0
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def fmt(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=PHILLY_DEV)
    ap.add_argument("--cluster", default="philly")
    ap.add_argument("--time-scale", type=float, default=0.03)
    ap.add_argument("--overflow", action="store_true")
    args = ap.parse_args(argv)
    config = load_cluster_config(args.cluster)
    print(f"{args.trace} on {args.cluster}, submit times x {args.time_scale:g}, "
          f"{'with' if args.overflow else 'without'} overflow")
    print("| queueing | time limits | avg (p95) all | avg (p95) 1-GPU | avg (p95) gangs | max gang wait | avg JCT | run time |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for queueing, limits in (("skip", None), ("strict", None), ("backfill", 1.0), ("backfill", 2.0)):
        events = load_trace(args.trace, config, time_scale=args.time_scale, time_limits=limits)
        gpus = {e.job: e.gpus for e in events}
        submit = {e.job: e.t for e in events}
        t0 = time.perf_counter()
        res = simulate(config, events, "hived", anomaly=False, overflow=args.overflow, queueing=queueing)
        took = time.perf_counter() - t0
        first: dict[str, float] = {}
        for d in res.decisions:
            if d["event"] == "started":
                first.setdefault(d["job"], d["t"])
        waits = {j: first[j] - submit[j] for j in first}
        one = [w for j, w in waits.items() if gpus[j] == 1]
        gang = [w for j, w in waits.items() if gpus[j] > 1]
        allw = list(waits.values())
        cell = lambda xs: f"{fmt(statistics.fmean(xs)) if xs else '-'} ({fmt(pct(xs, 95))})"  # noqa: E731
        print(f"| {queueing} | {'-' if limits is None else f'{limits:g}x durations'} | {cell(allw)} | {cell(one)} | "
              f"{cell(gang)} | {fmt(max(gang) if gang else 0)} | {fmt(res.metrics.avg_jct_s)} | {took:.1f} s |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
