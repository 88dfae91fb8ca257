"""Opportunistic overflow: a guaranteed job its VC cannot place right now may run in idle GPUs elsewhere.

A lever beyond HiveD (issue 12), wrapped around the core ``Scheduler`` without changing it. When a
guaranteed job (priority >= 0) is queued, a *shadow* opportunistic copy (same tasks, priority -1, id
``<job>@overflow``) is queued beside it; whichever the core starts first wins and the other is withdrawn:

- the guaranteed job starts in its VC's cells: the shadow is withdrawn;
- the shadow starts (on GPUs no guaranteed job needs now, other VCs' idle cells first, as every
  opportunistic job): the guaranteed request is withdrawn and the job runs as opportunistic
  (``started`` with ``opportunistic: true``). Like any opportunistic job it is preempted when a VC needs
  those GPUs back; it is then queued again both ways (guaranteed in its VC, and as a shadow).

With ``keep_place`` (the simulator's default; issue 25) the guaranteed request is NOT withdrawn when the
shadow starts: it keeps its place in its VC's queue, and when that place comes the job moves into its
VC's cells (``preempted`` by its own id, then ``started``, at once; the shadow is withdrawn). Without it
the job left the queue and, once preempted, came back at its old submit-time position ahead of jobs that
had waited meanwhile: those then waited longer than on their private cluster (the sharing anomaly). The
live server does not use it yet (its lifecycle has no move of a running job). A job pinned to a cell
gets no shadow (it must run in that cell), nor does a job whose VC owns every GPU it may use: there is no
*elsewhere* (a one-VC cluster), and a shadow could only take the VC's own idle GPUs ahead of its own queue,
so the cluster would not be the VC's private cluster any more (issue 41: a one-VC cluster written as a
config replays exactly as ``private``).

With ``hold_private_time`` too (the simulator's default; issue 25) the VC's cells keep the private
cluster's timing: a job that ran T seconds outside as its shadow ends earlier than on its private
cluster, by T. Its cells in its VC are then held T seconds longer by a *ghost* (its guaranteed request,
kept in the core after the job's end and shown to nobody), and a job that completed entirely outside
leaves a ghost in its place in its VC's queue that holds its cells for T once its turn comes. So every
VC's own cells see exactly the arrivals, order and occupancy of its private cluster, and no job waits
longer than there (the sharing anomaly is 0 by construction, with immediate preemption); without it an
early end reordered the VC's next jobs and some of them waited longer. The price: GPU time held by
ghosts (``held_gpu_s``). The driver calls ``complete`` (not ``finish``) for a job that ran to its end,
takes the ghosts' ends with ``take_timers`` and reports them with ``ghost_end``.

To the driver everything carries the job's own id: the shadows never show in the decisions. Other VCs
keep their guarantee (a shadow is only ever opportunistic), so their sharing anomaly does not grow; the
cost is preemptions of overflowed jobs (the simulator's preemption keeps a job's progress).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .decisions import Decision
from .errors import RequestError
from .types import JobRequest

__all__ = ["OverflowScheduler", "SHADOW_SUFFIX", "gpus_outside_vc", "may_overflow", "shadow_of"]

SHADOW_SUFFIX = "@overflow"
_SHADOW_LEN = len(SHADOW_SUFFIX)


class _AsOwner:
    """``expected`` (anything with ``get``, looked up lazily) with a shadow's id read as its job's."""

    def __init__(self, expected: Any):
        self.expected = expected

    def get(self, job_id: str, default: Any = None) -> Any:
        return self.expected.get(_owner(job_id), default)


class OverflowScheduler:
    def __init__(self, inner: Any, keep_place: bool = False, hold_private_time: bool = False):
        if hold_private_time and not keep_place:
            raise ValueError("hold_private_time needs keep_place (a ghost keeps the job's place)")
        self.inner = inner
        self._keep_place = keep_place  # an overflowed job's guaranteed request stays queued (see module doc)
        self._ghosts = _Ghosts() if hold_private_time else None  # ghosts of ended jobs (see module doc)
        self._req: dict[str, JobRequest] = {}  # guaranteed jobs that may overflow, by id
        self._g_waiting: set[str] = set()  # jobs whose guaranteed request waits in the core
        self._shadow_waiting = _Tally(self._key)  # jobs whose shadow waits in the core (counted per VC, user)
        self._overflowed: set[str] = set()  # jobs running (or being stopped) as their shadow
        self._reserving: set[str] = set()  # guaranteed requests waiting for their victims to stop (no shadow)
        self._withdrawing: set[str] = set()  # ids whose "finished" we caused and swallow
        self._gone: set[str] = set()  # core ids withdrawn: later decisions about them in a list are stale
        self._requeue = True
        self._elsewhere: dict[tuple, bool] = {}  # (vc, chains) -> GPUs outside the VC in those chains

    # -- decisions ----------------------------------------------------------------------------------
    def _withdraw(self, job_id: str, now: float, out: list) -> None:
        self._withdrawing.add(job_id)
        self._translate(self.inner.finish(job_id, now), now, out)
        self._gone.add(job_id)

    def _submit(self, req: JobRequest, now: float, out: list) -> None:
        self._gone.discard(req.id)
        shadow = req.id.endswith(SHADOW_SUFFIX)  # its "queued" is not shown: no reason to compute
        self._translate(self.inner.submit(req, now, explain=not shadow) if shadow else self.inner.submit(req, now),
                        now, out)

    def _translate(self, decisions: list, now: float, out: list) -> None:
        """Decisions of the core -> decisions under the jobs' own ids, acting on shadows as they come;
        queueing a job again (or its shadow) waits until the whole list is seen, so a start later in the
        list is never undone."""
        requeue: list[str] = []  # shadows preempted: queue the guaranteed request again unless restarted
        shadow_later: list[str] = []  # guaranteed requests queued: queue a shadow beside them
        withdrawing, gone = self._withdrawing, self._gone
        # (the sets are changed in place, never replaced: local names for the per-decision lookups)
        reqs, g_waiting, shadow_waiting = self._req, self._g_waiting, self._shadow_waiting
        overflowed, reserving = self._overflowed, self._reserving
        ghosts = self._ghosts
        ghost_victims: list[str] = []  # ghosts a preemptor displaces: they stop at once (nothing runs)
        ghost_drops: list[str] = []  # ghosts demoted (lazy preemption): their place in the VC is gone
        ghost_starts: list[str] = []  # ghosts that started: they lend their GPUs (``Scheduler.lend``)
        for d in decisions:
            job, event = d.job, d.event
            if event == "finished" and job in withdrawing:
                withdrawing.discard(job)
                continue
            if job in gone:
                continue
            owner = job[:-_SHADOW_LEN] if job.endswith(SHADOW_SUFFIX) else job  # (_owner, written out: per decision)
            if ghosts is not None:
                if d.victims and ghosts.any_of(d.victims):
                    ghost_victims.extend(v for v in d.victims if v in ghosts)
                    others = tuple(v for v in d.victims if v not in ghosts)
                    if not others:  # it starts once the ghosts are stopped (below): nothing to show yet
                        continue
                    d = _renamed(d, job, victims=others)
                if owner == job and job in ghosts:
                    if event == "demoted":
                        ghost_drops.append(job)
                    else:
                        if event == "started":
                            ghost_starts.append(job)
                        self._ghost_decision(d, now, out)
                    continue
            if owner != job and owner in reqs:
                if event == "started":
                    shadow_waiting.discard(owner)
                    overflowed.add(owner)
                    if ghosts is not None:
                        ghosts.since[owner] = now
                    if owner in g_waiting and not self._keep_place:  # it leaves the VC's queue
                        g_waiting.discard(owner)
                        self._withdraw(owner, now, out)
                    vc = reqs[owner].vc
                    out.append(_renamed(
                        d, owner, opportunistic=True,
                        reason=f"running in idle GPUs outside VC {vc} (overflow); preemptible"))
                elif event == "preempted":
                    out.append(_renamed(d, owner))
                    overflowed.discard(owner)
                    if ghosts is not None:
                        ghosts.stopped_outside(owner, now)
                    if self._requeue:
                        shadow_waiting.add(owner)  # the core queued the shadow again
                        requeue.append(owner)
                        if owner in g_waiting:  # its place in its VC's queue was kept all along
                            out.append(Decision("queued", owner, now,
                                                reason=f"preempted by {d.by}; waiting in VC {reqs[owner].vc} "
                                                       f"(its place kept) and for idle GPUs"))
                    else:
                        if owner in g_waiting:  # stopped for good: its place in the VC goes too
                            g_waiting.discard(owner)
                            reserving.discard(owner)
                            self._withdraw(owner, now, out)
                        self._forget(owner)
                elif event == "finished":
                    out.append(_renamed(d, owner))
                    overflowed.discard(owner)
                    if ghosts is not None:  # (``complete`` read its time outside first, if it ran to its end)
                        ghosts.ended(owner)
                    self._forget(owner)
                elif event == "rejected":  # not queued again: the job waits in its VC only
                    shadow_waiting.discard(owner)
                continue  # a shadow's "queued": the job already shows as queued
            if d.victims:
                d = _renamed(d, job, victims=tuple(_owner(v) for v in d.victims))
            if event == "rejected" and job in overflowed:  # its place in the VC is refused (e.g. a
                g_waiting.discard(job)  # reconfiguration): it runs on in idle GPUs, preemptible
                reserving.discard(job)
                continue
            if event == "preempting" and job in reqs and self._runs(job):
                # stale: a withdrawal earlier in this list (an overflowed job's shadow, as the job moved into
                # its VC) freed this job's victims' GPUs and it started in a nested pass already; marking it
                # waiting again would make its end look like a cancel (no ghost: its cells freed early)
                continue
            out.append(d)
            if job not in reqs:
                continue
            if event != "preempting":
                reserving.discard(job)
            if event == "started":
                at = len(out) - 1  # where its "started" is (withdrawals below may add decisions after it)
                g_waiting.discard(job)
                if job in shadow_waiting:
                    shadow_waiting.discard(job)
                    self._withdraw(job + SHADOW_SUFFIX, now, out)
                if job in overflowed:  # its turn in its VC came: it moves from idle GPUs into its cells
                    overflowed.discard(job)
                    if ghosts is not None:
                        ghosts.stopped_outside(job, now)
                    self._withdraw(job + SHADOW_SUFFIX, now, out)
                    out.insert(at, Decision("preempted", job, now, by=job,
                                                      reason=f"moved into the cells of VC {reqs[job].vc}"))
            elif event == "preempting":  # cells reserved in its VC: it starts there once its victims stop,
                g_waiting.add(job)  # so its shadow leaves (it must never start beside it)
                reserving.add(job)
                if job in shadow_waiting:
                    shadow_waiting.discard(job)
                    self._withdraw(job + SHADOW_SUFFIX, now, out)
            elif event in ("queued", "preempted"):  # a preempted guaranteed job is queued again by the core
                if event == "queued" or self._requeue:
                    g_waiting.add(job)
                    shadow_later.append(job)
            elif event in ("finished", "rejected"):
                g_waiting.discard(job)
                self._forget(job)
                if ghosts is not None:
                    ghosts.forget(job)
        for job in ghost_drops:  # (a demoted job would run on as opportunistic work; a ghost has none)
            if job in ghosts:
                ghosts.forget(job, now)
                self._withdraw(job, now, out)
                self._req.pop(job, None)
        for job in ghost_starts:
            if job in ghosts and ghosts.running(job):
                self._translate(self.inner.lend(job, now), now, out)
        for job in ghost_victims:
            if job in ghosts and ghosts.running(job):
                try:
                    stopped = self.inner.preemption_done(job, now, requeue=True)
                except RequestError:  # (the preemption was called off meanwhile)
                    continue
                self._translate(stopped, now, out)
        for job in requeue:
            if job in shadow_waiting and job not in g_waiting:
                self._submit(reqs[job], now, out)
        for job in shadow_later:
            if (job in g_waiting and job not in shadow_waiting and job not in overflowed
                    and job not in reserving):
                shadow_waiting.add(job)
                shadow = shadow_of(reqs[job])
                self._submit(shadow, now, out)

    def _key(self, job: str) -> tuple[str, str]:
        req = self._req[job]
        return req.vc, req.user

    def _forget(self, job: str) -> None:
        if job not in self._overflowed and job not in self._shadow_waiting and job not in self._g_waiting:
            self._req.pop(job, None)

    # -- ghosts (hold_private_time) -------------------------------------------------------------------
    def _ghost_decision(self, d: Any, now: float, out: list) -> None:
        """A core decision about a ghost: it changes the ghost's hold, and shows to nobody, except a
        ``preempting`` (a ghost takes its place in its VC as the job did privately, victims included)."""
        ghosts, job, event = self._ghosts, d.job, d.event
        if event == "started":
            ghosts.start(job, now, at=len(out))
        elif event == "preempted":
            ghosts.preempted(job, now)
        elif event == "preempting":
            if d.victims:
                out.append(_renamed(d, job, victims=tuple(_owner(v) for v in d.victims)))
        elif event in ("finished", "rejected"):
            ghosts.forget(job)
            self._g_waiting.discard(job)
            self._reserving.discard(job)
            self._forget(job)

    def complete(self, job_id: str, now: float) -> list:
        """``job_id`` ran to its end (``finish`` is for a cancel). With ``hold_private_time``, a job that ran
        T seconds outside its VC ends as usual, but its cells in its VC stay held T seconds (or, when its
        place in its VC's queue still waits, its ghost holds them T seconds once its turn comes)."""
        ghosts = self._ghosts
        outside = ghosts.ran_outside(job_id, now) if ghosts is not None else 0.0
        if outside <= 0:
            return self.finish(job_id, now)
        gpus = self._req[job_id].total_gpus if job_id in self._req else 0
        out: list = []
        if job_id in self._overflowed:  # it ends in idle GPUs: its place in its VC's queue becomes a ghost
            if job_id in self._g_waiting:
                self._g_waiting.discard(job_id)
                self._reserving.discard(job_id)
                ghosts.wait(job_id, outside, gpus)
                self.inner.lend(job_id, now)  # (it holds its place, never GPUs: nothing changes now)
            self._translate(self.inner.finish(job_id + SHADOW_SUFFIX, now), now, out)
            return out
        if job_id in self._g_waiting or job_id in self._shadow_waiting:  # (not running: nothing to hold)
            ghosts.forget(job_id)
            return self.finish(job_id, now)
        ghosts.wait(job_id, outside, gpus)  # it runs in its VC's cells (it moved there): they stay held
        ghosts.start(job_id, now)
        out.append(Decision("finished", job_id, now))
        self._translate(self.inner.lend(job_id, now), now, out)  # its GPUs go to opportunistic work meanwhile
        return out

    def take_timers(self, positions: bool = False) -> list[tuple]:
        """The ghosts' ends scheduled since the last call, as ``(t, job, generation)``: the driver calls
        ``ghost_end(job, generation, t)`` at ``t`` (a stale generation is ignored). With ``positions``,
        ``(t, job, generation, at)``: a ghost that started in a pass of the call just returned is at
        ``at`` in its list of decisions (where its ``started`` would be, were it shown), so a driver can
        order ends at one instant as the job's would be on its private cluster; ``at`` is None for the
        ghost of a job that ran to its end in its VC's cells (it ranks as that job's start)."""
        if self._ghosts is None or not self._ghosts.timers:
            return []
        timers, self._ghosts.timers = self._ghosts.timers, []
        return timers if positions else [x[:3] for x in timers]

    def ghost_end(self, job_id: str, generation: int, now: float) -> list:
        """A ghost's hold is over: its cells are released (what that starts is returned)."""
        ghosts = self._ghosts
        out: list = []
        if ghosts is None or not ghosts.due(job_id, generation):
            return out
        ghosts.forget(job_id, now)
        self._withdraw(job_id, now, out)
        self._req.pop(job_id, None)
        return out

    @property
    def held_gpu_s(self) -> float:
        """GPU-seconds that ghosts held (the price of ``hold_private_time``; 0 without it)."""
        return self._ghosts.held_gpu_s if self._ghosts is not None else 0.0

    # -- calls --------------------------------------------------------------------------------------
    def _runs(self, job_id: str) -> bool:
        """The core runs ``job_id`` (its guaranteed request) now."""
        try:
            view = self.inner.job(job_id)
        except RequestError:
            return False
        return view is not None and view.state == "running"

    def _may_overflow(self, job: JobRequest) -> bool:
        """``may_overflow(job)`` and some GPU ``job`` may use lies outside its VC's guarantee."""
        if not may_overflow(job):
            return False
        chains = tuple(self.inner.state.job_chains(job, None))
        key = (job.vc, chains)
        got = self._elsewhere.get(key)
        if got is None:
            got = self._elsewhere[key] = gpus_outside_vc(self.inner.config, job.vc, chains) > 0
        return got

    def submit(self, job: JobRequest, now: float) -> list:
        decisions = self.inner.submit(job, now)  # a bad request raises before anything changed
        if self._may_overflow(job):
            self._req[job.id] = job
        out: list = []
        self._translate(decisions, now, out)
        return out

    def finish(self, job_id: str, now: float) -> list:
        out: list = []
        if job_id in self._overflowed:
            if job_id in self._g_waiting:  # its place in the VC's queue goes first (nothing starts it)
                self._g_waiting.discard(job_id)
                self._reserving.discard(job_id)
                self._withdraw(job_id, now, out)
            self._translate(self.inner.finish(job_id + SHADOW_SUFFIX, now), now, out)
            return out
        if job_id in self._shadow_waiting:
            self._shadow_waiting.discard(job_id)
            self._withdraw(job_id + SHADOW_SUFFIX, now, out)
        self._g_waiting.discard(job_id)
        self._reserving.discard(job_id)
        self._translate(self.inner.finish(job_id, now), now, out)
        return out

    def finish_many(self, job_ids, now: float) -> list:
        """``finish`` of each of ``job_ids`` with the core's passes run once after the last (the core's
        ``finish_many``); the jobs neither the wrapper nor the core holds are skipped."""
        out: list = []
        later: list = []
        with self.inner.passes_deferred(later):
            for job_id in job_ids:
                try:
                    out += self.finish(job_id, now)
                except RequestError:
                    continue
        self._translate(later, now, out)
        return out

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list:
        out: list = []
        target = job_id + SHADOW_SUFFIX if job_id in self._overflowed else job_id
        self._requeue = requeue
        try:
            self._translate(self.inner.preemption_done(target, now, requeue=requeue), now, out)
        finally:
            self._requeue = True
        return out

    def set_node_health(self, node: str, healthy: bool, now: float) -> list:
        out: list = []
        self._translate(self.inner.set_node_health(node, healthy, now), now, out)
        return out

    def set_gpu_health(self, node: str, gpu: int, healthy: bool, now: float) -> list:
        out: list = []
        self._translate(self.inner.set_gpu_health(node, gpu, healthy, now), now, out)
        return out

    def set_user_limits(self, vc: str, limits: Any, now: float) -> list:
        out: list = []
        self._translate(self.inner.set_user_limits(vc, limits, now), now, out)
        return out

    def reconfigure(self, config: Any, now: float) -> list:
        out: list = []
        if self._ghosts is not None:  # a new cluster has new timing: the ghosts' holds end here
            for job in sorted(set(self._ghosts.waiting) | set(self._ghosts.ends)):
                self._ghosts.forget(job, now)
                self._withdraw(job, now, out)
                self._req.pop(job, None)
        self._translate(self.inner.reconfigure(config, now), now, out)
        self._elsewhere.clear()  # (the new config's VCs own other cells)
        return out

    def schedule(self, now: float) -> list:
        out: list = []
        self._translate(self.inner.schedule(now), now, out)
        return out


    # -- the rest of the core's surface (the live server's calls) -------------------------------------
    def is_overflowed(self, job_id: str) -> bool:
        """``job_id`` runs (or is being stopped) in idle GPUs as its opportunistic shadow."""
        return job_id in self._overflowed

    def submit_if_waiting(self, job: JobRequest, now: float):
        """The core's group-commit submit (``submit`` or nothing, undone exactly by ``withdraw_waiting``).

        A job that may overflow is queued with its shadow, as ``submit`` does, only if the core would just
        queue both (the job cannot start in its VC and its shadow cannot start in idle GPUs); then its
        ``queued`` decision is returned. Otherwise nothing changes and None says: use ``submit``."""
        if not self._may_overflow(job):
            return self.inner.submit_if_waiting(job, now)
        decision = self.inner.submit_if_waiting(job, now)  # a bad request raises before anything changed
        if decision is None:
            return None
        shadow = shadow_of(job)
        try:
            shadow_decision = self.inner.submit_if_waiting(shadow, now)
        except Exception:
            shadow_decision = None
        if shadow_decision is None:  # the shadow would start (or submit decides it): nothing may remain
            self.inner.withdraw_waiting([job.id])
            return None
        self._req[job.id] = job  # the state ``submit`` leaves: the job and its shadow wait
        self._gone.discard(shadow.id)
        self._g_waiting.add(job.id)
        self._shadow_waiting.add(job.id)
        return decision

    def withdraw_waiting(self, job_ids: list[str]) -> None:
        """Undo ``submit_if_waiting`` of ``job_ids`` (the latest, in order), shadows included: as if never
        submitted. RequestError (nothing changed) if one of them is no longer just waiting."""
        ids: list[str] = []
        paired: list[str] = []
        for job_id in job_ids:
            ids.append(job_id)
            if job_id in self._shadow_waiting and job_id in self._g_waiting and job_id not in self._overflowed:
                ids.append(job_id + SHADOW_SUFFIX)
                paired.append(job_id)
        self.inner.withdraw_waiting(ids)
        for job_id in paired:
            self._shadow_waiting.discard(job_id)
            self._g_waiting.discard(job_id)
            self._req.pop(job_id, None)

    def adopt(self, job: JobRequest, placement: Any, opportunistic: bool, now: float) -> list:
        """Put back a running job after a restart. A guaranteed job that ran opportunistically (it had
        overflowed) is adopted as its shadow, so it stays preemptible and is queued again both ways."""
        out: list = []
        if opportunistic and may_overflow(job):
            shadow = shadow_of(job)
            decisions = self.inner.adopt(shadow, placement, True, now)
            self._req[job.id] = job
            self._overflowed.add(job.id)
            self._gone.discard(shadow.id)
            self._translate(decisions, now, out)
            return out
        self._translate(self.inner.adopt(job, placement, opportunistic, now), now, out)
        return out

    def job(self, job_id: str):
        """The core's view of ``job_id`` under its own id (an overflowed job's view is its shadow's)."""
        if job_id in self._overflowed:
            view = self.inner.job(job_id + SHADOW_SUFFIX)
            if view is None:
                return None
            return dataclasses.replace(view, id=job_id, priority=self._req[job_id].priority)
        return self.inner.job(job_id)

    def jobs(self, *args: Any, **kwargs: Any) -> list:
        """The core's jobs, shadows shown under their owner's id (a waiting shadow is not shown)."""
        out = []
        for v in self.inner.jobs(*args, **kwargs):
            owner = _owner(v.id)
            if owner == v.id:
                if owner not in self._overflowed:  # (an overflowed job's place in its VC's queue is not shown)
                    out.append(v)
            elif owner in self._overflowed:
                out.append(dataclasses.replace(v, id=owner, priority=self._req[owner].priority))
        return out

    def what_if(self, job: JobRequest, now: float):
        """The core's answer; a guaranteed job that would wait but whose shadow would start now is
        answered ``start`` (opportunistic, the overflow reason), as ``submit`` would do."""
        answer = self.inner.what_if(job, now)
        if answer.outcome != "wait" or not self._may_overflow(job):
            return answer
        shadow = self.inner.what_if(shadow_of(job), now)
        if shadow.outcome != "start":
            return answer
        return dataclasses.replace(shadow, opportunistic=True,
                                   reason=f"running in idle GPUs outside VC {job.vc} (overflow); preemptible")

    def estimate_starts(self, now: float, expected=None, max_waiting=None) -> dict:
        """The core's forward simulation with each job and its shadow as alternatives (the first to
        start withdraws the other, as ``submit`` does), a shadow expected to run as long as its job, and
        every estimate under the job's own id: the earlier of its two starts, the shadow's saying
        where it would run."""
        alternatives, names = self._alternatives()
        # (max_waiting: a job and its shadow are replayed together and count once, as alternatives)
        raw = self.inner.estimate_starts(now, _AsOwner(expected) if expected else None, alternatives=alternatives,
                                         names=names, max_waiting=max_waiting)
        return _by_owner(raw, self._overflowed, self._shadow_waiting, {j: r.vc for j, r in self._req.items()})

    def estimates_snapshot(self, estimator, now: float, expected=None, max_waiting=None) -> "_OverflowSnapshot":
        """``estimate_starts`` in two halves (the core's ``estimates_snapshot``): what it reads of this
        wrapper is copied too, so ``run()`` answers what ``estimate_starts`` answered now."""
        alternatives, names = self._alternatives()
        inner = self.inner.estimates_snapshot(estimator, now, _AsOwner(expected) if expected else None,
                                              alternatives=alternatives, names=names, max_waiting=max_waiting)
        return _OverflowSnapshot(inner, frozenset(self._overflowed), frozenset(self._shadow_waiting),
                                 {j: r.vc for j, r in self._req.items()})

    def _alternatives(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each waiting job and its waiting shadow as alternatives; how a shadow's id is shown."""
        alternatives: dict[str, str] = {}
        names: dict[str, str] = {}
        for job in self._req:
            shadow = job + SHADOW_SUFFIX
            names[shadow] = job
            if job in self._g_waiting and job in self._shadow_waiting:
                alternatives[job], alternatives[shadow] = shadow, job
        return alternatives, names

    def _waiting_shadows(self, vc: str, user: str | None = None) -> int:
        """Core jobs of ``vc`` (``user``) that wait but are not a waiting job of their own: waiting shadows
        (counted as they come and go: a submit is not O(queue)) and overflowed jobs' places in the queue."""
        places = sum(1 for j in self._overflowed if j in self._g_waiting and self._req[j].vc == vc
                     and (user is None or self._req[j].user == user)) if self._keep_place else 0
        return self._shadow_waiting.count(vc, user) + places

    def check_limits(self, job: JobRequest, time_limit_s: float | None = None, also_waiting: int = 0) -> None:
        """The core's check; a job waiting with its shadow counts once toward ``max_queued_jobs``."""
        return self.inner.check_limits(job, time_limit_s, also_waiting - self._waiting_shadows(job.vc, job.user))

    def vc_view(self, *args: Any, **kwargs: Any) -> dict:
        """The core's VC view; a job waiting with its shadow counts once in ``queue_length``."""
        out = self.inner.vc_view(*args, **kwargs)
        for name, row in out.items():
            if "queue_length" in row:
                row["queue_length"] -= self._waiting_shadows(name)
        return out

    def cluster_view(self, *args: Any, **kwargs: Any):
        return _rename(self.inner.cluster_view(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # everything else is the core's (views, limits, health...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("inner",) or name.startswith("_") or name in type(self).__dict__:
            object.__setattr__(self, name, value)
        else:  # a setting of the core (backfill...)
            setattr(self.inner, name, value)


class _Ghosts:
    """What ``hold_private_time`` tracks: how long each job ran outside its VC as its shadow, and the
    ghosts (ended jobs whose guaranteed request still holds, or waits for, their VC's cells)."""

    __slots__ = ("outside", "since", "waiting", "gpus", "ends", "timers", "generation", "held_gpu_s")

    def __init__(self) -> None:
        self.outside: dict[str, float] = {}  # job -> seconds its shadow ran (intervals that ended)
        self.since: dict[str, float] = {}  # job -> when its running shadow started
        self.waiting: dict[str, float] = {}  # ghost not running -> seconds it holds once started
        self.gpus: dict[str, int] = {}  # ghost -> its GPUs
        self.ends: dict[str, tuple[float, float, int]] = {}  # running ghost -> (start, end, generation)
        self.timers: list[tuple[float, str, int, int | None]] = []  # ends not yet handed to the driver
        self.generation = 0
        self.held_gpu_s = 0.0

    def __contains__(self, job: object) -> bool:
        return job in self.waiting or job in self.ends

    def any_of(self, jobs: tuple) -> bool:
        return any(v in self.waiting or v in self.ends for v in jobs)

    def running(self, job: str) -> bool:
        return job in self.ends

    def stopped_outside(self, job: str, now: float) -> None:
        since = self.since.pop(job, None)
        if since is not None:
            self.outside[job] = self.outside.get(job, 0.0) + (now - since)

    def ran_outside(self, job: str, now: float) -> float:
        """Seconds ``job`` ran outside its VC up to ``now`` (its running shadow's interval closed)."""
        self.stopped_outside(job, now)
        return self.outside.pop(job, 0.0)

    def ended(self, job: str) -> None:
        self.since.pop(job, None)
        self.outside.pop(job, None)

    def wait(self, job: str, hold: float, gpus: int) -> None:
        self.waiting[job] = hold
        self.gpus[job] = gpus

    def start(self, job: str, now: float, at: int | None = None) -> None:
        hold = self.waiting.pop(job)
        self.generation += 1
        self.ends[job] = (now, now + hold, self.generation)
        self.timers.append((now + hold, job, self.generation, at))

    def preempted(self, job: str, now: float) -> None:
        start, end, _ = self.ends.pop(job)
        self.held_gpu_s += self.gpus[job] * (now - start)
        self.waiting[job] = max(0.0, end - now)

    def due(self, job: str, generation: int) -> bool:
        entry = self.ends.get(job)
        return entry is not None and entry[2] == generation

    def forget(self, job: str, now: float | None = None) -> None:
        entry = self.ends.pop(job, None)
        if entry is not None and now is not None:
            self.held_gpu_s += self.gpus.get(job, 0) * (now - entry[0])
        self.waiting.pop(job, None)
        self.gpus.pop(job, None)
        self.outside.pop(job, None)
        self.since.pop(job, None)


def _by_owner(raw: dict, overflowed, shadow_waiting, vcs) -> dict:
    """The core's estimates under each job's own id: the earlier of its and its shadow's starts (none for
    an overflowed job, which runs). ``vcs``: job id -> its VC."""
    out: dict = {}
    for core_id, est in raw.items():
        owner = _owner(core_id)
        if owner in overflowed:  # running: no start to estimate
            continue
        if owner != core_id:
            if owner not in shadow_waiting:
                continue
            if est.start is not None:
                vc = vcs[owner] if owner in vcs else "its VC"
                est = dataclasses.replace(est, basis=f"{est.basis}, in idle GPUs outside VC {vc} (overflow)")
        have = out.get(owner)
        if have is None or (est.start is not None and (have.start is None or est.start < have.start)):
            out[owner] = est
    return out


class _OverflowSnapshot:
    """The core's ``EstimatesSnapshot`` and the wrapper's state its answer is read with, copied."""

    def __init__(self, inner, overflowed: frozenset, shadow_waiting: frozenset, vcs: dict[str, str]):
        self.inner = inner
        self.version = inner.version
        self._overflowed = overflowed
        self._shadow_waiting = shadow_waiting
        self._vcs = vcs

    def run(self) -> dict:
        return _by_owner(self.inner.run(), self._overflowed, self._shadow_waiting, self._vcs)


class _Tally:
    """A set of job ids that also counts its members per (VC, user), so that the count a submit's
    ``check_limits`` needs costs O(1) instead of a walk over every waiting shadow. ``key`` gives a member's
    (VC, user) when it is added; the key is kept, so ``discard`` needs nothing else."""

    def __init__(self, key: Any):
        self._key = key
        self._members: dict[str, tuple[str, str]] = {}
        self._by_user: dict[tuple[str, str], int] = {}
        self._by_vc: dict[str, int] = {}

    def __contains__(self, job: object) -> bool:
        return job in self._members

    def __iter__(self):
        return iter(list(self._members))

    def __len__(self) -> int:
        return len(self._members)

    def add(self, job: str) -> None:
        if job in self._members:
            return
        key = self._members[job] = self._key(job)
        self._by_user[key] = self._by_user.get(key, 0) + 1
        self._by_vc[key[0]] = self._by_vc.get(key[0], 0) + 1

    def discard(self, job: str) -> None:
        key = self._members.pop(job, None)
        if key is None:
            return
        for table, k in ((self._by_user, key), (self._by_vc, key[0])):
            table[k] -= 1
            if not table[k]:
                del table[k]

    def count(self, vc: str, user: str | None = None) -> int:
        return self._by_vc.get(vc, 0) if user is None else self._by_user.get((vc, user), 0)


def _rename(value: Any) -> Any:
    """``value`` (a JSON-like view) with every ``<job>@overflow`` string shown as ``<job>``."""
    if isinstance(value, str):
        return _owner(value)
    if isinstance(value, dict):
        return {_rename(k) if isinstance(k, str) else k: _rename(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_rename(v) for v in value)
    return value


def may_overflow(job: JobRequest) -> bool:
    """A guaranteed job that asks for GPUs and may run anywhere: a job pinned to a cell (HiveD's
    reservation) must run in that cell, so it gets no shadow and waits there as in the bare core."""
    return job.priority >= 0 and job.pinned_cell is None and any(t.gpus for t in job.tasks)


def gpus_outside_vc(config: Any, vc: str, chains: tuple[str, ...] | list[str]) -> int:
    """GPUs of ``chains`` in the cluster ``config`` that VC ``vc`` does not own (virtual or pinned cells):
    where an overflowed job of ``vc`` could run without taking its own VC's place."""
    chains = set(chains)
    total = sum(1 for top in config.physical_cells if top.chain in chains
                for c in top.walk() if c.gpu is not None)
    spec = config.virtual_clusters.get(vc)
    if spec is None:
        return total
    types = config.cell_types
    own = sum(types[v.cell_type].leaf_count * v.number for v in spec.virtual_cells if v.chain in chains)
    own += sum(types[config.pinned_cells[p].type].leaf_count for p in spec.pinned_cells
               if config.pinned_cells[p].chain in chains)
    return total - own


def shadow_of(job: JobRequest) -> JobRequest:
    """``job``'s shadow: the same request, opportunistic (priority -1), under ``<id>@overflow``.

    The same as ``dataclasses.replace(job, id=..., priority=-1)``, built directly for a ``JobRequest`` (every
    job that waits gets one; ``replace`` introspects the fields each time). Every field is passed on: a
    test compares it with ``replace`` on a request whose fields are all set."""
    if type(job) is not JobRequest:
        return dataclasses.replace(job, id=job.id + SHADOW_SUFFIX, priority=-1)
    return JobRequest(job.id + SHADOW_SUFFIX, job.vc, job.user, job.tasks, -1, job.within, job.pinned_cell,
                      job.lazy_preemption, job.submit_time, job.group, job.groups, job.kind, job.time_limit_s)


def _renamed(d: Any, job: str, **changes: Any) -> Any:
    """``dataclasses.replace(d, job=job, **changes)``, built directly for the core's ``Decision`` (it runs
    for most decisions of an overflow replay; ``replace`` introspects the fields each time)."""
    if type(d) is not Decision:
        return dataclasses.replace(d, job=job, **changes)
    fields = {"placement": d.placement, "opportunistic": d.opportunistic, "reason": d.reason, "victims": d.victims,
              "by": d.by, "error": d.error}
    fields.update(changes)
    return Decision(d.event, job, d.t, **fields)


def _owner(job: str) -> str:
    return job[: -len(SHADOW_SUFFIX)] if job.endswith(SHADOW_SUFFIX) else job
