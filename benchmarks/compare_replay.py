"""Does this tree replay the benchmark's week exactly as another tree does? (speed work must not change results)

    PYTHONPATH=.:scheduler:server_ext python benchmarks/compare_replay.py --baseline DIR [--students 40] [--no-overflow]

``DIR`` holds another tree's ``scheduler/`` (e.g. ``git archive main scheduler | tar -x -C DIR``). Both trees
replay ``bench_replay.course_week`` with ``replay_history`` under the live configuration (the baseline in a
child process); every decision line (time, job, event, placement, reasons, victims) must be equal, in the
same order, and so must each job's start and finish times and placements derived from them. Exit status 0
when they are; 1 with the first difference otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys


def decisions(students: int, jobs_per_day: int, order: str, overflow: bool) -> list[dict]:
    """The decision lines of the live scenario's replay of the week, with the ``hive_scheduler`` imported."""
    import bench_replay as b
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history
    from hive_scheduler.sim.replay import LivePolicy, replay_history

    buf = io.StringIO()
    write_history(b.course_week(students, jobs_per_day), buf)
    config = load_cluster_config(b.CLUSTER)
    history = parse_history(io.StringIO(buf.getvalue()), config)
    report = replay_history(history, config, live=LivePolicy(order=order, overflow=overflow))
    return report.live.result.decisions


def outcomes(lines: list[dict]) -> dict[str, dict]:
    """Per job: its start times, placements and finish time (what a replay decides for it)."""
    out: dict[str, dict] = {}
    for d in lines:
        o = out.setdefault(d["job"], {"starts": [], "finished": None})
        if d["event"] == "started":
            o["starts"].append((d["t"], d["placement"], d["opportunistic"]))
        elif d["event"] == "finished":
            o["finished"] = d["t"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="DIR", required=True)
    ap.add_argument("--students", type=int, default=40)
    ap.add_argument("--jobs-per-day", type=int, default=70)
    ap.add_argument("--order", default="fifo")
    ap.add_argument("--no-overflow", action="store_true")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.path.abspath(args.baseline)
    overflow = not args.no_overflow
    code = ("import json, sys; sys.path[:0] = [sys.argv[1] + '/scheduler', sys.argv[2]]; import compare_replay as c; "
            "import hive_scheduler; assert hive_scheduler.__file__.startswith(sys.argv[1]), hive_scheduler.__file__; "
            "json.dump(c.decisions(int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6] == '1'), sys.stdout)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    theirs = json.loads(subprocess.run(
        [sys.executable, "-c", code, base, here, str(args.students), str(args.jobs_per_day), args.order,
         "1" if overflow else "0"], env=env, check=True, capture_output=True, text=True).stdout)
    import hive_scheduler

    assert not hive_scheduler.__file__.startswith(base), hive_scheduler.__file__
    ours = json.loads(json.dumps(decisions(args.students, args.jobs_per_day, args.order, overflow)))
    a, b = outcomes(theirs), outcomes(ours)
    print(f"baseline {base}: {len(theirs)} decisions; this tree ({os.path.dirname(hive_scheduler.__file__)}): "
          f"{len(ours)} decisions; jobs {len(a)} / {len(b)}")
    if a != b:
        job = next(j for j in sorted(set(a) | set(b)) if a.get(j) != b.get(j))
        print(f"DIFFERENT outcomes, e.g. job {job}: baseline {a.get(job)}, this tree {b.get(job)}")
        sys.exit(1)
    if theirs != ours:
        i = next(i for i, (x, y) in enumerate(zip(theirs, ours)) if x != y) if len(theirs) == len(ours) else \
            min(len(theirs), len(ours))
        print(f"DIFFERENT decision lines from #{i}: baseline {theirs[i:i + 1]}, this tree {ours[i:i + 1]}")
        sys.exit(1)
    print("identical: every decision line, and each job's starts (time, placement), finish time")


if __name__ == "__main__":
    main()
