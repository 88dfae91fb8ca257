"""``hive-lab admin usage``: who used how much (``GET usage``), as a table or CSV.

    hive-lab admin usage --since 7d                 GPU-hours, CPU-hours and jobs per user
    hive-lab admin usage --since 2026-11-01 --by day --csv > usage.csv
    hive-lab admin usage --vc cv-101 --csv             one course's students (an instructor's export)

Admins see everyone; others see their own row.
"""

from __future__ import annotations

import argparse
import csv
import sys

from ._common import add_server_args, client_from, print_json, reports_errors

BY = ("user", "vc", "day", "job")


def register_usage(sub) -> None:
    u = sub.add_parser("usage", help="GPU-seconds, CPU-seconds and jobs per user, VC or day",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    u.add_argument("--since", default="7d", help="7d, 24h, 90m, or an ISO date (UTC), e.g. 2026-11-01 (default: 7d)")
    u.add_argument("--by", default="user", choices=BY, help="one row per user (default), VC, UTC day or job")
    u.add_argument("--user", default=None, metavar="NAME", help="only these users (comma-separated; admins)")
    u.add_argument("--vc", default=None, metavar="VC", help="only usage in these VCs (comma-separated), e.g. a course")
    u.add_argument("--csv", action="store_true", help="print CSV (one line per row) for spreadsheets")
    add_server_args(u)
    u.set_defaults(func=run_usage)


def _gpu_types(rows: list[dict]) -> list[str]:
    return sorted({t for r in rows for t in (r.get("gpu_seconds_by_type") or {})})


def _num(value, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def write_csv(rows: list[dict], by: str, out=None) -> None:
    """Columns: the key, gpu_seconds, one gpu_seconds_<type> per GPU type, cpu_seconds, peak_memory_mb, jobs
    (unknown values empty)."""
    types = _gpu_types(rows)
    writer = csv.writer(out or sys.stdout, lineterminator="\n")
    writer.writerow([by, "gpu_seconds", *(f"gpu_seconds_{t}" for t in types), "cpu_seconds", "peak_memory_mb", "jobs"])
    for r in rows:
        by_type = r.get("gpu_seconds_by_type") or {}
        writer.writerow([r.get(by), _num(r.get("gpu_seconds"), 3), *(_num(by_type.get(t, 0.0), 3) for t in types),
                         _num(r.get("cpu_seconds"), 3), _num(r.get("peak_memory_mb")), r.get("jobs", 0)])


def usage_table(rows: list[dict], by: str, since: str):
    from rich import box
    from rich.table import Table

    types = _gpu_types(rows)
    table = Table(title=f"usage since {since}, by {by}", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column(by)
    for column in ("GPU-hours", *(f"{t} GPU-h" for t in types), "CPU-hours", "peak mem MiB", "jobs"):
        table.add_column(column, justify="right")
    for r in rows:
        by_type = r.get("gpu_seconds_by_type") or {}
        cpu = r.get("cpu_seconds")
        table.add_row(str(r.get(by)), _num(r["gpu_seconds"] / 3600, 2),
                      *(_num(by_type.get(t, 0.0) / 3600, 2) for t in types),
                      "" if cpu is None else _num(cpu / 3600, 2), _num(r.get("peak_memory_mb"), 0), str(r.get("jobs", 0)))
    if not rows:
        table.caption = "no usage in this window"
    elif any(r.get("cpu_seconds") is None for r in rows):
        table.caption = ("empty CPU/memory: not measured (the local launcher measures CPU, and memory with "
                         "cgroups, when a job ends)")
    return table


@reports_errors
def run_usage(args) -> int:
    rows = client_from(args).usage(since=args.since, by=args.by, user=args.user, vc=args.vc)
    if args.json:
        print_json({"rows": rows})
    elif args.csv:
        write_csv(rows, args.by)
    else:
        from ..tables import print_table

        print_table(usage_table(rows, args.by, args.since))
    return 0
