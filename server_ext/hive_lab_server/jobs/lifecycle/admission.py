"""Admission: a new job from a validated spec to a stored, acknowledged job the core has decided on.

``submit`` and group commit (``submit_grouped``: the submits that arrive before the next turn of the event
loop share one transaction, one clock reading and one publication), the checks a job must pass before it
gets an id (time limit, job type, shares, can it ever fit, the owner's limits), and ``what_if`` (the same
checks, answered from a rolled-back placement, nothing stored).

``Admission`` is a part the service holds (``HiveService.admission``), built with exactly what it uses: the
unit of work (``shell.UnitOfWork``: the clock, ``unit``, the core's decisions as facts, the state listeners),
the store (ids and rows), the core, the launcher (a kernel's dir), the unfinished jobs, the metrics, the
progress tracker (job types), the shares of a GPU, the dependency gate, the time limits and kernel caps per
VC, the GPUs' UUIDs, the jobs root, the bound on unfinished jobs and the job's REST view.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import pathlib
import time
from typing import Any, Mapping

from hive_scheduler.errors import LimitRefusal
from hive_scheduler import RequestError
from hive_scheduler.protocol import LiveSchedulerCore
from hive_scheduler.validation import validate_request

from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.spec import JobSpec
from hive_lab_server.jobs.start_estimates import with_time_limit
from hive_lab_server.jobs.lifecycle import launch_plan, machine as m, presentation
from hive_lab_server.errors import ServiceError, ServiceFull, StoreUnavailable
from hive_lab_server.execution.launchers.base import Launcher
from hive_lab_server.jobs.lifecycle.active import ActiveJob, request_from
from hive_lab_server.jobs.lifecycle.share_grants import ShareGrants
from hive_lab_server.jobs.lifecycle.shell import UnitOfWork
from hive_lab_server.wire.states import PLACED_STATES
from hive_lab_server.jobs.lifecycle.kernel_caps import KernelCap, capped_time_limit
from hive_lab_server.jobs.lifecycle.time_limit import TimeLimitError, VcTimeLimit, effective_limit
from hive_lab_server.jobs.lifecycle.work import DependencyGate, JobViews
from hive_lab_server.store import Store
from hive_lab_server.timeshare.progress import ProgressTracker
from hive_lab_server.usage.metrics import Metrics

log = logging.getLogger("hive_lab_server")

MAX_GROUP = 64  # submits committed together in one unit at most (group commit; see _flush_submits)


class Admission:
    """New jobs: checked, given an id, stored and handed to the core (held by ``HiveService`` as ``admission``)."""

    def __init__(self, *, work: UnitOfWork, store: Store, scheduler: LiveSchedulerCore, launcher: Launcher,
                 active: dict[str, ActiveJob], metrics: Metrics, progress: ProgressTracker, shares: ShareGrants,
                 dependencies: DependencyGate, time_limits: Mapping[str, VcTimeLimit],
                 kernel_caps: Mapping[str, KernelCap], gpu_uuids: Mapping[tuple[str, int], str],
                 jobs_root: pathlib.Path, max_unfinished_jobs: int, views: JobViews):
        self.work = work
        self.store = store
        self.scheduler = scheduler
        self.launcher = launcher
        self.active = active
        self.metrics = metrics
        self.progress = progress  # its throughput file says which job types exist
        self.shares = shares
        self.dependencies = dependencies
        self.time_limits = time_limits
        self.kernel_caps = kernel_caps
        self.gpu_uuids = gpu_uuids
        self._jobs_root_str = str(jobs_root)
        self.max_unfinished_jobs = max_unfinished_jobs  # more in ``active``: submits are refused (0: no bound)
        self.views = views  # the REST view of a job that ended before its submit was answered
        self._seq = store.max_seq()
        # waiting for group commit: (spec, user, vc, future, t0, the user's groups, fair share's group)
        self._submits: list[tuple[JobSpec, str, str, asyncio.Future, float, tuple[str, ...], str]] = []

    def _next_id(self) -> tuple[int, str]:
        self._seq += 1
        return self._seq, f"j-{self._seq:06d}"

    def submit(self, spec: JobSpec, user: str, vc: str, groups: tuple[str, ...] = (), group: str = "") -> dict[str, Any]:
        """Store a validated job, then let the core decide. Raises ServiceError(400) for requests the
        cluster can never run and StoreUnavailable(503) when the store refuses it (nothing is stored or
        decided then). ``submit_grouped`` does the same for submits arriving together, in one unit."""
        t0 = time.perf_counter()
        try:
            new = self.prepare(spec, user, vc, self.work.now(), groups, group=group)
        except ServiceFull:
            self.metrics.submits_shed.inc()
            raise
        self.admit([new])
        self._kernel_dirs([new[0]])
        self.metrics.submit_seconds.observe(time.perf_counter() - t0)
        return self._object_of(new[0].id, new[1])

    async def submit_grouped(self, spec: JobSpec, user: str, vc: str, groups: tuple[str, ...] = (),
                             group: str = "") -> dict[str, Any]:
        """``submit``, committed together with the other submits that arrive before the next turn of the
        event loop (group commit: one transaction, one clock reading, one publication for all)."""
        fut = asyncio.get_running_loop().create_future()
        self._submits.append((spec, user, vc, fut, time.perf_counter(), tuple(groups), group))
        if len(self._submits) == 1:
            asyncio.get_running_loop().call_soon(self._flush_submits)
        return await fut

    def _flush_submits(self) -> None:
        # at most MAX_GROUP submits a unit: under a flood the loop turns between groups, so a read waits for
        # one group's work (~0.3 ms a submit), not for all that arrived (issue 40: 400+ ms groups)
        group, self._submits = self._submits[:MAX_GROUP], self._submits[MAX_GROUP:]
        if self._submits:
            asyncio.get_running_loop().call_soon(self._flush_submits)
        now = self.work.now()
        admitted = []
        for spec, user, vc, fut, t0, groups, user_group in group:
            try:  # (also_waiting: this user's submits in the same group count against max_queued_jobs;
                # unadmitted: all the group's, against max_unfinished_jobs)
                mine = sum(1 for (j, _), _, _ in admitted if j.user == user and j.vc == vc)
                admitted.append((self.prepare(spec, user, vc, now, groups, mine, group=user_group,
                                               unadmitted=len(admitted)), fut, t0))
            except ServiceError as exc:
                if isinstance(exc, ServiceFull):
                    self.metrics.submits_shed.inc()
                fut.set_exception(exc)
        if not admitted:
            return
        try:
            self.admit([a for a, _, _ in admitted])
        except Exception as exc:
            for _, fut, _ in admitted:
                if not fut.done():
                    fut.set_exception(exc)
            return
        self._kernel_dirs([job for (job, _), _, _ in admitted])
        for (job, row), fut, t0 in admitted:
            if not fut.done():
                fut.set_result(self._object_of(job.id, row))
            self.metrics.submit_seconds.observe(time.perf_counter() - t0)

    def _check_room(self, unadmitted: int = 0) -> None:
        """ServiceError(503, Retry-After) when the service holds ``max_unfinished_jobs`` jobs (issue 24): each
        unfinished job is kept in memory (its ``ActiveJob``, the core's job, its queue entry) until it
        ends, so a server offered jobs faster than it runs them must refuse some, or its backlog and its
        memory grow without bound (bench_overload: 20,000 ``true`` jobs taken in 90 s, ~15/s run)."""
        refused = self.refusal_now(unadmitted)
        if refused is not None:
            raise refused

    def refusal_now(self, unadmitted: int = 0) -> ServiceFull | None:
        """The refusal a submit gets now (counting ``unadmitted`` jobs prepared but not yet in ``active``);
        None: room. The connection asks it before a submit's spec is read (``api/connection_shedding.py``)."""
        bound = self.max_unfinished_jobs
        return ServiceFull(bound) if bound and len(self.active) + unadmitted >= bound else None

    def _kernel_capped(self, spec: JobSpec, vc: str) -> float | None:
        """The time limit ``spec`` asks for, with its VC's kernel cap applied (``lifecycle.kernel_caps``:
        a GPU kernel gets the cap when its kernelspec asks for no limit or a longer one)."""
        return capped_time_limit(spec.time_limit_s, spec.kind, spec.total_gpus, vc, self.kernel_caps)

    def _kernel_dirs(self, jobs: list[ActiveJob]) -> None:
        """A kernel job's dir exists (its owner's, 0700) from submission on, not only once placed: the
        provisioner keeps its heartbeat there while it waits, so a kernel whose Jupyter server died is
        ended even before it starts (``kernel_leases``); under a Hub the owner cannot make it in the
        jobs root."""
        for job in jobs:
            if job.spec.kind == "kernel":
                try:
                    launch_plan.make_job_dir(job, self.launcher)
                except OSError as exc:
                    log.warning("hive-lab: cannot make the dir of kernel job %s yet: %s", job.id, exc)

    def prepare(self, spec: JobSpec, user: str, vc: str, now: float, groups: tuple[str, ...] = (),
                 also_waiting: int = 0, group: str = "", unadmitted: int = 0) -> tuple[ActiveJob, dict[str, Any]]:
        """A new job and its row; ServiceError(400) if the cluster can never run it, 403 if its owner's
        limits in the VC never let it run, 429 if they have max_queued_jobs waiting there, 503 if the
        service holds ``max_unfinished_jobs`` unfinished jobs (counting ``unadmitted``: the jobs prepared
        before this one in the same unit, not yet in ``active``). ``groups``: all the owner's groups
        (limits); ``group``: their group for fair share (``AccessPolicy.fair_share_group``)."""
        self._check_room(unadmitted)
        try:
            limit = effective_limit(self._kernel_capped(spec, vc), spec.kind, vc, self.time_limits)
        except TimeLimitError as exc:
            raise ServiceError(400, exc.message, exc.field) from None
        if spec.job_type and self.progress.throughputs is not None and not self.progress.knows_type(spec.job_type):
            raise ServiceError(400, f"job_type: {spec.job_type!r} is not a job type of the throughput file "
                                    f"({self.progress.throughputs.source}); e.g. "
                                    f"{', '.join(repr(t) for t in sorted({k[0] for k in self.progress.throughputs.job_types()})[:3])}",
                               "job_type")
        seq, job_id = self._next_id()
        spec_dict = spec.model_dump(mode="json")
        spec_dict["vc"] = vc
        spec_dict["time_limit_s"] = limit
        request = request_from(job_id, vc, user, spec.tasks, spec.core_priority, spec.within, now, group,
                               groups=groups, kind=spec.kind, pinned_cell=spec.pinned_cell)
        try:
            if spec.gpu_share:
                self.shares.check_share(spec)
            validate_request(self.scheduler, request)
            self.scheduler.check_can_ever_fit(request)  # a gang that never fits is a 400, not a job queued forever
            self.scheduler.check_limits(request, limit, also_waiting)
        except RequestError as exc:
            if self._seq == seq:  # the id is not used up
                self._seq -= 1
            if isinstance(exc, LimitRefusal):
                raise ServiceError(429 if exc.queue_full else 403, exc.message, exc.field) from None
            raise ServiceError(400, str(exc), getattr(exc, "field", None)) from None
        working_dir = os.path.join(self._jobs_root_str, job_id)
        output_dir = os.path.join(working_dir, os.path.normpath(spec.output_dir or "output"))  # relative (JobSpec)
        row = {
            "seq": seq, "id": job_id, "name": spec.name, "user": user, "vc": vc, "kind": spec.kind,
            "state": "submitted", "reason": "", "priority": spec.core_priority,
            "opportunistic": spec.opportunistic,
            # the column counts GPUs touched (a share: its one GPU); the share itself is in the spec
            "gpus": math.ceil(spec.total_gpus),
            "gpu_type": next((t.gpu_type for t in spec.tasks if t.gpu_type), None), "spec": spec_dict,
            "submitted_at": now, "started_at": None, "finished_at": None, "exit_code": None,
            "retries": 0, "max_retries": spec.max_retries, "attempt": 0, "working_dir": working_dir,
            "output_dir": output_dir, "updated_at": now, "stop_intent": None, "stop_reason": "",
            "owner_groups": list(groups),
            "user_group": group,
        }
        stored = LaunchSpec.of(spec_dict)  # (the row keeps the same dict: nobody changes it from here on)
        job = ActiveJob(id=job_id, seq=seq, user=user, vc=vc, spec=stored, request=request,
                        working_dir=working_dir, output_dir=output_dir, queued_at=now,
                        opportunistic=spec.opportunistic,
                        lc=m.Job(job_id, max_retries=spec.max_retries, time_limit_s=limit,
                                 policy=m.completion_policy(stored.tasks)))
        return job, row

    def what_if(self, spec: JobSpec, user: str, vc: str, groups: tuple[str, ...] = ()) -> dict[str, Any]:
        """What would happen to this job if it were submitted now (``POST jobs?dry_run=true``): start at once
        on which GPUs, preempt which jobs, or wait and why. Nothing is stored, launched, published or
        preempted, and no id is used up: the core answers from a rolled-back placement
        (``Scheduler.what_if``). ServiceError(400) for what a submit would refuse."""
        now = self.work.now()
        try:
            limit = effective_limit(self._kernel_capped(spec, vc), spec.kind, vc, self.time_limits)
        except TimeLimitError as exc:
            raise ServiceError(400, exc.message, exc.field) from None
        request = request_from("what-if", vc, user, spec.tasks, spec.core_priority, spec.within, now,
                               groups=groups, kind=spec.kind, pinned_cell=spec.pinned_cell)
        request = with_time_limit(request, limit)  # backfill decides on it, as for a submit
        try:
            validate_request(self.scheduler, request)
            self.scheduler.check_can_ever_fit(request)
            self.scheduler.check_limits(request, limit)  # what a submit would refuse (403/429) is refused here too
            answer = self.scheduler.what_if(request, now)
        except RequestError as exc:
            if isinstance(exc, LimitRefusal):
                raise ServiceError(429 if exc.queue_full else 403, exc.message, exc.field) from None
            raise ServiceError(400, str(exc), getattr(exc, "field", None)) from None
        placement = [launch_plan.placement_row(p, answer.opportunistic, self.gpu_uuids) for p in answer.placement]
        estimate = getattr(answer, "estimated_start", None)
        return {
            "dry_run": True, "outcome": answer.outcome, "vc": vc, "gpus": math.ceil(spec.total_gpus),
            "placement": [{"task": p["task"], "node": p["node"], "address": launch_plan.node_address(self.launcher, p["node"]),
                           "gpus": list(p["gpus"]), "gpu_uuids": p["gpu_uuids"],
                           **({"share": p["share"], "share_slot": p["share_slot"]} if p["share"] else {})}
                          for p in placement],
            "preempts": list(answer.victims), "reason": answer.reason, "opportunistic": answer.opportunistic,
            "time_limit_s": limit,
            "estimated_start": presentation.iso(now) if answer.outcome == "start" else
            (presentation.iso(estimate) if isinstance(estimate, (int, float)) else estimate),
        }

    def admit(self, new: list[tuple[ActiveJob, dict[str, Any]]]) -> None:
        """Store new jobs and hand them to the core; a job is acknowledged only once stored.

        Group commit: the leading jobs that the core would only queue (``submit_if_waiting``: nothing
        else changes) are queued in the core first and stored with their queued state in one unit (one
        transaction); if the store refuses, the core withdraws them exactly (``withdraw_waiting``) and
        nothing is left. The others (a job that would start or preempt, and every job after it, so
        the core sees them in order) are stored in that unit too, then given to the core."""
        now = self.work.now()
        facts: list[tuple[str, m.Event]] = []
        waiting: list[str] = []
        everyone, new = new, []
        for job, row in everyone:  # depends_on not met: stored held (or ended), never given to the core
            held = self.dependencies.gate(job)
            if held is None:
                new.append((job, row))
            else:
                facts += held
        for job, _ in new:
            decision = None
            try:
                decision = self.scheduler.submit_if_waiting(job.request, now)
            except Exception:  # the core refuses it: ``submit`` below says so, once it is stored
                pass
            if decision is None:
                break
            waiting.append(job.id)
            facts.append((job.id, m.Queued(decision.reason or "waiting")))
        for job, _ in everyone:
            self.active[job.id] = job

        def insert(batch, at: float) -> None:
            for job, row in everyone:
                self.store.insert_job(batch, row)
                self.store.add_event(batch, job.id, "submitted", at, f"submitted by {job.user} to VC {job.vc}")

        def committed() -> None:  # before the unit's own effects: listeners hear "submitted" first
            for job, _ in everyone:
                self.metrics.transitions.labels("submitted").inc()
                self.work.tell_listeners(job.id, "submitted", f"submitted by {job.user} to VC {job.vc}")

        try:
            self.work.unit(facts, request=True, write=insert, committed=committed)
        except StoreUnavailable:  # nothing was stored: nothing may stay in memory or in the core
            for job, _ in everyone:
                self.active.pop(job.id, None)
                self.dependencies.held.discard(job.id)
            self.scheduler.withdraw_waiting(waiting)
            raise
        rest = new[len(waiting):]
        if not rest:
            return
        now = self.work.now()
        facts = []
        for job, _ in rest:
            try:
                facts += self.work.facts_of(self.scheduler.submit(job.request, now), job.id)
            except Exception as exc:  # stored, so it must end somewhere visible
                log.exception("hive-lab: the core refused %s", job.id)
                facts.append((job.id, m.Rejected(f"the scheduler refused it: {exc}")))
        # the core's decisions are facts: a store fault now keeps them pending (the jobs are acknowledged)
        self.work.unit(facts)

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
            return self.views.job_object(job_id, detail=False, private=True)
        return self.views.job_object(job_id, detail=False, private=True, row=row, placement=placement,
                                     live_reason=False)
