"""A cluster's own history as a trace (``hive-lab admin history``) -> simulator events.

The history CSV is a superset of the trace format (:mod:`hive_scheduler.sim.trace`): its first eight
columns are the trace's, so ``hive-lab simulate --trace`` reads it too (as plain jobs); ``--history``
reads everything else:

- ``submit_time_s``: seconds after the window's start (``since``); ``duration_s``: the seconds the job
  actually held its GPUs, all attempts together (empty: it never got GPUs);
- ``priority`` (-1: opportunistic), ``kind`` (``batch`` | ``kernel``: a notebook kernel, replayed as a job
  holding its GPUs for as long as the kernel did), ``user_group`` (fair share's upper level),
  ``time_limit_s`` (empty: none), ``tasks`` (the job's task groups as JSON: gangs and shares of a GPU
  as they were; empty: the trace's split of ``num_gpus``);
- ``observed_wait_s``: how long it waited live (submit to first start, plus every wait after a
  preemption; up to the export for a job still waiting): the reference of the live check;
- ``end_time_s``: for a job that never ran and left the queue (cancelled), when it left; the replay
  withdraws it then;
- ``carried_over``: 1 for a job submitted before the window and still queued or running at its start
  (submitted at 0 with its remaining run time; left out of the live check).

A job without ``duration_s`` and ``end_time_s`` (still waiting at the export) runs to the end of the replay.
There are no array or dependency links to carry: hive-lab's jobs have none.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..types import TaskGroup
from .events import EventError, FinishEvent, SubmitEvent
from .shape import ClusterShape, cluster_shape
from .trace import TRACE_COLUMNS, _number, _tasks, job_and_submit_time

__all__ = ["HISTORY_COLUMNS", "History", "load_history", "parse_history", "write_history"]

HISTORY_COLUMNS = TRACE_COLUMNS + ("priority", "kind", "user_group", "time_limit_s", "tasks", "observed_wait_s",
                                   "end_time_s", "carried_over")


@dataclass
class History:
    """The events of a history trace, and what was observed live (per job)."""

    events: list  # SubmitEvent and FinishEvent, in time order
    observed: dict[str, float] = field(default_factory=dict)  # job -> observed wait (s); not carried-over jobs
    carried_over: set[str] = field(default_factory=set)
    kinds: dict[str, str] = field(default_factory=dict)
    source: str = "<history>"

    @property
    def submits(self) -> list[SubmitEvent]:
        return [e for e in self.events if isinstance(e, SubmitEvent)]


def write_history(rows: Iterable[dict[str, Any]], out: io.TextIOBase) -> None:
    """Write history rows (dicts keyed by ``HISTORY_COLUMNS``) as CSV; ``None`` becomes an empty field."""
    writer = csv.DictWriter(out, fieldnames=HISTORY_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in HISTORY_COLUMNS})


def _task_groups(text: str) -> tuple[TaskGroup, ...]:
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError(f"'tasks' must be a JSON list of task groups, got {text[:60]!r}") from None
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        raise ValueError("'tasks' must be a non-empty JSON list of objects like {\"count\": 1, \"gpus\": 2}")
    groups = []
    for i, t in enumerate(raw):
        count, gpus = t.get("count", 1), t.get("gpus", 1)
        if not isinstance(count, int) or count < 1 or isinstance(gpus, bool) or not isinstance(gpus, (int, float)) \
                or gpus < 0:
            raise ValueError(f"'tasks' group {i}: count must be an integer >= 1 and gpus a number >= 0")
        groups.append(TaskGroup(name=str(t.get("name") or f"task{i}"), count=count, gpus=gpus,
                                gpu_type=t.get("gpu_type") or None))
    return tuple(groups)


def _optional(row: dict[str, str], column: str) -> float | None:
    text = (row.get(column) or "").strip()
    return None if text == "" else _number(text, column, integer=False)


def load_history(path: str | os.PathLike, cluster: Any) -> History:
    """Read a history CSV for ``cluster`` (a ``ClusterConfig``, HiveD dict or ``ClusterShape``).
    Raises :class:`EventError` naming the file, the line and the field of each bad row."""
    path = os.fspath(path)
    try:
        fh = open(path, newline="", encoding="utf-8")
    except FileNotFoundError:
        raise EventError(path, [(0, "file not found")]) from None
    with fh:
        return parse_history(fh, cluster, source=path)


def parse_history(lines: Iterable[str], cluster: Any, source: str = "<history>") -> History:
    shape = cluster if isinstance(cluster, ClusterShape) else cluster_shape(cluster)
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    missing = [c for c in ("job_id", "submit_time_s", "duration_s", "num_gpus", "vc") if c not in header]
    if missing:
        raise EventError(source, [(1, f"missing column(s) {', '.join(missing)}; expected header "
                                      f"{','.join(HISTORY_COLUMNS)}")])
    out = History(events=[], source=source)
    finishes: list[FinishEvent] = []
    errors: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        try:
            job, t = job_and_submit_time(row, seen)
            duration = _optional(row, "duration_s")
            if duration is not None and duration < 0:
                raise ValueError(f"'duration_s' must be >= 0 or empty, got {row['duration_s']!r}")
            vc = (row.get("vc") or "").strip()
            if not vc:
                raise ValueError("'vc' is empty (a history names each job's VC)")
            gpu_type = (row.get("gpu_type") or "").strip() or None
            tasks_text = (row.get("tasks") or "").strip()
            if tasks_text:
                tasks = _task_groups(tasks_text)
            else:
                gpus = _number(row["num_gpus"], "num_gpus", integer=True)
                if gpus < 0:
                    raise ValueError(f"'num_gpus' must be >= 0, got {row['num_gpus']!r}")
                tasks = _tasks(gpus, gpu_type, shape.max_gpus_per_node(gpu_type))
            priority_text = (row.get("priority") or "").strip()
            priority = int(_number(priority_text, "priority", integer=True)) if priority_text else 0
            kind = (row.get("kind") or "").strip() or "batch"
            if kind not in ("batch", "kernel"):
                raise ValueError(f"'kind' must be batch or kernel, got {kind!r}")
            end = _optional(row, "end_time_s")
            if end is not None and end < t:
                raise ValueError(f"'end_time_s' ({end}) is before 'submit_time_s' ({t})")
            out.events.append(SubmitEvent(
                t=t, job=job, vc=vc, tasks=tasks, priority=priority, user=(row.get("user") or "").strip(),
                duration=duration,
                time_limit_s=_optional(row, "time_limit_s"), line=line,
                group=(row.get("user_group") or "").strip(), kind=kind))
            if duration is None and end is not None:
                finishes.append(FinishEvent(t=end, job=job, line=line))
            out.kinds[job] = kind
            if (row.get("carried_over") or "").strip() in ("1", "true", "True"):
                out.carried_over.add(job)
            else:
                observed = _optional(row, "observed_wait_s")
                if observed is not None:
                    out.observed[job] = observed
            seen[job] = line
        except ValueError as exc:
            errors.append((line, str(exc)))
    if errors:
        raise EventError(source, errors)
    # submits before withdrawals at the same instant; otherwise time order (stable: file order)
    out.events = sorted(out.events + finishes, key=lambda e: (e.t, isinstance(e, FinishEvent)))
    return out
