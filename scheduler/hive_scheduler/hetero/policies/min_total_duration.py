"""``min_total_duration_perf`` and ``min_total_duration``: minimise the makespan of the active jobs.

As Gavel: maximise s = 1/M subject to each job doing its remaining steps within M
(``sum_j T_ij X_ij >= remaining_i * s``) - one LP. A second LP keeps that makespan and maximises
each job's progress relative to its remaining work, so jobs off the critical path finish early and
no GPU is left idle for nothing. The agnostic variant plans on one pool of GPUs, each job at its
fastest type's speed (Gavel: V100), and spreads each job's share over the types in proportion to their GPUs.
"""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem, pooled, spread, agnostic


def min_makespan_allocation(problem: Problem, throughput: np.ndarray) -> np.ndarray:
    n, k = problem.n, problem.k
    rem = np.maximum(problem.remaining_steps.astype(float), 1e-9)
    # scale s so that it is ~1: s' = s * scale, scale = a typical duration
    scale = float(np.median(rem / np.maximum(throughput.max(axis=1), 1e-12)))
    coeff = throughput * scale / rem[:, None]  # s' - sum_j coeff_ij x_ij <= 0
    a0, b0 = lp.base_rows(problem, 1)
    a = np.vstack([a0, lp.per_job_rows(problem, coeff, 0, np.ones(n), 1)])
    b = np.concatenate([b0, np.zeros(n)])
    c = np.zeros(n * k + 1)
    c[-1] = -1.0
    v = lp.solve(c, a, b, *lp.bounds(problem, [np.inf]))
    if v is None:
        raise lp.SolveError("min-total-duration LP infeasible")
    s_star = v[-1]
    a2 = np.vstack([lp.base_rows(problem, 0)[0], lp.per_job_rows(problem, coeff, None, None, 0)])
    b2 = np.concatenate([b0, np.full(n, -s_star * (1 - 1e-6))])
    v2 = lp.solve(-coeff.reshape(-1), a2, b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MinTotalDurationPerf(Policy):
    name = "min_total_duration_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        return min_makespan_allocation(problem, problem.throughput)


class MinTotalDuration(Policy):
    shuffle_types = True
    name = "min_total_duration"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        return spread(min_makespan_allocation(pooled(problem, agnostic(problem.throughput)), agnostic(problem.throughput)[:, :1]), problem)
