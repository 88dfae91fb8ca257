"""The hive-lab service: the composition root of the scheduling service.

``HiveService`` holds the service's state (the core, the store, the launcher, the unfinished jobs),
builds its parts, each with exactly the collaborators it uses (no part imports this module), and runs
their lifecycle (``start``/``stop``; recovery first). Callers call the part that does the work, as
jupyter_server's handlers call its ``kernel_manager`` or ``contents_manager``:

- ``work``: the unit of work that runs the lifecycle machine's effects (``lifecycle.shell.UnitOfWork``);
  every other part is handed it (as ``lifecycle.work.Work``), never the service;
- ``admission``: new jobs (submit, group commit, what-if: ``lifecycle.admission.Admission``);
- ``limits`` (``limits.Limits``), ``hardware_events`` (drains and GPU health), ``shares`` (shares of a
  GPU), ``moves`` (pause/resume/migrate/resize), ``recovery`` (after a restart), ``arrays`` (job arrays),
  ``dependencies`` (``depends_on``).

The service itself answers cancels, the REST views of jobs, the cluster and the VCs, progress and
usage. The state table is ``wire/states.py`` (and docs/lifecycle.md), the pure step function
``machine.py``, staging and launch requests ``launch_plan.py``, REST views ``presentation.py``; the
refusals live in ``errors.py``.

Everything runs on the Jupyter server's event loop thread, so the core is only ever touched by one
caller at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from hive_scheduler import ClusterConfig, Scheduler

from hive_lab_server.usage import accounting
from hive_lab_server.wire.events import EventBus
from hive_lab_server.hardware.sharing import GpuSharing
from hive_lab_server.execution.launchers.base import Launcher
from hive_lab_server.jobs.limits import Limits
from hive_lab_server.jobs.arrays.feeder import ArrayFeeder
from hive_lab_server.jobs.lifecycle.admission import Admission
from hive_lab_server.jobs.lifecycle.hardware_events import HardwareEvents
from hive_lab_server.jobs.lifecycle.share_grants import ShareGrants
from hive_lab_server.jobs.lifecycle import kernel_leases, launch_plan, machine as m, presentation
from hive_lab_server.jobs.lifecycle.presentation import iso, task_names  # noqa: F401  (kept importable from here)
from hive_lab_server.jobs.lifecycle.moves import Moves
from hive_lab_server.jobs.lifecycle.recovery import Recovery
from hive_lab_server.errors import STORE_RETRY_AFTER_S, ServiceError, StoreUnavailable  # noqa: F401  (kept importable from here)
from hive_lab_server.jobs.lifecycle.active import ActiveJob, request_from, unfinished_job  # noqa: F401  (kept importable from here)
from hive_lab_server.jobs.lifecycle.shell import UnitOfWork
from hive_lab_server.jobs.start_estimates import StartEstimates
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import PLACED_STATES, JobState
from hive_lab_server.jobs.lifecycle.kernel_caps import parse_kernel_limits
from hive_lab_server.jobs.lifecycle.kernel_idle import KernelIdleWatch
from hive_lab_server.jobs.lifecycle.time_limit import parse_vc_time_limits
from hive_lab_server.usage.metrics import Metrics
from hive_lab_server.timeshare.progress import ProgressTracker
from hive_lab_server.jobs.pipelines.dependencies import Dependencies, JobOutcomes
from hive_lab_server.store import Store

if TYPE_CHECKING:
    from hive_scheduler.hetero import Throughputs

    from hive_lab_server.hardware.monitor import HardwareMonitor
    from hive_lab_server.jobs.pipelines.schedules import Schedules

log = logging.getLogger("hive_lab_server")

STATES = tuple(s.value for s in JobState)
S = JobState
KERNEL_LEASE_CHECK_S = 2.0  # how often the kernel jobs' heartbeats are read (lifecycle.kernel_leases)


class Rounds(Protocol):
    """What the service's loop runs under a Gavel queue policy (``timeshare.rounds.RoundDriver``, which is
    handed the service: named here by what it does, not imported)."""

    round_s: float
    round: int
    policy_name: str

    async def run_round(self) -> None:
        """Solve the policy again and carry out its moves."""


class HiveService:
    """The parts of the scheduling service and their lifecycle (see the module's docstring)."""

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        config: ClusterConfig,
        store: Store,
        launcher: Launcher,
        jobs_root: str | os.PathLike,
        gpu_uuids: dict[tuple[str, int], str] | None = None,
        preemption_grace_s: float = 10.0,
        stop_grace_s: float = 10.0,
        checkpoint_grace_s: float = 30.0,
        poll_interval_s: float = 0.1,
        events: EventBus | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        vc_time_limits: dict[str, Any] | None = None,
        user_limits: dict | None = None,
        sharing: GpuSharing | None = None,
        throughputs: Throughputs | None = None,
        progress_interval_s: float = 1.0,
        max_unfinished_jobs: int = 0,
        kernel_limits: dict[str, Any] | None = None,
    ):
        self.scheduler = scheduler
        self.config = config
        self.store = store
        self.launcher = launcher
        self.jobs_root = pathlib.Path(jobs_root)
        self.jobs_root.mkdir(parents=True, exist_ok=True)
        self._jobs_root_str = str(self.jobs_root)
        self.gpu_uuids = dict(gpu_uuids or {})
        self.preemption_grace_s = preemption_grace_s
        self.stop_grace_s = stop_grace_s
        self.checkpoint_grace_s = checkpoint_grace_s  # SIGUSR1 -> exit, before the stop (docs/checkpoint.md)
        self.poll_interval_s = poll_interval_s
        self.events = events or EventBus()
        self.events.seq = max(self.events.seq, store.last_event_seq())  # seq goes on across restarts
        store.on_events = self.events.publish_states  # stored state changes go out once committed
        self.metrics = metrics or Metrics()
        self.metrics.attach(self)
        self.active: dict[str, ActiveJob] = {}
        self.progress = ProgressTracker(throughputs)  # hive_lab.progress lines -> rates per GPU type
        self.progress_interval_s = progress_interval_s
        self.rounds: Rounds | None = None  # rounds.RoundDriver under a Gavel queue_policy (set by the app)
        self._rounds_task: asyncio.Task | None = None
        self.hardware: HardwareMonitor | None = None  # set by the app (GPU health, live data)
        self.schedules: Schedules | None = None  # set by the app (recurring jobs; ticked by _loop)
        self._clock = clock
        self._last_now = 0.0
        self.time_limits = parse_vc_time_limits(vc_time_limits, sorted(getattr(config, "virtual_clusters", None) or ()) or None)
        # GPU kernels' caps per VC, whatever their kernelspec says: time limit at admission, idle cull here
        self.kernel_caps = parse_kernel_limits(kernel_limits, sorted(getattr(config, "virtual_clusters", None) or ()) or None)
        self.kernel_idle = KernelIdleWatch(self.kernel_caps, self.now, self.launcher.host_address, self._kernel_gpus_busy)
        self._loop_task: asyncio.Task | None = None
        self._gpu_sweep_task: asyncio.Task | None = None  # the launcher's GPU descriptor sweep, when one runs
        self._stopping = False
        self._ready = asyncio.Event()  # set once recovery is over (binds to the running loop on first use)
        self._recovery_error: str | None = None
        self._recovering = False
        # shares of a GPU: how each is enforced (mode per GPU type), MPS daemons, memory budgets
        self.sharing = sharing or GpuSharing()
        # ``estimated_start`` of queued jobs, recomputed on change (see start_estimates)
        self.start_estimates = StartEstimates(self, on_changed=lambda ids: self.events.publish(
            {"type": "estimates", "jobs": ids}))
        # the parts, each handed what it needs; the unit of work first: every other part is handed it
        self.work = UnitOfWork(store=store, scheduler=scheduler, launcher=launcher, active=self.active,
                               metrics=self.metrics, progress=self.progress, start_estimates=self.start_estimates,
                               events=self.events, views=self, config=config, gpu_uuids=self.gpu_uuids,
                               jobs_root=self.jobs_root, now=self.now, preemption_grace_s=preemption_grace_s,
                               stop_grace_s=stop_grace_s, checkpoint_grace_s=checkpoint_grace_s)
        self.limits = Limits(vcs=config.virtual_clusters, core=scheduler, store=store, work=self.work,
                             config_limits=user_limits)  # user_limits: HiveLabApp.user_limits, parsed
        self.hardware_events = HardwareEvents(nodes=config.nodes, core=scheduler, store=store, active=self.active,
                                              work=self.work, monitor=lambda: self.hardware)
        self.shares = ShareGrants(chains=config.chains, store=store, active=self.active, work=self.work,
                                  sharing=self.sharing, gpu_uuids=self.gpu_uuids,
                                  cluster=lambda: presentation.cluster_object(self),
                                  on_state_change=self.work.on_state_change)
        self.recovery = Recovery(store=store, launcher=launcher, core=scheduler, active=self.active,
                                 drained_nodes=self.hardware_events.drained_nodes,
                                 drained_gpus=self.hardware_events.drained_gpus, sharing=self.sharing,
                                 jobs_root=self.jobs_root, stop_grace_s=stop_grace_s, work=self.work)
        self.moves = Moves(nodes=config.nodes, core=scheduler, store=store, active=self.active, work=self.work,
                           view=lambda job_id: self.job_object(job_id, detail=False, private=True))
        # depends_on (issue 27): held jobs stay out of the core until the jobs they name ended as asked
        outcomes = JobOutcomes(store=store, active=self.active)
        self.dependencies = Dependencies(outcomes, self.active, work=self.work, containers=self._array_of)
        self.work.attach_parts(shares=self.shares, moves=self.moves, dependencies=self.dependencies)
        self.admission = Admission(work=self.work, store=store, scheduler=scheduler, launcher=launcher,
                                   active=self.active, metrics=self.metrics, progress=self.progress,
                                   shares=self.shares, dependencies=self.dependencies, time_limits=self.time_limits,
                                   kernel_caps=self.kernel_caps, gpu_uuids=self.gpu_uuids, jobs_root=self.jobs_root,
                                   max_unfinished_jobs=max_unfinished_jobs, views=self)
        # job arrays and sweeps: pending elements wait there, released ones are jobs (arrays/feeder.py)
        self.arrays = ArrayFeeder(store=store, core=scheduler, work=self.work, prepare=self.admission.prepare,
                                  admit=self.admission.admit, cancel=self.cancel, pause=self.moves.pause,
                                  resume=self.moves.resume, time_limits=self.time_limits,
                                  jobs_root=self._jobs_root_str)
        outcomes.add_resolver(self.arrays.outcome)  # an array counts as ended when all its elements did
        self.work.on_state_change(self.arrays.on_state_change)
        self.work.on_state_change(self.dependencies.on_state)

    def _array_of(self, job_id: str) -> list[str]:
        row = self.store.get_job(job_id)
        return [row["array_id"]] if row is not None and row.get("array_id") else []

    # ------------------------------------------------------------------------------------------
    # time

    def now(self) -> float:
        t = self._clock()
        if t < self._last_now:
            t = self._last_now
        self._last_now = t
        return t

    # ------------------------------------------------------------------------------------------
    # start and stop

    async def start(self) -> None:
        """Recover the jobs of an earlier server process, then watch the launcher. Requests wait for
        ``wait_ready`` so nobody sees (or changes) the state from before recovery."""
        if self._loop_task is not None:
            return
        try:
            self._restore_usage()
            self.limits.load()  # before recovery queues jobs again: they are gated like new ones
            await self.recovery.recover()
        except BaseException as exc:
            self._recovery_error = f"{type(exc).__name__}: {exc}"
            self._ready.set()
            raise
        self._loop_task = asyncio.create_task(self._loop(), name="hive-lab-service")
        self.arrays.start()  # after recovery: recovered elements count against their array's throttle
        if self.rounds is not None:
            self._rounds_task = asyncio.create_task(self._round_loop(), name="hive-lab-rounds")
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
        self.start_estimates.close()
        self.arrays.stop()
        if self._rounds_task:
            self._rounds_task.cancel()
        if self._loop_task:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        self.kernel_idle.close()
        if self._gpu_sweep_task:
            self._gpu_sweep_task.cancel()
        self.work.cancel_operations()
        with contextlib.suppress(Exception):
            await self.launcher.close()
        self.store.close()

    async def _loop(self) -> None:
        last_error, last_logged, last_progress, last_leases, last_sweep = "", 0.0, 0.0, 0.0, 0.0
        while True:
            try:
                await self.work.poll_launcher()
                self.work.check_deadlines()
                if self.schedules is not None:  # recurring jobs due by the service's clock
                    self.schedules.tick()
                if time.monotonic() - last_progress >= self.progress_interval_s:
                    last_progress = time.monotonic()
                    self.read_progress_of_running()
                if time.monotonic() - last_leases >= KERNEL_LEASE_CHECK_S:
                    last_leases = time.monotonic()
                    self.end_unreachable_kernels()
                    self.end_idle_kernels()
                sweep_every = self.launcher.gpu_sweep_interval_s
                if sweep_every > 0 and time.monotonic() - last_sweep >= sweep_every:
                    last_sweep = time.monotonic()
                    self._sweep_gpus()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. the Docker daemon is down: say so once a minute, keep going
                now = time.monotonic()
                if repr(exc) != last_error or now - last_logged > 60:
                    log.exception("hive-lab: polling the %s launcher failed", self.launcher.name)
                    last_error, last_logged = repr(exc), now
            await asyncio.sleep(self.poll_interval_s)

    def _sweep_gpus(self) -> None:
        """Start the launcher's GPU descriptor sweep (no GPU descriptor outlives its task; it reads /proc off
        the event loop) unless the previous one still runs; the loop does not wait for it."""
        if self._gpu_sweep_task is not None and not self._gpu_sweep_task.done():
            return

        async def sweep() -> None:
            try:
                await self.launcher.sweep_gpus()
            except Exception:  # noqa: BLE001 - the next sweep tries again
                log.exception("hive-lab: the GPU descriptor sweep failed")

        self._gpu_sweep_task = asyncio.create_task(sweep(), name="hive-lab-gpu-sweep")

    def _restore_usage(self) -> None:
        """Fair share: the core's decayed usage, derived from the stored usage records (so it survives
        restarts without a second copy to keep in sync), given to the core before any job is."""
        if self.scheduler.policy != "fair_share":
            return
        half_life = self.scheduler.usage_ledger().settings.half_life_s
        now = self.now()
        rows = self.store.usage_rows(since=now - accounting.FORGOTTEN_AFTER_HALF_LIVES * half_life)
        self.scheduler.restore_usage(accounting.fair_share_snapshot(rows, now, half_life))

    async def _round_loop(self) -> None:
        """A round of the Gavel policy every ``rounds.round_s`` seconds (rounds.py)."""
        while True:
            await asyncio.sleep(self.rounds.round_s)
            try:
                await self.rounds.run_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("hive-lab: round %s of %s failed", self.rounds.round, self.rounds.policy_name)

    # ------------------------------------------------------------------------------------------
    # requests from handlers (new jobs: ``admission``; moves, limits, drains: their parts)

    async def cancel(self, job_id: str, by: str, wait_s: float = 5.0) -> dict[str, Any]:
        """Cancel a job. Its intent is stored before this returns (a restart finishes the stop); it
        answers once the job is cancelled or ``wait_s`` passed. StoreUnavailable(503) if the store
        refuses the intent: nothing changed, the cancel may be sent again."""
        unfinished_job(self.active, self.store, job_id, "cancelled")
        self.work.unit([(job_id, m.Cancel(by))], request=True)
        await self.work.settle(job_id, wait_s)
        return self.job_object(job_id, detail=False, private=True)

    def read_progress(self, job_id: str, row: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The job's ``progress`` (see ``progress``), after reading what its first task's log gained."""
        from hive_lab_server.execution.isolation.job_files import read_log

        row = row or self.store.get_job(job_id)
        if row is None:
            return None
        spec = LaunchSpec.of(row["spec"])
        task = spec.task_names()[0]
        tracker = self.progress
        final = job_id not in self.active and job_id in tracker.ending  # ended since the last read: read to the end
        if job_id not in self.active and not final:  # ended: its kept progress, else its log read once, nothing kept
            kept = tracker.view(job_id, spec.job_type, row["gpus"])
            if kept is not None and kept["steps"] is not None:
                return kept
            tracker = ProgressTracker(self.progress.throughputs)
        for source, path in (("log", launch_plan.log_path(self.jobs_root, job_id, task)),
                             ("channel", launch_plan.progress_path(self.jobs_root, job_id, task))):

            def chunk(offset: int, path=path) -> tuple[bytes, int]:
                data, nxt, size = read_log(self, row["user"], path, offset)  # as the owner, no link followed
                return (data, nxt) if data or size >= offset else (b"", size)

            tracker.read(job_id, spec.job_type, chunk, self.now(), source)
        if final:
            tracker.finish(job_id)
        return tracker.view(job_id, spec.job_type, row["gpus"])

    def end_unreachable_kernels(self) -> None:
        """Cancel the kernel jobs whose Jupyter server's heartbeat lease ran out (``lifecycle.kernel_leases``)."""
        for job_id, by in kernel_leases.unreachable_kernels(list(self.active.values()), self.now()):
            log.warning("hive-lab: cancelling kernel job %s: %s", job_id, by)
            self.work.unit([(job_id, m.Cancel(by))])

    def end_idle_kernels(self) -> None:
        """Cancel the GPU kernels idle for their VC's cap (``HiveLabApp.kernel_limits``, ``lifecycle.kernel_idle``)."""
        self.kernel_idle.sync(list(self.active.values()))
        for job_id, by in self.kernel_idle.idle(self.active):
            log.warning("hive-lab: cancelling kernel job %s: %s", job_id, by)
            self.work.unit([(job_id, m.Cancel(by))])

    def _kernel_gpus_busy(self, job: ActiveJob) -> bool:
        """The hardware monitor saw one of ``job``'s GPUs busy in its latest sample."""
        if self.hardware is None:
            return False
        for p in job.placement:
            for gpu in p.gpus:
                if (self.hardware.gpu_status(p.node, gpu).get("utilization") or 0) > 0:
                    return True
        return False

    def read_progress_of_running(self) -> None:
        """Read what the running jobs' sources gained, and those of the jobs that ended since the last
        read to their end (their last steps), once."""
        for job in list(self.active.values()):
            if job.lc.state is S.RUNNING:
                row = {"spec": job.spec.stored, "user": job.user, "gpus": sum(len(p.gpus) for p in job.placement)}
                try:
                    self.read_progress(job.id, row)
                except Exception:
                    log.exception("hive-lab: reading the progress of %s failed", job.id)
        for job_id in list(self.progress.ending):
            try:
                if self.read_progress(job_id) is None:  # (no row: nothing to read)
                    self.progress.finish(job_id)
            except Exception:
                self.progress.finish(job_id)
                log.exception("hive-lab: reading the final progress of %s failed", job_id)

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

    def list_jobs(self, *, users, vcs, states, limit, offset, private_for: Callable[[dict], bool],
                  elements: bool = True, after: int | None = None) -> dict[str, Any]:
        """A page of jobs, newest first; ``next`` is the cursor of the page after it (None: the last page)."""
        rows, total = self.store.list_jobs(users=users, vcs=vcs, states=states, limit=limit + 1, offset=offset,
                                           elements=elements, after=after)
        more, rows = len(rows) > limit, rows[:limit]
        placements = self.store.placements([r["id"] for r in rows])
        jobs = [presentation.job_object(self, r, placements[r["id"]], detail=False, private=private_for(r))
                for r in rows]
        return {"jobs": jobs, "total": total, "limit": limit, "offset": offset,
                "next": rows[-1]["seq"] if more else None}

    def task_active(self, job_id: str, task: str) -> bool:
        """The task may still write to its log (not started yet, or running)."""
        job = self.active.get(job_id)
        if job is None:
            return False
        return job.lc.state is not S.RUNNING or job.lc.intent is not None or task in job.lc.left

    # ------------------------------------------------------------------------------------------
    # accounting (see accounting.py)

    def usage(self, *, since: float, by: str, users: list[str] | None,
              vcs: list[str] | None = None) -> list[dict[str, Any]]:
        """Totals per user, VC or day over ``[since, now]`` (running attempts count up to now);
        ``users`` / ``vcs``: only these users' attempts, in these VCs (None: everyone's, every VC)."""
        rows = self.store.usage_rows(since=since, users=users, vcs=vcs)
        return accounting.usage_table(rows, since, self.now(), by)

    def gpus_held(self) -> dict[str, int]:
        """GPUs each user's placed jobs hold now (Prometheus ``hive_lab_user_gpus_held``)."""
        held: dict[str, int] = {}
        for job in self.active.values():
            if job.lc.state in PLACED_STATES:
                n = sum(len(p.gpus) for p in job.placement)
                if n:
                    held[job.user] = held.get(job.user, 0) + n
        return dict(sorted(held.items()))
