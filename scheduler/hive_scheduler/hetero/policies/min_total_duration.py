"""``min_total_duration_perf`` and ``min_total_duration``: minimise the makespan of the active jobs.

As Gavel: maximise s = 1/M subject to each job doing its remaining steps within M
(``sum_j T_ij X_ij >= remaining_i * s``) - one LP. A second LP keeps that makespan and maximises
each job's progress relative to its remaining work, so jobs off the critical path finish early and
no GPU is left idle for nothing. The agnostic variant plans on one pool of GPUs, each job at its
fastest type's speed (Gavel: V100), where both LPs have closed forms (:func:`min_makespan_pooled`), and
spreads each job's share over the types in proportion to their GPUs.
"""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem, agnostic, fill_greedily, spread

PHASE2_SLACK = 1e-6  # the second LP keeps the best rate less this fraction


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
    b2 = np.concatenate([b0, np.full(n, -s_star * (1 - PHASE2_SLACK))])
    v2 = lp.solve(-coeff.reshape(-1), a2, b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MinTotalDurationPerf(Policy):
    name = "min_total_duration_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        return min_makespan_allocation(problem, problem.throughput)


def min_makespan_pooled(problem: Problem, speed: np.ndarray) -> np.ndarray:
    """The two LPs of :func:`min_makespan_allocation` on one pool of GPUs, in closed form.

    With one pool, job i's share x_i does ``coeff_i x_i`` of its remaining work per (scaled) second,
    so the best common rate is ``s = min(min_i coeff_i, GPUs / sum_i sf_i / coeff_i)`` (each share
    <= 1, the pool not over-committed), each job at ``x_i = s / coeff_i``; the second LP (keep s less
    the same hair, maximise ``sum_i coeff_i x_i``) is a fractional knapsack: the GPUs left go to the
    largest ``coeff_i / sf_i`` first (ties: the first job)."""
    rem = np.maximum(problem.remaining_steps.astype(float), 1e-9)
    speed = np.maximum(speed, 1e-12)
    scale = float(np.median(rem / speed))
    coeff = speed * scale / rem
    sf = problem.scale_factor.astype(float)
    gpus = float(problem.gpus.sum())
    s_star = min(float(coeff.min()), gpus / float((sf / coeff).sum()))
    x = np.minimum(1.0, s_star * (1 - PHASE2_SLACK) / coeff)
    return fill_greedily(x, sf, gpus, coeff / sf)


class MinTotalDuration(Policy):
    shuffle_types = True
    name = "min_total_duration"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        return spread(min_makespan_pooled(problem, agnostic(problem.throughput)[:, 0])[:, None], problem)
