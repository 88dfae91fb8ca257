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

from ..arith import fsum_np
from . import lp
from .base import (Allocation, Matrix, Policy, Problem, Vector, agnostic, equal_share, fill_greedily,
                   isolated_throughput, pooled, spread)

PHASE2_SLACK = 1e-6  # phase 2 keeps each job within this fraction of the best least share


def max_min_allocation(problem: Problem, throughput: Matrix) -> Allocation:
    n, k = problem.n, problem.k
    iso = [max(v, 1e-12) for v in isolated_throughput(problem, throughput)]
    w = [[v * sf / (prio * i_t) for v in row]
         for row, sf, prio, i_t in zip(throughput, problem.scale_factor, problem.priority_weight, iso)]
    b0 = lp.base_rhs(problem)
    c = [0.0] * (n * k) + [-1.0]
    # base rows, then t - sum_j w_ij x_ij <= 0 for each job
    v = lp.solve(c, lp.allocation_columns(problem, w, extra_col=True), b0 + [0.0] * n,
                 *lp.bounds(problem, [float("inf")]))
    if v is None:
        raise lp.SolveError("max-min fairness LP infeasible")
    t_star = v[-1]
    # phase 2: keep everyone at >= t* (less a hair), maximise the total normalised throughput
    b2 = b0 + [-t_star * (1 - PHASE2_SLACK)] * n
    v2 = lp.solve([-x for row in w for x in row], lp.allocation_columns(problem, w), b2, *lp.bounds(problem))
    return lp.to_allocation(v if v2 is None else v2, problem)


class MaxMinFairnessPerf(Policy):
    name = "max_min_fairness_perf"
    perf = True

    def allocate(self, problem: Problem) -> Allocation:
        return max_min_allocation(problem, problem.throughput)


def water_fill(weight: Vector, scale_factor: Vector, gpus: float) -> list[float]:
    """Time fractions ``x`` maximising ``min_i weight_i x_i`` s.t. ``0 <= x <= 1`` and
    ``sum_i scale_factor_i x_i <= gpus`` (each job's share of one pool), by water filling."""
    sf = [float(s) for s in scale_factor]
    n = len(weight)
    if fsum_np(sf) <= gpus:
        return [1.0] * n
    # raise t; job i stops rising at t = w_i (x_i = 1). Between those points the pool used is
    # sum_{capped} sf_i + t * sum_{rising} sf_i / w_i: find the piece where it reaches the GPUs
    order = sorted(range(n), key=weight.__getitem__)
    w = [weight[i] for i in order]
    s = [sf[i] for i in order]
    capped = [0.0] * n  # GPUs of the jobs below position i (all capped)
    for i in range(1, n):
        capped[i] = s[i - 1] if i == 1 else capped[i - 1] + s[i - 1]
    rising = [0.0] * n  # sum of sf/w over position i and up
    acc = 0.0
    for i in range(n - 1, -1, -1):
        acc = s[i] / w[i] if i == n - 1 else acc + s[i] / w[i]
        rising[i] = acc
    t = [(gpus - capped[i]) / rising[i] for i in range(n)]  # the level if the jobs from position i up are still rising
    piece = next(i for i in range(n) if t[i] >= (w[i - 1] if i else 0.0) - 1e-12 and t[i] <= w[i] + 1e-12)
    # phase 2, as the perf variant's second LP: keep everyone at >= t (less the same hair) and give
    # what that frees to the largest weight per GPU (ties: the first job), raising the sum
    level = t[piece] * (1 - PHASE2_SLACK)
    x = [min(1.0, level / wi) for wi in weight]
    return fill_greedily(x, sf, gpus, [wi / si for wi, si in zip(weight, sf)])


class MaxMinFairness(Policy):
    shuffle_types = True
    name = "max_min_fairness"
    perf = False

    def allocate(self, problem: Problem) -> Allocation:
        # one pool at each job's own speed everywhere: the speed cancels out of the normalised
        # throughput, which is sf_i x_i / (priority_i x equal share_i)
        pool = pooled(problem, agnostic(problem.throughput))
        share = [row[0] for row in equal_share(pool)]
        weight = [sf / (prio * sh) for sf, prio, sh in zip(problem.scale_factor, problem.priority_weight, share)]
        x = water_fill(weight, problem.scale_factor, float(sum(problem.gpus)))
        return spread([[v] for v in x], problem)
