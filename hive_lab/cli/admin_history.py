"""``hive-lab admin history``: the cluster's jobs as a trace the simulator replays (``GET history``).

    hive-lab admin history --since 7d --out week.csv            also writes week.cluster.json (the live cluster)
    hive-lab simulate --history week.csv --cluster week.cluster.json --vc-gpus cv-101=12

Owners are pseudonymised (user-001, ...) unless --real-names. Admins only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ._common import add_server_args, client_from, reports_errors


def register_history(sub) -> None:
    h = sub.add_parser("history", help="export the cluster's jobs as a trace for hive-lab simulate --history",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("--since", default="7d", help="7d, 24h, 90m, or an ISO date (UTC), e.g. 2026-11-01 (default: 7d)")
    h.add_argument("--out", default=None, metavar="WEEK.csv", help="write the CSV here (default: standard output)")
    h.add_argument("--cluster-out", default=None, metavar="CLUSTER.json",
                   help="write the live cluster model here (default with --out: <stem>.cluster.json)")
    h.add_argument("--real-names", action="store_true", help="owners' real names instead of pseudonyms")
    add_server_args(h, json_output=False)
    h.set_defaults(func=run_history)


def cluster_path(out: str | None, cluster_out: str | None) -> str | None:
    if cluster_out:
        return cluster_out
    return f"{os.path.splitext(out)[0]}.cluster.json" if out else None


def policy_flags(policy: dict) -> str:
    """The ``hive-lab simulate`` flags that replay under the live policy."""
    flags = [f"--order {policy.get('order', 'fifo')}"]
    if not policy.get("overflow", True):
        flags.append("--no-overflow")
    if policy.get("queueing", "skip") != "skip":
        flags.append(f"--queueing {policy['queueing']}")
    return " ".join(flags)


@reports_errors
def run_history(args) -> int:
    from hive_scheduler.sim.history import write_history

    report = client_from(args).history(since=args.since, real_names=args.real_names)
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            write_history(report["jobs"], fh)
    else:
        write_history(report["jobs"], sys.stdout)
    cpath = cluster_path(args.out, args.cluster_out)
    if cpath:
        with open(cpath, "w", encoding="utf-8") as fh:
            json.dump(report["cluster"], fh, indent=1)
    if args.out:
        policy = report.get("policy") or {}
        print(f"{len(report['jobs'])} jobs from {report['since']} to {report['until']} -> {args.out}"
              + (f"; live cluster -> {cpath}" if cpath else ""), file=sys.stderr)
        if policy.get("note"):
            print(f"note: {policy['note']}", file=sys.stderr)
        print(f"replay: hive-lab simulate --history {args.out} --cluster {cpath} {policy_flags(policy)}",
              file=sys.stderr)
    return 0
