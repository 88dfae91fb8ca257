"""``hive-lab simulate --trace X.trace [--throughputs F.json]``: the round-based simulator for Gavel's
traces and policies on a mixed cluster (``hive_scheduler.hetero``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing's own costs ~2.5 ms of each `hive-lab` start; type checkers read this as True
if TYPE_CHECKING:
    from typing import Any

HELP = """\
With a Gavel trace (--trace FILE.trace, or --throughputs given) the round-based simulator runs instead:
--cluster is a short form such as v100:8,p100:16,k80:24 or a HiveD config with one chain per GPU type
(its VCs each solved on their own GPUs), --policy / --order name Gavel's policies (fifo, fifo_perf,
gandiva, max_min_fairness[_perf], finish_time_fairness[_perf], min_total_duration[_perf],
max_sum_throughput_perf), --throughputs is Gavel's JSON (default: the copy shipped with hive-lab).
"""


def add_arguments(p: Any) -> None:
    g = p.add_argument_group("round-based simulator (Gavel traces; see docs/simulator.md)")
    g.add_argument("--throughputs", metavar="F.json",
                   help="Gavel's throughput file: job type x GPU type x scale factor -> steps/s (default: shipped copy)")
    g.add_argument("--round-length", type=float, default=360.0, metavar="S", help="round length in seconds (default 360, as Gavel)")
    g.add_argument("--restart-overhead", type=float, default=0.0, metavar="S",
                   help="seconds without progress charged at each resume and migration (default 0, as Gavel)")
    g.add_argument("--resolve-interval", type=float, default=1920.0, metavar="S",
                   help="solve the policy again at most every S seconds, on arrivals and completions (default 1920, as Gavel)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random choices (fifo's GPU type, gandiva's pairs; default 0)")
    g.add_argument("--vc", metavar="VC",
                   help="the VC of the trace's jobs (Gavel's format has none); default: the only VC, else each job to a VC "
                        "picked by a hash of its id, in proportion to the VCs' GPUs")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.throughputs) or bool(args.trace and args.trace.endswith(".trace"))


def _duration(s: float) -> str:
    return f"{s:,.0f} s ({s / 3600:,.2f} h)"


ROWS = [
    ("jobs", "jobs", str),
    ("makespan_s", "makespan", _duration),
    ("avg_jct_s", "JCT average", _duration),
    ("median_jct_s", "JCT median", _duration),
    ("p95_jct_s", "JCT p95", _duration),
    ("gpu_utilisation", "GPU utilisation", lambda v: f"{100 * v:.1f} %"),
    ("avg_rho", "finish-time fairness rho (mean)", lambda v: f"{v:.2f}"),
    ("max_rho", "finish-time fairness rho (max)", lambda v: f"{v:.2f}"),
    ("rounds", "rounds", str),
    ("allocations", "policy solves", str),
    ("pauses", "pauses", str),
    ("resumes", "resumes", str),
    ("migrations", "migrations", str),
    ("resizes", "resizes", str),
]


def assign_vcs(trace: list, cluster: Any, vc: str | None) -> list:
    """Put the trace's jobs in ``vc``, or the cluster's only VC, or spread them over the VCs by a SHA-256
    hash of the job id, in proportion to each VC's GPUs among the VCs with room for the job's gang
    (the event simulator fills empty VCs the same way)."""
    import dataclasses

    if vc is not None:
        if vc not in cluster.vcs:
            raise ValueError(f"--vc {vc}: not a VC of the cluster (VCs: {', '.join(cluster.vcs)})")
        return [dataclasses.replace(j, vc=vc) for j in trace]
    if len(cluster.vcs) == 1:
        only = next(iter(cluster.vcs))
        return [dataclasses.replace(j, vc=only) for j in trace]
    import hashlib  # here: a cluster of one VC (most runs) does not pay its import (~2 ms)

    out = []
    for j in trace:
        fits = [(name, sum(share.values())) for name, share in sorted(cluster.vcs.items())
                if any(n >= j.scale_factor for n in share.values())]
        if not fits:
            raise ValueError(f"job {j.job_id} needs {j.scale_factor} GPUs of one type and no VC has that many")
        h = int.from_bytes(hashlib.sha256(str(j.job_id).encode()).digest()[:8], "big") / 2**64
        total = sum(w for _, w in fits)
        acc = 0.0
        pick = fits[-1][0]
        for name, w in fits:
            acc += w / total
            if h < acc:
                pick = name
                break
        out.append(dataclasses.replace(j, vc=pick))
    return out


def run(args: argparse.Namespace) -> int:
    from hive_scheduler.hetero import (
        POLICIES, ClusterSpecError, SimulationError, ThroughputError, TraceError, load_gpu_cluster,
        load_throughputs, load_trace, simulate,
    )

    def fail(message: str) -> int:
        print(f"error: {message}", file=sys.stderr)
        return 2

    if args.events:
        return fail("--throughputs goes with --trace FILE.trace (Gavel's format), not --events")
    names = args.policy if args.policy is not None else args.order
    policies = [p.strip() for p in names.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if not policies or bad:
        return fail(f"--policy/--order: unknown {', '.join(bad) or 'empty list'}; with a Gavel trace choose from {', '.join(POLICIES)}")
    if len(set(policies)) != len(policies):
        return fail("--policy: a policy is named twice")
    if args.time_scale != 1.0:
        return fail("--time-scale applies to CSV traces only")
    try:
        cluster = load_gpu_cluster(args.cluster)
    except (ClusterSpecError, ValueError, OSError) as exc:
        return fail(f"--cluster {args.cluster}: {exc}")
    try:
        throughputs = load_throughputs(args.throughputs)
        trace = load_trace(args.trace)
    except (ThroughputError, TraceError) as exc:
        return fail(str(exc))
    try:
        trace = assign_vcs(trace, cluster, args.vc)
    except ValueError as exc:
        return fail(str(exc))
    results = {}
    for policy in policies:
        try:
            results[policy] = simulate(trace, throughputs, cluster, policy, round_s=args.round_length,
                                       restart_overhead=args.restart_overhead, seed=args.seed,
                                       min_resolve_interval=args.resolve_interval)
        except (SimulationError, ThroughputError) as exc:
            return fail(f"{policy}: {exc}")
    if args.json:
        doc = {
            "cluster": args.cluster,
            "gpus": cluster.gpus,
            "vcs": cluster.vcs,
            "source": args.trace,
            "throughputs": args.throughputs or "gavel (shipped)",
            "round_length": args.round_length,
            "restart_overhead": args.restart_overhead,
            "resolve_interval": args.resolve_interval,
            "seed": args.seed,
            "policies": {p: m.to_dict() for p, m in results.items()},
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    gpus = ", ".join(f"{n} {t}" for t, n in cluster.gpus.items())
    table = Table(title=f"{os.path.basename(args.trace)} on {gpus}, {args.round_length:g} s rounds")
    table.add_column("metric")
    for p in results:
        table.add_column(p, justify="right")
    for key, label, fmt in ROWS:
        table.add_row(label, *(fmt(getattr(m, key)) for m in results.values()))
    Console().print(table)
    return 0
