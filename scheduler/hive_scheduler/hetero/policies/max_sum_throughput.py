"""``max_sum_throughput_perf``: maximise the total steps/s of the cluster (Gavel's objective, unnormalised).

The LP's optimum is rarely unique (jobs of the same type are interchangeable, and a type's GPUs may
be split between them in any proportion). A simplex solver returns one corner of that set, which
may run one of two identical jobs full time and starve the other; Gavel's interior-point solver
(ECOS) returns its centre. Neither choice is the policy's: a second LP keeps the maximum total and,
among the allocations that reach it, takes the one that does the most of the jobs' *remaining* work
per second (sum of steps/s over remaining steps), so jobs near their end finish first and the
average JCT falls without costing throughput (the shortest-remaining-first rule, inside the optimum).
"""

from __future__ import annotations

from ..arith import dot
from . import lp
from .base import Allocation, Policy, Problem

TOTAL_SLACK = 1e-7  # the second LP keeps the total throughput within this fraction of the maximum


class MaxSumThroughputPerf(Policy):
    name = "max_sum_throughput_perf"
    perf = True

    def allocate(self, problem: Problem) -> Allocation:
        b = lp.base_rhs(problem)
        total = [float(v) for row in problem.throughput for v in row]
        v = lp.solve([-t for t in total], lp.allocation_columns(problem), b, *lp.bounds(problem))
        if v is None:
            raise lp.SolveError("max-sum-throughput LP infeasible")
        best = dot(total, v)
        remaining = [max(float(r), 1e-9) for r in problem.remaining_steps]
        share_of_rest = [t / r for row, r in zip(problem.throughput, remaining) for t in row]
        b2 = b + [-best * (1 - TOTAL_SLACK)]  # and -total . X <= that
        v2 = lp.solve([-x for x in share_of_rest], lp.allocation_columns(problem, total=total), b2,
                      *lp.bounds(problem))
        return lp.to_allocation(v if v2 is None else v2, problem)
