"""``max_min_fairness_perf`` and ``max_min_fairness`` (LAS): maximise the least normalised throughput.

As Gavel: job i's throughput under X, times its scale factor, over its priority weight and over its
throughput on an equal 1/n share of the cluster; the smallest of these is maximised. A second LP then
keeps that minimum and maximises the sum, so GPUs the bottleneck cannot use are not left idle.
"""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem, pooled, spread, agnostic, isolated_throughput


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
    b2 = np.concatenate([b0, np.full(n, -t_star * (1 - 1e-6))])
    rows2 = lp.per_job_rows(problem, w, None, None, 0)
    a2 = np.vstack([lp.base_rows(problem, 0)[0], rows2])
    v2 = lp.solve(-w.reshape(-1), a2, b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MaxMinFairnessPerf(Policy):
    name = "max_min_fairness_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        return max_min_allocation(problem, problem.throughput)


class MaxMinFairness(Policy):
    shuffle_types = True
    name = "max_min_fairness"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        return spread(max_min_allocation(pooled(problem, agnostic(problem.throughput)), agnostic(problem.throughput)[:, :1]), problem)
