"""``finish_time_fairness_perf`` and ``finish_time_fairness`` (Themis' rho, Gavel's formulation).

rho_i(X) = (t_i + R_i / thr_i(X)) / (t_i + R_i / iso_i): job i's expected finish time under X over
its finish time on an equal 1/n share; minimise the largest rho. ``rho_i <= r`` is linear in X for a
fixed r (``thr_i(X) >= R_i / (r E_i - t_i)``), so r is found by bisection over HiGHS feasibility LPs
(Gavel hands the convex form to cvxpy). The equal share itself is feasible, so r* <= 1.
"""

from __future__ import annotations

from . import lp
from .base import Allocation, Matrix, Policy, Problem, equal_share, isolated_throughput, pooled, spread

BISECTION_STEPS = 20


def ftf_allocation(problem: Problem, throughput: Matrix) -> Allocation:
    n = problem.n
    t = [float(v) for v in problem.time_since_start]
    rem = [float(v) for v in problem.remaining_steps]
    iso = [max(v, 1e-12) for v in isolated_throughput(problem, throughput)]
    e = [ti + ri / ii for ti, ri, ii in zip(t, rem, iso)]  # expected finish (from arrival) on the equal share
    b0 = lp.base_rhs(problem)
    norm = [[v / max(r, 1e-9) for v in row] for row, r in zip(throughput, rem)]
    model = lp.Lp([-v / n for row in norm for v in row], lp.allocation_columns(problem, norm), b0 + [0.0] * n,
                  *lp.bounds(problem))

    def feasible(r: float) -> list[float] | None:
        slack = [r * ei - ti for ei, ti in zip(e, t)]
        if any(s <= 0 for s in slack):
            return None
        need = [1.0 / s for s in slack]  # thr_i / R_i >= 1 / (r E_i - t_i)
        model.set_rhs(b0 + [-x for x in need])  # same LP, new bounds: HiGHS starts from the last basis
        return model.solve()

    lo, hi = max(ti / ei for ti, ei in zip(t, e)), 1.0
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

    def allocate(self, problem: Problem) -> Allocation:
        return ftf_allocation(problem, problem.throughput)


class FinishTimeFairness(Policy):
    shuffle_types = True
    name = "finish_time_fairness"
    perf = False

    def allocate(self, problem: Problem) -> Allocation:
        # Gavel's agnostic variant plans with a throughput of 1 everywhere
        ones = [[1.0] for _ in range(problem.n)]
        return spread(ftf_allocation(pooled(problem, ones), ones), problem)
