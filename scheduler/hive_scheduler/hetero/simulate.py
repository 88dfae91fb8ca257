"""The round-based simulator: Gavel's traces and throughputs, Gavel's policies, inside each VC.

Time advances in rounds (default 360 s). The policy is solved again only when jobs arrive or end
(at the next round boundary, and at most every ``min_resolve_interval`` seconds, 1,920 s as
Gavel, except that a strict policy (FIFO) is solved at once when the coming round would leave GPUs
idle that a job it has not placed could use: Gavel leaves them idle until the interval ends, but for
its first re-solve after time 0); in between, the round mechanism (:mod:`.rounds`) realises its
allocation. A round ends when its longest-running job's slice ends (as in Gavel's simulator), so a
round whose jobs all finish early is short. Each VC is simulated on its own GPUs only, with its own rounds:
HiveD's guarantee that a VC's GPUs are its own, whatever the order inside it.

A job runs whole steps: a slice of a round runs as many as fit in it (Gavel's simulator counts
``int(steps/s x round)`` steps a round), so a slice ends at its last whole step, and a job's last
slice at its last step. At each solve, every unit (job or packed pair) is charged its deficit: the
time it was owed on each type under the allocation that ends (fraction x time since that solve)
minus the time it got; equal priorities in the rounds are ranked by it (Gavel's deficits), so a unit
that lost the ties under one allocation wins them under the next.

A job that stops running between rounds is paused; one that starts again is resumed; one that runs
on another GPU type than last time has migrated. ``restart_overhead`` seconds of no progress are
charged at each resume and migration (Gavel's simulator charges none: default 0).

Vectors per GPU type are plain lists (a handful of numbers: numpy's import cost more than their
arithmetic); sums follow numpy's order (:mod:`.arith`), so the figures are those of the numpy version.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .arith import dot, fsum_np, mean_np
from .cluster import GpuCluster
from .metrics import HeteroMetrics, percentile
from .policies import PackedAllocation, Problem, make_policy
from .rounds import choose_round
from .throughputs import Throughputs
from .trace import TraceJob

DONE_EPS = 1e-6  # steps: a job with fewer left is finished (floating-point dust)
# Gavel's defaults: re-solve at most every 1,920 s (``minimum_time_between_allocation_resets``), and
# credit each job half a round on every type when the allocation is renewed, so that priorities are
# finite and ranked by allocation at first
MIN_RESOLVE_INTERVAL = 1920.0
RECEIVED_SEED = 0.5


class SimulationError(ValueError):
    pass


@dataclass
class _Job:
    spec: TraceJob
    thr: list[float]  # (k,) steps/s on each type of the VC's cluster
    remaining: float
    vc: str
    last_type: int | None = None  # type of its last slice
    ran_last_round: bool = False
    finish: float | None = None
    iso_time: float = 0.0


Unit = tuple[int, ...]  # the job ids that share GPUs in a slice: one job, or a packed pair
Row = list[float]  # one number per GPU type


def _type_order(gpu_types: list[str], jobs: Sequence[_Job]) -> list[int]:
    """Fastest type first (Gavel's fixed order V100, P100, K80), by mean steps/s over the trace."""
    k = len(gpu_types)
    total = [0.0] * k  # summed job by job (numpy's order along the jobs)
    for j in jobs:
        total = [a + b for a, b in zip(total, j.thr)]
    mean = [v / len(jobs) for v in total]
    return sorted(range(len(gpu_types)), key=lambda t: (-mean[t], gpu_types[t]))


Observer = Callable[[str, float, dict[Unit, int]], None]  # (vc, round start, unit -> GPU type index)


@dataclass
class _Run:
    jobs: dict[int, _Job]
    busy: float
    rounds: int
    allocations: int
    pauses: int
    resumes: int
    migrations: int


def simulate(
    trace: Sequence[TraceJob],
    throughputs: Throughputs,
    cluster: GpuCluster,
    policy: str,
    round_s: float = 360.0,
    restart_overhead: float = 0.0,
    seed: int = 0,
    min_resolve_interval: float = MIN_RESOLVE_INTERVAL,
    observer: Observer | None = None,
) -> HeteroMetrics:
    """Replay ``trace`` under ``policy``; each VC of ``cluster`` runs on its own GPUs, with its own rounds."""
    vcs = {j.vc for j in trace}
    missing = sorted(vcs - set(cluster.vcs))
    if missing:
        raise SimulationError(f"VC {missing[0]!r} of the trace is not in the cluster (VCs: {', '.join(cluster.vcs)})")
    for t in cluster.gpu_types:
        used = sum(share.get(t, 0) for share in cluster.vcs.values())
        if used > cluster.gpus[t]:
            raise SimulationError(f"the VCs hold {used} {t} GPUs, the cluster has {cluster.gpus[t]}")
    if not trace:
        raise SimulationError("no jobs")
    runs = []
    for vc in sorted(vcs):
        part = GpuCluster(dict(cluster.gpus), {vc: cluster.vcs[vc]})
        runs.append(_simulate_vc([j for j in trace if j.vc == vc], throughputs, part, policy, round_s,
                                 restart_overhead, seed, min_resolve_interval, observer))
    jobs = {jid: j for r in runs for jid, j in r.jobs.items()}
    jct = {jid: j.finish - j.spec.arrival_time for jid, j in sorted(jobs.items())}
    start = min(j.spec.arrival_time for j in jobs.values())
    makespan = max(j.finish for j in jobs.values())
    rho = [(j.finish - j.spec.arrival_time) / j.iso_time for j in jobs.values()]
    values = list(jct.values())
    span = max(makespan - start, 1e-12)
    return HeteroMetrics(
        jobs=len(jobs), finished=len(jobs), makespan_s=makespan, avg_jct_s=mean_np(values),
        median_jct_s=percentile(values, 0.5), p95_jct_s=percentile(values, 0.95),
        gpu_utilisation=sum(r.busy for r in runs) / (float(sum(cluster.gpus.values())) * span),
        avg_rho=mean_np(rho), max_rho=float(max(rho)),
        rounds=sum(r.rounds for r in runs), allocations=sum(r.allocations for r in runs),
        pauses=sum(r.pauses for r in runs), resumes=sum(r.resumes for r in runs),
        migrations=sum(r.migrations for r in runs), resizes=0, restart_overhead_s=restart_overhead, jct_s=jct,
    )


def _simulate_vc(
    trace: Sequence[TraceJob],
    throughputs: Throughputs,
    cluster: GpuCluster,
    policy: str,
    round_s: float,
    restart_overhead: float,
    seed: int,
    min_resolve_interval: float,
    observer: Observer | None,
) -> _Run:
    if round_s <= 0:
        raise SimulationError(f"round length must be > 0 seconds, got {round_s}")
    if restart_overhead < 0 or restart_overhead >= round_s:
        raise SimulationError(f"restart overhead must be >= 0 and shorter than a round ({round_s} s), got {restart_overhead}")
    if min_resolve_interval < 0:
        raise SimulationError(f"re-solve interval must be >= 0 seconds, got {min_resolve_interval}")
    gpu_types = [throughputs.gpu_type(t) for t in cluster.gpu_types]
    k = len(gpu_types)
    vc_gpus = {vc: [int(share.get(t, 0)) for t in cluster.gpu_types] for vc, share in cluster.vcs.items()}
    jobs: dict[int, _Job] = {}
    for spec in trace:
        if spec.vc not in vc_gpus:
            raise SimulationError(f"job {spec.job_id}: VC {spec.vc!r} is not in the cluster (VCs: {', '.join(vc_gpus)})")
        thr = [float(throughputs.get(spec.job_type, spec.scale_factor, t)) for t in gpu_types]
        if not any(g >= spec.scale_factor and v > 0 for g, v in zip(vc_gpus[spec.vc], thr)):
            raise SimulationError(f"job {spec.job_id} ({spec.job_type}, {spec.scale_factor} GPUs) fits on no GPU type "
                                  f"of VC {spec.vc} ({dict(zip(cluster.gpu_types, vc_gpus[spec.vc]))})")
        jobs[spec.job_id] = _Job(spec, thr, float(spec.total_steps), spec.vc)
    if not jobs:
        raise SimulationError("no jobs")

    pair_cache: dict[Unit, list[Row]] = {}

    def unit_throughput(unit: Unit) -> list[Row]:
        """(len(unit), k) steps/s of each job of the unit while it runs (co-located for a pair; 0 if unmeasured)."""
        if len(unit) == 1:
            return [jobs[unit[0]].thr]
        got = pair_cache.get(unit)
        if got is None:
            a, b = (jobs[u].spec for u in unit)
            got = [[0.0] * k, [0.0] * k]
            for t, gpu in enumerate(gpu_types):
                both = throughputs.pair((a.job_type, a.scale_factor), (b.job_type, b.scale_factor), gpu)
                if both is not None:
                    got[0][t], got[1][t] = both
            pair_cache[unit] = got
        return got

    rates_cache: dict[Unit, list[list[float]]] = {}

    def rates_on(unit: Unit, t: int) -> list[float]:
        """Steps/s of each job of the unit on type t (the hot loop)."""
        got = rates_cache.get(unit)
        if got is None:
            got = rates_cache[unit] = [list(col) for col in zip(*unit_throughput(unit))]
        return got[t]

    usable_cache: dict[Unit, Row] = {}

    def usable_on(unit: Unit) -> Row:
        """(k,) > 0 where every job of the unit progresses."""
        got = usable_cache.get(unit)
        if got is None:
            got = usable_cache[unit] = [min(col) for col in zip(*unit_throughput(unit))]
        return got

    def pair_throughput(a: int, b: int) -> list[Row]:
        """(k, 2): the pair's steps/s on each type, the lower job id's first."""
        return [list(col) for col in zip(*unit_throughput((a, b) if a < b else (b, a)))]

    policies = {vc: make_policy(policy, seed) for vc in sorted(vc_gpus)}
    shuffle_types = next(iter(policies.values())).shuffle_types
    strict = next(iter(policies.values())).strict
    fixed_order = _type_order(gpu_types, list(jobs.values()))
    shuffler = random.Random(seed + 5)

    pending = sorted(jobs.values(), key=lambda j: (j.spec.arrival_time, j.spec.job_id))
    nxt = 0
    active: dict[str, dict[int, _Job]] = {vc: {} for vc in vc_gpus}  # by job id, in arrival order
    allocation: dict[str, dict[Unit, Row]] = {}  # vc -> unit -> time fractions per type
    received: dict[str, dict[Unit, Row]] = {vc: {} for vc in vc_gpus}  # seconds per type since the solve
    deficit: dict[str, dict[Unit, Row]] = {vc: {} for vc in vc_gpus}  # seconds owed per type, all solves
    solved_at: dict[str, float] = {}
    zero = [0.0] * k  # never changed in place
    seed_row = [RECEIVED_SEED * round_s] * k  # what a unit counts as received before it first runs (never changed)
    stale = set(vc_gpus)
    layout: dict[str, tuple | None] = {}  # vc -> the round mechanism's view of the allocation, until it changes
    now = pending[0].spec.arrival_time
    busy = 0.0
    rounds = allocations = pauses = resumes = migrations = 0
    last_solve = float("-inf")

    while nxt < len(pending) or any(active.values()):
        while nxt < len(pending) and pending[nxt].spec.arrival_time <= now:
            job = pending[nxt]
            nxt += 1
            active[job.vc][job.spec.job_id] = job
            layout[job.vc] = None
            stale.add(job.vc)
            n = len(active[job.vc])  # equal share at arrival, for rho
            share = [g / (n * job.spec.scale_factor) for g in vc_gpus[job.vc]]
            scale = max(fsum_np(share), 1.0)
            share = [v / scale for v in share]
            job.iso_time = job.spec.total_steps / max(dot(job.thr, share), 1e-12)
        if not any(active.values()):
            now = pending[nxt].spec.arrival_time
            continue
        due = now - last_solve >= min_resolve_interval or any(bool(active[vc]) and vc not in allocation for vc in stale)
        if stale and due:
            last_solve = now
            for vc in sorted(stale):
                act = list(active[vc].values())
                if not act:
                    allocation.pop(vc, None)
                    continue
                problem = Problem(
                    job_ids=[j.spec.job_id for j in act],
                    gpu_types=gpu_types,
                    gpus=vc_gpus[vc],
                    throughput=[j.thr for j in act],
                    scale_factor=[j.spec.scale_factor for j in act],
                    remaining_steps=[j.remaining for j in act],
                    priority_weight=[j.spec.priority_weight for j in act],
                    time_since_start=[now - j.spec.arrival_time for j in act],
                    job_keys=[(j.spec.job_type, j.spec.scale_factor) for j in act],
                    pair_throughput=pair_throughput,
                )
                _charge_deficits(deficit[vc], allocation.get(vc, {}), received[vc], active[vc], seed_row,
                                 now - solved_at.get(vc, now))
                solved_at[vc] = now
                x = policies[vc].allocate(problem)
                if isinstance(x, PackedAllocation):
                    allocation[vc] = {tuple(sorted(u)): x.x[i] for i, u in enumerate(x.units)}
                else:
                    allocation[vc] = {(j.spec.job_id,): x[i] for i, j in enumerate(act)}
                allocations += 1
                received[vc] = {u: [RECEIVED_SEED * round_s] * k for u in allocation[vc]}
                layout[vc] = None
            stale.clear()

        order = shuffler.sample(fixed_order, k) if shuffle_types else fixed_order
        slices: list[tuple[Unit, int]] = []
        rounds_by_vc: dict[str, dict[Unit, int]] = {}
        for vc in sorted(active):
            act = active[vc]
            if not act:
                continue
            # units of the allocation whose jobs are all still here. A pair that lost a job is gone
            # until the next solve, and its share with it: the other job has only its own share
            # (none while it was packed), as in Gavel's simulator. Every job is also a unit of its
            # own, so that jobs that arrived since the solve, or whose pair cannot run somewhere, use
            # left-over GPUs
            if layout.get(vc) is None:
                rows: dict[Unit, Row] = {(jid,): zero for jid in act}
                for unit, row in allocation.get(vc, {}).items():
                    if all(u in act for u in unit):
                        rows[unit] = [a + b for a, b in zip(rows[unit], row)] if unit in rows else row
                units = sorted(rows)
                owed = deficit[vc]
                layout[vc] = (units, [rows[u] for u in units], [usable_on(u) for u in units],
                              [act[u[0]].spec.scale_factor for u in units],
                              [owed.get(u, zero) for u in units])
            units, alloc_matrix, usable, unit_sf, unit_deficit = layout[vc]
            seeds = received[vc]
            chosen = choose_round(units, alloc_matrix, [seeds.get(u, seed_row) for u in units], usable,
                                  unit_sf, vc_gpus[vc], order, strict, unit_deficit)
            rounds_by_vc[vc] = chosen
        if strict and stale and any(_idle_while_waiting(chosen, layout[vc], vc_gpus[vc], allocation.get(vc, {}))
                                    for vc, chosen in rounds_by_vc.items() if vc in stale):
            # a strict policy never runs a job it has not allocated: rather than leave GPUs idle until
            # the re-solve interval ends while an arrival waits, solve now (Gavel does so only until
            # its first re-solve after time 0)
            last_solve = float("-inf")
            continue
        for vc, chosen in rounds_by_vc.items():
            if observer is not None:
                observer(vc, now, dict(chosen))
            running = {}
            for unit, t in chosen.items():
                for u in unit:
                    running[u] = t
                slices.append((unit, t))
            for jid, j in active[vc].items():
                t = running.get(jid)
                if t is None:
                    if j.ran_last_round:
                        pauses += 1
                    j.ran_last_round = False
                    continue
                migrations += j.last_type is not None and j.last_type != t
                resumes += j.last_type is not None and not j.ran_last_round
        if not slices:
            if stale:  # idle GPUs and jobs waiting for a solve: solve now (Gavel forces a reset too)
                last_solve = float("-inf")
                continue
            if nxt >= len(pending):
                raise SimulationError("no active job can run (check GPUs per type and scale factors)")
            now = max(now, pending[nxt].spec.arrival_time)
            continue
        rounds += 1
        length = 0.0
        finished: list[_Job] = []
        for unit, t in slices:
            thr = rates_on(unit, t)
            slice_len = 0.0
            for u, rate in zip(unit, thr):
                j = jobs[u]
                restarted = j.last_type is not None and (j.last_type != t or not j.ran_last_round)
                overhead = restart_overhead if restarted else 0.0
                steps = min(_whole_steps(rate * (round_s - overhead)), j.remaining)
                run = overhead + steps / rate
                j.remaining -= steps
                j.ran_last_round = True
                j.last_type = t
                slice_len = max(slice_len, run)
                if j.remaining <= DONE_EPS:
                    j.remaining = 0.0
                    j.finish = now + run
                    finished.append(j)
            vc = jobs[unit[0]].vc
            got = received[vc].get(unit)
            if got is None:
                got = received[vc][unit] = [RECEIVED_SEED * round_s] * k
            got[t] += slice_len
            busy += slice_len * jobs[unit[0]].spec.scale_factor
            length = max(length, slice_len)
        for j in finished:
            del active[j.vc][j.spec.job_id]
            layout[j.vc] = None
            j.ran_last_round = False
            stale.add(j.vc)
        now += length

    return _Run(jobs, busy, rounds, allocations, pauses, resumes, migrations)


def _idle_while_waiting(chosen: dict[Unit, int], layout: tuple, gpus: list[int],
                        allocation: dict[Unit, Row]) -> bool:
    """True when the round leaves GPUs of some type idle that a job the allocation has not placed
    (it arrived since the solve, or queued behind jobs that have ended since) could use: its gang
    fits in them and it progresses there."""
    units, _, usable, unit_sf, _ = layout
    free = [int(g) for g in gpus]
    for unit, t in chosen.items():
        free[t] -= int(unit_sf[units.index(unit)])
    if not any(f > 0 for f in free):
        return False
    placed = {u for unit, row in allocation.items() if fsum_np(row) > 0 for u in unit}
    for i, unit in enumerate(units):
        if len(unit) == 1 and unit[0] not in placed and any(
                use > 0 and f >= unit_sf[i] for use, f in zip(usable[i], free)):
            return True
    return False


def _whole_steps(fit: float) -> float:
    """Steps a slice runs when ``fit`` steps fit in it: the whole ones (Gavel's ``int(throughput x
    round)``), or all of ``fit`` where not even one does (a step longer than a round still progresses)."""
    return float(math.floor(fit)) if fit >= 1.0 else fit


def _charge_deficits(
    owed: dict[Unit, Row],
    allocation: dict[Unit, Row],
    received: dict[Unit, Row],
    active: dict[int, _Job],
    seed_row: Row,
    elapsed: float,
) -> None:
    """Add to each unit's deficit what ``allocation`` owed it over the ``elapsed`` seconds since it was
    solved (fraction x elapsed, per type) minus what it received (``received`` less the seed every
    unit is credited with at a solve); units with a job that has finished are forgotten (Gavel's
    ``_reset_time_run_so_far``)."""
    for unit in set(allocation) | set(received) | set(owed):
        if not all(u in active for u in unit):
            owed.pop(unit, None)
            continue
        was = owed.get(unit)
        got = received.get(unit)
        should = allocation.get(unit)
        owed[unit] = [(w + s) - g for w, s, g in zip(
            was if was is not None else (0.0,) * len(seed_row),
            [a * elapsed for a in should] if should is not None else (0.0,) * len(seed_row),
            [r - z for r, z in zip(got, seed_row)] if got is not None else (0.0,) * len(seed_row))]
