"""Replay speed of a cluster's own history (issue 28): a week of a 40-student course under one policy.

    PYTHONPATH=.:scheduler:server_ext python benchmarks/bench_replay.py [--students 40] [--jobs-per-day 70] [--repeat 3]

The week is synthetic and seeded: 40 students in cv-101 (16 GPUs guaranteed) next to two research VCs
(8 GPUs each) on 4 nodes x 8 GPUs; each student submits 35-105 jobs a day (short runs of about a minute, lognormal, a
few long ones; 2 % notebook kernels holding a GPU or half of one for an hour or two), most in the evening,
twice as many in the two days before Friday's deadline; each researcher a quarter as many, ten times longer. It is written as the CSV ``hive-lab admin
history`` writes and read back with ``load_history``; the figure is the replay alone (``replay_history``
with the live configuration, hived with fifo inside the VCs and overflow on), the best of ``--repeat`` runs,
plus the time to read the CSV. Target (issue 28): <= 2 s.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", type=int, default=40)
    ap.add_argument("--jobs-per-day", type=int, default=70)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--order", default="fifo")
    ap.add_argument("--no-overflow", action="store_true", help="hived without the overflow lever")
    args = ap.parse_args()

    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history
    from hive_scheduler.sim.replay import LivePolicy, replay_history

    rows = course_week(args.students, args.jobs_per_day)
    buf = io.StringIO()
    write_history(rows, buf)
    config = load_cluster_config(CLUSTER)
    t0 = time.perf_counter()
    history = parse_history(io.StringIO(buf.getvalue()), config)
    read_s = time.perf_counter() - t0
    best = cpu = math.inf
    report = None
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        report = replay_history(history, config, live=LivePolicy(order=args.order, overflow=not args.no_overflow))
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    live = report.live.summary()
    cv = live["by_vc"]["cv-101"]
    print(f"history: {len(rows)} jobs of {args.students} students + 6 researchers, 7 days, "
          f"{load_cluster_config(CLUSTER).gpu_count()} GPUs ({len(buf.getvalue()) / 1e6:.1f} MB CSV)")
    print(f"read CSV: {read_s:.2f} s")
    print(f"replay (hived, {args.order}, overflow {'off' if args.no_overflow else 'on'}), best of {args.repeat}: {best:.2f} s "
          f"({len(rows) / best:,.0f} jobs/s; CPU {cpu:.2f} s); target <= 2 s")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"cv-101: {cv['jobs']} jobs, average wait {cv['avg_wait_s']:.0f} s, p90 {cv['p90_wait_s']:.0f} s, "
          f"{100 * cv['within']:.0f} % started within 5 min; GPU utilisation {100 * live['gpu_utilisation']:.0f} %")


if __name__ == "__main__":
    main()
