"""The unit of work: the async shell that runs the lifecycle machine's effects.

Every change to a job is a *fact* (an event of ``lifecycle.machine``: a request, an exit, a launch
result, a core decision) applied in a unit of work (``unit``): the machine steps each job, the store
writes of all of them go in one transaction with one clock reading, and only after the commit do the
effects run (core calls, launches, stops, exit acknowledgements, one publication). A failed commit
changes nothing: facts stay queued for the next unit, requests are answered 503.

``UnitOfWork`` is a part the service holds (``HiveService.work``), built with exactly what it uses: the
store, the core, the launcher, the unfinished jobs, the metrics, the progress tracker, the start estimates,
the event bus, the cluster's config, the GPUs' UUIDs, the jobs root, the graces and the service's clock;
the shares of a GPU, the moves and the dependency gate are handed to it once they are built (they are
handed this unit of work themselves: ``attach_parts``). The per-job operations it starts (launch, stop,
adopt) are chained per job.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import logging
import pathlib
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from hive_scheduler import ClusterConfig
from hive_scheduler.protocol import LiveSchedulerCore

from hive_scheduler import RequestError
from hive_scheduler.words import gpu_list_text

from hive_lab_server.errors import StoreUnavailable
from hive_lab_server.execution.launchers.base import Launcher, LaunchError, TaskExit
from hive_lab_server.jobs.start_estimates import StartEstimates
from hive_lab_server.jobs.lifecycle import launch_plan, machine as m, presentation
from hive_lab_server.jobs.lifecycle.active import ActiveJob
from hive_lab_server.jobs.lifecycle.work import DependencyGate, EventSink, JobViews
from hive_lab_server.store import Store
from hive_lab_server.timeshare.progress import ProgressTracker
from hive_lab_server.usage.metrics import Metrics

if TYPE_CHECKING:  # built after this part, each handed it (``attach_parts``)
    from hive_lab_server.jobs.lifecycle.moves import Moves
    from hive_lab_server.jobs.lifecycle.share_grants import ShareGrants

log = logging.getLogger("hive_lab_server")


MAX_EXIT_JOBS = 4  # jobs whose exits one unit applies at most (poll_launcher)


def exits_by_jobs(exits: list[TaskExit], jobs: int) -> list[list[TaskExit]]:
    """``exits`` in the order reported, cut into lists of at most ``jobs`` jobs' exits each; one job's exits
    stay in one list (the machine sees them together, as when they were applied in one unit). At least
    one list, maybe empty (the facts still pending are applied with the first)."""
    ordinal: dict[str, int] = {}  # job -> its place among the jobs, by its first exit
    chunks: list[list[TaskExit]] = [[]]
    for e in exits:
        n = ordinal.setdefault(e.job_id, len(ordinal)) // jobs
        if n == len(chunks):
            chunks.append([])
        chunks[n].append(e)
    return chunks


def _decision_job(d: Any) -> str | None:
    value = getattr(d, "job", None)
    return value if isinstance(value, str) else None


class UnitOfWork:
    """The unit of work and the effects it runs (held by ``HiveService`` as ``work``)."""

    # handed over by ``attach_parts`` (each of them is built with this unit of work)
    shares: ShareGrants
    moves: Moves
    dependencies: DependencyGate

    def __init__(self, *, store: Store, scheduler: LiveSchedulerCore, launcher: Launcher,
                 active: dict[str, ActiveJob], metrics: Metrics, progress: ProgressTracker,
                 start_estimates: StartEstimates, events: EventSink, views: JobViews, config: ClusterConfig,
                 gpu_uuids: Mapping[tuple[str, int], str], jobs_root: pathlib.Path, now: Callable[[], float],
                 preemption_grace_s: float, stop_grace_s: float, checkpoint_grace_s: float):
        self.store = store
        self.scheduler = scheduler
        self.launcher = launcher
        self.active = active
        self.metrics = metrics
        self.progress = progress
        self.start_estimates = start_estimates
        self.events = events
        self.views = views  # the REST view of a job (published after a commit)
        self.config = config
        self.gpu_uuids = gpu_uuids
        self.jobs_root = jobs_root
        self.now = now  # the service's clock (never goes back)
        self.preemption_grace_s = preemption_grace_s
        self.stop_grace_s = stop_grace_s
        self.checkpoint_grace_s = checkpoint_grace_s  # SIGUSR1 -> exit, before the stop (docs/checkpoint.md)
        self.store_error: str | None = None  # the last failed commit, until one succeeds
        self._deadlines: list[tuple[float, str]] = []  # heap of running attempts' deadlines (checked each poll)
        self._pending: list[tuple[str, m.Event]] = []  # facts whose unit of work did not commit yet
        self._unacked: list[TaskExit] = []  # exits in those facts (acknowledged to the launcher on commit)
        self._ops: dict[str, asyncio.Task] = {}
        # the launches one placement pass starts are prepared and started with a turn of the event loop free
        # of launches between two (dirs, files, request, spawn: ~20 ms each on a busy machine), so they do not
        # hold up every read together, and requests are taken between them as before (main's lock and its
        # turn); a lone launch waits for no turn (issue 40: submit -> running)
        self._launch_busy = False  # a launch had this turn of the loop or the one before (``_take_launch_turn``)
        self._launch_waiters: collections.deque[asyncio.Future] = collections.deque()
        self._poll_lock = asyncio.Lock()  # one launcher poll (and the handling of its exits) at a time
        self._adopting: list[asyncio.Task] = []
        self._state_listeners: list[Callable[[str, str, str], None]] = []

    def attach_parts(self, *, shares: ShareGrants, moves: Moves, dependencies: DependencyGate) -> None:
        """The parts this unit of work calls that are built with it: a share's device and grant at
        placement and launch, the GPU type a job was placed on, the dependency gate before the core."""
        self.shares = shares
        self.moves = moves
        self.dependencies = dependencies

    @property
    def pending(self) -> list[tuple[str, m.Event]]:
        """The facts whose unit did not commit (the store refused it), applied again by the next unit."""
        return list(self._pending)

    def on_state_change(self, listener: Callable[[str, str, str], None]) -> None:
        """``listener(job_id, state, reason)`` soon after each stored transition (on the event loop, once
        the transaction is committed, so it may call ``submit``/``cancel``)."""
        self._state_listeners.append(listener)

    def tell_listeners(self, job_id: str, state: str, reason: str) -> None:
        """Let the state listeners hear of a committed transition (on the next turn of the event loop)."""
        for listener in self._state_listeners:
            asyncio.get_running_loop().call_soon(self._notify, listener, job_id, state, reason)

    async def poll_launcher(self) -> None:
        """Apply the exits the launcher reports (and the facts still pending): one unit per
        ``MAX_EXIT_JOBS`` jobs' exits, the loop turning between them, so a read waits for one such unit
        (its commit, its jobs' core finishes and their placements), not for all the exits a poll found
        (issue 40: a poll after a burst of short jobs held the loop for up to 1.4 s)."""
        async with self._poll_lock:  # (see _stop)
            exits = await self.launcher.poll()
            if not exits and not self._pending:
                return
            chunks = exits_by_jobs(exits, MAX_EXIT_JOBS)
            for i, chunk in enumerate(chunks):
                if i:
                    await asyncio.sleep(0)
                self.handle_exits(chunk)

    def cancel_operations(self) -> None:
        """Cancel the per-job operations in flight (the service stops; the next start adopts the tasks)."""
        for task in list(self._ops.values()):
            task.cancel()

    def unit(self, facts: list[tuple[str, m.Event]], *, request: bool = False, exits: list[TaskExit] = (),
              write: Callable[[Any, float], None] | None = None,
              committed: Callable[[], None] | None = None) -> list[str]:
        """Apply ``facts`` (and those still pending) in one transaction; then run their effects.

        ``request``: the facts come from a request; if the commit fails they are dropped and
        StoreUnavailable raised (nothing was acknowledged). Other facts stay pending for the next unit.
        ``write(batch, now)`` adds writes of its own to the transaction; ``committed()`` runs once it is
        committed, before the effects. Returns the jobs that changed."""
        all_facts = self._pending + list(facts)
        now = self.now()
        lcs: dict[str, m.Job] = {}
        effects: list[tuple[str, m.Event, m.Effect]] = []
        for job_id, event in all_facts:
            job = self.active.get(job_id)
            if job is None:
                continue
            before = lcs.get(job_id, job.lc)
            after, out = m.step(before, event)
            lcs[job_id] = after
            effects.extend((job_id, event, e) for e in out)
        changed: list[str] = []
        try:
            with self.store.begin() as batch:
                if write is not None:
                    write(batch, now)
                for job_id, event, e in effects:
                    self._write(batch, self.active[job_id], lcs[job_id], event, e, now)
                    if job_id not in changed and isinstance(e, m.Record):
                        changed.append(job_id)
        except Exception as exc:
            if self.store_error is None:
                log.warning("hive-lab: the store refuses writes (%s: %s); facts are kept and applied again, "
                            "requests are answered 503 until it accepts them", type(exc).__name__, exc)
            self.store_error = f"{type(exc).__name__}: {exc}"
            self._pending = all_facts[: len(self._pending)] if request else all_facts
            if not request:
                self._unacked = self._unacked + [e for e in exits if e not in self._unacked]
                return []
            raise StoreUnavailable(exc) from exc
        if self.store_error is not None:
            log.warning("hive-lab: the store accepts writes again")
        self.store_error = None
        self._pending = []
        acked, self._unacked = self._unacked + [e for e in exits], []
        if acked:
            with contextlib.suppress(Exception):
                self.launcher.ack(acked)
        for job_id, lc in lcs.items():
            job = self.active[job_id]
            if lc.deadline is not None and lc.deadline != job.lc.deadline:
                self.watch_deadline(job_id, lc.deadline)
            job.lc = lc
            if lc.final:
                self.active.pop(job_id, None)
                self.progress.ended(job_id)
        if committed is not None:
            committed()
        self._after_commit(effects, now)
        self.publish(changed)
        return changed

    # ------------------------------------------------------------------------------------------
    # time limits: a heap of deadlines, each checked against the job's current one when it is due

    def watch_deadline(self, job_id: str, deadline: float) -> None:
        heapq.heappush(self._deadlines, (deadline, job_id))

    def check_deadlines(self) -> list[str]:
        """Apply ``TimeUp`` to the running jobs whose deadline passed (the machine decides; a stale heap
        entry of an earlier attempt or a finished job does nothing). Returns the jobs that changed."""
        if not self._deadlines:
            return []
        now = self.now()
        facts: list[tuple[str, m.Event]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, job_id = heapq.heappop(self._deadlines)
            job = self.active.get(job_id)
            if job is not None and job.lc.deadline == deadline:
                facts.append((job_id, m.TimeUp(now)))
        return self.unit(facts) if facts else []

    def _write(self, batch, job: ActiveJob, lc: m.Job, event: m.Event, e: m.Effect, now: float) -> None:
        if isinstance(e, m.Record):
            fields: dict[str, Any] = {"state": e.state.value, "reason": e.reason, "updated_at": now,
                                      "retries": lc.retries, "attempt": lc.attempt, "opportunistic": job.opportunistic}
            extra = dict(e.fields)
            if extra.pop("finished", False):
                fields["finished_at"] = now
            if extra.pop("started", False):
                fields["started_at"] = now
            fields.update(extra)
            self.store.update_job(batch, job.id, **fields)
            if fields.get("finished_at") is not None:
                self._close_usage(batch, job, now)
            if e.history:
                self.store.add_event(batch, job.id, e.state.value, now, e.reason)
                self.metrics.transitions.labels(e.state.value).inc()
        elif isinstance(e, m.SetPlacement):
            if e.clear:
                self.store.clear_placement(batch, job.id)
                self._close_usage(batch, job, now)
            else:
                mig = self.shares.share_device(job)  # a share under MIG: its device, chosen now so the row keeps it
                self.store.set_placement(batch, job.id, lc.attempt,
                                         [launch_plan.placement_row(p, job.opportunistic, self.gpu_uuids, mig)
                                          for p in job.placement])
                job.measured = {}  # a new attempt (what an earlier one measured was written when it closed)
                self.store.open_usage(batch, launch_plan.usage_row(job, lc.attempt, now, self.config))

    def _close_usage(self, batch, job: ActiveJob, now: float) -> None:
        """The attempt's GPUs are given back: close its usage record with what the launcher measured."""
        measured = job.measured  # kept until the next attempt opens: a failed commit writes it again
        self.store.close_usage(batch, job.id, now, cpu_seconds=measured.get("cpu_seconds"),
                               peak_memory_mb=measured.get("peak_memory_mb"))

    def _after_commit(self, effects: list[tuple[str, m.Event, m.Effect]], now: float) -> None:
        """Effects of a committed unit: state listeners, core calls (their decisions are the next unit's
        facts), launches, stops. Adoptions go to the core before anything else is submitted to it."""
        follow: list[tuple[str, m.Event]] = []
        order = sorted(range(len(effects)), key=lambda i: (not (isinstance(effects[i][2], m.Core)
                                                                and effects[i][2].call == "adopt"), i))
        # the finishes between two other core calls go to the core together: one round of scheduling
        # passes for all of them (``finish_many``), not one per ended job (issue 40: with 10,000 jobs
        # waiting each pass walked them all, ~5 ms of the loop per ended job)
        finishing: list[str] = []
        for i in order:
            job_id, event, e = effects[i]
            if isinstance(e, m.Record) and e.history:
                self.tell_listeners(job_id, e.state.value, e.reason)
            elif isinstance(e, m.Core):
                if e.call == "finish":
                    finishing.append(job_id)
                    continue
                if finishing:
                    follow += self._finish_together(finishing, now)
                    finishing = []
                follow += self._core_call(job_id, e, now)
            elif isinstance(e, m.Start):
                if isinstance(event, m.Placed):
                    self.metrics.scheduling_latency.observe(max(0.0, now - self._queued_at(job_id)))
                self._enqueue(job_id, lambda j=job_id, a=e.attempt: self._launch(j, a))
            elif isinstance(e, m.StopTasks):
                grace = self.preemption_grace_s if e.grace == "preempt" else self.stop_grace_s
                self._enqueue(job_id, lambda j=job_id, a=e.attempt, g=grace, c=e.checkpoint: self._stop(j, a, g, c))
            elif isinstance(e, m.AdoptTasks):
                self._adopt_tasks(job_id)
        if finishing:
            follow += self._finish_together(finishing, now)
        if follow:
            self.unit(follow)

    def _queued_at(self, job_id: str) -> float:
        job = self.active.get(job_id)
        return job.queued_at if job else 0.0

    def _finish_together(self, job_ids: list[str], now: float) -> list[tuple[str, m.Event]]:
        """``Core("finish")`` of the jobs ``job_ids`` in one core call; its decisions as facts."""
        if len(job_ids) > 1:
            try:
                return self.facts_of(self.scheduler.finish_many(job_ids, now))
            except (RequestError, KeyError) as exc:
                # (as ``_core_call`` takes a refused finish): the rest one at a time; those the core already
                # finished are refused there, and skipped
                log.debug("hive-lab: core finish_many of %s: %s", job_ids, exc)
        return [fact for job_id in job_ids for fact in self._core_call(job_id, m.Core("finish"), now)]

    def _core_call(self, job_id: str, e: m.Core, now: float) -> list[tuple[str, m.Event]]:
        job = self.active.get(job_id)
        try:
            if e.call == "finish":
                decisions = self.scheduler.finish(job_id, now)
            elif e.call == "preemption_done":
                try:
                    decisions = self.scheduler.preemption_done(job_id, now, requeue=e.requeue)
                except RequestError:  # the core no longer counts it as preempted: finish (and queue) it
                    decisions = self.scheduler.finish(job_id, now)
                    if e.requeue and job is not None:
                        decisions += self._core_submit(job, now)
            elif e.call == "requeue":
                decisions = []
                with contextlib.suppress(RequestError, KeyError):
                    decisions = self.scheduler.finish(job_id, now)
                decisions += self._core_submit(job, now) if job is not None else []
            elif e.call == "submit":
                held = self.dependencies.gate(job) if job is not None else None
                if held is not None:  # depends_on not met: held out of the core's queue, or ended
                    return held
                decisions = self._core_submit(job, now) if job is not None else []
            elif e.call == "adopt":
                try:
                    decisions = self.scheduler.adopt(launch_plan.placed_request(job), job.placement,
                                                     job.opportunistic, now)
                except Exception as exc:
                    log.warning("hive-lab: cannot adopt %s (%s); it is marked lost", job_id, exc)
                    return [(job_id, m.Lost(f"lost on restart ({exc})"))]
            else:
                raise ValueError(e.call)
        except (RequestError, KeyError) as exc:
            log.debug("hive-lab: core %s of %s: %s", e.call, job_id, exc)
            return []
        if job is not None and e.call in ("requeue", "submit", "preemption_done"):
            job.queued_at = now
            job.placement = []
        return self.facts_of(decisions, job_id if e.call in ("submit", "requeue") else None)

    def submit_to_core(self, job_id: str) -> list[tuple[str, m.Event]]:
        """Hand an unfinished job to the core (through the dependency gate); its decisions as facts."""
        return self._core_call(job_id, m.Core("submit"), self.now())

    def _core_submit(self, job: ActiveJob, now: float) -> list:
        decisions = self.scheduler.submit(job.request, now)
        return decisions

    async def settle(self, job_id: str, wait_s: float) -> None:
        """Wait (at most ``wait_s``) for the job's running operation (a stop, a launch) to end."""
        op = self._ops.get(job_id)
        if op is not None and wait_s > 0:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(op), wait_s)

    def facts_of(self, decisions: list, submitted: str | None = None) -> list[tuple[str, m.Event]]:
        """The core's decisions as lifecycle facts."""
        facts: list[tuple[str, m.Event]] = []
        for d in decisions:
            job_id = _decision_job(d)
            job = self.active.get(job_id) if job_id else None
            if job is None:
                continue
            if d.event == "started":
                job.placement = list(d.placement)
                job.opportunistic = bool(d.opportunistic) or job.request.priority < 0
                # "main-0 on node-0 GPU 0,1": the GPU-list form of every surface (hive_scheduler.words)
                where = "; ".join(f"{p.task} on {gpu_list_text(p.node, p.gpus)}" for p in job.placement)
                overflow = bool(d.reason) and "(overflow)" in d.reason
                facts.append((job_id, m.Placed(tuple(p.task for p in job.placement),
                                               where + (f" ({d.reason})" if overflow else
                                                        " (opportunistic)" if job.opportunistic else ""))))
            elif d.event == "queued":
                facts.append((job_id, m.Queued(d.reason or "waiting")))
            elif d.event == "preempting":
                victims = list(d.victims or [])
                facts.append((job_id, m.Queued(f"waiting for {', '.join(victims)} to be preempted")))
                overflowed = getattr(self.scheduler, "is_overflowed", None)
                facts += [(v, m.Preempt(job_id, overflow=bool(overflowed and overflowed(v)))) for v in victims]
            elif d.event == "demoted":
                job.opportunistic = True
                facts.append((job_id, m.Demoted(d.reason or "demoted to opportunistic")))
            elif d.event == "rejected":
                facts.append((job_id, m.Rejected(d.error or "rejected by the scheduler")))
        if submitted is not None and not any(_decision_job(d) == submitted for d in decisions):
            facts.append((submitted, m.Queued(presentation.core_reason(self.scheduler, submitted) or "waiting")))
        return facts

    @staticmethod
    def _notify(listener: Callable[[str, str, str], None], job_id: str, state: str, reason: str) -> None:
        try:
            listener(job_id, state, reason)
        except Exception:
            log.exception("hive-lab: state listener failed")

    def publish(self, job_ids: list[str], cluster: bool = False, fresh: dict[str, dict] | None = None) -> None:
        self.start_estimates.refresh_soon()  # something changed: new estimates, off the request path
        if self.events.subscriber_count == 0:
            return
        for job_id in job_ids:
            try:
                if fresh and job_id in fresh:
                    obj = {k: v for k, v in fresh[job_id].items() if k not in presentation.PRIVATE_FIELDS}
                else:
                    obj = self.views.job_object(job_id, detail=False, private=False)
                self.events.publish({"type": "job", "job": obj})
            except Exception:
                log.exception("hive-lab: publishing job %s failed", job_id)
        if job_ids or cluster:
            self.events.publish({"type": "cluster", "gpus_free": self.scheduler.free_gpu_count(),
                                 "gpus_total": self.scheduler.gpu_count()})
            self.events.publish({"type": "vcs"})

    # ------------------------------------------------------------------------------------------
    # per-job operations (launch, stop), chained per job

    def _enqueue(self, job_id: str, make: Callable[[], Awaitable[None]]) -> asyncio.Task:
        prev = self._ops.get(job_id)

        async def run() -> None:
            if prev is not None:
                with contextlib.suppress(BaseException):
                    await prev
            try:
                await make()
            except asyncio.CancelledError:
                raise
            except StoreUnavailable:
                pass  # its facts are pending; the loop applies them once the store is back
            except Exception:
                log.exception("hive-lab: operation on %s failed", job_id)

        task = asyncio.get_running_loop().create_task(run())
        self._ops[job_id] = task

        def done(t: asyncio.Task) -> None:
            if self._ops.get(job_id) is t:
                del self._ops[job_id]

        task.add_done_callback(done)
        return task

    async def _launch(self, job_id: str, attempt: int) -> None:
        await self._take_launch_turn()
        job = self.active.get(job_id)
        if job is None:
            return
        begun, _ = m.step(job.lc, m.LaunchBegin(attempt))
        if not begun.launched or job.lc.launched:
            return  # preempted, cancelled or re-placed before its turn: nothing runs
        job.lc = begun  # memory only: a crash before the start forgets it, and nothing ran then
        t0 = time.perf_counter()
        try:
            launch_plan.stage(job, self.launcher)
            request = launch_plan.launch_request(job, self.launcher, self.jobs_root, self.gpu_uuids,
                                                 grant_for=self.shares.share_grant,
                                                 gpu_type=self.moves.placed_gpu_type(job))
            await self.launcher.start(request)
        except Exception as exc:
            self._launch_failed(job_id, attempt, exc)
            return
        self.metrics.launch_seconds.observe(time.perf_counter() - t0)
        n = len(job.placement)
        detail = f"{n} task{'s' if n != 1 else ''} started by the {self.launcher.name} launcher"
        self.unit([(job_id, m.LaunchStarted(attempt, detail, at=self.now()))])

    async def _take_launch_turn(self) -> None:
        """Return at once when no launch had this turn of the loop or the one before; else wait, in order, until
        the launch before hands over (the turn after next its own). The waiters sleep on a future: a burst's
        launches do not spin the loop."""
        loop = asyncio.get_running_loop()
        if self._launch_busy:
            turn = loop.create_future()
            self._launch_waiters.append(turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():  # handed the turn, cancelled before it ran: pass it on
                    self._pass_launch_turn()
                raise
        self._launch_busy = True
        loop.call_soon(loop.call_soon, self._pass_launch_turn)

    def _pass_launch_turn(self) -> None:
        while self._launch_waiters:
            turn = self._launch_waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # (``_launch_busy`` stays set: the turn is handed over)
                return
        self._launch_busy = False

    def _launch_failed(self, job_id: str, attempt: int, exc: Exception) -> None:
        msg = str(exc) if isinstance(exc, LaunchError) else f"the {self.launcher.name} launcher failed: {exc}"
        if not isinstance(exc, LaunchError):
            log.exception("hive-lab: launching %s failed", job_id, exc_info=exc)
        self.unit([(job_id, m.LaunchFailed(attempt, msg))])

    async def _stop(self, job_id: str, attempt: int, grace_s: float, checkpoint: bool = False) -> None:
        if job_id not in self.active:
            return
        try:
            job = self.active[job_id]
            if checkpoint and job.spec.checkpoint and self.checkpoint_grace_s > 0:  # docs/checkpoint.md
                await self.launcher.checkpoint(job_id, self.checkpoint_grace_s)
            await self.launcher.stop(job_id, grace_s)
            # collect the stopped tasks' exit codes now, and wait for a poll in flight to be applied: an
            # exit taken by the service loop's poll but not yet applied would otherwise arrive after the
            # stop is over, and count as an exit of the job's next attempt (placed at once on a migration)
            async with self._poll_lock:
                exits = await self.launcher.poll()
                self.handle_exits(exits)
        except Exception:
            log.exception("hive-lab: stopping %s failed", job_id)
        self.unit([(job_id, m.Stopped(attempt))])

    def _adopt_tasks(self, job_id: str) -> None:
        job = self.active[job_id]
        self.shares.share_adopt(job)  # a share running on: its MIG device, MPS daemon use and budget again

        async def adopt() -> None:
            try:
                await self.launcher.adopt(launch_plan.launch_request(job, self.launcher, self.jobs_root,
                                                                     self.gpu_uuids, master_port=0))
            except Exception:
                log.exception("hive-lab: the launcher could not adopt %s", job_id)

        self._adopting.append(self._enqueue(job_id, adopt))

    async def adopted(self) -> None:
        """Wait for the adoptions started so far (recovery: before it asks the launcher what runs)."""
        if self._adopting:
            await asyncio.gather(*self._adopting, return_exceptions=True)
            self._adopting = []

    # ------------------------------------------------------------------------------------------
    # exits reported by the launcher

    def handle_exits(self, exits: list[TaskExit]) -> None:
        """Exits are facts: applied in one unit; acknowledged to the launcher once stored."""
        facts = [(e.job_id, m.Exit(e.task, e.exit_code, e.reason)) for e in exits if e.job_id in self.active]
        for e in exits:
            job = self.active.get(e.job_id)
            if job is not None:
                launch_plan.add_measured(job.measured, e)
        if not facts and not self._pending:
            if exits:
                with contextlib.suppress(Exception):
                    self.launcher.ack(list(exits))
            return
        self.unit(facts, exits=list(exits))

