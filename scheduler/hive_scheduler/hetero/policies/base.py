"""What a heterogeneity-aware policy sees and returns.

A policy gets a :class:`Problem` (the active jobs of one VC, its GPUs per type, a throughput matrix)
and returns an allocation ``X`` (jobs x GPU types): ``X[i, j]`` is the fraction of wall-clock time
job ``i`` should run on ``scale_factor[i]`` GPUs of type ``j``. Every policy's ``X`` satisfies
Gavel's base constraints: ``X >= 0``, each row sums to <= 1, and for each type
``sum_i scale_factor[i] * X[i, j] <= gpus[j]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class Problem:
    job_ids: list[int]
    gpu_types: list[str]
    gpus: np.ndarray  # (k,) GPUs per type
    throughput: np.ndarray  # (n, k) steps/s of each job on its scale_factor GPUs of each type
    scale_factor: np.ndarray  # (n,)
    remaining_steps: np.ndarray  # (n,)
    priority_weight: np.ndarray  # (n,)
    time_since_start: np.ndarray  # (n,) seconds since arrival
    job_keys: list[tuple[str, int]] = field(default_factory=list)  # (job type, scale factor)
    # (k, 2) steps/s of jobs a and b (ids) sharing the same GPUs, zeros where not measured; for packing
    pair_throughput: Callable[[int, int], np.ndarray] | None = None

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
    x: np.ndarray


class Policy:
    """A named policy. ``perf``: heterogeneity-aware (Gavel's ``*_perf``)."""

    name: str = ""
    perf: bool = True
    # Gavel shuffles the order in which the round mechanism fills GPU types for agnostic policies
    # without packing; ``*_perf`` and packing policies (gandiva) fill the fastest type first
    shuffle_types: bool = False
    # FIFO policies never run a job with a zero allocation; the others fill left-over GPUs with them
    strict: bool = False

    def allocate(self, problem: Problem) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


def agnostic(throughput: np.ndarray) -> np.ndarray:
    """What a heterogeneity-agnostic policy believes: each job runs on every type as on its fastest
    (Gavel uses V100, the fastest type of its cluster)."""
    return np.repeat(throughput.max(axis=1, keepdims=True), throughput.shape[1], axis=1)


def pooled(problem: Problem, throughput: np.ndarray) -> Problem:
    """The cluster as a type-blind policy sees it: one pool of all GPUs, each job at ``throughput[:, 0]``."""
    return replace(problem, gpu_types=["any"], gpus=np.array([problem.gpus.sum()]), throughput=throughput[:, :1])


def spread(pool_allocation: np.ndarray, problem: Problem) -> np.ndarray:
    """A type-blind allocation (jobs x 1) spread over the types in proportion to their GPUs: each job
    gets the same mix of types, and every type's capacity holds because the pool's does."""
    return pool_allocation[:, :1] * (problem.gpus / problem.gpus.sum())[None, :]


def equal_share(problem: Problem) -> np.ndarray:
    """Gavel's isolated allocation: each job gets 1/n of every type's GPUs, scaled down (never up, unlike
    Gavel's, so that it stays within the GPUs) to a row sum of at most 1."""
    n = problem.n
    x = np.tile(problem.gpus / n, (n, 1)) / problem.scale_factor[:, None]
    return x / max(x.sum(axis=1).max(), 1.0)


def isolated_throughput(problem: Problem, throughput: np.ndarray | None = None) -> np.ndarray:
    t = problem.throughput if throughput is None else throughput
    return (t * equal_share(problem)).sum(axis=1)


def fill_greedily(x: np.ndarray, sf: np.ndarray, gpus: float, value: np.ndarray) -> np.ndarray:
    """The closed forms' second phase, a fractional knapsack: the GPUs ``x`` (time fractions, each job
    ``sf`` GPUs) leaves of ``gpus`` go to the jobs of the largest ``value`` per GPU first, each up to all
    of its time (ties: the first job). ``x`` is changed in place and returned."""
    left = gpus - float(sf @ x)
    for i in np.argsort(-value, kind="stable").tolist():
        if left <= 0:
            break
        add = min(1.0 - x[i], left / sf[i])
        x[i] += add
        left -= add * sf[i]
    return x
