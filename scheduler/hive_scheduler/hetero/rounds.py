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

UNSEEN = 1e9  # priority scale for a job that has not run on a type since the last allocation

Matrix = Sequence[Sequence[float]]  # rows of numbers: lists, tuples or numpy arrays


def choose_round(
    units: Sequence[tuple[int, ...]],  # one job, or jobs packed on the same GPUs; sorted
    allocation: Matrix,  # (u, k)
    received: Matrix,  # (u, k) seconds run on each type since the allocation was computed
    usable: Matrix,  # (u, k) > 0 where every job of the unit makes progress on the type
    scale_factor: Sequence[int],  # (u,)
    gpus: Sequence[int],  # (k,)
    type_order: Sequence[int],
    strict: bool = False,
    deficit: Matrix | None = None,  # (u, k) seconds owed on each type by the earlier allocations
) -> dict[tuple[int, ...], int]:
    """Unit -> GPU type index for the coming round; each job in at most one chosen unit."""
    free = [int(g) for g in gpus]
    sf = [int(s) for s in scale_factor]
    chosen: dict[tuple[int, ...], int] = {}
    busy: set[int] = set()
    owed = deficit if deficit is not None else [_NO_DEFICIT] * len(units)
    for t in type_order:
        if free[t] <= 0:
            continue
        # (-priority, -deficit, -allocation, unit): highest priority first, then the largest deficit,
        # then the largest allocation, then the unit's place
        keys = []
        for i, (arow, rrow, urow, drow) in enumerate(zip(allocation, received, usable, owed)):
            a = float(arow[t])  # Python floats: a huge quotient is inf, as numpy's under errstate was
            if urow[t] > 0:
                got = float(rrow[t])
                p = a / got if got > 0 else a * UNSEEN
            else:
                p = 0.0
            keys.append((-p, -drow[t], -a, i))
        keys.sort()
        for key in keys:
            if strict and key[0] >= 0:
                break  # sorted: the rest have no allocation here either
            i = key[3]
            if sf[i] > free[t] or not usable[i][t] > 0:
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


class _NoDeficit:
    def __getitem__(self, t: int) -> float:
        return 0.0


_NO_DEFICIT = _NoDeficit()
