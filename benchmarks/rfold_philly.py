"""Convert RFold's flattened Microsoft Philly trace into the simulator's trace CSV (the shared schema).

    .venv/bin/python benchmarks/rfold_philly.py philly_trace.csv --out /tmp/philly-real.csv
    .venv/bin/python benchmarks/rfold_philly.py philly_trace.csv --after 4320000 --jobs 2000 --out dev.csv
    .venv/bin/hive-lab simulate --cluster philly --trace /tmp/philly-real.csv --policy hived

The input is ``WorkloadGen/data/philly_trace.csv`` of the ``shuoshuc/RFold`` repository (111,549 rows):
comment lines start with ``#`` (its header is ``#job id,arrival time (sec),topology,shape,size,duration
(sec)``), then one job a line: id, arrival second, topology (``CLOS``), shape (``4+4``: GPUs per server),
size (GPUs) and duration in seconds (the Philly notebook's: last attempt's end minus first attempt's start).

The conversion is the one that made ``philly-dev.csv`` (shared/traces/README.md): rows with ``size < 1`` or
``duration <= 0`` are dropped (10 rows of the real file: 111,539 jobs remain); the file's order is kept
(it is sorted by arrival; ties stay in file order); ``--after S`` starts at the first row arriving at or
after second ``S`` and ``--jobs N`` keeps N rows; then ``job_id`` = the RFold id, ``submit_time_s`` =
arrival minus the first kept row's arrival, ``duration_s`` = duration rounded to a whole second (at least
1), ``num_gpus`` = size; ``gpu_type``, ``vc``, ``user`` and ``status`` stay empty (the source has none;
the simulator assigns VCs by a stable hash of the id). The shape is dropped: the simulator splits a job
bigger than a node into whole nodes itself. A malformed row stops the conversion with its line number.
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Iterable, TextIO

COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "vc", "user", "status")
RFOLD_FIELDS = ("job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)")


class RFoldError(ValueError):
    """A row of the RFold file that cannot be read; the message names its line."""


def read_rfold(lines: Iterable[str], source: str = "<rfold>") -> Iterable[tuple[int, str, float, int, float]]:
    """(line number, job id, arrival s, size, duration s) of each job line, in file order."""
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [f.strip() for f in text.split(",")]
        if len(fields) != len(RFOLD_FIELDS):
            raise RFoldError(f"{source} line {number}: expected {len(RFOLD_FIELDS)} fields "
                             f"({', '.join(RFOLD_FIELDS)}), got {len(fields)}: {text[:80]!r}")
        job, arrival, _topology, _shape, size, duration = fields
        if not job:
            raise RFoldError(f"{source} line {number}: the job id is empty")
        try:
            arrival_s, size_n, duration_s = float(arrival), int(float(size)), float(duration)
        except ValueError:
            raise RFoldError(f"{source} line {number}: arrival, size and duration must be numbers, got "
                             f"{arrival!r}, {size!r}, {duration!r}") from None
        if arrival_s != arrival_s or duration_s != duration_s or arrival_s < 0:  # NaN, or before the trace
            raise RFoldError(f"{source} line {number}: arrival {arrival!r} and duration {duration!r} must be "
                             "numbers, the arrival >= 0")
        yield number, job, arrival_s, size_n, duration_s


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def convert(lines: Iterable[str], out: TextIO, after: float = 0.0, jobs: int | None = None,
            source: str = "<rfold>") -> dict[str, int]:
    """Write the trace CSV of RFold ``lines`` to ``out``; returns counts: ``read``, ``dropped`` (size < 1 or
    duration <= 0), ``before`` (arriving before ``after``), ``written``."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    counts = {"read": 0, "dropped": 0, "before": 0, "written": 0}
    seen: dict[str, int] = {}
    first: float | None = None
    for number, job, arrival, size, duration in read_rfold(lines, source):
        counts["read"] += 1
        if size < 1 or duration <= 0:
            counts["dropped"] += 1
            continue
        if arrival < after:
            counts["before"] += 1
            continue
        if jobs is not None and counts["written"] >= jobs:
            continue  # (read on: a malformed row later still fails, and the counts stay whole)
        if job in seen:
            raise RFoldError(f"{source} line {number}: job id {job!r} already appeared on line {seen[job]}")
        seen[job] = number
        if first is None:
            first = arrival
        if arrival < first:
            raise RFoldError(f"{source} line {number}: arrival {_num(arrival)} is before the first job's "
                             f"({_num(first)}); the file must be sorted by arrival")
        writer.writerow((job, _num(arrival - first), max(1, round(duration)), size, "", "", "", ""))
        counts["written"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rfold_csv", help="RFold's WorkloadGen/data/philly_trace.csv")
    ap.add_argument("--out", required=True, help="the trace CSV to write ('-' for stdout)")
    ap.add_argument("--after", type=float, default=0.0, metavar="S",
                    help="start at the first job arriving at or after second S of the source (default 0)")
    ap.add_argument("--jobs", type=int, default=None, metavar="N", help="keep at most N jobs (default: all)")
    args = ap.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        ap.error("--jobs must be >= 1")
    try:
        with open(args.rfold_csv, encoding="utf-8") as src:
            if args.out == "-":
                counts = convert(src, sys.stdout, args.after, args.jobs, args.rfold_csv)
            else:
                with open(args.out, "w", newline="", encoding="utf-8") as fh:
                    counts = convert(src, fh, args.after, args.jobs, args.rfold_csv)
    except (RFoldError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.rfold_csv}: {counts['read']} jobs read, {counts['dropped']} dropped (size < 1 or duration <= 0), "
          f"{counts['before']} before second {_num(args.after)}, {counts['written']} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
