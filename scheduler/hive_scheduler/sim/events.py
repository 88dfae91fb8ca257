"""The simulator's event script: one JSON object a line (the public format of ``hive-lab simulate --events``).

Formats (a public contract, see the README):

- ``{"t":0,"op":"submit","job":"j1","vc":"VC1","priority":0,"user":"ann","tasks":[{"name":"worker","count":2,
  "gpus":4,"gpu_type":"V100","cpus":8,"memory_mb":32768}],"within":"DGX1-NODE","pinned_cell":null,
  "lazy_preemption":true,"duration":3600}`` (``duration``: run time once started; absent = until a ``finish``)
- ``{"t":10,"op":"finish","job":"j1"}``
- ``{"t":20,"op":"node_down","node":"n1"}``, ``node_up``; ``{"t":25,"op":"gpu_down","node":"n1","gpu":3}``, ``gpu_up``
- ``{"t":30,"op":"reconfigure","cluster":"new.yaml"}``

``t`` is in seconds and non-decreasing. The loader checks the *format* (types, required fields, unknown
fields, time order, duplicate job ids); whether a request makes sense for the cluster (unknown VC, priority
range, ...) is the scheduler's call; a ``finish`` must name a job submitted on an earlier line and shows up as a ``rejected`` decision.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Union

from ..types import TaskGroup

__all__ = [
    "EventError",
    "TaskSpec",
    "SubmitEvent",
    "FinishEvent",
    "NodeEvent",
    "GpuEvent",
    "ReconfigureEvent",
    "Event",
    "load_events",
    "parse_events",
    "dump_events",
]

MAX_REPORTED_ERRORS = 20


class EventError(ValueError):
    """The event script is malformed. ``errors`` lists ``(line, message)``; ``str()`` shows them all."""

    def __init__(self, source: str, errors: list[tuple[int, str]]):
        self.source = source
        self.errors = errors
        shown = [
            f"{source} line {line}: {msg}" if line else f"{source}: {msg}" for line, msg in errors[:MAX_REPORTED_ERRORS]
        ]
        if len(errors) > MAX_REPORTED_ERRORS:
            shown.append(f"... and {len(errors) - MAX_REPORTED_ERRORS} more errors")
        super().__init__("\n".join(shown))


# A submit line's task group is the core's own TaskGroup (same fields, same to_dict()).
TaskSpec = TaskGroup


@dataclass(frozen=True)
class SubmitEvent:
    t: float
    job: str
    vc: str
    tasks: tuple[TaskSpec, ...]
    priority: int = 0
    user: str = ""
    within: str | None = None
    pinned_cell: str | None = None
    lazy_preemption: bool = True
    duration: float | None = None
    time_limit_s: float | None = None
    line: int = field(default=0, compare=False)
    group: str = ""  # the owner's group (fair share's upper level); replayed histories carry it
    kind: str = "batch"  # "batch" | "kernel" (replayed histories mark notebook kernels)
    op = "submit"

    @property
    def gpus(self) -> int:
        return sum(t.count * t.gpus for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "t": self.t,
            "op": "submit",
            "job": self.job,
            "vc": self.vc,
            "priority": self.priority,
            "user": self.user,
            "tasks": [t.to_dict() for t in self.tasks],
            "within": self.within,
            "pinned_cell": self.pinned_cell,
            "lazy_preemption": self.lazy_preemption,
        }
        if self.duration is not None:
            d["duration"] = self.duration
        if self.time_limit_s is not None:
            d["time_limit_s"] = self.time_limit_s
        return d


@dataclass(frozen=True)
class FinishEvent:
    t: float
    job: str
    line: int = field(default=0, compare=False)
    op = "finish"

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "op": "finish", "job": self.job}


@dataclass(frozen=True)
class NodeEvent:
    t: float
    node: str
    up: bool
    line: int = field(default=0, compare=False)

    @property
    def op(self) -> str:
        return "node_up" if self.up else "node_down"

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "op": self.op, "node": self.node}


@dataclass(frozen=True)
class GpuEvent:
    t: float
    node: str
    gpu: int
    up: bool
    line: int = field(default=0, compare=False)

    @property
    def op(self) -> str:
        return "gpu_up" if self.up else "gpu_down"

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "op": self.op, "node": self.node, "gpu": self.gpu}


@dataclass(frozen=True)
class ReconfigureEvent:
    t: float
    cluster: Any  # a path (relative paths are resolved against ``base_dir``), a built-in name, or a dict
    base_dir: str | None = field(default=None, compare=False)
    line: int = field(default=0, compare=False)
    op = "reconfigure"

    def resolved_cluster(self) -> Any:
        """The cluster source to load: a relative path that exists next to the event file wins."""
        if isinstance(self.cluster, str) and self.base_dir and not os.path.isabs(self.cluster):
            candidate = os.path.join(self.base_dir, self.cluster)
            if os.path.exists(candidate):
                return candidate
        return self.cluster

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "op": "reconfigure", "cluster": self.cluster}


Event = Union[SubmitEvent, FinishEvent, NodeEvent, GpuEvent, ReconfigureEvent]

_FIELDS = {
    "submit": (
        {"t", "op", "job", "vc", "tasks"},
        {"priority", "user", "within", "pinned_cell", "lazy_preemption", "duration", "time_limit_s"},
    ),
    "finish": ({"t", "op", "job"}, set()),
    "node_down": ({"t", "op", "node"}, set()),
    "node_up": ({"t", "op", "node"}, set()),
    "gpu_down": ({"t", "op", "node", "gpu"}, set()),
    "gpu_up": ({"t", "op", "node", "gpu"}, set()),
    "reconfigure": ({"t", "op", "cluster"}, set()),
}
_TASK_FIELDS = ({"name", "count", "gpus"}, {"gpu_type", "cpus", "memory_mb"})


class _Invalid(Exception):
    pass


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _check_keys(obj: dict, required: set[str], optional: set[str], what: str) -> None:
    missing = sorted(required - obj.keys())
    if missing:
        raise _Invalid(f"{what}: missing field(s) {', '.join(missing)}")
    unknown = sorted(obj.keys() - required - optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise _Invalid(f"{what}: unknown field(s) {', '.join(unknown)} (allowed: {allowed})")


def _str(obj: dict, key: str, what: str, *, nullable: bool = False, nonempty: bool = True) -> str | None:
    v = obj.get(key)
    if v is None and nullable:
        return None
    if not isinstance(v, str) or (nonempty and not v):
        kind = "a non-empty string" + (" or null" if nullable else "")
        raise _Invalid(f"{what}: '{key}' must be {kind}, got {json.dumps(v)}")
    return v


def _task(raw: Any, i: int) -> TaskSpec:
    what = f"submit: tasks[{i}]"
    if not isinstance(raw, dict):
        raise _Invalid(f"{what} must be an object like {{\"name\":\"worker\",\"count\":1,\"gpus\":1}}")
    _check_keys(raw, *_TASK_FIELDS, what)
    name = _str(raw, "name", what)
    count, gpus = raw["count"], raw["gpus"]
    if not _is_int(count) or count < 1:
        raise _Invalid(f"{what}: 'count' must be an integer >= 1, got {json.dumps(count)}")
    if not _is_int(gpus) or gpus < 0:
        raise _Invalid(f"{what}: 'gpus' must be an integer >= 0, got {json.dumps(gpus)}")
    gpu_type = _str(raw, "gpu_type", what, nullable=True)
    cpus = raw.get("cpus", 0)
    if not _is_number(cpus) or cpus < 0:
        raise _Invalid(f"{what}: 'cpus' must be a number >= 0, got {json.dumps(cpus)}")
    memory_mb = raw.get("memory_mb", 0)
    if not _is_int(memory_mb) or memory_mb < 0:
        raise _Invalid(f"{what}: 'memory_mb' must be an integer >= 0, got {json.dumps(memory_mb)}")
    return TaskSpec(name=name, count=count, gpus=gpus, gpu_type=gpu_type, cpus=cpus, memory_mb=memory_mb)


def _event(obj: Any, line: int, base_dir: str | None) -> Event:
    if not isinstance(obj, dict):
        raise _Invalid("each line must be a JSON object")
    op = obj.get("op")
    if op not in _FIELDS:
        raise _Invalid(f"'op' must be one of {', '.join(_FIELDS)}, got {json.dumps(op)}")
    _check_keys(obj, *_FIELDS[op], op)
    t = obj["t"]
    if not _is_number(t) or t < 0:
        raise _Invalid(f"{op}: 't' must be a number of seconds >= 0, got {json.dumps(t)}")
    if op == "submit":
        job = _str(obj, "job", op)
        vc = _str(obj, "vc", op)
        tasks_raw = obj["tasks"]
        if not isinstance(tasks_raw, list) or not tasks_raw:
            raise _Invalid("submit: 'tasks' must be a non-empty list of task groups")
        tasks = tuple(_task(raw, i) for i, raw in enumerate(tasks_raw))
        names = [tk.name for tk in tasks]
        if len(set(names)) != len(names):
            raise _Invalid(f"submit: task group names must be unique, got {names}")
        priority = obj.get("priority", 0)
        if not _is_int(priority):
            raise _Invalid(f"submit: 'priority' must be an integer (-1 opportunistic, 0..1000), got {json.dumps(priority)}")
        user = obj.get("user", "")
        if user is None:
            user = ""
        if not isinstance(user, str):
            raise _Invalid(f"submit: 'user' must be a string, got {json.dumps(user)}")
        within = _str(obj, "within", op, nullable=True)
        pinned = _str(obj, "pinned_cell", op, nullable=True)
        lazy = obj.get("lazy_preemption", True)
        if not isinstance(lazy, bool):
            raise _Invalid(f"submit: 'lazy_preemption' must be true or false, got {json.dumps(lazy)}")
        duration = obj.get("duration")
        if duration is not None and (not _is_number(duration) or duration <= 0):
            raise _Invalid(f"submit: 'duration' must be a number of seconds > 0 (or absent), got {json.dumps(duration)}")
        limit = obj.get("time_limit_s")
        if limit is not None and (not _is_number(limit) or limit <= 0):
            raise _Invalid(f"submit: 'time_limit_s' must be a number of seconds > 0 (or absent), got {json.dumps(limit)}")
        return SubmitEvent(
            t=t, job=job, vc=vc, tasks=tasks, priority=priority, user=user, within=within,
            pinned_cell=pinned, lazy_preemption=lazy, duration=duration, time_limit_s=limit, line=line,
        )
    if op == "finish":
        return FinishEvent(t=t, job=_str(obj, "job", op), line=line)
    if op in ("node_down", "node_up"):
        return NodeEvent(t=t, node=_str(obj, "node", op), up=op == "node_up", line=line)
    if op in ("gpu_down", "gpu_up"):
        gpu = obj["gpu"]
        if not _is_int(gpu) or gpu < 0:
            raise _Invalid(f"{op}: 'gpu' must be a GPU index >= 0 within the node, got {json.dumps(gpu)}")
        return GpuEvent(t=t, node=_str(obj, "node", op), gpu=gpu, up=op == "gpu_up", line=line)
    cluster = obj["cluster"]
    if not (isinstance(cluster, str) and cluster) and not isinstance(cluster, dict):
        raise _Invalid("reconfigure: 'cluster' must be a config file path, a built-in model name or an object")
    return ReconfigureEvent(t=t, cluster=cluster, base_dir=base_dir, line=line)


def parse_events(lines: Iterable[str], source: str = "<events>", base_dir: str | None = None) -> list[Event]:
    """Parse event lines; blank lines and lines starting with ``#`` are skipped.

    Raises :class:`EventError` listing every bad line (with its 1-based line number); nothing is returned
    then, so a script is either used whole or not at all.
    """
    events: list[Event] = []
    errors: list[tuple[int, str]] = []
    last_t = None
    submitted: dict[str, int] = {}
    for lineno, text in enumerate(lines, start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise _Invalid(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
            ev = _event(obj, lineno, base_dir)
            if last_t is not None and ev.t < last_t:
                raise _Invalid(f"{ev.op}: 't' goes back in time ({ev.t} after {last_t}); events must be sorted by t")
            if isinstance(ev, SubmitEvent):
                if ev.job in submitted:
                    raise _Invalid(f"submit: job id {json.dumps(ev.job)} was already submitted on line {submitted[ev.job]}")
                submitted[ev.job] = lineno
            elif isinstance(ev, FinishEvent) and ev.job not in submitted:
                raise _Invalid(f"finish: job {json.dumps(ev.job)} is not submitted on an earlier line")
            last_t = ev.t
            events.append(ev)
        except _Invalid as exc:
            errors.append((lineno, str(exc)))
    if errors:
        raise EventError(source, errors)
    return events


def load_events(path: str | os.PathLike) -> list[Event]:
    """Read and validate an events JSONL file (see the module doc for the format)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_events(fh, source=path, base_dir=os.path.dirname(os.path.abspath(path)))
    except FileNotFoundError:
        raise EventError(path, [(0, "file not found")]) from None


def dump_events(events: Iterable[Event], path: str | os.PathLike) -> None:
    """Write events in the JSONL format (for example a trace converted to an event script)."""
    with open(path, "w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(json.dumps(ev.to_dict(), separators=(",", ":")) + "\n")
