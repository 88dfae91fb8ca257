"""Pause, resume, migrate and resize: the time-sharing mechanisms as requests on the service.

Each turns into one lifecycle fact (``machine.Pause``, ``Resume``, ``Move``) applied in a unit of work,
so the history line with its reason, the stored intent and the request change commit together. A
running job is stopped with the checkpoint protocol (docs/checkpoint.md) and starts again, in a later
attempt that finds ``HIVE_RESUMED=1`` and its ``HIVE_CHECKPOINT_DIR``; none of them uses a retry.
A request that cannot apply to the job as it is now is a 409 naming why; bad input is a 400.

``Moves`` is one part of the service: it is handed the cluster's nodes, the core, the store, the
unfinished jobs, the unit of work (``work.Work``) and the job's REST view to answer with.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping

from hive_scheduler import RequestError
from hive_scheduler.validation import validate_request

from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle.active import ActiveJob, request_from, unfinished_job
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import JobState
from hive_lab_server.jobs.lifecycle.work import Work

if TYPE_CHECKING:
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.store import Store

S = JobState


def _leaf_types(cells: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    stack = list(cells)
    while stack:
        cell = stack.pop()
        children = cell.get("children") or []
        if children:
            stack.extend(children)
        elif cell.get("gpu") is not None and cell.get("node") is not None:
            out[(cell["node"], int(cell["gpu"]))] = str(cell.get("type"))
    return out


class Moves:
    """``pause``, ``resume``, ``migrate``, ``resize``; ``view(job_id)`` is the job's REST object."""

    def __init__(self, *, nodes: Mapping[str, Any], core: LiveSchedulerCore, store: Store, active: Mapping[str, ActiveJob],
                 work: Work, view: Callable[[str], dict[str, Any]]):
        self.nodes = nodes
        self.core = core
        self.store = store
        self.active = active
        self.work = work
        self.view = view

    def _movable(self, job_id: str, what: str) -> ActiveJob:
        job = unfinished_job(self.active, self.store, job_id, what)
        if job.lc.intent is not None:
            raise ServiceError(409, f"job {job_id} is being stopped ({job.lc.intent.value}: {job.lc.intent_reason}); "
                                    f"it cannot be {what} now, try again once it has stopped")
        return job

    def placed_gpu_type(self, job: ActiveJob) -> str | None:
        """The GPU type the job runs on now (None when it holds no GPUs)."""
        if not any(p.gpus for p in job.placement):  # (a CPU-only job: no walk of the cluster's view per launch)
            return None
        nodes = self.nodes
        simple = {tuple(getattr(nodes.get(p.node), "gpu_types", ()) or ()) for p in job.placement if p.gpus}
        if len(simple) == 1 and len(next(iter(simple))) == 1:  # nodes of one GPU type: no tree walk
            return next(iter(simple))[0]
        types = _leaf_types(self.core.cluster_view().get("cells", []))
        found = {types.get((p.node, g)) for p in job.placement for g in p.gpus}
        found.discard(None)
        return found.pop() if len(found) == 1 else None

    async def pause(self, job_id: str, reason: str, wait_s: float = 0.0) -> dict[str, Any]:
        """Pause a job: stopped with a checkpoint if it runs, out of the queue until ``resume``."""
        job = self._movable(job_id, "paused")
        if job.lc.state is S.PAUSED:
            raise ServiceError(409, f"job {job_id} is already paused ({job.lc.reason})")
        self.work.unit([(job_id, m.Pause(reason))], request=True)
        await self.work.settle(job_id, wait_s)
        return self.view(job_id)

    def resume(self, job_id: str, reason: str) -> dict[str, Any]:
        """Queue a paused job again (it starts from its checkpoint)."""
        job = self._movable(job_id, "resumed")
        if job.lc.state is not S.PAUSED:
            raise ServiceError(409, f"job {job_id} is {job.lc.state.value}, not paused; only paused jobs can be resumed")
        self.work.unit([(job_id, m.Resume(reason))], request=True)
        return self.view(job_id)

    async def migrate(self, job_id: str, gpu_type: str, reason: str = "", wait_s: float = 0.0) -> dict[str, Any]:
        """Move a job to GPUs of ``gpu_type``: stopped with a checkpoint if it runs, then queued for that type."""
        job = self._movable(job_id, "migrated")
        types = sorted({t for t in _leaf_types(self.core.cluster_view().get("cells", [])).values()})
        match = next((t for t in types if t.lower() == gpu_type.lower()), None)
        if match is None:
            raise ServiceError(400, f"gpu_type: the cluster has no GPU type {gpu_type!r}; its types are "
                                    f"{', '.join(types)}", "gpu_type")
        current = self.placed_gpu_type(job)
        asked = {t.gpu_type for t in job.spec.tasks}
        if current == match or (current is None and asked == {match}):
            raise ServiceError(409, f"job {job_id} already {'runs on' if current else 'asks for'} {match} GPUs")
        spec = job.spec.with_gpu_type(match)
        text = f"{current or '/'.join(sorted(a for a in asked if a)) or 'any type'} -> {match}"
        await self._move(job, spec, "migrate", f"{text}: {reason}" if reason else text, gpu_type=match)
        await self.work.settle(job_id, wait_s)
        return self.view(job_id)

    async def resize(self, job_id: str, gpus: int, reason: str = "", wait_s: float = 0.0) -> dict[str, Any]:
        """Give an elastic job ``gpus`` GPUs (``min_gpus..max_gpus``): stopped with a checkpoint if it runs,
        then queued for the new size (``HIVE_WORLD_SIZE`` in the next attempt)."""
        job = self._movable(job_id, "resized")
        lo, hi = job.spec.min_gpus, job.spec.max_gpus
        if lo is None or hi is None:
            raise ServiceError(409, f"job {job_id} is not elastic (it gives no min_gpus..max_gpus); it cannot be resized")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not lo <= gpus <= hi:
            raise ServiceError(400, f"gpus: give a GPU count in the job's range {lo}..{hi}, got {gpus!r}", "gpus")
        now_gpus = job.spec.tasks[0].gpus
        if gpus == now_gpus:
            raise ServiceError(409, f"job {job_id} already has {gpus} GPUs")
        spec = job.spec.with_gpus(gpus)
        text = f"{now_gpus} -> {gpus} GPUs"
        await self._move(job, spec, "resize", f"{text}: {reason}" if reason else text)
        await self.work.settle(job_id, wait_s)
        return self.view(job_id)

    async def _move(self, job: ActiveJob, spec: LaunchSpec, kind: str, reason: str, **row: Any) -> None:
        request = request_from(job.id, job.vc, job.user, spec.tasks, job.request.priority, spec.within,
                               job.request.submit_time, pinned_cell=spec.pinned_cell)
        probe = dataclasses.replace(request, id=f"{job.id}:probe")  # the job itself is in the core already
        try:
            validate_request(self.core, probe)
            self.core.check_can_ever_fit(probe)
        except RequestError as exc:
            raise ServiceError(409, f"job {job.id} cannot be {'migrated' if kind == 'migrate' else 'resized'}: {exc}",
                               getattr(exc, "field", None)) from None
        total = spec.total_gpus
        old = job.spec, job.request
        job.spec, job.request = spec, request  # the core's requeue (after the commit) submits the new request

        def write(batch, at: float) -> None:
            self.store.update_job(batch, job.id, spec=spec.as_stored(), gpus=total, **row)

        try:
            self.work.unit([(job.id, m.Move(kind, reason))], request=True, write=write)
        except BaseException:
            job.spec, job.request = old
            raise
