"""A job the service is carrying (``ActiveJob``: its lifecycle record and what running it needs), and
the core's request made from a stored spec (``request_from``), and the lookup of one by id that a request
to change it makes (``unfinished_job``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from hive_scheduler import JobRequest, TaskGroup, TaskPlacement

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.start_estimates import with_time_limit
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.wire.launch_spec import LaunchSpec


@dataclass
class ActiveJob:
    """A job that has not finished: its lifecycle record (``lc``) and what running it needs."""

    id: str
    seq: int
    user: str
    vc: str
    spec: LaunchSpec  # its stored spec, typed (the row keeps ``spec.stored``)
    request: JobRequest
    working_dir: str
    output_dir: str
    lc: m.Job
    queued_at: float = 0.0
    opportunistic: bool = False
    placement: list[TaskPlacement] = field(default_factory=list)
    share_device: str | None = None  # a share under MIG: its MIG device (kept in its placement row)
    # what the launcher measured of the current attempt's ended tasks (cpu_seconds, peak_memory_mb)
    measured: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the core's request carries the spec's time limit (backfill and the start estimates read it)
        self.request = with_time_limit(self.request, self.spec.time_limit_s)

    @property
    def state(self) -> str:
        return self.lc.state.value

    @property
    def stopping(self) -> str | None:
        return self.lc.intent.value if self.lc.intent else None

    @property
    def tasks_left(self) -> set[str]:
        return set(self.lc.left)


class AskedTasks(Protocol):
    """A task group as the core's request needs it: a submitted ``TaskSpec`` or a stored ``LaunchTaskGroup``."""

    name: Any
    count: int
    gpus: int | float
    gpu_type: str | None
    cpus: float | None
    memory_mb: int | None


def request_from(job_id: str, vc: str, user: str, tasks: Iterable[AskedTasks], priority: int, within: Any,
                  submit_time: float, group: str = "", *, groups: tuple[str, ...] | list[str] | None = (),
                  kind: str = "batch", pinned_cell: str | None = None) -> JobRequest:
    return JobRequest(
        id=job_id, vc=vc, user=user, group=group,
        tasks=tuple(TaskGroup(name=t.name, count=t.count, gpus=t.gpus, gpu_type=t.gpu_type,
                              cpus=t.cpus or 0, memory_mb=t.memory_mb or 0) for t in tasks),
        priority=priority, within=within, submit_time=submit_time, groups=tuple(groups or ()), kind=kind,
        pinned_cell=pinned_cell,
    )


def unfinished_job(active: dict[str, ActiveJob], store: Any, job_id: str, what: str) -> ActiveJob:
    """The unfinished job ``job_id``, or ServiceError: 404 if it does not exist, 409 naming the state it
    ended in (``what``: what the request would do to it, e.g. "cancelled")."""
    job = active.get(job_id)
    if job is None:
        row = store.get_job(job_id)
        if row is None:
            raise ServiceError(404, f"job {job_id} does not exist")
        raise ServiceError(409, f"job {job_id} already {row['state']}; only unfinished jobs can be {what}")
    return job
