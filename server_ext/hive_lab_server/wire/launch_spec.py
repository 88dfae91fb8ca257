"""The stored job spec as launching reads it: ``LaunchSpec``, typed and read-only.

Admission stores a job's spec as ``JobSpec.model_dump(mode="json")`` (the store keeps JSON, recovery
reads it back); launching a placed job (``jobs/lifecycle/launch_plan.py``, ``execution/runtime_env.py``)
reads it through this view instead of by string keys, so a field's name and its default are written
once, here. The view is made from the stored dict, not validated again as a ``JobSpec``: a spec stored
by an earlier version launches as it did then.

A field the stored spec leaves out is ``None`` (or empty; a task group's name, count and GPUs get
``TaskSpec``'s defaults): each reader keeps its own default where they differ (a task group's ``cpus``:
none asked for the launcher, OpenPAI's 1 in ``PAI_RESOURCE_*``).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Mapping


def _frozen(d: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclasses.dataclass(frozen=True)
class LaunchTaskGroup:
    """One of the spec's ``tasks`` (a task group): ``count`` tasks alike."""

    name: str | None
    count: int
    gpus: int | float
    cpus: float | None = None
    memory_mb: int | None = None
    command: str | None = None

    @classmethod
    def of(cls, t: Mapping[str, Any]) -> "LaunchTaskGroup":
        return cls(name=t.get("name", "main"), count=t.get("count", 1), gpus=t.get("gpus", 1), cpus=t.get("cpus"),
                   memory_mb=t.get("memory_mb"), command=t.get("command"))


@dataclasses.dataclass(frozen=True)
class PlatformRuntime:
    """``source.runtime``: what a job sent in another platform's format needs for that platform's task
    variables (``execution/runtime_env.py``); empty for hive-lab's own jobs."""

    platform: str | None = None  # "openpai", "slurm", "kubernetes", "volcano"
    ports: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=lambda: _frozen({}))
    array: str | None = None  # an ``#SBATCH --array`` job's array, in Slurm's syntax
    instances: int | None = None  # an OpenPAI role run without gang: its instance count
    completion: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _frozen({}))

    @classmethod
    def of(cls, runtime: Mapping[str, Any]) -> "PlatformRuntime":
        return cls(platform=runtime.get("platform"), ports=_frozen(runtime.get("ports")),
                   array=runtime.get("array"), instances=runtime.get("instances"),
                   completion=_frozen(runtime.get("completion")))


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What launching a job reads of its stored spec."""

    name: str | None
    kind: str
    tasks: tuple[LaunchTaskGroup, ...]
    vc: str | None = None
    image: str | None = None
    command: str | None = None  # the job's command (a task group's own wins)
    env: Mapping[str, str] = dataclasses.field(default_factory=lambda: _frozen({}))
    inherited_env: Mapping[str, str] = dataclasses.field(default_factory=lambda: _frozen({}))  # environment.vars
    working_dir: str | None = None
    data_dir: str | None = None
    files: Mapping[str, str] = dataclasses.field(default_factory=lambda: _frozen({}))
    job_type: str | None = None
    runtime: PlatformRuntime = dataclasses.field(default_factory=PlatformRuntime)

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> "LaunchSpec":
        """The view of a stored spec (the one place launching reads it by key)."""
        return cls(
            name=spec.get("name"), kind=spec.get("kind") or "batch",
            tasks=tuple(LaunchTaskGroup.of(t) for t in spec.get("tasks") or ()),
            vc=spec.get("vc"), image=spec.get("image"), command=spec.get("command"),
            env=_frozen(spec.get("env")), inherited_env=_frozen((spec.get("environment") or {}).get("vars")),
            working_dir=spec.get("working_dir"), data_dir=spec.get("data_dir"), files=_frozen(spec.get("files")),
            job_type=spec.get("job_type"), runtime=PlatformRuntime.of((spec.get("source") or {}).get("runtime") or {}))

    def group(self, name: str) -> LaunchTaskGroup | None:
        return next((t for t in self.tasks if t.name == name), None)
