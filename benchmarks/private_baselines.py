"""The sharing anomaly of a policy against both valid private baselines (issue 41).

    .venv/bin/python benchmarks/gen_philly_trace.py --jobs 6000 --seed 7 --jobs-per-day 0 --out /tmp/p6k-7.csv
    .venv/bin/python benchmarks/private_baselines.py --trace /tmp/p6k-7.csv --time-scale 0.03 [--queueing strict]

On a short-form built-in model (``philly`` by default) it replays the trace with ``hived`` (the defaults)
and ``quota``, and measures each one's anomaly (job-time and jobs that waited longer) against:

- ``derived``: ``--policy private`` (the private clusters ``sim/private.py`` derives from the shared config);
- ``written``: each VC alone on its own cells written as a short-form config, as a user would
  (``nodes: 64, racks: 4, vcs: {6214e9: 512}``), its jobs replayed there with ``hived`` (the defaults).

It prints one JSON line: mean queueing of each policy and baseline, the anomalies, and how many jobs start
at other instants on the two baselines (0: they agree job by job), and the longest wait of a gang (a job
of 8 GPUs or more: the one a starvation rule protects). ``--private-only`` replays only the
baselines (to compare queueing rules). ``--starvation`` picks the rule for a job overtaken for an hour
(the core's ``starvation_after``), in every scheduler of the run, baselines included: ``reserve`` (the
default since issue 38: it reserves the cells it will start in), ``hold`` (before: it holds back every job
behind it in its VC) or ``never`` (no anti-starvation rule: ``starvation_after=None``). Only VCs made of
whole racks, or whole nodes in a model without
racks, can be written as a short form; others are reported and left out of ``written``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from hive_scheduler import Scheduler, load_cluster_config
from hive_scheduler.builtin_models import _SHORT
from hive_scheduler.shortform import expand_short_form
from hive_scheduler.sim import simulate
from hive_scheduler.sim.trace import load_trace


def written_config(model: dict, vc: str) -> dict | None:
    """VC ``vc`` of the short-form ``model`` alone on its own cells, written as a short form (None: its
    cells are not whole racks, or whole nodes in a model without racks)."""
    gpn = model.get("gpus_per_node", 8)
    gpus = model["vcs"][vc]
    if gpus % gpn:
        return None
    nodes = gpus // gpn
    short = {k: model[k] for k in ("gpus_per_node", "gpu_type", "levels", "cpus_per_node", "memory_mb_per_node")
             if k in model}
    short.update(nodes=nodes, vcs={vc: gpus})
    racks = model.get("racks")
    if racks:
        per_rack = model["nodes"] // racks
        if nodes % per_rack == 0:
            short["racks"] = nodes // per_rack
        elif nodes >= per_rack:
            return None  # (racks and loose nodes: the short form has no such mix)
    return expand_short_form(short)


def starts(result) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in result.decisions:
        if d["event"] == "started":
            out.setdefault(d["job"], d["t"])
    return out


def anomaly(waits: dict[str, float], reference: dict[str, float]) -> tuple[float, int]:
    extra = [w - reference[j] for j, w in waits.items() if j in reference and w > reference[j] + 1e-9]
    return sum(extra), len(extra)


def use_starvation_rule(rule: str) -> None:
    """Make every ``Scheduler`` this process builds (the simulator's and the baselines') use ``rule``."""
    if rule == "reserve":
        return
    init = Scheduler.__init__

    def with_rule(self, *args, **kwargs):
        if rule == "hold":
            kwargs["starvation_hold"] = True
        elif kwargs.get("starvation_after", 3600.0) is not None:  # "never" (the estimates' twins keep theirs)
            kwargs["starvation_after"] = None
        init(self, *args, **kwargs)

    Scheduler.__init__ = with_rule


def longest_gang_wait(result, events) -> float:
    gangs = {e.job for e in events if sum(t.count * t.gpus for t in e.tasks) >= 8}
    return max((w for j, w in result.metrics.waits.items() if j in gangs), default=0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--model", default="philly", choices=sorted(_SHORT))
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--queueing", default="skip", choices=("skip", "strict", "backfill"))
    ap.add_argument("--time-limits", type=float, default=None, help="time_limit_s = F x duration (backfill)")
    ap.add_argument("--private-only", action="store_true")
    ap.add_argument("--starvation", default="reserve", choices=("reserve", "hold", "never"))
    args = ap.parse_args(argv)
    use_starvation_rule(args.starvation)
    t0 = time.perf_counter()
    model = _SHORT[args.model]
    cfg = load_cluster_config(args.model)
    events = load_trace(args.trace, cfg, time_scale=args.time_scale, time_limits=args.time_limits)
    q = args.queueing
    derived = simulate(cfg, events, "private", anomaly=False, queueing=q)
    written_waits: dict[str, float] = {}
    written_starts: dict[str, float] = {}
    left_out = []
    for vc in sorted(model["vcs"]):
        own = written_config(model, vc)
        mine = [e for e in events if e.vc == vc]
        if own is None:
            left_out.append(vc)
            continue
        if mine:
            r = simulate(own, mine, "hived", anomaly=False, queueing=q)
            written_waits.update(r.metrics.waits)
            written_starts.update(starts(r))
    d_starts = starts(derived)
    out = {"trace": args.trace, "time_scale": args.time_scale, "queueing": q, "starvation": args.starvation,
           "jobs": len(events), "private_avg_queue_s": round(derived.metrics.avg_queue_s, 1),
           "private_longest_gang_wait_s": round(longest_gang_wait(derived, events)),
           "baselines_differ_jobs": sum(1 for j, t in written_starts.items() if d_starts.get(j) != t),
           "written_left_out": left_out}
    if not args.private_only:
        for policy in ("hived", "quota"):
            r = simulate(cfg, events, policy, private=derived, queueing=q)
            m = r.metrics
            vs_written = anomaly(m.waits, written_waits)
            out[policy] = {"avg_queue_s": round(m.avg_queue_s, 1), "p95_queue_s": round(m.p95_queue_s, 1),
                           "anomaly_derived_h": round(m.sharing_anomaly_s / 3600, 2),
                           "anomaly_derived_jobs": m.sharing_anomaly_jobs,
                           "anomaly_written_h": round(vs_written[0] / 3600, 2), "anomaly_written_jobs": vs_written[1],
                           "preemptions": m.preemptions, "longest_gang_wait_s": round(longest_gang_wait(r, events))}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
