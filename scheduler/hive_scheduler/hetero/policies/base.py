"""What a heterogeneity-aware policy sees and returns.

A policy gets a :class:`Problem` (the active jobs of one VC, its GPUs per type, a throughput matrix)
and returns an allocation ``X`` (jobs x GPU types): ``X[i, j]`` is the fraction of wall-clock time
job ``i`` should run on ``scale_factor[i]`` GPUs of type ``j``. Every policy's ``X`` satisfies
Gavel's base constraints: ``X >= 0``, each row sums to <= 1, and for each type
``sum_i scale_factor[i] * X[i, j] <= gpus[j]``.

Vectors and matrices are plain sequences (lists of numbers, lists of rows; numpy arrays work too) and
allocations are lists of rows: the simulator's policies run without numpy, and the LP policies
hand HiGHS plain lists (:mod:`.lp`). Sums and dot products follow numpy's order (:mod:`..arith`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..arith import dot, fsum_np

Vector = Sequence[float]
Matrix = Sequence[Sequence[float]]  # rows
Allocation = list[list[float]]  # jobs (or units) x GPU types


@dataclass
class Problem:
    job_ids: list[int]
    gpu_types: list[str]
    gpus: Sequence[int]  # (k,) GPUs per type
    throughput: Matrix  # (n, k) steps/s of each job on its scale_factor GPUs of each type
    scale_factor: Sequence[int]  # (n,)
    remaining_steps: Vector  # (n,)
    priority_weight: Vector  # (n,)
    time_since_start: Vector  # (n,) seconds since arrival
    job_keys: list[tuple[str, int]] = field(default_factory=list)  # (job type, scale factor)
    # (k, 2) steps/s of jobs a and b (ids) sharing the same GPUs, zeros where not measured; for packing
    pair_throughput: Callable[[int, int], Matrix] | None = None

    @property
    def n(self) -> int:
        return len(self.job_ids)

    @property
    def k(self) -> int:
        return len(self.gpu_types)


@dataclass
class PackedAllocation:
    """An allocation over units: ``units[u]`` is one job id or a pair packed on the same GPUs
    (same scale factor); ``x[u, j]`` its time fraction on type j. A job's fractions over the units
    it belongs to sum to <= 1."""

    units: list[tuple[int, ...]]
    x: Allocation


class Policy:
    """A named policy. ``perf``: heterogeneity-aware (Gavel's ``*_perf``)."""

    name: str = ""
    perf: bool = True
    # Gavel shuffles the order in which the round mechanism fills GPU types for agnostic policies
    # without packing; ``*_perf`` and packing policies (gandiva) fill the fastest type first
    shuffle_types: bool = False
    # FIFO policies never run a job with a zero allocation; the others fill left-over GPUs with them
    strict: bool = False

    def allocate(self, problem: Problem) -> Allocation | PackedAllocation:  # pragma: no cover - interface
        raise NotImplementedError


def agnostic(throughput: Matrix) -> Allocation:
    """What a heterogeneity-agnostic policy believes: each job runs on every type as on its fastest
    (Gavel uses V100, the fastest type of its cluster)."""
    return [[max(row)] * len(row) for row in throughput]


def pooled(problem: Problem, throughput: Matrix) -> Problem:
    """The cluster as a type-blind policy sees it: one pool of all GPUs, each job at ``throughput[:, 0]``."""
    return replace(problem, gpu_types=["any"], gpus=[sum(problem.gpus)], throughput=[[row[0]] for row in throughput])


def spread(pool_allocation: Matrix, problem: Problem) -> Allocation:
    """A type-blind allocation (jobs x 1) spread over the types in proportion to their GPUs: each job
    gets the same mix of types, and every type's capacity holds because the pool's does."""
    total = sum(problem.gpus)
    mix = [g / total for g in problem.gpus]
    return [[row[0] * m for m in mix] for row in pool_allocation]


def equal_share(problem: Problem) -> Allocation:
    """Gavel's isolated allocation: each job gets 1/n of every type's GPUs, scaled down (never up, unlike
    Gavel's, so that it stays within the GPUs) to a row sum of at most 1."""
    n = problem.n
    each = [g / n for g in problem.gpus]
    x = [[e / sf for e in each] for sf in problem.scale_factor]
    scale = max(max(fsum_np(row) for row in x), 1.0)
    return [[v / scale for v in row] for row in x]


def isolated_throughput(problem: Problem, throughput: Matrix | None = None) -> list[float]:
    t = problem.throughput if throughput is None else throughput
    return [fsum_np([a * b for a, b in zip(row, share)]) for row, share in zip(t, equal_share(problem))]


def fill_greedily(x: list[float], sf: Vector, gpus: float, value: Vector) -> list[float]:
    """The closed forms' second phase, a fractional knapsack: the GPUs ``x`` (time fractions, each job
    ``sf`` GPUs) leaves of ``gpus`` go to the jobs of the largest ``value`` per GPU first, each up to all
    of its time (ties: the first job). ``x`` is changed in place and returned."""
    left = gpus - dot(sf, x)
    for i in sorted(range(len(x)), key=lambda i: -value[i]):
        if left <= 0:
            break
        add = min(1.0 - x[i], left / sf[i])
        x[i] += add
        left -= add * sf[i]
    return x
