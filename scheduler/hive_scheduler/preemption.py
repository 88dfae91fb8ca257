"""The preemption search: which of its VC's lower-priority jobs a guaranteed job would displace.

A search places the job as if every job of the VC with priority <= a cutoff were gone (placement
mode DISPLACE, lowest cutoffs first, so the lowest priorities are preempted first), records whose
virtual GPUs it took, and undoes itself completely: the search changes nothing. Carrying out the
preemption (demoting lazy victims, reserving, ``preempting``) is the scheduler's business.
"""

from __future__ import annotations

from .jobs import DISPLACE, Job
from .state import rollback


class PreemptionSearch:
    """One per scheduler. ``cut`` and ``stolen`` are read by placement while a search runs."""

    __slots__ = ("core", "cut", "stolen")

    def __init__(self, core):
        self.core = core
        self.cut = -1              # jobs of priority <= cut may be displaced (-1: no search running)
        self.stolen: list = []     # holders whose virtual GPUs the running search took

    def victims(self, j: Job) -> list[Job]:
        """The jobs ``j`` would displace (empty: it cannot be placed even so). Changes nothing."""
        core = self.core
        req = j.req
        vc = core.state.vcs[req.vc]
        if req.pinned_cell is not None:
            roots = [vc.pins[req.pinned_cell]]
        else:
            roots = [r for c in core.state.job_chains(req, vc) for r in vc.roots.get(c, ())]
        free = sum(r.free for r in roots)
        for cutoff in sorted(p for p in vc.prio_count if p < req.priority):
            # quick bound: even displacing every job of priority <= cutoff would not free enough
            if free + sum(n for r in roots for p, n in r.hp.items() if p <= cutoff) < req.total_gpus:
                continue
            sim: list = []
            snap = core.state.dirty_snapshot()
            self.cut = cutoff
            try:
                res = core._place_guaranteed(j, DISPLACE, sim)
                stolen = list(dict.fromkeys(self.stolen))
                rollback(sim)
            finally:
                self.cut = -1
                self.stolen = []
                core.state.dirty_restore(snap)
            if res is not None:
                if core.state.shared:  # a shared GPU's anchor stands for all its share jobs
                    stolen = core._share_victims(stolen)
                return [core._jobs[v] for v in stolen]
        return []
