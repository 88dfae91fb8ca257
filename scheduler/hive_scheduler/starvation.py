"""Anti-starvation inside a VC: the cells a starving job reserves (issue 38, HiveD's "less fragmentation,
less starvation").

A guaranteed job that others of its VC have overtaken for ``starvation_after`` seconds *starves*. It used
to hold back every job behind it until it started, so one 8-GPU job that found no whole free node idled
all the VC's other free GPUs (on Philly-like loads the private clusters then queued 9x longer than with
no hold at all). Now it reserves the cells it will start in: for each of its tasks, one of the VC's bound
virtual cells of the task's level, those with the most free GPUs first. Jobs behind it still start, but
only outside those cells (``GuaranteedPlacement.fenced``), so the cells drain and the starving job starts
there: no starvation, and no GPU left idle that it does not need. A job the rule cannot reserve for
(several task groups, ``within``, a pinned cell, or fewer such cells bound than it has tasks) still holds
back every job behind it.

The cells are chosen afresh at each pass, from the VC's state alone (not kept from an earlier pass): so
the choice does not depend on when passes happen, and a VC decides the same on the shared cluster (where
other VCs' events add passes) as on its private cluster (issue 38's invariance; a choice kept from the
first pass after the job began to starve differed between the two). It still cannot starve: the reserved
cells gain no job of the VC, so the most free GPUs any candidate cell has never falls; the choice moves
only to a cell with more free GPUs, or as many and a lower id, so it moves finitely often, and in between
the reserved cells drain as the work in them ends.
"""

from __future__ import annotations

from .cells import flat


def reserve_cells(state, job) -> list | None:
    """The virtual cells starving guaranteed ``job`` reserves now, or None when it cannot reserve (the
    caller then holds back the whole VC)."""
    req = job.req
    if req.within is not None or req.pinned_cell is not None or len(req.tasks) != 1:
        return None
    tg = req.tasks[0]
    if tg.gpus <= 0:
        return None
    vcs = state.vcs[req.vc]
    cands = []
    for chain in state.job_chains(req, vcs):
        level = state.task_level(chain, tg.gpus)
        if level is None:
            continue
        for r in vcs.roots.get(chain, ()):
            if r.bound is None or r.level < level:
                continue
            stack = [r]
            while stack:
                v = stack.pop()
                if v.level == level:
                    cands.append(v)
                elif v.level > level:
                    stack.extend(v.children)
    if len(cands) < tg.count:
        return None
    cands.sort(key=lambda v: (-v.free, v.id))
    return cands[:tg.count]


def fence_of(cells: list) -> frozenset:
    """Every virtual cell inside ``cells`` (what placement treats as taken for the jobs behind)."""
    return frozenset(v for c in cells for v in flat(c))
