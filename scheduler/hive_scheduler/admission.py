"""The admission gate: per-user limits of each VC, checked where the core picks the next job of a VC.

A waiting job whose start would take its owner over ``max_gpus``, ``max_running_jobs`` or
``max_kernels`` (``limits.blocking``) is skipped with an ``OverLimit`` reason; the pass goes on
with the jobs behind it, so one user at a limit never holds back the others. A skipped job neither
places, nor preempts, nor counts as overtaken (anti-starvation), so gangs, preemption and HiveD's
guarantee to the VC are unchanged: the gate only ever removes a job from a pass.

What users hold is derived from the core's jobs (started = running or preempting), in one walk over
them per pass (for every VC with limits at once), then grown by the jobs the pass starts (a pass only ever adds to what users hold, except
for reservations it takes over, so the counts can only over-estimate: never past a limit).
"""

from __future__ import annotations

from typing import Callable, Iterable

from .errors import LimitRefusal
from .jobs import WAITING, Job, OverLimit
from .limits import LimitTable, Usage, UserLimits, blocking, is_gpu_kernel, owner_groups, queue_refusal, refusal

NO_LIMITS = UserLimits()
NOTHING = Usage()


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
        return self.held({vc: None}).get(vc, {}).get(user, NOTHING)

    def held(self, vcs) -> dict[str, dict[str, Usage]]:
        """VC -> user -> what their started jobs hold there, for the VCs in ``vcs`` (one walk over the jobs)."""
        out: dict[str, dict[str, list[int]]] = {vc: {} for vc in vcs}
        for j in self._jobs():  # (hot: every pass of a VC with limits walks all jobs once)
            if j.state is WAITING:
                continue
            req = j.req
            per_user = out.get(req.vc)
            if per_user is None:
                continue
            u = per_user.get(req.user)
            if u is None:
                u = per_user[req.user] = [0, 0, 0]
            u[0] += j.gpus  # == req.total_gpus, computed once
            u[1] += 1
            if j.gpus and req.kind == "kernel":
                u[2] += 1
        return {vc: {user: Usage(*u) for user, u in per_user.items()} for vc, per_user in out.items()}

    def waiting(self, vc: str, user: str) -> int:
        return sum(1 for j in self._jobs() if j.state is WAITING and j.req.vc == vc and j.req.user == user)

    # --- the gate (one ``cache`` per scheduling pass) --------------------------------------------
    def blocked(self, j: Job, cache: dict) -> OverLimit | None:
        """Why ``j`` may not start now, or None. ``cache``: VC -> user -> usage, within one pass."""
        req = j.req
        if req.vc not in self.tables:
            return None
        limits = self.limits_of(req)
        if not limits:
            return None
        if not cache:  # first use in this pass: every limited VC in one walk
            cache.update(self.held(self.tables))
        hit = blocking(limits, req.vc, cache[req.vc].get(req.user, NOTHING), req)
        return OverLimit(*hit) if hit is not None else None

    def started(self, j: Job, cache: dict) -> None:
        """``j`` started (or began preempting) during the pass that owns ``cache``."""
        per_user = cache.get(j.req.vc)
        if per_user is not None:
            use = per_user.get(j.req.user, NOTHING)
            per_user[j.req.user] = Usage(use.gpus + j.req.total_gpus, use.running_jobs + 1,
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
        hit = refusal(limits, req.vc, gpus=req.total_gpus, priority=req.priority, time_limit_s=time_limit_s,
                      kind=req.kind)
        if hit is not None:
            field, message = hit
            limit = {"tasks": "max_gpus", "priority": "max_priority", "time_limit_s": "max_time_limit_s"}[field]
            raise LimitRefusal(field, message, limit)
        if limits.max_queued_jobs is not None:
            message = queue_refusal(limits, req.vc, self.waiting(req.vc, req.user) + also_waiting)
            if message is not None:
                raise LimitRefusal("vc", message, "max_queued_jobs", queue_full=True)
