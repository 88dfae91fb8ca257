"""The preemption search: which of its VC's lower-priority jobs a guaranteed job would displace.

A search places the job as if every job of the VC with priority <= a cutoff were gone (placement
mode DISPLACE, lowest cutoffs first, so the lowest priorities are preempted first), records whose
virtual GPUs it took, and undoes itself completely: the search changes nothing. Carrying out the
preemption (demoting lazy victims, reserving, ``preempting``) is the scheduler's business.

The VC's jobs count at their priority also while they are being stopped for a preemptor (a non-lazy
victim gives up its virtual cells at once, but runs on until it is stopped): as in HiveD, where such a
job keeps the cells the preemptor did not take at its priority, a second preemptor of higher priority
may take its remaining GPUs (HiveD's stateful preemption: two preemptors of one gang, on its two nodes).
"""

from __future__ import annotations

from typing import Callable

from .jobs import DISPLACE, Job


class PreemptionSearch:
    """One per cluster state: searches with ``placement`` (a ``GuaranteedPlacement``, whose ``cut`` and
    ``stolen`` it sets while it runs); ``share_victims`` maps the GPUs' holders it took to the jobs to
    stop (a shared GPU's anchor stands for all its share jobs)."""

    __slots__ = ("placement", "share_victims", "stopping")

    def __init__(self, placement, share_victims: Callable[[list], list],
                 stopping: Callable[[str], dict] = lambda vc: {}):
        self.placement = placement
        self.share_victims = share_victims
        self.stopping = stopping  # VC -> {job id: priority} of its jobs being stopped for a preemptor

    def victims(self, j: Job) -> list[Job]:
        """The jobs ``j`` would displace (empty: it cannot be placed even so). Changes nothing."""
        placement = self.placement
        state = placement.state
        req = j.req
        vc = state.vcs[req.vc]
        if req.pinned_cell is not None:
            roots = [vc.pins[req.pinned_cell]]
        else:
            roots = [r for c in state.job_chains(req, vc) for r in vc.roots.get(c, ())]
        free = sum(r.free for r in roots)  # (a job being stopped holds no virtual GPU: its GPUs count here)
        stopping = self.stopping(req.vc)
        for cutoff in sorted({p for p in vc.prio_count if p < req.priority}
                             | {p for p in stopping.values() if p < req.priority}):
            # quick bound: even displacing every job of priority <= cutoff would not free enough
            if free + sum(n for r in roots for p, n in r.hp.items() if p <= cutoff) < req.total_gpus:
                continue
            with state.trial() as sim:  # (undone: the search changes nothing)
                placement.cut = cutoff
                try:
                    res = placement.place(j, DISPLACE, sim)
                    stolen = list(dict.fromkeys(placement.stolen))
                    if res is not None and stopping:  # their GPUs are taken physically, not virtually
                        for _, _, _, leaves in res:
                            for leaf in leaves:
                                x = leaf.job
                                if x is not None and stopping.get(x, cutoff + 1) <= cutoff and x not in stolen:
                                    stolen.append(x)
                finally:
                    placement.cut = -1
                    placement.stolen = []
            if res is not None:
                if state.shared:
                    stolen = self.share_victims(stolen)
                return [placement.jobs[v] for v in stolen]
        return []
