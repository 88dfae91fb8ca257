"""SQLAlchemy models of the hive-lab store (jobs, their history, placements, drains, usage).

Times are stored as UNIX seconds (float); the REST layer renders them as ISO-8601 UTC.
The schema is created and upgraded by the alembic migrations in ``migrations/`` only.
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Job(Base):
    __tablename__ = "jobs"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(128), index=True)
    vc: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[int] = mapped_column(Integer)
    opportunistic: Mapped[bool] = mapped_column(Boolean, default=False)
    gpus: Mapped[int] = mapped_column(Integer)
    gpu_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    spec: Mapped[dict] = mapped_column(JSON)
    submitted_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    retries: Mapped[int] = mapped_column(Integer, default=0)
    max_retries: Mapped[int] = mapped_column(Integer, default=0)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    working_dir: Mapped[str] = mapped_column(Text)
    output_dir: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)
    stop_intent: Mapped[str | None] = mapped_column(String(16), nullable=True)  # wire.states.Intent
    stop_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    owner_groups: Mapped[list | None] = mapped_column(JSON, nullable=True)  # the owner's groups at submit (limits)
    user_group: Mapped[str] = mapped_column(String(128), default="", server_default="")  # fair share's group
    # the current attempt's tasks that ended, task -> exit code (lifecycle.machine.Job.ended)
    task_exits: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # an element of a job array: its array and index (each index at most once: released exactly once)
    array_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    array_index: Mapped[int | None] = mapped_column(Integer, nullable=True)

    __table_args__ = (UniqueConstraint("array_id", "array_index", name="uq_jobs_array_element"),)


class JobArray(Base):
    """A job array or sweep (``arrays.spec.ArrayPlan``). Its elements become ``jobs`` rows (``array_id``,
    ``array_index``) only when released (``arrays.feeder``); the rest are pending, or cancelled before
    release (``cancelled``: their indices)."""

    __tablename__ = "job_arrays"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(128), index=True)
    vc: Mapped[str] = mapped_column(String(128))
    spec: Mapped[dict] = mapped_column(JSON)  # the elements' common spec (validated JobSpec)
    indices: Mapped[list] = mapped_column(JSON)  # ascending
    sweep: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # name -> values (arrays.spec)
    throttle: Mapped[int | None] = mapped_column(Integer, nullable=True)
    held: Mapped[bool] = mapped_column(Boolean, default=False)  # paused: no element is released
    cancelled: Mapped[list] = mapped_column(JSON)  # indices cancelled before release
    owner_groups: Mapped[list | None] = mapped_column(JSON, nullable=True)
    user_group: Mapped[str] = mapped_column(String(128), default="")
    submitted_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text, default="")  # why nothing is released now (e.g. a refusal)


class JobEvent(Base):
    """One state change of a job. ``id`` is the event's sequence number on the ``events`` websocket
    (``since=N`` replays the rows after N): it only grows, also across restarts, and is never reused
    (SQLite AUTOINCREMENT; a PostgreSQL sequence)."""

    __tablename__ = "job_events"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id"), index=True)
    state: Mapped[str] = mapped_column(String(16))
    at: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text, default="")


class Placement(Base):
    __tablename__ = "placements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    task: Mapped[str] = mapped_column(String(160))
    group: Mapped[str] = mapped_column(String(128))
    index: Mapped[int] = mapped_column(Integer)
    rank: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(256))
    gpus: Mapped[list] = mapped_column(JSON)
    gpu_uuids: Mapped[list | None] = mapped_column(JSON, nullable=True)
    cpus: Mapped[float] = mapped_column(Float, default=0.0)
    memory_mb: Mapped[int] = mapped_column(Integer, default=0)
    opportunistic: Mapped[bool] = mapped_column(Boolean, default=False)
    # a share of its one GPU (0.5, 0.25, 0.125; NULL: whole GPUs): which eighths it holds (its first one)
    # and, under MIG, its MIG device, so a restart puts it back on the same slot and device
    share: Mapped[float | None] = mapped_column(Float, nullable=True)
    share_slot: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mig_device: Mapped[str | None] = mapped_column(String(128), nullable=True)


class Drain(Base):
    """An admin's drain of a node (gpu NULL) or of one GPU: no new work lands there."""

    __tablename__ = "drains"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(256))
    gpu: Mapped[int | None] = mapped_column(Integer, nullable=True)
    at: Mapped[float] = mapped_column(Float)
    by: Mapped[str] = mapped_column(String(128))


class VcLimits(Base):
    """An admin's per-user limits of one VC (``PUT vcs/{vc}/limits``); they replace the config's for that VC."""

    __tablename__ = "vc_limits"

    vc: Mapped[str] = mapped_column(String(128), primary_key=True)
    limits: Mapped[dict] = mapped_column(JSON)  # {"default": {...}, "groups": {...}, "users": {...}}
    at: Mapped[float] = mapped_column(Float)
    by: Mapped[str] = mapped_column(String(128))


class JobUsage(Base):
    """What one attempt of a job used: opened when the core places it, closed when its GPUs are given back.

    GPU-seconds are ``gpus * share * (ended_at - started_at)`` (``ended_at`` NULL: still holding them);
    ``share`` is 1.0 for whole GPUs (fractional GPUs later). ``gpu_types`` maps GPU type -> GPUs of this
    attempt. ``cpu_seconds`` and ``peak_memory_mb`` are NULL where the launcher does not know them."""

    __tablename__ = "job_usage"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    user: Mapped[str] = mapped_column(String(128), index=True)
    user_group: Mapped[str] = mapped_column(String(128), default="")
    vc: Mapped[str] = mapped_column(String(128))
    gpus: Mapped[int] = mapped_column(Integer)
    share: Mapped[float] = mapped_column(Float, default=1.0)
    gpu_types: Mapped[dict] = mapped_column(JSON)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)
    cpu_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    peak_memory_mb: Mapped[float | None] = mapped_column(Float, nullable=True)


class Schedule(Base):
    """A recurring job (issue 27): a job spec submitted under its owner's identity at each time a cron
    expression names in a time zone. ``next_run_at``: the next such time (UNIX seconds) it has not
    handled yet; ``policy``: skip | queue_one | run_all (pipelines/schedules.py)."""

    __tablename__ = "schedules"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(128), index=True)
    owner_groups: Mapped[list] = mapped_column(JSON)
    cron: Mapped[str] = mapped_column(String(256))
    timezone: Mapped[str] = mapped_column(String(64))
    policy: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict] = mapped_column(JSON)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    next_run_at: Mapped[float] = mapped_column(Float)


class ScheduleRun(Base):
    """One time a schedule was due: the job it submitted, or why none (skipped, refused)."""

    __tablename__ = "schedule_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(String(32), ForeignKey("schedules.id", ondelete="CASCADE"), index=True)
    due_at: Mapped[float] = mapped_column(Float)
    fired_at: Mapped[float] = mapped_column(Float)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    outcome: Mapped[str] = mapped_column(String(16))  # submitted | skipped | refused
    reason: Mapped[str] = mapped_column(Text, default="")
