"""``gandiva``: Gandiva's time-slicing (OSDI'18) as Gavel models it - every active job gets an equal
share of every GPU type, heterogeneity-agnostic; the round mechanism suspends and resumes jobs so
that each receives its share, and moves them between types as GPUs free up.
"""

from __future__ import annotations

import numpy as np

from .base import Policy, Problem


class Gandiva(Policy):
    name = "gandiva"
    perf = False

    def allocate(self, problem: Problem) -> np.ndarray:
        n = problem.n
        x = np.tile(problem.gpus / n, (n, 1)) / problem.scale_factor[:, None]
        return x / np.maximum(x.sum(axis=1), 1.0)[:, None]
