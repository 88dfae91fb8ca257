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
        v = lp.solve(-problem.throughput.reshape(-1), a, b, *lp.bounds(problem))
        if v is None:
            raise lp.SolveError("max-sum-throughput LP infeasible")
        return lp.to_allocation(v, problem)
