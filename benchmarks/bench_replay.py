"""Replay speed of a cluster's own history (issue 28): a week of a 40-student course under one policy.

    PYTHONPATH=.:scheduler:server_ext python benchmarks/bench_replay.py [--students 40] [--jobs-per-day 70] [--repeat 5]

The week is synthetic and seeded: 40 students in cv-101 (16 GPUs guaranteed) next to two research VCs
(8 GPUs each) on 4 nodes x 8 GPUs; each student submits 35-105 jobs a day (short runs of about a minute, lognormal, a
few long ones; 2 % notebook kernels holding a GPU or half of one for an hour or two), most in the evening,
twice as many in the two days before Friday's deadline; each researcher a quarter as many, ten times longer. It is written as the CSV ``hive-lab admin
history`` writes and read back with ``load_history``; the figure is the replay alone (``replay_history``
with the live configuration, hived with fifo inside the VCs and overflow on): the median and the best of
``--repeat`` runs, wall clock and CPU time of this process (on a shared machine the CPU time is the steadier
figure), plus the time to read the CSV. Target (issue 28): <= 2 s. ``--baseline DIR``: also replay with the
``hive_scheduler`` under ``DIR`` (e.g. ``git archive <commit> scheduler | tar -x -C DIR``), in a child process,
alternating run by run with this tree's, so both are measured under the same load.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

CLUSTER = {"nodes": 4, "gpus_per_node": 8, "gpu_type": "A100", "vcs": {"cv-101": 16, "lab-a": 8, "lab-b": 8}}
DAY = 86400.0


def course_week(students: int = 40, jobs_per_day: int = 70, seed: int = 28) -> list[dict]:
    """History rows (``HISTORY_COLUMNS``) of one synthetic week, sorted by submit time."""
    rng = random.Random(seed)

    def profile(t: float) -> float:  # relative arrival rate over a day: evenings busy, nights quiet
        hour = (t % DAY) / 3600
        return 0.15 + math.exp(-((hour - 20) / 3.5) ** 2) + 0.6 * math.exp(-((hour - 14) / 3) ** 2)

    def when(day: int) -> float:
        while True:
            t = day * DAY + rng.uniform(0, DAY)
            if rng.random() * 1.3 < profile(t):
                return t

    jobs = []
    users = [(f"student-{i:02d}", "cv-101") for i in range(students)] + \
            [(f"res-{i}", "lab-a" if i < 3 else "lab-b") for i in range(6)]
    for user, vc in users:
        for day in range(7):
            per_day = jobs_per_day if vc == "cv-101" else jobs_per_day // 4
            if vc == "cv-101" and day in (3, 4):  # the two days before Friday's deadline
                per_day *= 2
            for _ in range(rng.randint(per_day // 2, per_day * 3 // 2)):
                jobs.append((when(day), user, vc))
    jobs.sort()
    rows = []
    for n, (t, user, vc) in enumerate(jobs, start=1):
        kind = "kernel" if rng.random() < 0.02 else "batch"
        if kind == "kernel":
            duration = rng.uniform(1800, 7200)
            tasks = [{"name": "kernel", "count": 1, "gpus": rng.choice([1, 0.5])}]
        else:
            duration = min(6 * 3600, rng.lognormvariate(math.log(60 if vc == "cv-101" else 600), 1.0))
            gpus = rng.choices([1, 2, 4, 8], [80, 14, 5, 1])[0]
            tasks = [{"name": "main", "count": 1, "gpus": gpus}]
        rows.append({"job_id": f"j-{n:06d}", "submit_time_s": round(t, 3), "duration_s": round(duration, 3),
                     "num_gpus": max(1, math.ceil(tasks[0]["gpus"])), "gpu_type": "A100", "vc": vc,
                     "user": user, "status": "succeeded", "priority": 0, "kind": kind,
                     "user_group": vc, "time_limit_s": None,
                     "tasks": json.dumps(tasks, separators=(",", ":")), "observed_wait_s": None,
                     "end_time_s": None, "carried_over": 0})
    return rows


def _replay_times(repeat: int, order: str, overflow: bool, students: int, jobs_per_day: int) -> tuple[list, list, Any]:
    """Wall and CPU seconds of ``repeat`` replays of the week (and the last report)."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history
    from hive_scheduler.sim.replay import LivePolicy, replay_history

    buf = io.StringIO()
    write_history(course_week(students, jobs_per_day), buf)
    config = load_cluster_config(CLUSTER)
    history = parse_history(io.StringIO(buf.getvalue()), config)
    walls, cpus, report = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        report = replay_history(history, config, live=LivePolicy(order=order, overflow=overflow))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return walls, cpus, report


def _child(baseline: str, args: argparse.Namespace) -> tuple[float, float]:
    """One replay (wall, CPU) with the ``hive_scheduler`` under ``baseline``, in a fresh process."""
    code = ("import json, sys; sys.path[:0] = [sys.argv[1] + '/scheduler', sys.argv[2]]; import bench_replay as b; "
            "w, c, _ = b._replay_times(1, sys.argv[3], sys.argv[4] == '1', int(sys.argv[5]), int(sys.argv[6])); "
            "import hive_scheduler; assert hive_scheduler.__file__.startswith(sys.argv[1]), hive_scheduler.__file__; "
            "print(json.dumps([w[0], c[0]]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, os.path.abspath(baseline), os.path.dirname(os.path.abspath(__file__)),
                          args.order, "0" if args.no_overflow else "1", str(args.students), str(args.jobs_per_day)],
                         env=env, check=True, capture_output=True, text=True).stdout
    wall, cpu = json.loads(out.splitlines()[-1])
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, default=40)
    ap.add_argument("--jobs-per-day", type=int, default=70)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--order", default="fifo")
    ap.add_argument("--no-overflow", action="store_true", help="hived without the overflow lever")
    ap.add_argument("--baseline", metavar="DIR", help="a tree whose scheduler/ to compare with, run by run")
    args = ap.parse_args()

    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history

    rows = course_week(args.students, args.jobs_per_day)
    buf = io.StringIO()
    write_history(rows, buf)
    config = load_cluster_config(CLUSTER)
    t0 = time.perf_counter()
    parse_history(io.StringIO(buf.getvalue()), config)
    read_s = time.perf_counter() - t0
    walls, cpus, base_walls, base_cpus = [], [], [], []
    report = None
    for _ in range(args.repeat):
        if args.baseline:
            w, c = _child(args.baseline, args)
            base_walls.append(w)
            base_cpus.append(c)
        w, c, report = _replay_times(1, args.order, not args.no_overflow, args.students, args.jobs_per_day)
        walls += w
        cpus += c
    live = report.live.summary()
    cv = live["by_vc"]["cv-101"]
    med = statistics.median
    print(f"history: {len(rows)} jobs of {args.students} students + 6 researchers, 7 days, "
          f"{config.gpu_count()} GPUs ({len(buf.getvalue()) / 1e6:.1f} MB CSV)")
    print(f"read CSV: {read_s:.2f} s")
    print(f"replay (hived, {args.order}, overflow {'off' if args.no_overflow else 'on'}), {args.repeat} runs: "
          f"median {med(walls):.2f} s wall (best {min(walls):.2f}), CPU median {med(cpus):.2f} s (best {min(cpus):.2f}); "
          f"{len(rows) / med(cpus):,.0f} jobs per CPU second; target <= 2 s")
    if args.baseline:
        print(f"baseline {args.baseline}, same runs: median {med(base_walls):.2f} s wall (best {min(base_walls):.2f}), "
              f"CPU median {med(base_cpus):.2f} s (best {min(base_cpus):.2f}): "
              f"{med(base_cpus) / med(cpus):.2f}x the CPU time of this tree")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"cv-101: {cv['jobs']} jobs, average wait {cv['avg_wait_s']:.0f} s, p90 {cv['p90_wait_s']:.0f} s, "
          f"{100 * cv['within']:.0f} % started within 5 min; GPU utilisation {100 * live['gpu_utilisation']:.0f} %")


if __name__ == "__main__":
    main()
