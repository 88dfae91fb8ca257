"""The hive-lab service: a thin shell around the pure job lifecycle (``lifecycle.machine``).

Everything runs on the Jupyter server's event loop thread, so the core is only ever touched by one
caller at a time. Every change to a job is a *fact* (an event of the lifecycle: a request, an exit, a
launch result, a core decision) applied in a **unit of work** (``_unit``): the machine steps each job,
the store writes of all of them go in one transaction with one clock reading, and only after the
commit do the effects run (core calls, launches, stops, exit acknowledgements, publication). A failed
commit changes nothing: facts stay queued for the next unit, requests are answered 503.

The state table is in ``lifecycle/states.py`` (and docs/lifecycle.md); staging and launch requests in
``lifecycle/launch_plan.py``; REST views in ``lifecycle/presentation.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup, TaskPlacement
from hive_scheduler.validation import validate_request

from .events import EventBus
from .launchers.base import LaunchError, Launcher, TaskExit
from .lifecycle import launch_plan, machine as m, presentation
from .lifecycle.presentation import iso, task_names  # noqa: F401  (kept importable from here)
from .lifecycle.states import PLACED_STATES, Intent, JobState
from .metrics import Metrics
from .spec import JobSpec
from .store import Store

log = logging.getLogger("hive_lab_server")

STATES = tuple(s.value for s in JobState)
S = JobState
STORE_RETRY_AFTER_S = 5


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


class StoreUnavailable(ServiceError):
    """The store refused a write (disk full, database down): nothing was changed; retry later."""

    def __init__(self, exc: BaseException):
        super().__init__(503, f"hive-lab cannot write its job store right now ({type(exc).__name__}); nothing was "
                              "changed; retry in a moment", retry_after_s=STORE_RETRY_AFTER_S)


def _decision_job(d: Any) -> str | None:
    value = getattr(d, "job", None)
    return value if isinstance(value, str) else None


@dataclass
class ActiveJob:
    """A job that has not finished: its lifecycle record (``lc``) and what running it needs."""

    id: str
    seq: int
    user: str
    vc: str
    spec: dict[str, Any]
    request: JobRequest
    working_dir: str
    output_dir: str
    lc: m.Job
    queued_at: float = 0.0
    opportunistic: bool = False
    placement: list[TaskPlacement] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.lc.state.value

    @property
    def stopping(self) -> str | None:
        return self.lc.intent.value if self.lc.intent else None

    @property
    def tasks_left(self) -> set[str]:
        return set(self.lc.left)


def _request_from(job_id: str, vc: str, user: str, tasks: list[dict], priority: int, within: Any,
                  submit_time: float) -> JobRequest:
    return JobRequest(
        id=job_id, vc=vc, user=user,
        tasks=tuple(TaskGroup(name=t["name"], count=t["count"], gpus=t["gpus"], gpu_type=t.get("gpu_type"),
                              cpus=t.get("cpus") or 0, memory_mb=t.get("memory_mb") or 0) for t in tasks),
        priority=priority, within=within, submit_time=submit_time,
    )


class HiveService:
    def __init__(
        self,
        *,
        scheduler: Scheduler,
        config: Any,
        store: Store,
        launcher: Launcher,
        jobs_root: str | os.PathLike,
        gpu_uuids: dict[tuple[str, int], str] | None = None,
        preemption_grace_s: float = 10.0,
        stop_grace_s: float = 10.0,
        poll_interval_s: float = 0.1,
        events: EventBus | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.scheduler = scheduler
        self.config = config
        self.store = store
        self.launcher = launcher
        self.jobs_root = pathlib.Path(jobs_root)
        self.jobs_root.mkdir(parents=True, exist_ok=True)
        self.gpu_uuids = dict(gpu_uuids or {})
        self.preemption_grace_s = preemption_grace_s
        self.stop_grace_s = stop_grace_s
        self.poll_interval_s = poll_interval_s
        self.events = events or EventBus()
        self.metrics = metrics or Metrics()
        self.metrics.attach(self)
        self.active: dict[str, ActiveJob] = {}
        self.drained_nodes: set[str] = set()
        self.drained_gpus: set[tuple[str, int]] = set()
        self.hardware: Any = None  # hardware.monitor.HardwareMonitor, set by the app (GPU health, live data)
        self.store_error: str | None = None  # the last failed commit, until one succeeds
        self._clock = clock
        self._seq = store.max_seq()
        self._last_now = 0.0
        self._pending: list[tuple[str, m.Event]] = []  # facts whose unit of work did not commit yet
        self._unacked: list[TaskExit] = []  # exits in those facts (acknowledged to the launcher on commit)
        self._ops: dict[str, asyncio.Task] = {}
        self._loop_task: asyncio.Task | None = None
        self._stopping = False
        self._state_listeners: list[Callable[[str, str, str], None]] = []
        self._ready = asyncio.Event()  # set once recovery is over (binds to the running loop on first use)
        self._recovery_error: str | None = None
        self._recovering = False
        self._adopting: list[asyncio.Task] = []
        self._submits: list[tuple[JobSpec, str, str, asyncio.Future, float]] = []  # waiting for group commit

    # ------------------------------------------------------------------------------------------
    # time and ids

    def now(self) -> float:
        t = self._clock()
        if t < self._last_now:
            t = self._last_now
        self._last_now = t
        return t

    def _next_id(self) -> tuple[int, str]:
        self._seq += 1
        return self._seq, f"j-{self._seq:06d}"

    # ------------------------------------------------------------------------------------------
    # start and stop

    async def start(self) -> None:
        """Recover the jobs of an earlier server process, then watch the launcher. Requests wait for
        ``wait_ready`` so nobody sees (or changes) the state from before recovery."""
        if self._loop_task is not None:
            return
        try:
            await self._recover()
        except BaseException as exc:
            self._recovery_error = f"{type(exc).__name__}: {exc}"
            self._ready.set()
            raise
        self._loop_task = asyncio.create_task(self._loop(), name="hive-lab-service")
        self._ready.set()

    @property
    def ready(self) -> bool:
        """Recovery is over and it succeeded: requests may be served."""
        return self._ready.is_set() and self._recovery_error is None

    async def wait_ready(self, timeout_s: float) -> None:
        """Return once recovery is over; raise ServiceError(503) if it takes longer than ``timeout_s``
        or failed."""
        if not self._ready.is_set():
            try:
                await asyncio.wait_for(asyncio.shield(self._ready.wait()), max(0.0, timeout_s))
            except asyncio.TimeoutError:
                raise ServiceError(503, "hive-lab is recovering its jobs; retry in a moment") from None
        if self._recovery_error is not None:
            raise ServiceError(503, f"hive-lab could not recover its jobs ({self._recovery_error}); "
                                    "an admin must see the server log and restart the server")

    async def stop(self) -> None:
        """Stop the service; running jobs keep running (the next start adopts them)."""
        self._stopping = True
        if self._loop_task:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        for task in list(self._ops.values()):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.launcher.close()
        self.store.close()

    async def _loop(self) -> None:
        last_error, last_logged = "", 0.0
        while True:
            try:
                exits = await self.launcher.poll()
                if exits or self._pending:
                    self._handle_exits(exits)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. the Docker daemon is down: say so once a minute, keep going
                now = time.monotonic()
                if repr(exc) != last_error or now - last_logged > 60:
                    log.exception("hive-lab: polling the %s launcher failed", self.launcher.name)
                    last_error, last_logged = repr(exc), now
            await asyncio.sleep(self.poll_interval_s)

    def on_state_change(self, listener: Callable[[str, str, str], None]) -> None:
        """``listener(job_id, state, reason)`` soon after each stored transition (on the event loop, once
        the transaction is committed, so it may call ``submit``/``cancel``)."""
        self._state_listeners.append(listener)

    # ------------------------------------------------------------------------------------------
    # the unit of work

    def _unit(self, facts: list[tuple[str, m.Event]], *, request: bool = False, exits: list[TaskExit] = (),
              write: Callable[[Any, float], None] | None = None) -> list[str]:
        """Apply ``facts`` (and those still pending) in one transaction; then run their effects.

        ``request``: the facts come from a request; if the commit fails they are dropped and
        StoreUnavailable raised (nothing was acknowledged). Other facts stay pending for the next unit.
        ``write(batch, now)`` adds writes of its own to the transaction. Returns the jobs that changed."""
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
            job.lc = lc
            if lc.final:
                self.active.pop(job_id, None)
        self._after_commit(effects, now)
        self._publish(changed)
        return changed

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
            if e.history:
                self.store.add_event(batch, job.id, e.state.value, now, e.reason)
                self.metrics.transitions.labels(e.state.value).inc()
        elif isinstance(e, m.SetPlacement):
            if e.clear:
                self.store.clear_placement(batch, job.id)
            else:
                self.store.set_placement(batch, job.id, lc.attempt,
                                         [launch_plan.placement_row(p, job.opportunistic, self.gpu_uuids)
                                          for p in job.placement])

    def _after_commit(self, effects: list[tuple[str, m.Event, m.Effect]], now: float) -> None:
        """Effects of a committed unit: state listeners, core calls (their decisions are the next unit's
        facts), launches, stops. Adoptions go to the core before anything else is submitted to it."""
        follow: list[tuple[str, m.Event]] = []
        order = sorted(range(len(effects)), key=lambda i: (not (isinstance(effects[i][2], m.Core)
                                                                and effects[i][2].call == "adopt"), i))
        for i in order:
            job_id, event, e = effects[i]
            if isinstance(e, m.Record) and e.history:
                for listener in self._state_listeners:
                    asyncio.get_running_loop().call_soon(self._notify, listener, job_id, e.state.value, e.reason)
            elif isinstance(e, m.Core):
                follow += self._core_call(job_id, e, now)
            elif isinstance(e, m.Start):
                if isinstance(event, m.Placed):
                    self.metrics.scheduling_latency.observe(max(0.0, now - self._queued_at(job_id)))
                self._enqueue(job_id, lambda j=job_id, a=e.attempt: self._launch(j, a))
            elif isinstance(e, m.StopTasks):
                grace = self.preemption_grace_s if e.grace == "preempt" else self.stop_grace_s
                self._enqueue(job_id, lambda j=job_id, a=e.attempt, g=grace: self._stop(j, a, g))
            elif isinstance(e, m.AdoptTasks):
                self._adopt_tasks(job_id)
        if follow:
            self._unit(follow)

    def _queued_at(self, job_id: str) -> float:
        job = self.active.get(job_id)
        return job.queued_at if job else 0.0

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
                decisions = self._core_submit(job, now) if job is not None else []
            elif e.call == "adopt":
                try:
                    decisions = self.scheduler.adopt(job.request, job.placement, job.opportunistic, now)
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
        return self._facts_of(decisions, job_id if e.call in ("submit", "requeue") else None)

    def _core_submit(self, job: ActiveJob, now: float) -> list:
        decisions = self.scheduler.submit(job.request, now)
        return decisions

    def _facts_of(self, decisions: list, submitted: str | None = None) -> list[tuple[str, m.Event]]:
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
                where = "; ".join(f"{p.task} on {p.node} GPUs {list(p.gpus)}" for p in job.placement)
                facts.append((job_id, m.Placed(tuple(p.task for p in job.placement),
                                               where + (" (opportunistic)" if job.opportunistic else ""))))
            elif d.event == "queued":
                facts.append((job_id, m.Queued(d.reason or "waiting")))
            elif d.event == "preempting":
                victims = list(d.victims or [])
                facts.append((job_id, m.Queued(f"waiting for {', '.join(victims)} to be preempted")))
                facts += [(v, m.Preempt(job_id)) for v in victims]
            elif d.event == "demoted":
                job.opportunistic = True
                facts.append((job_id, m.Demoted(d.reason or "demoted to opportunistic")))
            elif d.event == "rejected":
                facts.append((job_id, m.Rejected(d.error or "rejected by the scheduler")))
        if submitted is not None and not any(_decision_job(d) == submitted for d in decisions):
            facts.append((submitted, m.Queued(self.core_reason(submitted) or "waiting")))
        return facts

    @staticmethod
    def _notify(listener: Callable[[str, str, str], None], job_id: str, state: str, reason: str) -> None:
        try:
            listener(job_id, state, reason)
        except Exception:
            log.exception("hive-lab: state listener failed")

    def _publish(self, job_ids: list[str], cluster: bool = False, fresh: dict[str, dict] | None = None) -> None:
        if self.events.subscriber_count == 0:
            return
        for job_id in job_ids:
            try:
                if fresh and job_id in fresh:
                    obj = {k: v for k, v in fresh[job_id].items() if k not in presentation.PRIVATE_FIELDS}
                else:
                    obj = self.job_object(job_id, detail=False, private=False)
                self.events.publish({"type": "job", "job": obj})
            except Exception:
                log.exception("hive-lab: publishing job %s failed", job_id)
        if job_ids or cluster:
            self.events.publish({"type": "cluster", "gpus_free": self.scheduler.free_gpu_count(),
                                 "gpus_total": self.scheduler.gpu_count()})
            self.events.publish({"type": "vcs"})

    # ------------------------------------------------------------------------------------------
    # requests from handlers

    def submit(self, spec: JobSpec, user: str, vc: str) -> dict[str, Any]:
        """Store a validated job, then let the core decide. Raises ServiceError(400) for requests the
        cluster can never run and StoreUnavailable(503) when the store refuses it (nothing is stored or
        decided then). ``submit_grouped`` does the same for submits arriving together, in one unit."""
        t0 = time.perf_counter()
        new = self._prepare(spec, user, vc, self.now())
        self._admit([new])
        self.metrics.submit_seconds.observe(time.perf_counter() - t0)
        return self._object_of(new[0].id, new[1])

    async def submit_grouped(self, spec: JobSpec, user: str, vc: str) -> dict[str, Any]:
        """``submit``, committed together with the other submits that arrive before the next turn of the
        event loop (group commit: one transaction, one clock reading, one publication for all)."""
        fut = asyncio.get_running_loop().create_future()
        self._submits.append((spec, user, vc, fut, time.perf_counter()))
        if len(self._submits) == 1:
            asyncio.get_running_loop().call_soon(self._flush_submits)
        return await fut

    def _flush_submits(self) -> None:
        group, self._submits = self._submits, []
        now = self.now()
        admitted = []
        for spec, user, vc, fut, t0 in group:
            try:
                admitted.append((self._prepare(spec, user, vc, now), fut, t0))
            except ServiceError as exc:
                fut.set_exception(exc)
        if not admitted:
            return
        try:
            self._admit([a for a, _, _ in admitted])
        except Exception as exc:
            for _, fut, _ in admitted:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (job, row), fut, t0 in admitted:
            if not fut.done():
                fut.set_result(self._object_of(job.id, row))
            self.metrics.submit_seconds.observe(time.perf_counter() - t0)

    def _prepare(self, spec: JobSpec, user: str, vc: str, now: float) -> tuple[ActiveJob, dict[str, Any]]:
        """A new job and its row; ServiceError(400) if the cluster can never run it."""
        seq, job_id = self._next_id()
        spec_dict = spec.model_dump(mode="json")
        spec_dict["vc"] = vc
        request = _request_from(job_id, vc, user, spec_dict["tasks"], spec.core_priority, spec.within, now)
        try:
            validate_request(self.scheduler, request)
            self.scheduler.check_can_ever_fit(request)  # a gang that never fits is a 400, not a job queued forever
        except RequestError as exc:
            if self._seq == seq:  # the id is not used up
                self._seq -= 1
            raise ServiceError(400, str(exc), getattr(exc, "field", None)) from None
        working_dir = str(self.jobs_root / job_id)
        output_dir = str(self.jobs_root / job_id / "output")
        row = {
            "seq": seq, "id": job_id, "name": spec.name, "user": user, "vc": vc, "kind": spec.kind,
            "state": "submitted", "reason": "", "priority": spec.core_priority,
            "opportunistic": spec.opportunistic, "gpus": spec.total_gpus,
            "gpu_type": next((t.gpu_type for t in spec.tasks if t.gpu_type), None), "spec": spec_dict,
            "submitted_at": now, "started_at": None, "finished_at": None, "exit_code": None,
            "retries": 0, "max_retries": spec.max_retries, "attempt": 0, "working_dir": working_dir,
            "output_dir": output_dir, "updated_at": now, "stop_intent": None, "stop_reason": "",
        }
        job = ActiveJob(id=job_id, seq=seq, user=user, vc=vc, spec=spec_dict, request=request,
                        working_dir=working_dir, output_dir=output_dir, queued_at=now,
                        opportunistic=spec.opportunistic, lc=m.Job(job_id, max_retries=spec.max_retries))
        return job, row

    def _admit(self, new: list[tuple[ActiveJob, dict[str, Any]]]) -> None:
        """Store new jobs in one unit, then hand them to the core (in that order: a store fault leaves
        nothing to undo, and a job is acknowledged only once stored)."""

        def insert(batch, at: float) -> None:
            for job, row in new:
                self.store.insert_job(batch, row)
                self.store.add_event(batch, job.id, "submitted", at, f"submitted by {job.user} to VC {job.vc}")

        self._unit([], request=True, write=insert)
        now = self.now()
        facts: list[tuple[str, m.Event]] = []
        for job, row in new:
            self.active[job.id] = job
            self.metrics.transitions.labels("submitted").inc()
            for listener in self._state_listeners:
                asyncio.get_running_loop().call_soon(self._notify, listener, job.id, "submitted",
                                                     f"submitted by {job.user} to VC {job.vc}")
            try:
                facts += self._facts_of(self.scheduler.submit(job.request, now), job.id)
            except Exception as exc:  # stored, so it must end somewhere visible
                log.exception("hive-lab: the core refused %s", job.id)
                facts.append((job.id, m.Rejected(f"the scheduler refused it: {exc}")))
        # the core's decisions are facts: a store fault now keeps them pending (the jobs are acknowledged)
        self._unit(facts)

    def _object_of(self, job_id: str, row: dict[str, Any]) -> dict[str, Any]:
        """The REST object of a job just submitted, from memory (no read back)."""
        job = self.active.get(job_id)
        row = dict(row)
        if job is not None:
            row.update(state=job.lc.state.value, reason=job.lc.reason or row["reason"], opportunistic=job.opportunistic,
                       retries=job.lc.retries, attempt=job.lc.attempt)
            placement = [launch_plan.placement_row(p, job.opportunistic, self.gpu_uuids) for p in job.placement] \
                if job.lc.state in PLACED_STATES else []
        else:  # it already ended (e.g. could not start): read what was stored
            return self.job_object(job_id, detail=False, private=True)
        return presentation.job_object(self, row, placement, detail=False, private=True, live_reason=False)

    async def cancel(self, job_id: str, by: str, wait_s: float = 5.0) -> dict[str, Any]:
        """Cancel a job. Its intent is stored before this returns (a restart finishes the stop); it
        answers once the job is cancelled or ``wait_s`` passed. StoreUnavailable(503) if the store
        refuses the intent: nothing changed, the cancel may be sent again."""
        job = self.active.get(job_id)
        if job is None:
            row = self.store.get_job(job_id)
            if row is None:
                raise ServiceError(404, f"job {job_id} does not exist")
            raise ServiceError(409, f"job {job_id} already {row['state']}; only unfinished jobs can be cancelled")
        self._unit([(job_id, m.Cancel(by))], request=True)
        op = self._ops.get(job_id)
        if op is not None and wait_s > 0:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(op), wait_s)
        return self.job_object(job_id, detail=False, private=True)

    def set_drain(self, node: str, gpu: int | None, drained: bool, by: str) -> None:
        if node not in self.scheduler_nodes():
            raise ServiceError(404, f"node {node} does not exist; see GET cluster for node names")
        if gpu is not None:
            count = self.node_gpu_count(node)
            if not 0 <= gpu < count:
                raise ServiceError(404, f"node {node} has no GPU {gpu}; its GPUs are 0..{count - 1}")

        def write(batch, at: float) -> None:
            if drained:
                self.store.add_drain(batch, node, gpu, at, by)
            else:
                self.store.remove_drain(batch, node, gpu)

        self._unit([], request=True, write=write)  # stored first, then the core hears of it
        now = self.now()
        if gpu is None:
            (self.drained_nodes.add if drained else self.drained_nodes.discard)(node)
            decisions = self.scheduler.set_node_health(node, not drained, now)
        else:
            (self.drained_gpus.add if drained else self.drained_gpus.discard)((node, gpu))
            decisions = self.scheduler.set_gpu_health(node, gpu, not drained, now)
        if not drained:  # undraining never gives out a GPU the health rules marked bad
            for g in self._bad_gpus(node):
                if gpu is None or g == gpu:
                    decisions += self.scheduler.set_gpu_health(node, g, False, now)
        self._unit(self._facts_of(decisions))
        self._publish([], cluster=True)

    # ------------------------------------------------------------------------------------------
    # hardware health (called by hardware.monitor.HardwareMonitor)

    def _bad_gpus(self, node: str) -> list[int]:
        bad = self.hardware.state.bad if self.hardware is not None else {}
        return sorted(g for n, g in bad if n == node)

    def gpu_failed(self, node: str, gpu: int, reason: str) -> None:
        """A GPU went bad: nothing new lands on it, and the jobs on it stop; each is retried elsewhere
        while it has retries left (as a lost job), else it fails with the reason."""
        facts = self._facts_of(self.scheduler.set_gpu_health(node, gpu, False, self.now()))
        why = f"GPU {gpu} on {node} failed: {reason}"
        facts += [(job.id, m.Lost(why)) for job in list(self.active.values())
                  if job.lc.intent is None and any(p.node == node and gpu in p.gpus for p in job.placement)]
        self._unit(facts)
        self._publish([], cluster=True)

    def gpu_repaired(self, node: str, gpu: int) -> None:
        """An admin marked a bad GPU healthy: give it out again unless the GPU itself is drained (the
        core keeps node health apart, so a drained node's GPU returns with the node's undrain)."""
        if (node, gpu) in self.drained_gpus:
            return
        self._unit(self._facts_of(self.scheduler.set_gpu_health(node, gpu, True, self.now())))
        self._publish([], cluster=True)

    def scheduler_nodes(self) -> dict[str, Any]:
        return self.config.nodes

    def node_gpu_count(self, node: str) -> int:
        info = self.scheduler_nodes().get(node)
        return int(getattr(info, "gpu_count", 0)) if info is not None else 0

    def core_reason(self, job_id: str) -> str | None:
        try:
            view = self.scheduler.job(job_id)
        except Exception:
            return None
        return getattr(view, "reason", None) if view is not None else None

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

    def log_path(self, job_id: str, task: str) -> pathlib.Path:
        return launch_plan.log_path(self.jobs_root, job_id, task)

    def node_address(self, node: str) -> str:
        return launch_plan.node_address(self.launcher, node)

    async def _launch(self, job_id: str, attempt: int) -> None:
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
            await self.launcher.start(launch_plan.launch_request(job, self.launcher, self.jobs_root, self.gpu_uuids))
        except Exception as exc:
            msg = str(exc) if isinstance(exc, LaunchError) else f"the {self.launcher.name} launcher failed: {exc}"
            if not isinstance(exc, LaunchError):
                log.exception("hive-lab: launching %s failed", job_id)
            self._unit([(job_id, m.LaunchFailed(attempt, msg))])
            return
        self.metrics.launch_seconds.observe(time.perf_counter() - t0)
        n = len(job.placement)
        detail = f"{n} task{'s' if n != 1 else ''} started by the {self.launcher.name} launcher"
        self._unit([(job_id, m.LaunchStarted(attempt, detail))])

    async def _stop(self, job_id: str, attempt: int, grace_s: float) -> None:
        if job_id not in self.active:
            return
        try:
            await self.launcher.stop(job_id, grace_s)
            exits = await self.launcher.poll()  # collect the stopped tasks' exit codes now
            self._handle_exits(exits)
        except Exception:
            log.exception("hive-lab: stopping %s failed", job_id)
        self._unit([(job_id, m.Stopped(attempt))])

    def _adopt_tasks(self, job_id: str) -> None:
        job = self.active[job_id]

        async def adopt() -> None:
            try:
                await self.launcher.adopt(launch_plan.launch_request(job, self.launcher, self.jobs_root,
                                                                     self.gpu_uuids, master_port=0))
            except Exception:
                log.exception("hive-lab: the launcher could not adopt %s", job_id)

        self._adopting.append(self._enqueue(job_id, adopt))

    # ------------------------------------------------------------------------------------------
    # exits reported by the launcher

    def _handle_exits(self, exits: list[TaskExit]) -> None:
        """Exits are facts: applied in one unit; acknowledged to the launcher once stored."""
        facts = [(e.job_id, m.Exit(e.task, e.exit_code, e.reason)) for e in exits if e.job_id in self.active]
        if not facts and not self._pending:
            if exits:
                with contextlib.suppress(Exception):
                    self.launcher.ack(list(exits))
            return
        self._unit(facts, exits=list(exits))

    # ------------------------------------------------------------------------------------------
    # recovery after a restart: the stored facts go through the same machine

    def _active_from_row(self, row: dict[str, Any], placement: list[dict[str, Any]]) -> ActiveJob:
        spec = row["spec"]
        request = _request_from(row["id"], row["vc"], row["user"], spec["tasks"], row["priority"],
                                spec.get("within"), row["submitted_at"])
        tasks = tuple(p["task"] for p in sorted(placement, key=lambda p: p["rank"]))
        state = JobState(row["state"])
        intent = Intent(row["stop_intent"]) if row.get("stop_intent") else None
        lc = m.Job(row["id"], state=state, max_retries=row["max_retries"], retries=row["retries"],
                   attempt=row["attempt"], tasks=tasks if state in PLACED_STATES else (),
                   left=frozenset(tasks) if state in PLACED_STATES else frozenset(), intent=intent,
                   intent_reason=row.get("stop_reason") or "", reason=row["reason"])
        return ActiveJob(id=row["id"], seq=row["seq"], user=row["user"], vc=row["vc"], spec=spec, request=request,
                         working_dir=row["working_dir"], output_dir=row["output_dir"], queued_at=row["updated_at"],
                         opportunistic=bool(row["opportunistic"]), lc=lc,
                         placement=launch_plan.placement_from_rows(placement) if state in PLACED_STATES else [])

    async def _recover(self) -> None:
        rows = self.store.active_jobs()
        for d in self.store.drains():
            if d["gpu"] is None:
                self.drained_nodes.add(d["node"])
            else:
                self.drained_gpus.add((d["node"], d["gpu"]))
        now = self.now()
        facts: list[tuple[str, m.Event]] = []
        for node in sorted(self.drained_nodes):
            facts += self._facts_of(self.scheduler.set_node_health(node, False, now))
        for node, gpu in sorted(self.drained_gpus):
            facts += self._facts_of(self.scheduler.set_gpu_health(node, gpu, False, now))
        alive = await self.launcher.running()
        # exits the launcher kept while nobody acknowledged them (the server or the store was down):
        # proof that an attempt started, so recovery never runs it again unrecorded
        early_exits = await self.launcher.poll()
        ended: dict[str, set[str]] = {}
        for e in early_exits:
            ended.setdefault(e.job_id, set()).add(e.task)
        placements = self.store.placements([r["id"] for r in rows if r["state"] in ("scheduled", "running")])
        for row in rows:
            job = self._active_from_row(row, placements.get(row["id"], []))
            self.active[job.id] = job
            facts.append((job.id, m.Recovered(frozenset(alive.get(job.id, ())), frozenset(ended.get(job.id, ())))))
        self._unit(facts)
        if self._adopting:
            await asyncio.gather(*self._adopting, return_exceptions=True)
            self._adopting = []
        # What runs now, THEN the exits the launcher knows (also those from while the server was down).
        # In this order a task that ends between the two calls is in the snapshot and its exit in the
        # poll, so it is recorded with its real exit code; only a task missing from the snapshot whose
        # exit nobody reports is lost. (Polling first would call a task ending in between lost.)
        alive = {job_id: set(tasks) for job_id, tasks in (await self.launcher.running()).items()}
        exits = early_exits + await self.launcher.poll()
        reported = {(e.job_id, e.task) for e in exits}
        self._handle_exits(exits)
        for e in exits:  # reported exits are authoritative: these tasks are over, whatever the snapshot says
            alive.get(e.job_id, set()).discard(e.task)
        lost = []
        for job in list(self.active.values()):
            if job.lc.state is S.RUNNING and job.lc.intent is None:
                lost += [(job.id, m.Exit(t, None, "not running after the server restarted"))
                         for t in sorted(job.lc.left - alive.get(job.id, set())) if (job.id, t) not in reported]
        if lost:
            self._unit(lost)
        # anything running that the store does not know as placed is stopped
        for job_id, tasks in sorted(alive.items()):
            job = self.active.get(job_id)
            if tasks and (job is None or job.lc.state not in PLACED_STATES):
                log.warning("hive-lab: stopping orphan tasks of %s found after restart", job_id)
                try:
                    await self.launcher.adopt(launch_plan.tracking_request(job_id, job.user if job else "",
                                                                           sorted(tasks), self.jobs_root))
                    await self.launcher.stop(job_id, self.stop_grace_s)
                except Exception:
                    log.exception("hive-lab: stopping orphan %s failed", job_id)
        self._publish([], cluster=True)

    # ------------------------------------------------------------------------------------------
    # views for handlers (see lifecycle.presentation)

    def job_object(self, job_id: str, *, detail: bool, private: bool, row: dict[str, Any] | None = None,
                   placement: list[dict[str, Any]] | None = None, live_reason: bool = True) -> dict[str, Any]:
        row = row or self.store.get_job(job_id)
        if row is None:
            raise ServiceError(404, f"job {job_id} does not exist")
        if placement is None:
            placement = self.store.placements([job_id])[job_id]
        return presentation.job_object(self, row, placement, detail=detail, private=private, live_reason=live_reason)

    def list_jobs(self, *, users, vcs, states, limit, offset, private_for: Callable[[dict], bool]) -> dict[str, Any]:
        rows, total = self.store.list_jobs(users=users, vcs=vcs, states=states, limit=limit, offset=offset)
        placements = self.store.placements([r["id"] for r in rows])
        jobs = [presentation.job_object(self, r, placements[r["id"]], detail=False, private=private_for(r))
                for r in rows]
        return {"jobs": jobs, "total": total, "limit": limit, "offset": offset}

    def job_active(self, job_id: str) -> bool:
        return job_id in self.active

    def task_active(self, job_id: str, task: str) -> bool:
        """The task may still write to its log (not started yet, or running)."""
        job = self.active.get(job_id)
        if job is None:
            return False
        return job.lc.state is not S.RUNNING or job.lc.intent is not None or task in job.lc.left

    def cluster_object(self) -> dict[str, Any]:
        return presentation.cluster_object(self)

    def vcs_object(self, may_submit: Callable[[str], bool]) -> dict[str, Any]:
        return presentation.vcs_object(self, may_submit)
