"""Gavel's round mechanism: realise a time-fraction allocation with whole-GPU rounds.

Each round, for each GPU type, jobs are ranked by priority = allocation / time already received on
that type (since the allocation was last computed; a job that has received none ranks first, by
allocation). Types are filled in order, each job at most once per round, a job only where its
whole gang (scale factor) fits. Over many rounds each job's share of time on each type tends to its
allocation. Non-strict policies also run zero-allocation jobs on GPUs that would otherwise idle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

UNSEEN = 1e9  # priority scale for a job that has not run on a type since the last allocation


def choose_round(
    job_ids: Sequence[int],
    allocation: np.ndarray,  # (n, k)
    received: np.ndarray,  # (n, k) seconds run on each type since the allocation was computed
    throughput: np.ndarray,  # (n, k)
    scale_factor: np.ndarray,  # (n,)
    gpus: np.ndarray,  # (k,)
    type_order: Sequence[int],
    strict: bool = False,
) -> dict[int, int]:
    """Job id -> GPU type index for the coming round."""
    with np.errstate(divide="ignore", invalid="ignore"):
        priority = np.where(received > 0, allocation / received, allocation * UNSEEN)
    priority = np.where(throughput > 0, priority, 0.0)
    free = gpus.astype(int).copy()
    chosen: dict[int, int] = {}
    ids = np.asarray(job_ids)
    for t in type_order:
        if free[t] <= 0:
            continue
        order = np.lexsort((ids, -allocation[:, t], -priority[:, t]))
        for i in order:
            if free[t] <= 0:
                break
            j = int(ids[i])
            if j in chosen or throughput[i, t] <= 0:
                continue
            if strict and priority[i, t] <= 0:
                continue
            sf = int(scale_factor[i])
            if sf > free[t]:
                continue
            chosen[j] = t
            free[t] -= sf
    return chosen
