"""``hive-lab simulate --history week.csv``: replay the cluster's own history (``hive-lab admin history``)
under the live configuration, checked against what was observed, and under a change, side by side.

    hive-lab simulate --history week.csv --cluster week.cluster.json                   the live check
    hive-lab simulate --history week.csv --cluster week.cluster.json --vc-gpus cv-101=12 --policy hived,fair_share
    hive-lab simulate --history week.csv --cluster week.cluster.json --capacity cv-101 --within 5m --target 0.9
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # typing's own costs ~2.5 ms of each `hive-lab` start; type checkers read this as True
if TYPE_CHECKING:
    from typing import Any

HELP = """\
With --history (a CSV from hive-lab admin history): the live configuration replayed and checked against
the observed waits (a job matches within max(60 s, 10 %); the check holds at 90 % of jobs), then the
change (--vc-gpus VC=GPUS, repeatable; --add-nodes N; --no-overflow / --order as the live policy's flags) under
each --policy (hived = the live order, hived:<order> or an order such as fair_share, quota, fifo, private),
side by side per VC. --capacity VC --within 5m --target 0.9: the fewest GPUs VC needs for 90 % of its
jobs to start within 5 minutes, by replay.
"""


def add_arguments(p: Any) -> None:
    g = p.add_argument_group("replaying your own cluster (--history)")
    g.add_argument("--vc-gpus", dest="vc_sizes", action="append", default=[], metavar="VC=GPUS",
                   help="with --history: what if VC had GPUS guaranteed GPUs (nodes are added if needed)")
    g.add_argument("--add-nodes", type=int, default=0, metavar="N", help="with --history: what if N more nodes")
    g.add_argument("--capacity", default=None, metavar="VC",
                   help="with --history: the fewest GPUs VC needs for --target of its jobs to start within --within")
    g.add_argument("--within", default="5m", metavar="T", help="with --capacity: 5m, 2h, 90s (default 5m)")
    g.add_argument("--target", type=float, default=0.9, metavar="F", help="with --capacity: a fraction (default 0.9)")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _changes(args: Any) -> dict[str, Any] | None:
    vcs: dict[str, int] = {}
    for item in args.vc_sizes:
        vc, eq, n = item.partition("=")
        if not eq or not vc.strip() or not n.strip().isdigit():
            raise ValueError(f"--vc {item!r}: write VC=GPUS, e.g. --vc-gpus cv-101=12")
        vcs[vc.strip()] = int(n)
    changes: dict[str, Any] = {}
    if vcs:
        changes["vcs"] = vcs
    if args.add_nodes:
        if args.add_nodes < 0:
            raise ValueError(f"--add-nodes must be >= 0, got {args.add_nodes}")
        changes["nodes"] = args.add_nodes
    return changes or None


def _secs(s: float) -> str:
    from hive_scheduler.sim.replay import readable_seconds

    return readable_seconds(s)


def run_history(args: Any) -> int:
    from rich.console import Console
    from rich.table import Table

    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim import EventError
    from hive_scheduler.sim.cluster_changes import ChangeError
    from hive_scheduler.sim.history import load_history
    from hive_scheduler.sim.replay import LivePolicy, capacity_search, replay_history

    from ..durations import parse_duration
    from ..errors import BadRequest

    try:
        config = load_cluster_config(args.cluster)
    except (ValueError, OSError) as exc:
        return _fail(f"--cluster {args.cluster}: {exc}")
    try:
        history = load_history(args.history, config)
    except EventError as exc:
        return _fail(str(exc))
    live = LivePolicy(order=args.order, overflow=not args.no_overflow,
                      queueing="backfill" if args.backfill else args.queueing)
    policies = [p.strip() for p in (args.policy or "hived").split(",") if p.strip()]
    try:
        changes = _changes(args)
        within = parse_duration(args.within, "--within") if args.capacity else 300.0
        report = replay_history(history, config, live=live, changes=changes, policies=policies,
                                anomaly=False)
        answer = None
        if args.capacity:
            answer = capacity_search(history, config, args.capacity, within_s=within, fraction=args.target, live=live)
    except BadRequest as exc:
        return _fail(str(exc))
    except (ChangeError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        doc = {"history": report.history_text(), "check": {"ok": report.check.ok, "sentence": report.check.sentence(), "jobs": report.check.jobs,
                         "matched": report.check.matched},
               "scenarios": [sc.summary(within) for sc in report.scenarios],
               "effects": [report.effect(sc) for sc in report.scenarios[1:]]}
        if answer is not None:
            doc["capacity"] = {"vc": answer.vc, "gpus": answer.gpus, "within_s": answer.within_s,
                               "fraction": answer.fraction, "tried": answer.tried, "sentence": answer.sentence()}
        json.dump(doc, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    out = Console()
    table = Table(title=f"{args.history} replayed on {args.cluster}",
                  caption=f"waits per VC; 'in {_secs(within)}': jobs that started within {_secs(within)}")
    for column in ("scenario", "VC", "GPUs", "jobs", "average wait", "p90 wait", f"in {_secs(within)}"):
        table.add_column(column, justify="left" if column in ("scenario", "VC") else "right")
    for sc in report.scenarios:
        for vc, r in sc.summary(within)["by_vc"].items():
            table.add_row(sc.label, vc, str(r["guaranteed_gpus"] if r["guaranteed_gpus"] is not None else "-"),
                          str(r["jobs"]), _secs(r["avg_wait_s"]), _secs(r["p90_wait_s"]), f"{100 * r['within']:.0f} %")
    out.print(table)
    out.print(report.history_text(), markup=False)
    out.print(report.check.sentence(), markup=False)
    for sc in report.scenarios[1:]:
        out.print(report.effect(sc), markup=False)
    if answer is not None:
        out.print(answer.sentence(), markup=False)
    return 0
