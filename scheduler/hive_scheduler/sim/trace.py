"""Job traces (CSV) -> submit events.

Schema (``data/README.md``; the shipped sample is ``samples.PHILLY_DEV``): ``job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status``.
Read with :mod:`csv`, so empty fields stay empty strings.

How a row becomes a job:

- one task group ``worker``: a job needing at most one node's GPUs is one task of ``num_gpus`` GPUs;
  a bigger one is ``num_gpus // G`` tasks of ``G`` GPUs (``G`` = GPUs per node of the cluster model),
  plus one task with the rest when ``G`` does not divide it (group ``worker-rest``);
- priority 0 (guaranteed), ``duration`` = ``duration_s``, ``gpu_type`` = the column or any type;
- ``time_scale`` multiplies submit times (``0.1`` = arrivals ten times denser, durations unchanged): the
  sample traces load a full-size model lightly, so queueing studies compress arrivals and say so;
- an empty ``vc`` is filled synthetically: a stable hash of ``job_id`` (SHA-256, not Python's ``hash``)
  picks a VC with probability proportional to its guaranteed GPUs, among the VCs whose guarantee can
  hold the job at all (a 128-GPU job never lands in a 64-GPU VC). Same trace + same model = same VCs.
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import os
import zlib
from typing import Any, Mapping

from .events import EventError, SubmitEvent, TaskSpec
from .shape import ClusterShape, cluster_shape

__all__ = ["load_trace", "trace_to_events", "assign_vc", "TRACE_COLUMNS"]

TRACE_COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "vc", "user", "status")
REQUIRED_COLUMNS = ("job_id", "submit_time_s", "duration_s", "num_gpus")


def _stable_fraction(key: str) -> float:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_vc(job_id: str, gpus: int, vc_sizes: Mapping[str, int]) -> str | None:
    """The VC for a trace job without one: proportional to guaranteed GPUs, by a stable hash of the id."""
    return _pick_vc(job_id, _vc_bounds(gpus, vc_sizes))


def _vc_bounds(gpus: int, vc_sizes: Mapping[str, int]) -> tuple[list[str], list[int], int] | None:
    """``assign_vc``'s candidates for a job of ``gpus`` GPUs: their names, cumulative sizes and total (None:
    none). Depends only on ``gpus`` and the sizes, so a trace computes it once per GPU count."""
    candidates = sorted((vc, size) for vc, size in vc_sizes.items() if size >= gpus and size > 0)
    if not candidates:
        candidates = sorted((vc, size) for vc, size in vc_sizes.items() if size > 0)
    if not candidates:
        return None
    bounds = []
    total = 0
    for _, size in candidates:
        total += size
        bounds.append(total)
    return [vc for vc, _ in candidates], bounds, total


def _pick_vc(job_id: str, got: tuple[list[str], list[int], int] | None) -> str | None:
    if got is None:
        return None
    names, bounds, total = got
    return names[bisect.bisect_right(bounds, _stable_fraction(job_id) * total)]


def _tasks(num_gpus: int, gpu_type: str | None, per_node: int) -> tuple[TaskSpec, ...]:
    if per_node <= 0 or num_gpus <= per_node:
        return (TaskSpec(name="worker", count=1, gpus=num_gpus, gpu_type=gpu_type),)
    full, rest = divmod(num_gpus, per_node)
    groups = [TaskSpec(name="worker", count=full, gpus=per_node, gpu_type=gpu_type)]
    if rest:
        groups.append(TaskSpec(name="worker-rest", count=1, gpus=rest, gpu_type=gpu_type))
    return tuple(groups)


def job_and_submit_time(row: dict, seen: dict[str, int]) -> tuple[str, float]:
    """A trace row's job id (non-empty, not seen before) and submit time (>= 0); ValueError saying what."""
    job = (row.get("job_id") or "").strip()
    if not job:
        raise ValueError("'job_id' is empty")
    if job in seen:
        raise ValueError(f"job_id {job!r} already appeared on line {seen[job]}")
    t = _number(row["submit_time_s"], "submit_time_s", integer=False)
    if t < 0:
        raise ValueError(f"'submit_time_s' must be >= 0, got {row['submit_time_s']!r}")
    return job, t


def _number(text: str, column: str, *, integer: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{column}' must be a number, got {text!r}") from None
    if integer and value != int(value):
        raise ValueError(f"'{column}' must be a whole number, got {text!r}")
    return int(value) if integer or value == int(value) else value


def load_trace(path: str | os.PathLike, cluster: Any, time_scale: float = 1.0,
               synthetic_users: int | None = None, time_limits: float | None = None) -> list[SubmitEvent]:
    """Read a trace CSV into submit events for ``cluster`` (a ``ClusterConfig``, HiveD dict or ``ClusterShape``).

    ``time_limits`` F: every job gets ``time_limit_s`` = F x its duration (1: exact limits; 2: users
    overestimating twice), for backfill; None: no limits.

    ``synthetic_users`` N: every job's user is ``user-K``, K a stable hash of the job id modulo N
    (for fairness studies on traces without users, such as the Philly window).

    Raises :class:`EventError` naming the file, the line and the field for each bad row.
    """
    path = os.fspath(path)
    shape = cluster if isinstance(cluster, ClusterShape) else cluster_shape(cluster)
    try:
        fh = open(path, newline="", encoding="utf-8")
    except FileNotFoundError:
        raise EventError(path, [(0, "file not found")]) from None
    with fh:
        return trace_to_events(fh, shape, source=path, time_scale=time_scale, synthetic_users=synthetic_users,
                               time_limits=time_limits)


def synthetic_user(job: str, users: int) -> str:
    """``user-K``: K = CRC-32 of the job id modulo ``users`` (stable across runs and hash seeds)."""
    width = len(str(users - 1))
    return f"user-{zlib.crc32(job.encode('utf-8')) % users:0{width}d}"


def trace_to_events(
    lines, shape: ClusterShape, source: str = "<trace>", time_scale: float = 1.0,
    synthetic_users: int | None = None, time_limits: float | None = None,
) -> list[SubmitEvent]:
    if not time_scale > 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale}")
    if time_limits is not None and not time_limits >= 1:
        raise ValueError(f"time_limits must be >= 1 (a multiple of each job's duration), got {time_limits}")
    if synthetic_users is not None and not (isinstance(synthetic_users, int) and synthetic_users >= 1):
        raise ValueError(f"synthetic_users must be an integer >= 1, got {synthetic_users!r}")
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise EventError(
            source, [(1, f"missing column(s) {', '.join(missing)}; expected header {','.join(TRACE_COLUMNS)}")]
        )
    vc_sizes = {vc: shape.vc_total(vc) for vc in shape.vcs}
    per_node_cache: dict[str | None, int] = {}
    vc_bounds: dict[int, tuple | None] = {}  # GPU count -> ``_vc_bounds``
    tasks_of: dict[tuple, tuple] = {}  # (GPUs, type) -> ``_tasks`` (frozen task groups: jobs share them)
    events: list[SubmitEvent] = []
    errors: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    last_t = None
    for row in reader:
        line = reader.line_num
        try:
            job, t = job_and_submit_time(row, seen)
            if last_t is not None and t < last_t:
                raise ValueError(f"'submit_time_s' goes back in time ({t} after {last_t}); sort the trace by it")
            duration = _number(row["duration_s"], "duration_s", integer=False)
            if duration <= 0:
                raise ValueError(f"'duration_s' must be > 0, got {row['duration_s']!r}")
            gpus = _number(row["num_gpus"], "num_gpus", integer=True)
            if gpus < 1:
                raise ValueError(f"'num_gpus' must be >= 1, got {row['num_gpus']!r}")
            gpu_type = (row.get("gpu_type") or "").strip() or None
            vc = (row.get("vc") or "").strip()
            if not vc:
                if gpus not in vc_bounds:
                    vc_bounds[gpus] = _vc_bounds(gpus, vc_sizes)
                vc = _pick_vc(job, vc_bounds[gpus])
            if vc is None:
                raise ValueError("'vc' is empty and the cluster model has no virtual clusters to spread jobs over")
            tasks = tasks_of.get((gpus, gpu_type))
            if tasks is None:
                if gpu_type not in per_node_cache:
                    per_node_cache[gpu_type] = shape.max_gpus_per_node(gpu_type)
                tasks = tasks_of[gpus, gpu_type] = _tasks(gpus, gpu_type, per_node_cache[gpu_type])
            events.append(
                SubmitEvent(
                    t=t * time_scale, job=job, vc=vc, tasks=tasks,
                    priority=0,
                    user=synthetic_user(job, synthetic_users) if synthetic_users else (row.get("user") or ""),
                    duration=duration, line=line,
                    time_limit_s=duration * time_limits if time_limits is not None else None,
                )
            )
            seen[job] = line
            last_t = t
        except ValueError as exc:
            errors.append((line, str(exc)))
    if errors:
        raise EventError(source, errors)
    return events
