"""The hive-lab service: drives the core scheduler, the launcher and the store.

Everything runs on the Jupyter server's event loop thread, so the core is only ever touched by one
caller at a time. REST handlers call ``submit``/``cancel``/``drain`` directly (they return once the
job is stored and the core has decided); one loop task (``_loop``) polls the launcher for exits;
launching and stopping a job run as small per-job tasks chained in order (``_enqueue``), so a slow
start or a stop grace period never holds up the rest.

Job states: submitted -> queued -> scheduled -> running -> succeeded | failed | cancelled.
Preempted and lost jobs go back to queued while retries remain (``max_retries``), else fail.
Every transition is stored (``job_events``) with its time and reason and published as an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import pathlib
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup, TaskPlacement

from .events import EventBus
from .launchers.base import LaunchError, Launcher, LaunchRequest, TaskExit, TaskLaunch
from .metrics import Metrics
from .spec import JobSpec
from .staging import private_dir, write_private
from .store import ACTIVE_STATES, TERMINAL_STATES, Store

log = logging.getLogger("hive_lab_server")

STATES = ("submitted", "queued", "scheduled", "running", "succeeded", "failed", "cancelled")


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def task_names(spec: dict[str, Any]) -> list[str]:
    return [f"{t['name']}-{i}" for t in spec["tasks"] for i in range(t["count"])]


def _decision_job(d: Any) -> str | None:
    for attr in ("job", "job_id"):
        value = getattr(d, attr, None)
        if isinstance(value, str):
            return value
    return None


@dataclass
class ActiveJob:
    """What the service keeps in memory about a job that has not finished."""

    id: str
    seq: int
    user: str
    vc: str
    spec: dict[str, Any]
    request: JobRequest
    state: str
    retries: int
    max_retries: int
    attempt: int
    working_dir: str
    output_dir: str
    submitted_at: float
    queued_at: float
    opportunistic: bool = False
    placement: list[TaskPlacement] = field(default_factory=list)
    tasks_left: set[str] = field(default_factory=set)
    stopping: str | None = None  # "cancel" | "preempt" | "failed" | "lost" | "orphan"
    stop_reason: str = ""
    stop_exit_code: int | None = None
    stop_seen: set[str] = field(default_factory=set)
    stop_codes: dict[str, int] = field(default_factory=dict)
    stale_exits: set[str] = field(default_factory=set)  # exits of a stopped attempt still to come
    recovering: bool = False


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
        self._seq = store.max_seq()
        self._last_now = 0.0
        self._ops: dict[str, asyncio.Task] = {}
        self._loop_task: asyncio.Task | None = None
        self._stopping = False
        self._state_listeners: list[Callable[[str, str, str], None]] = []
        self._ready = asyncio.Event()  # set once recovery is over (binds to the running loop on first use)
        self._recovery_error: str | None = None

    # ------------------------------------------------------------------------------------------
    # time and ids

    def now(self) -> float:
        t = time.time()
        if t < self._last_now:
            t = self._last_now
        self._last_now = t
        return t

    def _next_id(self) -> tuple[int, str]:
        self._seq += 1
        return self._seq, f"j-{self._seq:06d}"

    # ------------------------------------------------------------------------------------------
    # lifecycle

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
                if exits:
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
    # requests from handlers

    def submit(self, spec: JobSpec, user: str, vc: str) -> dict[str, Any]:
        """Store a validated job and let the core decide. Raises ServiceError(400) for requests the
        cluster can never run (nothing is stored then)."""
        t0 = time.perf_counter()
        seq, job_id = self._next_id()
        now = self.now()
        request = JobRequest(
            id=job_id,
            vc=vc,
            user=user,
            tasks=tuple(
                TaskGroup(name=t.name, count=t.count, gpus=t.gpus, gpu_type=t.gpu_type, cpus=t.cpus, memory_mb=t.memory_mb)
                for t in spec.tasks
            ),
            priority=spec.core_priority,
            within=spec.within,
            submit_time=now,
        )
        spec_dict = spec.model_dump(mode="json")
        spec_dict["vc"] = vc
        working_dir = str(self.jobs_root / job_id)
        output_dir = str(self.jobs_root / job_id / "output")
        job = ActiveJob(
            id=job_id, seq=seq, user=user, vc=vc, spec=spec_dict, request=request, state="submitted",
            retries=0, max_retries=spec.max_retries, attempt=0, working_dir=working_dir,
            output_dir=output_dir, submitted_at=now, queued_at=now, opportunistic=spec.opportunistic,
        )
        self.active[job_id] = job
        try:
            self.scheduler.check_can_ever_fit(request)  # a gang that never fits is a 400, not a job queued forever
            decisions = self.scheduler.submit(request, now)
        except RequestError as exc:
            del self.active[job_id]
            self._seq -= 1 if self._seq == seq else 0
            field_name = getattr(exc, "field", None)
            raise ServiceError(400, str(exc), field_name) from None
        except Exception:
            del self.active[job_id]
            raise
        row = {
            "seq": seq, "id": job_id, "name": spec.name, "user": user, "vc": vc, "kind": spec.kind,
            "state": "submitted", "reason": "", "priority": spec.core_priority,
            "opportunistic": spec.opportunistic, "gpus": spec.total_gpus,
            "gpu_type": next((t.gpu_type for t in spec.tasks if t.gpu_type), None), "spec": spec_dict,
            "submitted_at": now, "started_at": None, "finished_at": None, "exit_code": None,
            "retries": 0, "max_retries": spec.max_retries, "attempt": 0, "working_dir": working_dir,
            "output_dir": output_dir, "updated_at": now,
        }
        published: list[str] = []
        try:
            with self.store.begin() as conn:
                self.store.insert_job(conn, row)
                self.store.add_event(conn, job_id, "submitted", now, f"submitted by {user} to VC {vc}")
                published.append(job_id)
                if not any(_decision_job(d) == job_id for d in decisions):
                    self._transition(conn, job, "queued", self._core_reason(job_id) or "waiting", now, published)
                self._apply(conn, decisions, now, published)
        except Exception:
            # not stored: the core must forget it too (nothing half-applied)
            log.exception("hive-lab: storing %s failed; withdrawing it", job_id)
            self.active.pop(job_id, None)
            op = self._ops.pop(job_id, None)
            if op is not None:
                op.cancel()
            with contextlib.suppress(Exception):
                self.scheduler.finish(job_id, self.now())
            raise
        self.metrics.transitions.labels("submitted").inc()
        placement = [self._placement_row(p, job.opportunistic) for p in job.placement] if job.state != "queued" else []
        obj = self.job_object(job_id, detail=False, private=True, row=row, placement=placement, live_reason=False)
        self._publish(published, fresh={job_id: obj})
        self.metrics.submit_seconds.observe(time.perf_counter() - t0)
        return obj

    async def cancel(self, job_id: str, by: str, wait_s: float = 5.0) -> dict[str, Any]:
        job = self.active.get(job_id)
        if job is None:
            row = self.store.get_job(job_id)
            if row is None:
                raise ServiceError(404, f"job {job_id} does not exist")
            raise ServiceError(409, f"job {job_id} already {row['state']}; only unfinished jobs can be cancelled")
        reason = f"cancelled by {by}"
        if job.state in ("submitted", "queued"):
            now = self.now()
            published: list[str] = []
            with self.store.begin() as conn:
                decisions = self.scheduler.finish(job_id, now)
                self._finalize(conn, job, "cancelled", reason, now, published, exit_code=None, core_done=True)
                self._apply(conn, decisions, now, published)
            self._publish(published)
        elif job.stopping is None:
            self._begin_stop(job, "cancel", reason, self.stop_grace_s)
        op = self._ops.get(job_id)
        if op is not None and wait_s > 0:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(op), wait_s)
        return self.job_object(job_id, detail=False, private=True)

    def set_drain(self, node: str, gpu: int | None, drained: bool, by: str) -> None:
        now = self.now()
        if node not in self.scheduler_nodes():
            raise ServiceError(404, f"node {node} does not exist; see GET cluster for node names")
        if gpu is not None:
            count = self.node_gpu_count(node)
            if not 0 <= gpu < count:
                raise ServiceError(404, f"node {node} has no GPU {gpu}; its GPUs are 0..{count - 1}")
        published: list[str] = []
        with self.store.begin() as conn:
            if drained:
                self.store.add_drain(conn, node, gpu, now, by)
            else:
                self.store.remove_drain(conn, node, gpu)
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
            self._apply(conn, decisions, now, published)
        self._publish(published, cluster=True)

    # ------------------------------------------------------------------------------------------
    # hardware health (called by hardware.monitor.HardwareMonitor)

    def _bad_gpus(self, node: str) -> list[int]:
        bad = self.hardware.state.bad if self.hardware is not None else {}
        return sorted(g for n, g in bad if n == node)

    def gpu_failed(self, node: str, gpu: int, reason: str) -> None:
        """A GPU went bad: nothing new lands on it, and the jobs on it stop; each is retried elsewhere
        while it has retries left (as a lost job), else it fails with the reason."""
        now = self.now()
        published: list[str] = []
        with self.store.begin() as conn:
            self._apply(conn, self.scheduler.set_gpu_health(node, gpu, False, now), now, published)
        self._publish(published, cluster=True)
        why = f"GPU {gpu} on {node} failed: {reason}"
        for job in list(self.active.values()):
            if job.stopping is None and any(p.node == node and gpu in p.gpus for p in job.placement):
                self._begin_stop(job, "lost", why, self.stop_grace_s)

    def gpu_repaired(self, node: str, gpu: int) -> None:
        """An admin marked a bad GPU healthy: give it out again unless the GPU itself is drained (the
        core keeps node health apart, so a drained node's GPU returns with the node's undrain)."""
        if (node, gpu) in self.drained_gpus:
            return
        now = self.now()
        published: list[str] = []
        with self.store.begin() as conn:
            self._apply(conn, self.scheduler.set_gpu_health(node, gpu, True, now), now, published)
        self._publish(published, cluster=True)

    def scheduler_nodes(self) -> dict[str, Any]:
        return self.config.nodes

    def node_gpu_count(self, node: str) -> int:
        info = self.scheduler_nodes().get(node)
        return int(getattr(info, "gpu_count", 0)) if info is not None else 0

    # ------------------------------------------------------------------------------------------
    # applying the core's decisions (synchronous; inside one store transaction)

    def _core_reason(self, job_id: str) -> str | None:
        try:
            view = self.scheduler.job(job_id)
        except Exception:
            return None
        return getattr(view, "reason", None) if view is not None else None

    def _apply(self, conn, decisions: list, now: float, published: list[str]) -> None:
        for d in decisions:
            event = getattr(d, "event", None)
            job_id = _decision_job(d)
            job = self.active.get(job_id) if job_id else None
            if job is None:
                log.debug("hive-lab: decision %s for unknown job %s", event, job_id)
                continue
            if event == "started":
                self._on_started(conn, job, list(d.placement), bool(getattr(d, "opportunistic", False)), now, published)
            elif event == "queued":
                reason = getattr(d, "reason", None) or "waiting"
                if job.state in ("submitted", "queued"):
                    self._transition(conn, job, "queued", reason, now, published, event=job.state != "queued")
            elif event == "preempting":
                victims = list(getattr(d, "victims", None) or [])
                names = ", ".join(victims)
                if job.state in ("submitted", "queued"):
                    self._transition(conn, job, "queued", f"waiting for {names} to be preempted", now, published, event=False)
                for victim_id in victims:
                    victim = self.active.get(victim_id)
                    if victim is not None and victim.stopping is None:
                        self._begin_stop(victim, "preempt", f"preempted by {job.id}", self.preemption_grace_s,
                                         conn=conn, published=published)
            elif event == "preempted":
                by = getattr(d, "by", None) or "a higher-priority job"
                job.retries += 1
                job.queued_at = now
                job.tasks_left = set()
                self.store.update_job(conn, job.id, retries=job.retries)
                self._transition(conn, job, "queued", f"preempted by {by}; retry {job.retries}/{job.max_retries}", now, published)
            elif event == "demoted":
                job.opportunistic = True
                self.store.update_job(conn, job.id, opportunistic=True)
                self._transition(conn, job, job.state, getattr(d, "reason", None) or "demoted to opportunistic", now, published)
            elif event in ("finished", "rejected"):
                pass

    def _on_started(self, conn, job: ActiveJob, placement: list[TaskPlacement], opportunistic: bool, now: float,
                    published: list[str]) -> None:
        job.placement = placement
        job.opportunistic = opportunistic or job.request.priority < 0
        job.recovering = False
        job.attempt += 1
        job.tasks_left = {p.task for p in placement}
        job.stop_seen = set()
        self.metrics.scheduling_latency.observe(max(0.0, now - job.queued_at))
        self.store.set_placement(conn, job.id, job.attempt, [self._placement_row(p, job.opportunistic) for p in placement])
        self.store.update_job(conn, job.id, attempt=job.attempt, opportunistic=job.opportunistic)
        where = "; ".join(f"{p.task} on {p.node} GPUs {list(p.gpus)}" for p in placement)
        self._transition(conn, job, "scheduled", f"placed: {where}" + (" (opportunistic)" if job.opportunistic else ""), now, published)
        self._enqueue(job.id, lambda: self._launch(job.id))

    def _placement_row(self, p: TaskPlacement, opportunistic: bool) -> dict[str, Any]:
        uuids = [self.gpu_uuids.get((p.node, g)) for g in p.gpus]
        return {
            "task": p.task, "group": p.group, "index": p.index, "rank": p.rank, "node": p.node,
            "gpus": list(p.gpus), "gpu_uuids": uuids if uuids and all(uuids) else None,
            "cpus": float(p.cpus), "memory_mb": int(p.memory_mb), "opportunistic": opportunistic,
        }

    def _transition(self, conn, job: ActiveJob, state: str, reason: str, now: float, published: list[str],
                    event: bool = True, **fields: Any) -> None:
        changed = state != job.state
        job.state = state
        self.store.update_job(conn, job.id, state=state, reason=reason, updated_at=now, **fields)
        if event or changed:
            self.store.add_event(conn, job.id, state, now, reason)
            self.metrics.transitions.labels(state).inc()
        if job.id not in published:
            published.append(job.id)
        for listener in self._state_listeners:  # after the store transaction: listeners may call back in
            asyncio.get_running_loop().call_soon(self._notify, listener, job.id, state, reason)

    @staticmethod
    def _notify(listener: Callable[[str, str, str], None], job_id: str, state: str, reason: str) -> None:
        try:
            listener(job_id, state, reason)
        except Exception:
            log.exception("hive-lab: state listener failed")

    def _finalize(self, conn, job: ActiveJob, state: str, reason: str, now: float, published: list[str], *,
                  exit_code: int | None, core_done: bool = False) -> None:
        """The job is over: store its end; the caller has told the core (``finish``)."""
        self._transition(conn, job, state, reason, now, published, finished_at=now, exit_code=exit_code)
        self.active.pop(job.id, None)

    def _publish(self, job_ids: list[str], cluster: bool = False, fresh: dict[str, dict] | None = None) -> None:
        if self.events.subscriber_count == 0:
            return
        for job_id in job_ids:
            try:
                if fresh and job_id in fresh:
                    obj = {k: v for k, v in fresh[job_id].items() if k not in ("spec", "working_dir", "output_dir")}
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
    # per-job operations (launch, stop), chained per job

    def _enqueue(self, job_id: str, make: Callable[[], Awaitable[None]]) -> None:
        prev = self._ops.get(job_id)

        async def run() -> None:
            if prev is not None:
                with contextlib.suppress(BaseException):
                    await prev
            try:
                await make()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("hive-lab: operation on %s failed", job_id)

        task = asyncio.get_running_loop().create_task(run())
        self._ops[job_id] = task

        def done(t: asyncio.Task) -> None:
            if self._ops.get(job_id) is t:
                del self._ops[job_id]

        task.add_done_callback(done)

    def _task_env(self, job: ActiveJob, p: TaskPlacement, master_addr: str, master_port: int) -> dict[str, str]:
        env = {str(k): str(v) for k, v in job.spec.get("env", {}).items()}
        uuids = [self.gpu_uuids.get((p.node, g)) for g in p.gpus]
        devices = ",".join(uuids) if uuids and all(uuids) else ",".join(str(g) for g in p.gpus)
        env.update({
            "CUDA_VISIBLE_DEVICES": devices,
            "NVIDIA_VISIBLE_DEVICES": devices if p.gpus else "void",
            "HIVE_JOB_ID": job.id,
            "HIVE_JOB_NAME": job.spec.get("name", ""),
            "HIVE_USER": job.user,
            "HIVE_VC": job.vc,
            "HIVE_TASK_NAME": p.task,
            "HIVE_TASK_GROUP": p.group,
            "HIVE_TASK_INDEX": str(p.index),
            "HIVE_ATTEMPT": str(job.attempt),
            "HIVE_OUTPUT_DIR": job.output_dir,
            "HIVE_WORKING_DIR": job.working_dir,
            "HIVE_NODE_ADDRESS": self.node_address(p.node),
        })
        if job.spec.get("data_dir"):
            env["HIVE_DATA_DIR"] = job.spec["data_dir"]
        if len(job.placement) > 1:
            env.update({"MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
                        "WORLD_SIZE": str(len(job.placement)), "RANK": str(p.rank)})
        return env

    def log_path(self, job_id: str, task: str) -> pathlib.Path:
        return self.jobs_root / job_id / "logs" / f"{task}.log"

    def _launch_request(self, job: ActiveJob, master_port: int | None = None) -> LaunchRequest:
        placement = sorted(job.placement, key=lambda p: p.rank)
        groups = {t["name"]: t for t in job.spec["tasks"]}
        host = getattr(self.launcher, "host_address", None)
        master_node = placement[0].node if placement else ""
        master_addr = host(master_node) if callable(host) else master_node
        if master_port is None:
            master_port = _free_port() if len(placement) > 1 else 0
        tasks = []
        for p in placement:
            group = groups.get(p.group, {})
            uuids = tuple(self.gpu_uuids.get((p.node, g)) or "" for g in p.gpus)
            tasks.append(TaskLaunch(
                job_id=job.id, task=p.task, group=p.group, index=p.index, rank=p.rank, node=p.node,
                gpu_indices=tuple(p.gpus), gpu_uuids=uuids if uuids and all(uuids) else None,
                command=group.get("command") or job.spec.get("command") or "",
                env=self._task_env(job, p, master_addr, master_port), working_dir=job.working_dir,
                log_path=str(self.log_path(job.id, p.task)), cpus=float(group.get("cpus") or 0),
                memory_mb=int(group.get("memory_mb") or 0), image=job.spec.get("image"),
                data_dir=job.spec.get("data_dir"), output_dir=job.output_dir, user=job.user,
            ))
        return LaunchRequest(job_id=job.id, user=job.user, kind=job.spec.get("kind", "batch"), tasks=tuple(tasks),
                             labels={"hive-lab.job": job.id, "hive-lab.user": job.user, "hive-lab.vc": job.vc,
                                     "hive-lab.attempt": str(job.attempt)})

    def node_address(self, node: str) -> str:
        """Where a task on ``node`` is reached (a kernel's ZMQ ports): the launcher's ``host_address``
        (Slurm's NodeAddr), else this machine."""
        host = getattr(self.launcher, "host_address", None)
        return host(node) if callable(host) else "127.0.0.1"

    def _stage(self, job: ActiveJob) -> None:
        """The job's dirs (0700) and spec ``files`` (0600), owned by the Unix user its tasks run as
        (see ``staging``)."""
        task_owner = getattr(self.launcher, "task_owner", None)
        owner = task_owner(job.user) if callable(task_owner) else None
        root = pathlib.Path(job.working_dir)
        private_dir(root, owner, stop_at=root.parent)  # also hands over a dir the kernel provisioner made
        private_dir(root / "logs", owner, stop_at=root)
        private_dir(pathlib.Path(job.output_dir), owner, stop_at=root)
        for rel, text in (job.spec.get("files") or {}).items():
            target = (root / rel).resolve()
            if root.resolve() not in target.parents:
                raise LaunchError(f"files: {rel!r} points outside the working dir")
            private_dir(target.parent, owner, stop_at=root.resolve())
            write_private(target, text, owner)

    async def _launch(self, job_id: str) -> None:
        job = self.active.get(job_id)
        if job is None or job.state != "scheduled" or job.stopping:
            return
        t0 = time.perf_counter()
        try:
            self._stage(job)
            request = self._launch_request(job)
            await self.launcher.start(request)
        except Exception as exc:
            msg = str(exc) if isinstance(exc, LaunchError) else f"the {self.launcher.name} launcher failed: {exc}"
            if not isinstance(exc, LaunchError):
                log.exception("hive-lab: launching %s failed", job_id)
            job = self.active.get(job_id)
            if job is None:
                return
            now = self.now()
            published: list[str] = []
            with self.store.begin() as conn:
                decisions = self.scheduler.finish(job_id, now)
                self._finalize(conn, job, "failed", f"could not start: {msg}", now, published, exit_code=None)
                self._apply(conn, decisions, now, published)
            self._publish(published)
            return
        self.metrics.launch_seconds.observe(time.perf_counter() - t0)
        job = self.active.get(job_id)
        if job is None or job.state != "scheduled":
            return
        now = self.now()
        published = []
        with self.store.begin() as conn:
            n = len(job.placement)
            self._transition(conn, job, "running", f"{n} task{'s' if n != 1 else ''} started by the {self.launcher.name} launcher",
                             now, published, started_at=now)
        self._publish(published)

    def _begin_stop(self, job: ActiveJob, why: str, reason: str, grace_s: float, exit_code: int | None = None,
                    conn=None, published: list[str] | None = None) -> None:
        """Start stopping a job; pass ``conn``/``published`` when already inside a store transaction."""
        job.stopping = why
        job.stop_reason = reason
        job.stop_exit_code = exit_code
        job.stop_seen = set()
        job.stop_codes = {}
        now = self.now()
        if conn is None:
            own: list[str] = []
            with self.store.begin() as tx:
                self._transition(tx, job, job.state, f"stopping: {reason}", now, own, event=False)
            self._publish(own)
        else:
            self._transition(conn, job, job.state, f"stopping: {reason}", now, published if published is not None else [],
                             event=False)
        self._enqueue(job.id, lambda: self._stop(job.id, grace_s))

    async def _stop(self, job_id: str, grace_s: float) -> None:
        job = self.active.get(job_id)
        if job is None:
            return
        try:
            await self.launcher.stop(job_id, grace_s)
            exits = await self.launcher.poll()  # collect the stopped tasks' exit codes now
            if exits:
                self._handle_exits(exits)
        except Exception:
            log.exception("hive-lab: stopping %s failed", job_id)
        job = self.active.get(job_id)
        if job is None or job.stopping is None:
            return
        if job.stop_exit_code is None and job.stop_codes:
            job.stop_exit_code = job.stop_codes[sorted(job.stop_codes)[0]]
        # Exits of the stopped tasks not yet reported are stale from now on.
        job.stale_exits |= {p.task for p in job.placement} - job.stop_seen - (
            {p.task for p in job.placement} - job.tasks_left
        )
        why, reason, code = job.stopping, job.stop_reason, job.stop_exit_code
        job.stopping = None
        job.tasks_left = set()
        now = self.now()
        published: list[str] = []
        with self.store.begin() as conn:
            if why == "preempt":
                requeue = job.retries < job.max_retries
                decisions = self.scheduler.preemption_done(job_id, now, requeue=requeue)
                if not requeue:
                    self._finalize(conn, job, "failed", f"{reason}; no retries left (max_retries={job.max_retries})",
                                   now, published, exit_code=code)
                elif not any(_decision_job(d) == job_id and getattr(d, "event", "") == "preempted" for d in decisions):
                    # the core requeued it without saying so: record it ourselves
                    job.retries += 1
                    job.queued_at = now
                    self.store.update_job(conn, job.id, retries=job.retries)
                    self._transition(conn, job, "queued", f"{reason}; retry {job.retries}/{job.max_retries}", now, published)
                self._apply(conn, decisions, now, published)
            else:
                decisions = self.scheduler.finish(job_id, now)
                if why == "cancel":
                    self._finalize(conn, job, "cancelled", reason, now, published, exit_code=code)
                elif why == "lost" and job.retries < job.max_retries:
                    self._requeue(conn, job, f"{reason}; retry {job.retries + 1}/{job.max_retries}", now, published)
                else:
                    suffix = f"; no retries left (max_retries={job.max_retries})" if why == "lost" else ""
                    self._finalize(conn, job, "failed", reason + suffix, now, published, exit_code=code)
                self._apply(conn, decisions, now, published)
        self._publish(published)

    def _requeue(self, conn, job: ActiveJob, reason: str, now: float, published: list[str], count_retry: bool = True) -> None:
        """Put a job whose run ended (lost) back into the core's queue."""
        if count_retry:
            job.retries += 1
        job.recovering = False
        job.queued_at = now
        job.placement = []
        self.store.update_job(conn, job.id, retries=job.retries)
        self._transition(conn, job, "queued", reason, now, published)
        decisions = self.scheduler.submit(job.request, now)
        if not any(_decision_job(d) == job.id for d in decisions):
            self._transition(conn, job, "queued", self._core_reason(job.id) or "waiting", now, published, event=False)
        self._apply(conn, decisions, now, published)

    # ------------------------------------------------------------------------------------------
    # exits reported by the launcher

    def _handle_exits(self, exits: list[TaskExit]) -> None:
        now = self.now()
        published: list[str] = []
        with self.store.begin() as conn:
            for e in exits:
                job = self.active.get(e.job_id)
                if job is None:
                    continue
                if e.task in job.stale_exits:
                    job.stale_exits.discard(e.task)
                    continue
                if job.stopping is not None:
                    job.stop_seen.add(e.task)
                    if e.exit_code is not None:
                        job.stop_codes[e.task] = e.exit_code
                    continue
                if e.task not in job.tasks_left:
                    continue
                if e.exit_code == 0:
                    job.tasks_left.discard(e.task)
                    if not job.tasks_left:
                        decisions = self.scheduler.finish(job.id, now)
                        n = len(job.placement)
                        self._finalize(conn, job, "succeeded", f"{'all ' + str(n) + ' tasks' if n > 1 else 'the task'} exited with code 0",
                                       now, published, exit_code=0)
                        self._apply(conn, decisions, now, published)
                    continue
                job.tasks_left.discard(e.task)
                if e.exit_code is None:
                    detail = e.reason if e.reason and e.reason != "lost" else "gone without an exit code"
                    why, reason = "lost", f"task {e.task} was lost ({detail})"
                else:
                    detail = f", {e.reason}" if e.reason else ""
                    why, reason = "failed", f"task {e.task} exited with code {e.exit_code}{detail}"
                job.stop_seen = set()
                if job.tasks_left:  # gang: the other tasks stop too
                    self._begin_stop(job, why, reason, self.stop_grace_s, exit_code=e.exit_code,
                                     conn=conn, published=published)
                    job.stop_seen.add(e.task)
                else:
                    decisions = self.scheduler.finish(job.id, now)
                    if why == "lost" and job.retries < job.max_retries:
                        self._requeue(conn, job, f"{reason}; retry {job.retries + 1}/{job.max_retries}", now, published)
                    else:
                        suffix = f"; no retries left (max_retries={job.max_retries})" if why == "lost" else ""
                        self._finalize(conn, job, "failed", reason + suffix, now, published, exit_code=e.exit_code)
                    self._apply(conn, decisions, now, published)
        self._publish(published)

    # ------------------------------------------------------------------------------------------
    # recovery after a restart

    def _active_from_row(self, row: dict[str, Any]) -> ActiveJob:
        spec = row["spec"]
        request = JobRequest(
            id=row["id"], vc=row["vc"], user=row["user"],
            tasks=tuple(TaskGroup(name=t["name"], count=t["count"], gpus=t["gpus"], gpu_type=t.get("gpu_type"),
                                  cpus=t.get("cpus") or 0, memory_mb=t.get("memory_mb") or 0) for t in spec["tasks"]),
            priority=row["priority"], within=spec.get("within"), submit_time=row["submitted_at"],
        )
        return ActiveJob(
            id=row["id"], seq=row["seq"], user=row["user"], vc=row["vc"], spec=spec, request=request,
            state=row["state"], retries=row["retries"], max_retries=row["max_retries"], attempt=row["attempt"],
            working_dir=row["working_dir"], output_dir=row["output_dir"], submitted_at=row["submitted_at"],
            queued_at=row["updated_at"], opportunistic=bool(row["opportunistic"]),
        )

    async def _recover(self) -> None:
        rows = self.store.active_jobs()
        for d in self.store.drains():
            if d["gpu"] is None:
                self.drained_nodes.add(d["node"])
            else:
                self.drained_gpus.add((d["node"], d["gpu"]))
        alive = await self.launcher.running()
        placed_ids = [r["id"] for r in rows if r["state"] in ("scheduled", "running")]
        placements = self.store.placements(placed_ids)
        now = self.now()
        published: list[str] = []
        to_adopt: list[ActiveJob] = []
        with self.store.begin() as conn:
            for node in sorted(self.drained_nodes):
                self._apply(conn, self.scheduler.set_node_health(node, False, now), now, published)
            for node, gpu in sorted(self.drained_gpus):
                self._apply(conn, self.scheduler.set_gpu_health(node, gpu, False, now), now, published)
            requeue: list[ActiveJob] = []
            for row in rows:
                job = self._active_from_row(row)
                self.active[job.id] = job
                stored = placements.get(job.id) or []
                if job.state not in ("scheduled", "running"):
                    requeue.append(job)
                    continue
                placement = [TaskPlacement(task=p["task"], group=p["group"], index=p["index"], rank=p["rank"],
                                           node=p["node"], gpus=tuple(p["gpus"]), cpus=p["cpus"], memory_mb=p["memory_mb"])
                             for p in stored]
                live = alive.get(job.id, set())
                if not placement or (job.state == "scheduled" and not live):
                    # never (fully) started: it goes back to the queue without costing a retry
                    job.state = "queued"
                    self.store.clear_placement(conn, job.id)
                    self._transition(conn, job, "queued", "the server restarted before the job started", now, published)
                    requeue.append(job)
                    continue
                try:
                    decisions = self.scheduler.adopt(job.request, placement, job.opportunistic, now)
                except Exception as exc:
                    log.warning("hive-lab: cannot adopt %s (%s); it is marked lost", job.id, exc)
                    job.placement = []
                    if live:
                        await self.launcher.adopt(self._launch_request_for_recovery(job, placement))
                        await self.launcher.stop(job.id, 0)
                    if job.retries < job.max_retries:
                        job.retries += 1
                        job.state = "queued"
                        self.store.update_job(conn, job.id, retries=job.retries)
                        self._transition(conn, job, "queued", f"lost on restart ({exc}); retry {job.retries}/{job.max_retries}", now, published)
                        requeue.append(job)
                    else:
                        self._finalize(conn, job, "failed", f"lost on restart ({exc})", now, published, exit_code=None)
                    continue
                job.placement = placement
                job.tasks_left = {p.task for p in placement}
                job.recovering = True
                if job.state == "scheduled":
                    self._transition(conn, job, "running", "adopted after a server restart", now, published)
                else:
                    self._transition(conn, job, "running", "adopted after a server restart", now, published, event=True)
                self._apply(conn, decisions, now, published)
                if live:
                    to_adopt.append(job)
            for job in requeue:
                job.queued_at = now
                decisions = self.scheduler.submit(job.request, now)
                if not any(_decision_job(d) == job.id for d in decisions):
                    self._transition(conn, job, "queued", self._core_reason(job.id) or "waiting", now, published,
                                     event=job.state != "queued")
                self._apply(conn, decisions, now, published)
        for job in to_adopt:
            try:
                await self.launcher.adopt(self._launch_request(job, master_port=0))
            except Exception:
                log.exception("hive-lab: the launcher could not adopt %s", job.id)
        # What runs now, THEN the exits the launcher knows (also those from while the server was down).
        # In this order a task that ends between the two calls is in the snapshot and its exit in the
        # poll, so it is recorded with its real exit code; only a task missing from the snapshot whose
        # exit nobody reports is lost. (Polling first would call a task ending in between lost.)
        alive = {job_id: set(tasks) for job_id, tasks in (await self.launcher.running()).items()}
        exits = await self.launcher.poll()
        if exits:
            self._handle_exits(exits)
        for e in exits:  # reported exits are authoritative: these tasks are over, whatever the snapshot says
            tasks = alive.get(e.job_id)
            if tasks is not None:
                tasks.discard(e.task)
                if not tasks:
                    del alive[e.job_id]
        lost: list[TaskExit] = []
        for job in list(self.active.values()):
            if not job.recovering or job.state != "running":
                continue
            job.recovering = False
            if job.stopping is None:
                for task in sorted(job.tasks_left - alive.get(job.id, set())):
                    lost.append(TaskExit(job.id, task, None, "not running after the server restarted"))
        if lost:
            self._handle_exits(lost)
        # anything running that the store does not know as running is stopped
        for job_id, tasks in sorted(alive.items()):
            job = self.active.get(job_id)
            if job is None or job.state not in ("scheduled", "running"):
                log.warning("hive-lab: stopping orphan tasks of %s found after restart", job_id)
                placement = [TaskPlacement(task=t, group=t.rsplit("-", 1)[0], index=0, rank=0, node="", gpus=())
                             for t in sorted(tasks)]
                try:
                    orphan = self._launch_request_for_recovery(job, placement, job_id)
                    await self.launcher.adopt(orphan)
                    await self.launcher.stop(job_id, self.stop_grace_s)
                except Exception:
                    log.exception("hive-lab: stopping orphan %s failed", job_id)
        self._publish(published, cluster=True)

    def _launch_request_for_recovery(self, job: ActiveJob | None, placement: list[TaskPlacement],
                                     job_id: str | None = None) -> LaunchRequest:
        jid = job.id if job else job_id
        tasks = tuple(
            TaskLaunch(job_id=jid, task=p.task, group=p.group, index=p.index, rank=p.rank, node=p.node,
                       gpu_indices=tuple(p.gpus), gpu_uuids=None, command="", env={},
                       working_dir=str(self.jobs_root / jid), log_path=str(self.log_path(jid, p.task)))
            for p in placement
        )
        return LaunchRequest(job_id=jid, user=job.user if job else "", kind="batch", tasks=tasks,
                             labels={"hive-lab.job": jid})

    # ------------------------------------------------------------------------------------------
    # views for handlers

    def job_object(self, job_id: str, *, detail: bool, private: bool, row: dict[str, Any] | None = None,
                   placement: list[dict[str, Any]] | None = None, live_reason: bool = True) -> dict[str, Any]:
        row = row or self.store.get_job(job_id)
        if row is None:
            raise ServiceError(404, f"job {job_id} does not exist")
        if placement is None:
            placement = self.store.placements([job_id])[job_id]
        reason = row["reason"]
        if live_reason and row["state"] == "queued" and job_id in self.active and not self.active[job_id].stopping:
            reason = self._core_reason(job_id) or reason
        obj: dict[str, Any] = {
            "id": row["id"], "name": row["name"], "user": row["user"], "vc": row["vc"], "kind": row["kind"],
            "state": row["state"], "reason": reason, "priority": row["priority"],
            "opportunistic": bool(row["opportunistic"]), "gpus": row["gpus"], "gpu_type": row["gpu_type"],
            "tasks": task_names(row["spec"]),
            "submitted_at": iso(row["submitted_at"]), "started_at": iso(row["started_at"]),
            "finished_at": iso(row["finished_at"]), "exit_code": row["exit_code"], "retries": row["retries"],
            "max_retries": row["max_retries"],
            "placement": [{"task": p["task"], "node": p["node"], "address": self.node_address(p["node"]),
                           "gpus": list(p["gpus"]), "gpu_uuids": p["gpu_uuids"]} for p in placement],
        }
        if private:
            obj["spec"] = row["spec"]
            obj["working_dir"] = row["working_dir"]
            obj["output_dir"] = row["output_dir"]
        if detail:
            obj["history"] = [{"state": h["state"], "at": iso(h["at"]), "reason": h["reason"]}
                              for h in self.store.history(job_id)]
        return obj

    def list_jobs(self, *, users, vcs, states, limit, offset, private_for: Callable[[dict], bool]) -> dict[str, Any]:
        rows, total = self.store.list_jobs(users=users, vcs=vcs, states=states, limit=limit, offset=offset)
        placements = self.store.placements([r["id"] for r in rows])
        jobs = [self.job_object(r["id"], detail=False, private=private_for(r), row=r, placement=placements[r["id"]])
                for r in rows]
        return {"jobs": jobs, "total": total, "limit": limit, "offset": offset}

    def job_active(self, job_id: str) -> bool:
        return job_id in self.active

    def task_active(self, job_id: str, task: str) -> bool:
        """The task may still write to its log (not started yet, or running)."""
        job = self.active.get(job_id)
        if job is None:
            return False
        return job.state != "running" or job.stopping is not None or task in job.tasks_left

    def cluster_object(self) -> dict[str, Any]:
        view = self.scheduler.cluster_view()
        cells = view.get("cells", [])
        users = {j.id: j.user for j in self.active.values()}
        gpus: list[dict[str, Any]] = []

        def walk(cell: dict[str, Any], path: list[str]) -> None:
            children = cell.get("children") or []
            if not children and cell.get("gpu") is not None or (not children and cell.get("level") == 1):
                node = cell.get("node")
                index = cell.get("gpu")
                jobs = cell.get("jobs") or []
                job_id = jobs[0] if jobs else None
                gpus.append({
                    "node": node, "index": index, "uuid": self.gpu_uuids.get((node, index)),
                    "type": cell.get("type"), "state": cell.get("state"), "vc": cell.get("vc"), "job": job_id,
                    "user": users.get(job_id) if job_id else None, "opportunistic": bool(cell.get("opportunistic")),
                    "utilization": None, "memory_used_mb": None, "bad": cell.get("state") == "bad",
                    "drained": node in self.drained_nodes or (node, index) in self.drained_gpus,
                    "path": list(path),
                })
                if self.hardware is not None:  # live readings and the health rules' verdict
                    gpus[-1].update(self.hardware.gpu_status(node, index))
                return
            for child in children:
                walk(child, path + [cell.get("address")])

        for top in cells:
            walk(top, [])
        nodes = []
        for name, info in self.scheduler_nodes().items():
            nodes.append({"name": name, "cpus": getattr(info, "cpus", None), "memory_mb": getattr(info, "memory_mb", None),
                          "gpu_count": getattr(info, "gpu_count", None), "gpu_types": list(getattr(info, "gpu_types", ()) or ()),
                          "drained": name in self.drained_nodes})
        return {"gpus_total": self.scheduler.gpu_count(), "gpus_free": self.scheduler.free_gpu_count(),
                "nodes": nodes, "cells": cells, "gpus": gpus}

    def vcs_object(self, may_submit: Callable[[str], bool]) -> dict[str, Any]:
        out = []
        for name, v in sorted(self.scheduler.vc_view().items()):
            item = {"name": name}
            item.update({k: v.get(k) for k in ("guaranteed_gpus", "used_gpus", "opportunistic_gpus", "doomed_gpus",
                                               "queue_length", "running_jobs", "guaranteed_cells")})
            item["mine"] = may_submit(name)
            out.append(item)
        return {"vcs": out}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
