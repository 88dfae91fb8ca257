"""The admission gate: per-user limits of each VC, checked where the core picks the next job of a VC.

A waiting job whose start would take its owner over ``max_gpus``, ``max_running_jobs`` or
``max_kernels`` (``limits.blocking``) is skipped with an ``OverLimit`` reason; the pass goes on
with the jobs behind it, so one user at a limit never holds back the others. A skipped job neither
places, nor preempts, nor counts as overtaken (anti-starvation), so gangs, preemption and HiveD's
guarantee to the VC are unchanged: the gate only ever removes a job from a pass.

What a user holds is derived from the core's jobs (started = running or preempting), once per pass
and per user, then grown by the jobs the pass starts (a pass only ever adds to what users hold, except
for reservations it takes over, so the counts can only over-estimate: never past a limit).
"""

from __future__ import annotations

from typing import Callable, Iterable

from .errors import LimitRefusal
from .jobs import WAITING, Job, OverLimit
from .limits import LimitTable, Usage, UserLimits, blocking, is_gpu_kernel, owner_groups, queue_refusal, refusal

NO_LIMITS = UserLimits()


class AdmissionGate:
    """Per-VC ``LimitTable``s and the checks that use them (a part of the ``Scheduler``)."""

    def __init__(self, jobs: Callable[[], Iterable[Job]]):
        self._jobs = jobs
        self.tables: dict[str, LimitTable] = {}

    # --- the tables ---------------------------------------------------------------------------
    def set(self, vc: str, table: LimitTable) -> None:
        if table:
            self.tables[vc] = table
        else:
            self.tables.pop(vc, None)

    def table(self, vc: str) -> LimitTable:
        return self.tables.get(vc) or LimitTable()

    def limits_of(self, req) -> UserLimits:
        table = self.tables.get(req.vc)
        return table.resolve(req.user, owner_groups(req)) if table is not None else NO_LIMITS

    # --- what users hold -----------------------------------------------------------------------
    def usage(self, vc: str, user: str) -> Usage:
        gpus = running = kernels = 0
        for j in self._jobs():
            if j.state is not WAITING and j.req.vc == vc and j.req.user == user:
                gpus += j.req.total_gpus
                running += 1
                kernels += is_gpu_kernel(j.req)
        return Usage(gpus, running, kernels)

    def waiting(self, vc: str, user: str) -> int:
        return sum(1 for j in self._jobs() if j.state is WAITING and j.req.vc == vc and j.req.user == user)

    # --- the gate (one ``cache`` per scheduling pass) --------------------------------------------
    def blocked(self, j: Job, cache: dict) -> OverLimit | None:
        """Why ``j`` may not start now, or None. ``cache``: usage per (vc, user) within one pass."""
        req = j.req
        if req.vc not in self.tables:
            return None
        limits = self.limits_of(req)
        if not limits:
            return None
        key = (req.vc, req.user)
        use = cache.get(key)
        if use is None:
            use = cache[key] = self.usage(req.vc, req.user)
        hit = blocking(limits, req.vc, use, req)
        return OverLimit(*hit) if hit is not None else None

    def started(self, j: Job, cache: dict) -> None:
        """``j`` started (or began preempting) during the pass that owns ``cache``."""
        key = (j.req.vc, j.req.user)
        use = cache.get(key)
        if use is not None:
            cache[key] = Usage(use.gpus + j.req.total_gpus, use.running_jobs + 1,
                               use.kernels + is_gpu_kernel(j.req))

    # --- at submit -----------------------------------------------------------------------------
    def check_submit(self, req, time_limit_s: float | None = None, also_waiting: int = 0) -> None:
        """Raise LimitRefusal when ``req`` may not be queued under its owner's limits: it can never run
        under them, or its owner already has ``max_queued_jobs`` waiting (``also_waiting``: more of theirs
        about to be queued that the core does not know yet)."""
        if req.vc not in self.tables:
            return
        limits = self.limits_of(req)
        if not limits:
            return
        hit = refusal(limits, req.vc, gpus=req.total_gpus, priority=req.priority, time_limit_s=time_limit_s)
        if hit is not None:
            field, message = hit
            limit = {"tasks": "max_gpus", "priority": "max_priority", "time_limit_s": "max_time_limit_s"}[field]
            raise LimitRefusal(field, message, limit)
        if limits.max_queued_jobs is not None:
            message = queue_refusal(limits, req.vc, self.waiting(req.vc, req.user) + also_waiting)
            if message is not None:
                raise LimitRefusal("vc", message, "max_queued_jobs", queue_full=True)
