"""One VC's scheduling pass over a backlog where nothing can start (three passes in four on the 111k
Philly replay): the VC (the philly model's first) is filled with its own one-GPU jobs, BACKLOG jobs of
1, 2, 4 or 8 GPUs wait, then each timed call marks the VC's pass due (as a finish elsewhere that returns
CPUs does) and runs the passes (``run_passes``): one pass over the whole queue, where nothing starts.

    .venv/bin/python benchmarks/bench_vc_pass.py [--backlog 400] [--repeat 300]
    mkdir -p /tmp/base && git archive main scheduler | tar -x -C /tmp/base
    .venv/bin/python benchmarks/bench_vc_pass.py --baseline /tmp/base --rounds 3   # alternating, same run

Prints the best and median pass time in microseconds (the best is the figure that survives a loaded
machine); with ``--baseline DIR`` each round runs this tree and DIR's ``scheduler/`` in child processes,
alternating which goes first, and prints the ratio of the medians of the best times. A measurement, not
a test.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time


def measure(backlog: int, repeat: int) -> tuple[float, float]:
    from hive_scheduler import Scheduler, load_cluster_config
    from hive_scheduler.types import JobRequest, TaskGroup

    def one(jid: str, vc: str, gpus: int) -> JobRequest:
        return JobRequest(jid, vc, user="u", tasks=(TaskGroup("w", 1, gpus, None, 0, 0),))

    s = Scheduler(load_cluster_config("philly"))
    vc = sorted(s.vc_view())[0]
    i = 0
    while not any(d.event == "queued" for d in s.submit(one(f"r{i}", vc, 1), 0.0)):
        i += 1
    rng = random.Random(1)
    for k in range(backlog):
        s.submit(one(f"w{k}", vc, rng.choice((1, 2, 4, 8))), 0.0)
    state = s.state.vcs[vc]
    times = []
    for _ in range(repeat):
        out: list = []
        state.dirty = True  # (what a finish elsewhere that returns CPUs does: every VC's pass is due)
        t0 = time.perf_counter()
        s.run_passes(1.0, out)
        times.append(time.perf_counter() - t0)
        assert not out, out
    return min(times) * 1e6, statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backlog", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--baseline", help="a directory holding another tree's scheduler/ (git archive)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if not args.baseline:
        best, med = measure(args.backlog, args.repeat)
        print(f"pass over {args.backlog + 1} waiting: best {best:.0f} us, median {med:.0f} us")
        return 0
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(os.path.dirname(here), "scheduler")
    sides = {"this tree": tree, "baseline": os.path.join(args.baseline, "scheduler")}
    best: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            env = dict(os.environ, PYTHONPATH=sides[name])
            code = (f"import sys; sys.path.insert(0, {here!r}); import bench_vc_pass as b; "
                    f"print(*b.measure({args.backlog}, {args.repeat}))")
            got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            b, m = map(float, got.stdout.split())
            best[name].append(b)
            print(f"round {r + 1} {name}: best {b:.0f} us, median {m:.0f} us")
    a, z = statistics.median(best["this tree"]), statistics.median(best["baseline"])
    print(f"best pass, median of rounds: this tree {a:.0f} us, baseline {z:.0f} us, ratio {a / z:.2f} "
          f"(load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
