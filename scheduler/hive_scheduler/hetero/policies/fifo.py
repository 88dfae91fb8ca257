"""``fifo`` and ``fifo_perf``: whole jobs in arrival order, no time-sharing.

``fifo`` (agnostic) keeps a job on the GPU type it started on and picks that type at random among
those with room (seeded, as Gavel); ``fifo_perf`` re-plans each time and gives each job, in arrival
order, the fastest type that still has room. Both stop at the first job that fits nowhere (no job
overtakes an earlier one).
"""

from __future__ import annotations

import random

from .base import Allocation, Policy, Problem


class Fifo(Policy):
    shuffle_types = True
    name = "fifo"
    perf = False
    strict = True

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._placed: dict[int, int] = {}  # job id -> GPU type index, kept while the job is active

    def _pick(self, problem: Problem, i: int, fits: list[int]) -> int:
        return fits[self._rng.randrange(len(fits))]

    def allocate(self, problem: Problem) -> Allocation:
        x = [[0.0] * problem.k for _ in range(problem.n)]
        free = [int(g) for g in problem.gpus]
        active = set(problem.job_ids)
        self._placed = {j: t for j, t in self._placed.items() if j in active}
        index = {j: i for i, j in enumerate(problem.job_ids)}
        for j, t in sorted(self._placed.items()):
            x[index[j]][t] = 1.0
            free[t] -= int(problem.scale_factor[index[j]])
        for i in sorted(range(problem.n), key=problem.job_ids.__getitem__):
            j = problem.job_ids[i]
            if j in self._placed:
                continue
            sf = int(problem.scale_factor[i])
            fits = [t for t in range(problem.k) if free[t] >= sf and problem.throughput[i][t] > 0]
            if not fits:
                break
            t = self._pick(problem, i, fits)
            self._placed[j] = t
            x[i][t] = 1.0
            free[t] -= sf
        return x


class FifoPerf(Fifo):
    name = "fifo_perf"
    perf = True
    shuffle_types = False

    def _pick(self, problem: Problem, i: int, fits: list[int]) -> int:
        return max(fits, key=lambda t: (problem.throughput[i][t], -t))

    def allocate(self, problem: Problem) -> Allocation:
        self._placed = {}  # re-plan: a job may move to a faster type that freed up
        return super().allocate(problem)
