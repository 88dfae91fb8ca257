"""Cost of a what-if question (``Scheduler.what_if``, behind ``POST jobs?dry_run=true``) next to a real
``submit`` on the same loaded cluster (bench_core's load: philly, 2,816 GPUs, filled to 85%, a backlog).

    .venv/bin/python benchmarks/bench_what_if.py [--samples 500] [--models philly]

what-if runs the placement in a transaction that is rolled back: no copy of the scheduler is made, so
its cost is that of one placement attempt (plus the preemption search when it would preempt). Prints
p50/p99 wall and thread-CPU milliseconds per call kind. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_core import Load, percentile  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--models", default="philly")
    ap.add_argument("--backlog", type=int, default=50)
    args = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for model in args.models.split(","):
        load = Load(model)
        load.fill(0.85)
        load.backlog(args.backlog)
        outcomes: dict[str, int] = {}
        what_if, submit = [], []
        for i in range(args.samples):
            req = load.request(opportunistic=i % 10 == 1)
            load.now += 1.0
            c0, t0 = time.thread_time(), time.perf_counter()
            answer = load.sched.what_if(req, load.now)
            what_if.append((time.perf_counter() - t0, time.thread_time() - c0))
            outcomes[answer.outcome] = outcomes.get(answer.outcome, 0) + 1
            if i % 2 == 0:  # keep the load moving: every other question is then really submitted
                dt, decisions = load.call(load.sched.submit, req)
                submit.append(dt)
                load.track(decisions)
            elif load.running:
                load.track(load.call(load.sched.finish, load.running[i % len(load.running)])[1])
        print(f"{model}: {load.sched.gpu_count()} GPUs, answers {outcomes}")
        for name, xs in (("what_if", what_if), ("submit", submit)):
            wall = [w * 1e3 for w, _ in xs]
            cpu = [c * 1e3 for _, c in xs]
            print(f"  {name:8} n={len(xs):4}  wall p50 {percentile(wall, 50):.3f} ms  p99 {percentile(wall, 99):.3f} ms"
                  f"  | cpu p50 {percentile(cpu, 50):.3f} ms  p99 {percentile(cpu, 99):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
