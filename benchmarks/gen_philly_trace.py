"""Resample ``philly-dev.csv`` into a bigger Philly-like trace (deterministic: same seed, same file).

    .venv/bin/python benchmarks/gen_philly_trace.py --jobs 100000 --seed 0 --out /tmp/philly-100k.csv

Each generated job draws, with replacement and independently, a (num_gpus, duration_s) pair of a
source job (GPU count and run time stay jointly distributed as in the sample) and an inter-arrival gap
of the sample, stretched so that the arrival rate is the whole Philly trace's (``--jobs-per-day``,
default 814: 111,549 jobs from 2017-08-07 to 2017-12-22). The sample's own window is busier (2,000 jobs
in 23 h); ``--jobs-per-day 0`` keeps its gaps as they are. The output has the shared trace
schema (``job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status``) with empty ``vc`` (the
simulator assigns VCs by a stable hash of the id, in proportion to VC size) and job ids ``g<n>``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys

from hive_scheduler.sim.samples import PHILLY_DEV

DEFAULT_SOURCE = PHILLY_DEV
COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "vc", "user", "status")


def read_source(path: str) -> tuple[list[tuple[int, float]], list[float]]:
    """(num_gpus, duration_s) of every source job, and the gaps between consecutive submits."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    jobs = [(int(float(r["num_gpus"])), float(r["duration_s"])) for r in rows]
    times = [float(r["submit_time_s"]) for r in rows]
    gaps = [b - a for a, b in zip(times, times[1:])]
    if not jobs or not gaps:
        raise ValueError(f"{path}: need at least two jobs to resample")
    return jobs, gaps


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


PHILLY_JOBS_PER_DAY = 814  # 111,549 jobs over the 137 days of the trace


def generate(source: str, n: int, seed: int, out, jobs_per_day: float = PHILLY_JOBS_PER_DAY) -> None:
    jobs, gaps = read_source(source)
    if jobs_per_day > 0:
        stretch = (86400 / jobs_per_day) / (sum(gaps) / len(gaps))
        gaps = [round(g * stretch) for g in gaps]
    rng = random.Random(seed)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    t = 0.0
    for i in range(n):
        if i:
            t += rng.choice(gaps)
        gpus, duration = rng.choice(jobs)
        writer.writerow((f"g{i}", _num(t), _num(duration), gpus, "", "", "", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.normpath(DEFAULT_SOURCE))
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs-per-day", type=float, default=PHILLY_JOBS_PER_DAY,
                    help="arrival rate to stretch the sample's gaps to (0: keep them)")
    ap.add_argument("--out", required=True, help="output CSV path ('-' for stdout)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    if args.out == "-":
        generate(args.source, args.jobs, args.seed, sys.stdout, args.jobs_per_day)
    else:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            generate(args.source, args.jobs, args.seed, fh, args.jobs_per_day)
    return 0


if __name__ == "__main__":
    sys.exit(main())
