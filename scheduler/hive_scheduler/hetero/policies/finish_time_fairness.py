"""``finish_time_fairness_perf`` and ``finish_time_fairness`` (Themis' rho, Gavel's formulation).

rho_i(X) = (t_i + R_i / thr_i(X)) / (t_i + R_i / iso_i): job i's expected finish time under X over
its finish time on an equal 1/n share; minimise the largest rho. ``rho_i <= r`` is linear in X for a
fixed r (``thr_i(X) >= R_i / (r E_i - t_i)``), so r is found by bisection over HiGHS feasibility LPs
(Gavel hands the convex form to cvxpy). The equal share itself is feasible, so r* <= 1.
"""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem, pooled, spread, equal_share, isolated_throughput

BISECTION_STEPS = 20


def ftf_allocation(problem: Problem, throughput: np.ndarray) -> np.ndarray:
    n = problem.n
    t = problem.time_since_start.astype(float)
    rem = problem.remaining_steps.astype(float)
    iso = np.maximum(isolated_throughput(problem, throughput), 1e-12)
    e = t + rem / iso  # expected finish (from arrival) on the equal share
    a0, b0 = lp.base_rows(problem, 0)
    norm = throughput / np.maximum(rem[:, None], 1e-9)
    a = np.vstack([a0, lp.per_job_rows(problem, norm, None, None, 0)])
    model = lp.Lp(-norm.reshape(-1) / n, a, np.concatenate([b0, np.zeros(n)]), *lp.bounds(problem))

    def feasible(r: float) -> np.ndarray | None:
        slack = r * e - t
        if np.any(slack <= 0):
            return None
        need = 1.0 / slack  # thr_i / R_i >= 1 / (r E_i - t_i)
        model.set_rhs(np.concatenate([b0, -need]))  # same LP, new bounds: HiGHS starts from the last basis
        return model.solve()

    lo, hi = float(np.max(t / e)), 1.0
    best = feasible(hi)
    if best is None:  # numerically at the edge: the equal share is the answer
        return equal_share(problem)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        v = feasible(mid)
        if v is None:
            lo = mid
        else:
            hi, best = mid, v
        if hi - lo < 1e-3 * hi:
            break
    return lp.to_allocation(best, problem)


class FinishTimeFairnessPerf(Policy):
    name = "finish_time_fairness_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        return ftf_allocation(problem, problem.throughput)


class FinishTimeFairness(Policy):
    shuffle_types = True
    name = "finish_time_fairness"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        # Gavel's agnostic variant plans with a throughput of 1 everywhere
        ones = np.ones((problem.n, 1))
        return spread(ftf_allocation(pooled(problem, ones), ones), problem)
