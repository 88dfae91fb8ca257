"""``max_min_fairness_perf`` and ``max_min_fairness`` (LAS): maximise the least normalised throughput.

As Gavel: job i's throughput under X, times its scale factor, over its priority weight and over its
throughput on an equal 1/n share of the cluster; the smallest of these is maximised. A second LP then
keeps that minimum and maximises the sum, so GPUs the bottleneck cannot use are not left idle.

The agnostic variant plans on one pool of GPUs, where the LP has a closed form (water filling): job
i's normalised throughput is ``w_i x_i``, so the best least value t gives each job ``min(1, t / w_i)``
and t is where the pool is full, ``sum_i sf_i min(1, t / w_i) = GPUs`` (or every job gets all of
its time when they all fit); the second phase is a fractional knapsack. No LP, no solver to load.
"""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem, agnostic, equal_share, fill_greedily, isolated_throughput, pooled, spread

PHASE2_SLACK = 1e-6  # phase 2 keeps each job within this fraction of the best least share


def max_min_allocation(problem: Problem, throughput: np.ndarray) -> np.ndarray:
    n, k = problem.n, problem.k
    iso = np.maximum(isolated_throughput(problem, throughput), 1e-12)
    w = throughput * problem.scale_factor[:, None] / (problem.priority_weight[:, None] * iso[:, None])
    a0, b0 = lp.base_rows(problem, 1)
    rows = lp.per_job_rows(problem, w, 0, np.ones(n), 1)  # t - sum_j w_ij x_ij <= 0
    a = np.vstack([a0, rows])
    b = np.concatenate([b0, np.zeros(n)])
    c = np.zeros(n * k + 1)
    c[-1] = -1.0
    v = lp.solve(c, a, b, *lp.bounds(problem, [np.inf]))
    if v is None:
        raise lp.SolveError("max-min fairness LP infeasible")
    t_star = v[-1]
    # phase 2: keep everyone at >= t* (less a hair), maximise the total normalised throughput
    b2 = np.concatenate([b0, np.full(n, -t_star * (1 - PHASE2_SLACK))])
    rows2 = lp.per_job_rows(problem, w, None, None, 0)
    a2 = np.vstack([lp.base_rows(problem, 0)[0], rows2])
    v2 = lp.solve(-w.reshape(-1), a2, b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MaxMinFairnessPerf(Policy):
    name = "max_min_fairness_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        return max_min_allocation(problem, problem.throughput)


def water_fill(weight: np.ndarray, scale_factor: np.ndarray, gpus: float) -> np.ndarray:
    """Time fractions ``x`` maximising ``min_i weight_i x_i`` s.t. ``0 <= x <= 1`` and
    ``sum_i scale_factor_i x_i <= gpus`` (each job's share of one pool), by water filling."""
    sf = scale_factor.astype(float)
    if sf.sum() <= gpus:
        return np.ones(len(weight))
    # raise t; job i stops rising at t = w_i (x_i = 1). Between those points the pool used is
    # sum_{capped} sf_i + t * sum_{rising} sf_i / w_i: find the piece where it reaches the GPUs
    order = np.argsort(weight, kind="stable")
    w, s = weight[order], sf[order]
    capped = np.concatenate([[0.0], np.cumsum(s)])[:-1]  # GPUs of the jobs below position i (all capped)
    rising = np.cumsum((s / w)[::-1])[::-1]  # sum of sf/w over position i and up
    t = (gpus - capped) / rising  # the level if the jobs from position i up are still rising
    lower = np.concatenate([[0.0], w[:-1]])
    piece = np.flatnonzero((t >= lower - 1e-12) & (t <= w + 1e-12))[0]
    # phase 2, as the perf variant's second LP: keep everyone at >= t (less the same hair) and give
    # what that frees to the largest weight per GPU (ties: the first job), raising the sum
    x = np.minimum(1.0, t[piece] * (1 - PHASE2_SLACK) / weight)
    return fill_greedily(x, sf, gpus, weight / sf)


class MaxMinFairness(Policy):
    shuffle_types = True
    name = "max_min_fairness"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        # one pool at each job's own speed everywhere: the speed cancels out of the normalised
        # throughput, which is sf_i x_i / (priority_i x equal share_i)
        pool = pooled(problem, agnostic(problem.throughput))
        share = equal_share(pool)[:, 0]
        weight = problem.scale_factor / (problem.priority_weight * share)
        x = water_fill(weight, problem.scale_factor, float(problem.gpus.sum()))
        return spread(x[:, None], problem)
