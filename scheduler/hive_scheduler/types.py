"""What a job asks for (JobRequest, TaskGroup) and where its tasks landed (TaskPlacement)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskGroup:
    """``count`` identical tasks of ``gpus`` GPUs each (``gpus=0``: a CPU-only task; 0.5, 0.25 or 0.125:
    a share of one GPU, for a group of one task, see ``shares.py``)."""

    name: str = "task"
    count: int = 1
    gpus: int | float = 1
    gpu_type: str | None = None
    cpus: float = 0
    memory_mb: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TaskGroup":
        return cls(
            name=d.get("name", "task"),
            count=d.get("count", 1),
            gpus=d.get("gpus", 1),
            gpu_type=d.get("gpu_type") or None,
            cpus=d.get("cpus", 0) or 0,
            memory_mb=d.get("memory_mb", 0) or 0,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "gpus": self.gpus,
            "gpu_type": self.gpu_type,
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
        }


@dataclass(frozen=True)
class JobRequest:
    """A job: task groups, a VC, a priority (0..1000 guaranteed, -1 opportunistic) and constraints."""

    id: str
    vc: str
    user: str = ""
    tasks: tuple[TaskGroup, ...] = ()
    priority: int = 0
    within: str | None = None
    pinned_cell: str | None = None
    lazy_preemption: bool = True
    submit_time: float = 0.0
    group: str = ""  # the owner's group (fair share one level above users); "" = no group
    groups: tuple[str, ...] = ()  # all the owner's groups (per-user limits: most generous group wins)
    kind: str = "batch"  # "batch" | "kernel" (a notebook kernel: ``max_kernels`` counts those holding GPUs)
    time_limit_s: float | None = None  # the job ends by then (estimates and backfill rely on it); None = no limit

    def __post_init__(self):
        tasks = self.tasks
        if not (type(tasks) is tuple and all(type(t) is TaskGroup for t in tasks)):  # else stored as it is
            if isinstance(tasks, TaskGroup):
                tasks = (tasks,)
            elif isinstance(tasks, (list, tuple)):
                tasks = tuple(TaskGroup.from_dict(t) if isinstance(t, dict) else t for t in tasks)
            object.__setattr__(self, "tasks", tasks)
        if not isinstance(self.groups, tuple):
            object.__setattr__(self, "groups", tuple(self.groups or ()))

    @property
    def opportunistic(self) -> bool:
        return self.priority == -1

    @property
    def total_gpus(self) -> int:
        return sum(g.count * g.gpus for g in self.tasks if isinstance(g, TaskGroup))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobRequest":
        """Build from the simulator's submit event / REST body (``job`` or ``id`` for the id)."""
        return cls(
            id=d.get("id", d.get("job")),
            vc=d.get("vc"),
            user=d.get("user", "") or "",
            tasks=tuple(TaskGroup.from_dict(t) if isinstance(t, dict) else t for t in d.get("tasks", ())),
            priority=d.get("priority", 0),
            within=d.get("within") or None,
            pinned_cell=d.get("pinned_cell") or None,
            lazy_preemption=d.get("lazy_preemption", True),
            submit_time=d.get("submit_time", d.get("t", 0.0)) or 0.0,
            group=d.get("group", "") or "",
            groups=tuple(d.get("groups") or ()),
            kind=d.get("kind", "batch") or "batch",
            time_limit_s=d.get("time_limit_s"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vc": self.vc,
            "user": self.user,
            "tasks": [t.to_dict() for t in self.tasks],
            "priority": self.priority,
            "within": self.within,
            "pinned_cell": self.pinned_cell,
            "lazy_preemption": self.lazy_preemption,
            "submit_time": self.submit_time,
            "group": self.group,
            "groups": list(self.groups),
            "kind": self.kind,
            "time_limit_s": self.time_limit_s,
        }


@dataclass(frozen=True)
class TaskPlacement:
    """Where one task runs: ``gpus`` are leaf indices within ``node`` (sorted)."""

    task: str
    group: str
    index: int
    rank: int
    node: str
    gpus: tuple[int, ...] = field(default_factory=tuple)
    cpus: float = 0
    memory_mb: int = 0
    share: float = 0.0      # a share of its one GPU (0.5, 0.25, 0.125); 0 = whole GPUs
    share_slot: int = -1    # the share's first eighth of the GPU (share buddy block), -1 = whole GPUs

    def to_json(self) -> dict[str, Any]:
        d = {"task": self.task, "node": self.node, "gpus": list(self.gpus)}
        if self.share:
            d["share"], d["share_slot"] = self.share, self.share_slot
        return d

    def to_dict(self) -> dict[str, Any]:
        d = {
            "task": self.task,
            "group": self.group,
            "index": self.index,
            "rank": self.rank,
            "node": self.node,
            "gpus": list(self.gpus),
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
        }
        if self.share:
            d["share"], d["share_slot"] = self.share, self.share_slot
        return d
