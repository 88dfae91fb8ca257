"""What the per-user limits' admission gate costs the core: decision latency on the philly model
(2,816 GPUs) with a backlog, without limits and with limits on every VC.

    .venv/bin/python benchmarks/bench_limits.py [--samples N] [--backlog 500] [--max-gpus 32]

Same load as bench_core.py (17 users, jobs of 1..32 GPUs, filled to 85% then a backlog of waiting
jobs); "limits" gives every VC ``{"default": {"max_gpus": N, "max_running_jobs": 64}}`` before filling.
Prints p50/p99 of this thread's CPU time per call (``time.thread_time``). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_core import Load, percentile  # noqa: E402


def run(model: str, limits: dict | None, samples: int, backlog: int) -> tuple[dict, int, int]:
    load = Load(model)
    if limits is not None:
        for vc in load.vcs:
            load.sched.set_user_limits(vc, limits, load.now)
    load.fill(0.85)
    load.backlog(backlog)
    times = load.measure(samples)
    waiting = sum(1 for j in load.sched._jobs.values() if j.state == "waiting")
    over = sum(1 for j in load.sched._jobs.values() if type(j.fail).__name__ == "OverLimit" and j.state == "waiting")
    return times, waiting, over


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--backlog", type=int, default=500)
    ap.add_argument("--max-gpus", type=int, default=32)
    ap.add_argument("--model", default="philly")
    args = ap.parse_args(argv)
    load1, _, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load1:.1f} (figures are only comparable on a quiet machine)")
    print(f"{args.model}, filled to 85% then {args.backlog} jobs waiting, {args.samples} calls; CPU ms per call")
    for label, limits in (("no limits", None),
                          (f"max_gpus={args.max_gpus}", {"default": {"max_gpus": args.max_gpus, "max_running_jobs": 64}})):
        times, waiting, over = run(args.model, limits, args.samples, args.backlog)
        for kind in ("submit", "finish"):
            cpu = [c * 1000 for _, c in times[kind]]
            print(f"  {label:14s} {kind:6s} p50 {percentile(cpu, 50):7.3f}  p99 {percentile(cpu, 99):7.3f}  "
                  f"({len(cpu)} calls; {waiting} waiting at the end, {over} of them at a limit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
