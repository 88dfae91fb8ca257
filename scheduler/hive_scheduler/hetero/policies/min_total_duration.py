"""``min_total_duration_perf`` and ``min_total_duration``: minimise the makespan of the active jobs.

As Gavel: maximise s = 1/M subject to each job doing its remaining steps within M
(``sum_j T_ij X_ij >= remaining_i * s``) - one LP. A second LP keeps that makespan and maximises
each job's progress relative to its remaining work, so jobs off the critical path finish early and
no GPU is left idle for nothing. The agnostic variant plans on one pool of GPUs, each job at its
fastest type's speed (Gavel: V100), where both LPs have closed forms (:func:`min_makespan_pooled`), and
spreads each job's share over the types in proportion to their GPUs.
"""

from __future__ import annotations

from ..arith import fsum_np, median
from . import lp
from .base import Allocation, Matrix, Policy, Problem, Vector, agnostic, fill_greedily, spread

PHASE2_SLACK = 1e-6  # the second LP keeps the best rate less this fraction


def min_makespan_allocation(problem: Problem, throughput: Matrix) -> Allocation:
    n, k = problem.n, problem.k
    rem = [max(float(r), 1e-9) for r in problem.remaining_steps]
    # scale s so that it is ~1: s' = s * scale, scale = a typical duration
    scale = median([r / max(max(row), 1e-12) for r, row in zip(rem, throughput)])
    coeff = [[v * scale / r for v in row] for row, r in zip(throughput, rem)]  # s' - sum_j coeff_ij x_ij <= 0
    b0 = lp.base_rhs(problem)
    c = [0.0] * (n * k) + [-1.0]
    v = lp.solve(c, lp.allocation_columns(problem, coeff, extra_col=True), b0 + [0.0] * n,
                 *lp.bounds(problem, [float("inf")]))
    if v is None:
        raise lp.SolveError("min-total-duration LP infeasible")
    s_star = v[-1]
    b2 = b0 + [-s_star * (1 - PHASE2_SLACK)] * n
    v2 = lp.solve([-x for row in coeff for x in row], lp.allocation_columns(problem, coeff), b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MinTotalDurationPerf(Policy):
    name = "min_total_duration_perf"
    perf = True

    def allocate(self, problem: Problem) -> Allocation:
        return min_makespan_allocation(problem, problem.throughput)


def min_makespan_pooled(problem: Problem, speed: Vector) -> list[float]:
    """The two LPs of :func:`min_makespan_allocation` on one pool of GPUs, in closed form.

    With one pool, job i's share x_i does ``coeff_i x_i`` of its remaining work per (scaled) second,
    so the best common rate is ``s = min(min_i coeff_i, GPUs / sum_i sf_i / coeff_i)`` (each share
    <= 1, the pool not over-committed), each job at ``x_i = s / coeff_i``; the second LP (keep s less
    the same hair, maximise ``sum_i coeff_i x_i``) is a fractional knapsack: the GPUs left go to the
    largest ``coeff_i / sf_i`` first (ties: the first job)."""
    rem = [max(float(r), 1e-9) for r in problem.remaining_steps]
    speed = [max(v, 1e-12) for v in speed]
    scale = median([r / v for r, v in zip(rem, speed)])
    coeff = [v * scale / r for v, r in zip(speed, rem)]
    sf = [float(s) for s in problem.scale_factor]
    gpus = float(sum(problem.gpus))
    s_star = min(min(coeff), gpus / fsum_np([s / c for s, c in zip(sf, coeff)]))
    level = s_star * (1 - PHASE2_SLACK)
    x = [min(1.0, level / c) for c in coeff]
    return fill_greedily(x, sf, gpus, [c / s for c, s in zip(coeff, sf)])


class MinTotalDuration(Policy):
    shuffle_types = True
    name = "min_total_duration"
    perf = False

    def allocate(self, problem: Problem) -> Allocation:
        speed = [row[0] for row in agnostic(problem.throughput)]
        return spread([[v] for v in min_makespan_pooled(problem, speed)], problem)
