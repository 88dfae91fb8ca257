"""``hive-lab simulate``: replay an event script or a job trace under one or more policies and compare them."""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing's own costs ~2.5 ms of each `hive-lab` start; type checkers read this as True
if TYPE_CHECKING:
    from typing import Any

DESCRIPTION = """\
Replay an event script (JSONL) or a job trace (CSV) on a cluster model and print per-policy metrics.

Policies: hived (HiveD cells, the hive-lab core, with opportunistic overflow: a queued guaranteed job may
run preemptibly in idle GPUs elsewhere until its VC can place it; --no-overflow turns it off), quota (YARN-CS style GPU quotas per VC, first fit,
no topology guarantee), fifo (one global queue, no VCs), private (each VC alone on a cluster made of
exactly its own cells, with the hived core). With several policies and --out, the decisions of each go to
a file named after the policy: --out run.jsonl gives run.hived.jsonl, run.quota.jsonl, ...

Sharing anomaly (HiveD's): per guaranteed job, how much longer it waited than under private,
max(0, wait(policy) - wait(private)), summed and counted. The private replay it needs runs once per
command (--no-anomaly skips it). --by-vc adds each VC's average queueing under every policy and private.
"""
from .simulate_hetero import HELP as HETERO_HELP  # noqa: E402
from .simulate_history import HELP as HISTORY_HELP  # noqa: E402

DESCRIPTION += "\n" + HETERO_HELP + "\n" + HISTORY_HELP


def register(subparsers: Any) -> None:
    from . import RawDescriptionHelpFormatter

    p = subparsers.add_parser(
        "simulate",
        help="replay events or a trace under hived/quota/fifo/private and compare metrics",
        description=DESCRIPTION,
        formatter_class=RawDescriptionHelpFormatter,
    )
    p.add_argument("--cluster", required=True, help="cluster config file (YAML/JSON) or built-in model: philly, default, big20k")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--events", metavar="EVENTS.jsonl", help="event script, one JSON object a line")
    src.add_argument("--trace", metavar="TRACE.csv", help="job trace: job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status")
    src.add_argument("--history", metavar="WEEK.csv", help="this cluster's own history (hive-lab admin history): "
                                                         "the live check, then the --vc-gpus/--add-nodes change side by side")
    p.add_argument("--policy", default=None,
                   help="comma-separated policies among hived, quota, fifo, private (default: hived); with a .trace file, Gavel's policies")
    p.add_argument("--order", default="fifo",
                   help="how hived orders jobs inside a VC: a core order (fifo, priority, drf, fair_share; default fifo); "
                        "quota and fifo keep their own order")
    p.add_argument("--synthetic-users", type=int, default=None, metavar="N",
                   help="with --trace: give each job one of N users, a stable hash of its job id (fairness studies)")
    p.add_argument("--out", metavar="DECISIONS.jsonl", help="write the decisions, one JSON object a line")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of a table")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="with --trace: multiply submit times by F (0.1 = arrivals 10x denser; durations unchanged)")
    p.add_argument("--grace", type=float, default=0.0, metavar="S", help="seconds between a preemption decision and the victim stopping (default 0)")
    p.add_argument("--by-vc", action="store_true",
                   help="also print each VC's average queueing per policy next to private's, and its anomaly")
    p.add_argument("--no-overflow", action="store_true",
                   help="hived without the overflow lever (the bare core; private never overflows)")
    p.add_argument("--no-private-timing", action="store_true",
                   help="hived with overflow: let a job that ran outside its VC free its VC's cells when it ends "
                        "(the live server's behaviour) instead of holding them as long as on its private cluster; "
                        "faster, but the VC's next jobs may then wait longer than privately (sharing anomaly)")
    p.add_argument("--queueing", choices=("skip", "strict", "backfill"), default="skip",
                   help="inside a VC, for hived and the private baseline it is measured against (private, the "
                        "anomaly's replay): skip (default: a job that does not fit is passed by those behind it), "
                        "strict (it holds a reservation nobody passes), backfill (only jobs whose time limit ends "
                        "before the reservation pass it)")
    p.add_argument("--backfill", action="store_true", help="the same as --queueing backfill")
    p.add_argument("--time-limits", type=float, default=None, metavar="F",
                   help="with --trace: give every job a time limit of F x its duration (1 = exact, 2 = overestimated "
                        "twice); backfill needs limits")
    p.add_argument("--no-anomaly", action="store_true",
                   help="skip the private replay behind the sharing anomaly (its rows show '-')")
    from .simulate_hetero import add_arguments

    add_arguments(p)
    from .simulate_history import add_arguments as add_history_arguments

    add_history_arguments(p)
    p.set_defaults(func=run)


def out_paths(out: str | None, policies: list[str]) -> dict[str, str | None]:
    """Where each policy's decisions go: ``--out`` itself for one policy, ``<stem>.<policy><ext>`` for several."""
    if out is None:
        return {p: None for p in policies}
    if len(policies) == 1:
        return {policies[0]: out}
    stem, ext = os.path.splitext(out)
    return {p: f"{stem}.{p}{ext or '.jsonl'}" for p in policies}


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:,.1f} s"
    if s < 2 * 3600:
        return f"{s / 60:,.1f} min"
    return f"{s / 3600:,.2f} h"


def _opt(fmt: Any) -> Any:
    return lambda v: "-" if v is None else fmt(v)


ROWS = [
    ("jobs", "jobs", str),
    ("finished", "finished", str),
    ("rejected", "rejected", str),
    ("unfinished", "unfinished", str),
    ("avg_jct_s", "JCT average", _duration),
    ("median_jct_s", "JCT median", _duration),
    ("p95_jct_s", "JCT p95", _duration),
    ("avg_queue_s", "queueing delay average", _duration),
    ("p95_queue_s", "queueing delay p95", _duration),
    ("makespan_s", "makespan", _duration),
    ("gpu_utilisation", "GPU utilisation", lambda v: f"{100 * v:.1f} %"),
    ("preemptions", "preemptions", str),
    ("sharing_anomaly_s", "sharing anomaly (job-time)", _opt(_duration)),
    ("sharing_anomaly_jobs", "sharing anomaly jobs", _opt(str)),
    ("held_gpu_s", "GPU time held for private timing", _opt(lambda v: f"{v / 3600:.1f} GPU-h")),
]


def _table(results: list[Any], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    for r in results:
        table.add_column(r.policy, justify="right")
    for key, label, fmt in ROWS:
        table.add_row(label, *(fmt(getattr(r.metrics, key)) for r in results))
    return table


def _spread_lines(results: list[Any]) -> list[str]:
    """``user_wait_spread`` per policy: p95 / median and max / median of the users' average waits."""
    lines = []
    for r in results:
        sp = r.metrics.user_wait_spread
        if sp is None:
            continue
        ratio = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"user_wait_spread ({r.policy}, {sp['users']} users): p95/median {ratio(sp['p95_over_median'])}, "
                     f"max/median {ratio(sp['max_over_median'])} (median {_duration(sp['median_s'])}, "
                     f"p95 {_duration(sp['p95_s'])}, max {_duration(sp['max_s'])})")
    return lines


def _vc_table(results: list[Any], private: Any, title: str) -> Any:
    """Per VC: jobs, private's average queueing, then each policy's, with its anomaly in brackets."""
    from rich.table import Table

    table = Table(title=title, caption="average queueing per VC; (+anomaly vs private, jobs)")
    table.add_column("VC")
    table.add_column("jobs", justify="right")
    if private is not None:
        table.add_column("private", justify="right")
    shown = [r for r in results if r.policy != "private"]
    for r in shown:
        table.add_column(r.policy, justify="right")
    for vc in sorted({vc for r in results for vc in r.metrics.by_vc}):
        first = next(r.metrics.by_vc[vc] for r in results if vc in r.metrics.by_vc)
        cells = [vc, str(first["jobs"])]
        if private is not None:
            cells.append(_duration(private.metrics.by_vc.get(vc, {}).get("avg_queue_s", 0.0)))
        for r in shown:
            row = r.metrics.by_vc.get(vc, {})
            cell = _duration(row.get("avg_queue_s", 0.0))
            if row.get("sharing_anomaly_jobs"):
                cell += f" (+{_duration(row['sharing_anomaly_s'])}, {row['sharing_anomaly_jobs']})"
            cells.append(cell)
        table.add_row(*cells)
    return table


def run(args: argparse.Namespace) -> int:
    from .simulate_hetero import run as run_hetero, wanted

    if wanted(args):  # a Gavel trace: the round-based simulator (hive_scheduler.hetero)
        return run_hetero(args)
    if args.history:  # the cluster's own history (hive_scheduler.sim.replay)
        from .simulate_history import run_history

        return run_history(args)

    from rich.console import Console

    from hive_scheduler import load_cluster_config
    from hive_scheduler.policies import ORDERS
    from hive_scheduler.sim import POLICIES, EventError, load_events, load_trace, simulate_policies

    err = Console(stderr=True)

    def fail(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)  # plain: no wrapping, so paths and line numbers stay whole
        return 2

    if args.order not in ORDERS:
        return fail(f"--order: unknown {args.order!r}; choose from {', '.join(ORDERS)} (Gavel's policies go with a .trace file)")
    if args.synthetic_users is not None and (args.synthetic_users < 1 or not args.trace):
        return fail(f"--synthetic-users applies to --trace and must be >= 1, got {args.synthetic_users}")
    policies = [p.strip() for p in (args.policy or "hived").split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if not policies or bad:
        return fail(f"--policy: unknown {', '.join(bad) or 'empty list'}; choose from {', '.join(POLICIES)}")
    if len(set(policies)) != len(policies):
        return fail("--policy: a policy is named twice")
    if args.grace < 0:
        return fail(f"--grace must be >= 0 seconds, got {args.grace}")
    if not args.time_scale > 0:
        return fail(f"--time-scale must be > 0, got {args.time_scale}")
    if args.backfill:
        args.queueing = "backfill"
    if args.time_limits is not None and (not args.trace or not args.time_limits >= 1):
        return fail(f"--time-limits applies to --trace and must be >= 1, got {args.time_limits}")
    if args.events and args.time_scale != 1.0:
        return fail("--time-scale applies to --trace only (an event script's times are its own)")
    try:
        config = load_cluster_config(args.cluster)
    except (ValueError, OSError) as exc:
        return fail(f"--cluster {args.cluster}: {exc}")
    try:
        events = load_events(args.events) if args.events else load_trace(args.trace, config, time_scale=args.time_scale,
                                                                              synthetic_users=args.synthetic_users,
                                                                              time_limits=args.time_limits)
    except EventError as exc:
        return fail(str(exc))
    source = args.events or args.trace
    paths = out_paths(args.out, policies)
    progress = None
    if err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err, transient=True,
        )
        progress.start()

    def progress_for(policy: str, total: int) -> Any:
        if progress is None:
            return None
        label = f"simulate {policy}" if policy in policies else f"simulate {policy} (for the sharing anomaly)"
        task = progress.add_task(label, total=total)
        return lambda done, total, task=task: progress.update(task, completed=done)

    anomaly = not args.no_anomaly
    try:
        results = simulate_policies(config, events, policies, grace=args.grace, order=args.order,
                                    anomaly=anomaly, overflow=not args.no_overflow, queueing=args.queueing,
                                    private_timing=not args.no_private_timing,
                                    out=paths.get,
                                    progress=progress_for)
    except (EventError, ValueError, OSError) as exc:
        if progress is not None:
            progress.stop()
        return fail(str(exc))
    finally:
        if progress is not None:
            progress.stop()
    private = next((r for r in results if r.policy == "private"), None) or next(
        (r.private for r in results if r.private is not None), None)

    if args.json:
        doc = {
            "cluster": args.cluster,
            "source": source,
            "grace": args.grace,
            "order": args.order,
            "time_scale": args.time_scale,
            "synthetic_users": args.synthetic_users,
            "overflow": not args.no_overflow,
            "private_timing": not args.no_overflow and not args.no_private_timing,
            "queueing": args.queueing,
            "time_limits": args.time_limits,
            "anomaly_reference": "private" if anomaly and not _note(results) else None,
            "anomaly_note": _note(results),
            "policies": {r.policy: r.metrics.to_dict() for r in results},
            "decisions": {p: path for p, path in paths.items() if path},
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = Console()
        scale = f", submit times x {args.time_scale:g}" if args.time_scale != 1.0 else ""
        if args.no_overflow and "hived" in policies:
            scale += ", hived without overflow"
        elif args.no_private_timing and "hived" in policies:
            scale += ", hived without private timing"
        if args.queueing != "skip" and "hived" in policies:
            scale += f", hived queueing {args.queueing}"
        if args.time_limits is not None:
            scale += f", time limits {args.time_limits:g}x durations"
        out.print(_table(results, f"{os.path.basename(source)} on {args.cluster}{scale}"))
        if args.by_vc:
            out.print(_vc_table(results, private, f"queueing per VC{scale}"))
        for line in _spread_lines(results):
            out.print(line, markup=False)
        if anomaly and _note(results):
            out.print(_note(results), markup=False)
        for p, path in paths.items():
            if path:
                out.print(f"decisions ({p}): {path}", markup=False)
    return 0


def _note(results: list) -> str | None:
    """Why the sharing anomaly was not computed although asked for (the same for every policy)."""
    return next((r.anomaly_note for r in results if getattr(r, "anomaly_note", None)), None)
