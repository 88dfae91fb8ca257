"""``gandiva``: Gandiva (OSDI'18) as Gavel models it - heterogeneity-agnostic time-slicing with packing.

Every active unit gets an equal share of every GPU type (the round mechanism suspends and resumes
jobs to realise it, and moves them between types). When the jobs ask for more GPUs than the VC has,
jobs are packed in pairs on the same GPUs (random pairs of the same scale factor, seeded, as Gavel);
a pair is kept while both jobs are active and it progresses on some type (co-located throughputs from
Gavel's file), and is split when packing stops paying (a job of the pair makes no progress somewhere).
A job left unpacked is not kept alone: at every solve it is pooled again with the other loose jobs and
may be paired (Gavel forgets its single-job combinations at every solve: their packing gain is 0 < 1).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..arith import fsum_np
from .base import Allocation, PackedAllocation, Policy, Problem


class Gandiva(Policy):
    name = "gandiva"
    perf = False

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._partner: dict[int, int | None] = {}  # job id -> the job it is packed with (None: alone)

    def _normalised(self, problem: Problem, a: int, b: int, index: dict[int, int]) -> float:
        """Gavel's packing gain: the sum over types of each job's co-located / isolated steps/s;
        0 if either job makes no progress on some type."""
        both = problem.pair_throughput(a, b) if problem.pair_throughput else None
        if both is None:
            return 0.0
        iso = (problem.throughput[index[a]], problem.throughput[index[b]])  # (2, k)
        k = len(iso[0])
        if any(v <= 0 for row in both for v in row) or any(v <= 0 for row in iso for v in row):
            return 0.0
        return fsum_np([both[t][c] / iso[c][t] for c in range(2) for t in range(k)])

    def allocate(self, problem: Problem) -> Allocation | PackedAllocation:
        ids = list(problem.job_ids)
        index = {j: i for i, j in enumerate(ids)}
        # forget jobs left alone (pooled again below), and pairs that lost a job or stopped paying
        for a, b in list(self._partner.items()):
            if a not in index or b is None or b not in index or self._normalised(problem, a, b, index) < 1.0:
                self._partner.pop(a, None)
                if b is not None:
                    self._partner.pop(b, None)
        if sum(problem.scale_factor) <= sum(problem.gpus):
            return _equal(problem, [(j,) for j in ids], problem.scale_factor)
        loose = [j for j in ids if j not in self._partner]
        for _ in range(len(loose)):
            if len(loose) < 2:
                break
            a, b = self._rng.sample(loose, 2)
            if problem.scale_factor[index[a]] != problem.scale_factor[index[b]]:
                continue
            loose.remove(a)
            loose.remove(b)
            self._partner[a], self._partner[b] = b, a
        for j in loose:
            self._partner[j] = None
        units = sorted({tuple(sorted((a,) if b is None else (a, b))) for a, b in self._partner.items()})
        sf = [problem.scale_factor[index[u[0]]] for u in units]
        return PackedAllocation(units, _equal(problem, units, sf))


def _equal(problem: Problem, units: list, scale_factor: Sequence[int]) -> Allocation:
    m = len(units)
    each = [g / m for g in problem.gpus]
    x = [[e / sf for e in each] for sf in scale_factor]
    return [[v / s for v in row] for row, s in ((row, max(fsum_np(row), 1.0)) for row in x)]
