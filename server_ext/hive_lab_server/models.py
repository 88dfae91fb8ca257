"""Pydantic models of what the REST API answers (requests are ``spec.JobSpec`` / ``spec.PaiJob``).

Handlers pass the service's views through these models (``HiveHandler.reply_model``) and the OpenAPI
document (``openapi.py``) is generated from them, so the document, the checks and the answers cannot
drift apart. Response models allow extra fields (a newer service may add some without breaking
answers); tests check that every field of real answers is declared here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .job_state import JobState

IsoTime = str  # "2026-11-22T10:00:00.123Z"


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class Error(BaseModel):
    """Every 4xx/5xx: what to change, and the field it is about."""

    model_config = ConfigDict(extra="forbid")
    error: str = Field(description="a sentence saying what to change")
    field: str | None = Field(None, description="the offending field, e.g. tasks[0].gpus, or null")


class Placement(_Out):
    task: str
    node: str
    address: str = Field(description="where the task's node is reached (Slurm NodeAddr; 127.0.0.1 for "
                                     "local/docker); a kernel's ZMQ ports listen there")
    gpus: list[int]
    gpu_uuids: list[str] | None = None


class HistoryEntry(_Out):
    state: JobState
    at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    reason: str


class Rate(_Out):
    steps_per_s: float | None = Field(None, description="steps / seconds between consecutive readings of one attempt")
    seconds: float


class Progress(_Out):
    """What the job reported with ``hive_lab.progress(steps)`` (docs/checkpoint.md)."""

    steps: int | None = Field(None, description="the last reported total")
    at: float | None = Field(None, description="when it was measured (seconds since the epoch)")
    gpu_type: str | None = None
    rates: dict[str, Rate] = Field(default_factory=dict, description="learned online, per GPU type")
    known_rates: dict[str, float] | None = Field(None, description="steps/s per GPU type from the throughput file "
                                                                 "(the job's job_type at its GPU count)")


class Job(_Out):
    """A job; ``spec``, ``working_dir`` and ``output_dir`` only for its owner and admins, ``history`` only
    in ``GET jobs/{id}``."""

    id: str
    name: str
    user: str
    vc: str
    kind: Literal["batch", "kernel"]
    state: JobState
    reason: str
    priority: int = Field(description="0..1000, or -1 = opportunistic")
    opportunistic: bool
    gpus: int
    gpu_type: str | None = None
    tasks: list[str] = Field(description="task names, e.g. main-0")
    submitted_at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    started_at: IsoTime | None = None
    finished_at: IsoTime | None = None
    exit_code: int | None = None
    retries: int
    max_retries: int
    placement: list[Placement]
    spec: dict[str, Any] | None = Field(None, description="the validated spec (owner/admin only)")
    working_dir: str | None = Field(None, description="owner/admin only")
    output_dir: str | None = Field(None, description="owner/admin only")
    history: list[HistoryEntry] | None = Field(None, description="only in GET jobs/{id}")
    progress: Progress | None = Field(None, description="reported progress and rates (when it reports any)")


class JobList(_Out):
    jobs: list[Job]
    total: int
    limit: int
    offset: int


class LogChunk(_Out):
    task: str
    tasks: list[str]
    offset: int
    next_offset: int
    data: str
    eof: bool


class OutputFile(_Out):
    path: str
    size: int


class OutputList(_Out):
    files: list[OutputFile]


class Gpu(_Out):
    node: str
    index: int
    uuid: str | None = None
    type: str | None = None
    state: str | None = None
    vc: str | None = None
    job: str | None = None
    user: str | None = None
    opportunistic: bool = False
    utilization: float | None = None
    memory_used_mb: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    bad: bool = False
    bad_reason: str | None = None
    drained: bool = False
    path: list[str | None]


class Node(_Out):
    name: str
    cpus: float | None = None
    memory_mb: int | None = None
    gpu_count: int | None = None
    gpu_types: list[str] = []
    drained: bool = False


class LauncherInfo(_Out):
    name: str = Field(description="the launcher in effect: local, docker, slurm or a module path")
    chosen_by: Literal["auto", "config"] = Field(description='"auto" when HiveLabApp.launcher is auto')


class Cluster(_Out):
    gpus_total: int
    gpus_free: int
    nodes: list[Node]
    cells: list[dict[str, Any]] = Field(description="the core's cell tree (docs/core-api.md: cluster_view)")
    gpus: list[Gpu]
    launcher: LauncherInfo | None = None


class Vc(_Out):
    name: str
    guaranteed_gpus: int
    used_gpus: int
    opportunistic_gpus: int | None = None
    doomed_gpus: int | None = None
    queue_length: int
    running_jobs: int | None = None
    guaranteed_cells: dict[str, int] | None = None
    mine: bool = Field(description="the caller may submit to it")


class VcList(_Out):
    vcs: list[Vc]


class Me(_Out):
    user: str
    admin: bool
    vcs: list[str] = Field(description="the VCs the caller may submit to")
    groups: list[str]


class Drain(_Out):
    node: str
    gpu: int | None = None
    drained: bool


class Healthy(_Out):
    node: str
    gpu: int | None = None
    healthy: bool
    gpus: list[int]


RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    Error, Job, JobList, LogChunk, OutputList, Cluster, VcList, Me, Drain, Healthy,
)
