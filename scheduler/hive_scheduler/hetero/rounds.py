"""Gavel's round mechanism: realise a time-fraction allocation with whole-GPU rounds.

Each round, for each GPU type, jobs are ranked by priority = allocation / time already received on
that type (since the allocation was last computed; a job that has received none ranks first, by
allocation); equal priorities are ranked by deficit (the time a job was owed on the type under the
earlier allocations and did not get, as Gavel), then by allocation. Types are filled in order, each
job at most once per round, a job only where its whole gang (scale factor) fits. Over many rounds
each job's share of time on each type tends to its allocation, and the deficits carry what a job
missed in one allocation's rounds into the next. Non-strict policies also run zero-allocation jobs
on GPUs that would otherwise idle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

UNSEEN = 1e9  # priority scale for a job that has not run on a type since the last allocation


def choose_round(
    units: Sequence[tuple[int, ...]],  # one job, or jobs packed on the same GPUs; sorted
    allocation: np.ndarray,  # (u, k)
    received: np.ndarray,  # (u, k) seconds run on each type since the allocation was computed
    usable: np.ndarray,  # (u, k) > 0 where every job of the unit makes progress on the type
    scale_factor: np.ndarray,  # (u,)
    gpus: np.ndarray,  # (k,)
    type_order: Sequence[int],
    strict: bool = False,
    deficit: np.ndarray | None = None,  # (u, k) seconds owed on each type by the earlier allocations
) -> dict[tuple[int, ...], int]:
    """Unit -> GPU type index for the coming round; each job in at most one chosen unit."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        priority = np.where(received > 0, allocation / received, allocation * UNSEEN)
    priority = np.where(usable > 0, priority, 0.0)
    free = [int(g) for g in gpus]
    sf = [int(s) for s in scale_factor]
    chosen: dict[tuple[int, ...], int] = {}
    busy: set[int] = set()
    rank = np.arange(len(units))
    if deficit is None:
        deficit = np.zeros_like(allocation)
    for t in type_order:
        if free[t] <= 0:
            continue
        col = priority[:, t]
        order = np.lexsort((rank, -allocation[:, t], -deficit[:, t], -col)).tolist()
        pr = col.tolist()
        ok = (usable[:, t] > 0).tolist()
        for i in order:
            if strict and pr[i] <= 0:
                break  # sorted: the rest have no allocation here either
            if not ok[i] or sf[i] > free[t]:
                continue
            unit = units[i]
            if len(unit) == 1:
                if unit[0] in busy:
                    continue
            elif any(u in busy for u in unit):
                continue
            chosen[unit] = t
            busy.update(unit)
            free[t] -= sf[i]
            if free[t] <= 0:
                break
    return chosen
