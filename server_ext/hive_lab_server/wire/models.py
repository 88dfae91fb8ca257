"""Pydantic models of what the REST API answers (requests are ``spec.JobSpec`` / ``spec.PaiJob``).

Handlers pass the service's views through these models (``HiveHandler.reply_model``) and the OpenAPI
document (``openapi.py``) is generated from them, so the document, the checks and the answers cannot
drift apart. Response models allow extra fields (a newer service may add some without breaking
answers); tests check that every field of real answers is declared here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hive_lab_server.wire.job_state import JobState

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
    share: float | None = Field(None, description="a share of its one GPU (0.5, 0.25, 0.125); absent for whole GPUs")
    share_slot: int | None = Field(None, description="a share's first eighth of the GPU (0-7): which eighths it "
                                                     "holds; kept across server restarts")
    mig_device: str | None = Field(None, description="a share under MIG: the MIG device it was given (MIG-...)")


class HistoryEntry(_Out):
    seq: int = Field(description="this state change's sequence number on the events websocket (GET events?since=)")
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
    total_steps: int | None = Field(None, description="the job's declared total (hive_lab.progress(steps, total=))")
    remaining_steps: int | None = Field(None, description="total_steps - steps, when the total is known")
    estimated_finish: float | None = Field(None, description="when it should finish at its current rate (seconds "
                                                             "since the epoch); null while unknown")


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
    estimated_start: IsoTime | None = Field(
        None, description="queued: when the core's forward simulation expects it to start (null: unknown)",
        json_schema_extra={"format": "date-time"})
    estimated_start_basis: str | None = Field(None, description="queued: one line saying what the estimate rests on")
    priority: int = Field(description="0..1000, or -1 = opportunistic")
    opportunistic: bool
    gpus: float = Field(description="GPUs per job; a share of one GPU is 0.5, 0.25 or 0.125")
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
    time_limit_s: float | None = Field(None, description="run time limit of each attempt in seconds (the spec's, "
                                                         "else the VC's default for batch jobs); null: none")
    deadline: IsoTime | None = Field(None, description="running with a limit: when the limit is reached",
                                     json_schema_extra={"format": "date-time"})
    time_left_s: float | None = Field(None, description="running with a limit: seconds until the deadline")

    progress: Progress | None = Field(None, description="reported progress and rates (when it reports any)")
    array_id: str | None = Field(None, description="an element of this job array (absent otherwise)")
    array_index: int | None = Field(None, description="its index in the array (HIVE_ARRAY_INDEX)")


class WhatIf(_Out):
    """``POST jobs?dry_run=true``: what would happen to this job if it were submitted now. Nothing was
    stored, launched, published or preempted."""

    dry_run: Literal[True] = True
    outcome: Literal["start", "preempt", "wait"] = Field(
        description="start: at once on `placement`; preempt: after the jobs in `preempts` stop (on `placement` "
                    "when known); wait: queued for `reason`")
    vc: str
    gpus: int
    placement: list[Placement] = Field(description="the node and GPU indices of each task (start, and preempt "
                                                   "of opportunistic work); empty otherwise")
    preempts: list[str] = Field(description="jobs that would be preempted for it (none are, by this request)")
    reason: str | None = Field(None, description="why it would wait (the sentence a queued job shows), or what "
                                                 "the preemption would do")
    opportunistic: bool
    time_limit_s: float | None = Field(None, description="the limit it would get (its own or the VC's default)")
    estimated_start: IsoTime | None = Field(None, description="when it would start: now for `start`; otherwise "
                                                              "an estimate where the service makes one, else null",
                                            json_schema_extra={"format": "date-time"})


NEXT_HELP = ("the cursor of the next page: send it as after=<next> (null: this is the last page); pages by "
             "cursor stay put while new ones arrive, pages by offset shift")


class JobList(_Out):
    jobs: list[Job]
    total: int
    limit: int
    offset: int
    next: int | None = Field(None, description=NEXT_HELP)


ArrayState = Literal["waiting", "running", "held", "ended"]


class ArrayElement(_Out):
    """One element of an array: ``pending`` until released as a job (then ``job_id`` and the job's state)."""

    index: int
    job_id: str | None = Field(None, description="its job, once released (null while pending)")
    state: Literal["pending", "submitted", "queued", "scheduled", "running", "paused", "succeeded", "failed",
                   "cancelled"]
    reason: str
    exit_code: int | None = None
    retries: int
    started_at: IsoTime | None = None
    finished_at: IsoTime | None = None
    params: dict[str, Any] | None = Field(None, description="a sweep's parameters of this element")


class Array(_Out):
    """A job array or sweep: its elements counted by state; a page of them in ``GET arrays/{id}``."""

    id: str
    name: str
    user: str
    vc: str
    state: ArrayState = Field(description="waiting, running (an element runs), held (paused) or ended (every "
                                          "element ended)")
    reason: str = Field(description="why no element is released now (e.g. the owner's max_queued_jobs), or ''")
    count: int = Field(description="elements in all")
    throttle: int | None = Field(description="at most this many elements not ended at once (null: no throttle)")
    held: bool
    indices: str = Field(description="the indices, compact (e.g. 0-49 or 1,3,5-9)")
    sweep: dict[str, list[Any]] | None = Field(None, description="a sweep's parameter lists")
    counts: dict[str, int] = Field(description="elements by state: pending (not released yet) and the job states")
    submitted_at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    elements: list[ArrayElement] | None = Field(None, description="only in GET arrays/{id}: a page, by index")
    limit: int | None = None
    offset: int | None = None


class ArrayList(_Out):
    arrays: list[Array]
    total: int
    limit: int
    offset: int
    next: int | None = Field(None, description=NEXT_HELP)


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


class GpuShare(_Out):
    job: str
    user: str | None = None
    slot: int = Field(description="its first eighth of the GPU")
    share: float = Field(description="0.5, 0.25 or 0.125 of the GPU")
    utilization: float | None = Field(None, description="SM utilisation of its own processes, percent of the GPU "
                                                        "(NVML per-process utilisation; null where unknown)")


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
    memory_total_mb: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    bad: bool = False
    bad_reason: str | None = None
    drained: bool = False
    path: list[str | None]
    shares: list[GpuShare] | None = Field(None, description="a shared GPU: its shares and who holds each")
    free_share: float | None = Field(None, description="a shared GPU: the part of it no share holds")


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


class HardwareInfo(_Out):
    source: Literal["config", "nvml", "default"] = Field(
        description="the cluster model: HiveLabApp.cluster_config, this machine's GPUs (NVML), or the built-in default")
    gpus_seen_here: int = Field(description="NVIDIA GPUs NVML sees on the server's machine")
    simulated: bool = Field(description="jobs run on this machine, which has no GPU: the GPUs are only modelled "
                            "(CUDA_VISIBLE_DEVICES is set, but there is no device behind it)")


class Cluster(_Out):
    gpus_total: int
    gpus_free: int
    nodes: list[Node]
    cells: list[dict[str, Any]] = Field(description="the core's cell tree (docs/core-api.md: cluster_view)")
    gpus: list[Gpu]
    launcher: LauncherInfo | None = None
    hardware: HardwareInfo | None = None


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


class Limits(BaseModel):
    """Per-user limits in one VC; a missing key or null = no limit (docs/rest-api.md: Limits)."""

    model_config = ConfigDict(extra="forbid")
    max_gpus: int | None = Field(None, ge=0, description="GPUs held at once by the user's started jobs")
    max_running_jobs: int | None = Field(None, ge=0, description="the user's started jobs at once")
    max_kernels: int | None = Field(None, ge=0, description="the user's notebook kernels holding GPUs at once")
    max_queued_jobs: int | None = Field(None, ge=0, description="the user's waiting jobs at once (more: 429 at submit)")
    max_priority: int | None = Field(None, ge=0, description="highest priority a job may ask for (above: 403 at submit)")
    max_time_limit_s: int | None = Field(None, ge=0, description="longest time_limit_s a job may ask for (above: 403)")


class VcLimitsBody(BaseModel):
    """``PUT vcs/{vc}/limits``: replaces the VC's limits whole. Most specific wins, key by key: users, then
    groups (a user in several: the most generous group value), then default."""

    model_config = ConfigDict(extra="forbid")
    default: Limits = Field(default_factory=Limits)
    groups: dict[str, Limits] = Field(default_factory=dict, description="group name -> limits")
    users: dict[str, Limits] = Field(default_factory=dict, description="user name -> limits")


class VcLimits(_Out):
    vc: str
    default: dict[str, int]
    groups: dict[str, dict[str, int]]
    users: dict[str, dict[str, int]]
    source: Literal["store", "config", "none"] = Field(
        description="store: set with PUT (replaces the config's); config: HiveLabApp.user_limits; none: no limits")


class Me(_Out):
    user: str
    admin: bool
    vcs: list[str] = Field(description="the VCs the caller may submit to")
    groups: list[str]
    limits: dict[str, dict[str, int]] | None = Field(
        None, description="VC -> the caller's limits in effect there (only the keys that are set)")
    shared: bool = Field(False, description="the server serves several people (JupyterHub, a token map), not "
                         "only its owner")


class Drain(_Out):
    node: str
    gpu: int | None = None
    drained: bool


class Healthy(_Out):
    node: str
    gpu: int | None = None
    healthy: bool
    gpus: list[int]


class UsageRow(_Out):
    """Totals of one user, VC or day (the key named by ``by``) over the window."""

    user: str | None = Field(None, description="by=user")
    vc: str | None = Field(None, description="by=vc")
    day: str | None = Field(None, description="by=day: the UTC date, e.g. 2026-11-23")
    job: str | None = Field(None, description="by=job: the job id (all its attempts)")
    gpu_seconds: float = Field(description="GPUs x share x seconds held inside the window (running jobs up to now)")
    gpu_seconds_by_type: dict[str, float] = Field(description="the same per GPU type")
    cpu_seconds: float | None = Field(description="CPU time of the attempts that ended in the window, where the "
                                                  "launcher measures it (local launcher with cgroups); else null")
    peak_memory_mb: float | None = Field(description="largest peak memory of one task of those attempts, where "
                                                     "measured; else null")
    jobs: int = Field(description="jobs that held GPUs or ended in the window")


class UsageReport(_Out):
    by: Literal["user", "vc", "day", "job"]
    since: IsoTime = Field(json_schema_extra={"format": "date-time"})
    until: IsoTime = Field(json_schema_extra={"format": "date-time"})
    rows: list[UsageRow] = Field(description="sorted by key; non-admins get their own rows only")


class HistoryReport(_Out):
    """The store's jobs in a window as a history trace (``hive_scheduler.sim.history``), with the live
    cluster and policy to replay them on."""

    since: IsoTime = Field(json_schema_extra={"format": "date-time"})
    until: IsoTime = Field(json_schema_extra={"format": "date-time"})
    columns: list[str] = Field(description="the history CSV's columns, in order")
    jobs: list[dict[str, Any]] = Field(description="one row per job, keyed by the columns (null: empty)")
    cluster: dict[str, Any] = Field(description="the live cluster model in HiveD's form (loadable as --cluster)")
    policy: dict[str, Any] = Field(description="the live order inside VCs, overflow and queueing (skip/backfill)")
    pseudonymised: bool = Field(description="owners are user-001, ... (real_names=true: their names)")


# --- the events websocket's messages (GET events); every one carries seq ---------------------------

SEQ_DOC = ("the newest stored state change this message follows (its own, for a state message); resume with "
           "GET events?since=<the last seq you read>")


class EventHello(_Out):
    """First message on every connect: who you are and the newest seq now."""

    type: Literal["hello"]
    user: str
    seq: int = Field(description=SEQ_DOC)


class EventState(_Out):
    """One stored state change of a job (a row of its history), sent live and replayed after ``since``."""

    type: Literal["state"]
    seq: int = Field(description="this state change's sequence number: grows, also across restarts, never reused")
    job: str = Field(description="the job's id")
    state: JobState
    at: IsoTime = Field(json_schema_extra={"format": "date-time"})
    reason: str


class EventSnapshot(_Out):
    """The server cannot replay what you missed (too many events, or a seq it does not know): refetch what you
    show (GET jobs, cluster, vcs), then go on from this message's seq."""

    type: Literal["snapshot"]
    seq: int = Field(description=SEQ_DOC)
    reason: str


class EventJob(_Out):
    """A job changed (live only, not replayed): its list view (no spec, no history)."""

    type: Literal["job"]
    seq: int = Field(description=SEQ_DOC)
    job: Job


class EventCluster(_Out):
    """Free and total GPUs changed (live only)."""

    type: Literal["cluster"]
    seq: int = Field(description=SEQ_DOC)
    gpus_free: int
    gpus_total: int


class EventVcs(_Out):
    """VC usage may have changed: refetch GET vcs (live only)."""

    type: Literal["vcs"]
    seq: int = Field(description=SEQ_DOC)


class EventEstimates(_Out):
    """Queued jobs' estimated starts changed (to the minute, or their basis): refetch GET jobs (live only)."""

    type: Literal["estimates"]
    seq: int = Field(description=SEQ_DOC)
    jobs: list[str] = Field(description="the queued jobs whose estimate changed")


EVENT_MODELS: tuple[type[BaseModel], ...] = (EventHello, EventState, EventSnapshot, EventJob, EventCluster, EventVcs,
                                             EventEstimates)

RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    Error, Job, WhatIf, JobList, LogChunk, OutputList, Cluster, VcList, Me, Drain, Healthy, VcLimits, UsageReport,
    HistoryReport, Array, ArrayElement, ArrayList, *EVENT_MODELS,
)
