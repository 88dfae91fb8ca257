"""``max_sum_throughput_perf``: maximise the total steps/s of the cluster (Gavel's objective, unnormalised)."""

from __future__ import annotations

import numpy as np

from . import lp
from .base import Policy, Problem


class MaxSumThroughputPerf(Policy):
    name = "max_sum_throughput_perf"
    perf = True

    def allocate(self, problem: Problem) -> np.ndarray:
        a, b = lp.base_rows(problem, 0)
        n, k = problem.n, problem.k
        v = lp.solve(-problem.throughput.reshape(-1), a, b, [(0.0, 1.0)] * (n * k))
        if v is None:
            raise lp.SolveError("max-sum-throughput LP infeasible")
        return lp.to_allocation(v, problem)
