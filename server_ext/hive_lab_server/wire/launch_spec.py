"""The stored job spec as everything after admission reads it: ``LaunchSpec``, typed and read-only.

Admission stores a job's spec as ``JobSpec.model_dump(mode="json")`` (the store keeps JSON, recovery
reads it back) and keeps this view of it on the running job (``ActiveJob.spec``): admission, recovery,
moves, rounds, the array feeder, the estimates, the kernel watches and launching
(``jobs/lifecycle/launch_plan.py``, ``execution/runtime_env.py``) read its attributes, never its
string keys, so a field's name and its default are written once, here. The view is made from the
stored dict, not validated again as a ``JobSpec``: a spec stored by an earlier version runs as it did
then.

A field the stored spec leaves out is ``None`` (or empty; a task group's name, count and GPUs get
``TaskSpec``'s defaults): each reader keeps its own default where they differ (a task group's ``cpus``:
none asked for the launcher, OpenPAI's 1 in ``PAI_RESOURCE_*``).

A change of a running job's spec (a move to another GPU type, a resize, an array element's own
variables) makes a new view (``with_gpu_type``, ``with_gpus``, ``as_element``); ``as_stored()`` is the
JSON the store keeps for it, every key the job was submitted with kept as it was.

The view is lazy: making one only wraps the stored dict, and each attribute is read when asked for (its
task groups and other containers once): a list of jobs presents hundreds of stored specs and reads three
fields of each.
"""

from __future__ import annotations

import copy
import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple

EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen(d: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(d)) if d else EMPTY


def _a_share(gpus: Any) -> bool:
    """A share of one GPU (0.5, 0.25, 0.125: a float below 1), not a whole number of GPUs."""
    return isinstance(gpus, float) and 0 < gpus < 1


class LaunchTaskGroup(NamedTuple):
    """One of the spec's ``tasks`` (a task group): ``count`` tasks alike."""

    name: str | None
    count: int
    gpus: int | float
    cpus: float | None = None
    memory_mb: int | None = None
    command: str | None = None
    gpu_type: str | None = None
    gpu_memory_mb: int | None = None  # a share's GPU memory budget
    # the group's completion policy (``TaskSpec``): this many failures fail the job, successes end it
    min_failed: int | None = 1
    min_succeeded: int | None = None

    @classmethod
    def of(cls, t: Mapping[str, Any]) -> "LaunchTaskGroup":
        get = t.get  # (tuple.__new__: a list of jobs makes one per stored task group it shows)
        return tuple.__new__(cls, (get("name", "main"), get("count", 1), get("gpus", 1), get("cpus"), get("memory_mb"),
                                   get("command"), get("gpu_type"), get("gpu_memory_mb"), get("min_failed", 1),
                                   get("min_succeeded")))


@dataclasses.dataclass(frozen=True)
class PlatformRuntime:
    """``source.runtime``: what a job sent in another platform's format needs for that platform's task
    variables (``execution/runtime_env.py``); empty for hive-lab's own jobs."""

    platform: str | None = None  # "openpai", "slurm", "kubernetes", "volcano"
    ports: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=lambda: EMPTY)
    array: str | None = None  # an ``#SBATCH --array`` job's array, in Slurm's syntax
    instances: int | None = None  # an OpenPAI role run without gang: its instance count
    completion: Mapping[str, Any] = dataclasses.field(default_factory=lambda: EMPTY)

    @classmethod
    def of(cls, runtime: Mapping[str, Any]) -> "PlatformRuntime":
        if not runtime:
            return NO_RUNTIME
        return cls(platform=runtime.get("platform"), ports=_frozen(runtime.get("ports")),
                   array=runtime.get("array"), instances=runtime.get("instances"),
                   completion=_frozen(runtime.get("completion")))


NO_RUNTIME = PlatformRuntime()


class Dependency(NamedTuple):
    """One of the spec's ``depends_on``: start once job ``job`` ``when`` (succeeded, failed or ended)."""

    job: str
    when: str = "succeeded"


class LaunchSpec:
    """What running a job reads of its stored spec: typed attributes, read-only."""

    # its task groups and other containers, once read (its own ``__dict__``, which its ``__setattr__`` keeps
    # everyone else from: a plain instance dict makes a view ~7x faster than slots set through object.__setattr__)
    _raw: Mapping[str, Any]  # the stored dict (set once, in __init__)
    _tasks: tuple[LaunchTaskGroup, ...] | None = None
    _made: dict[str, Any] | None = None

    def __init__(self, stored: Mapping[str, Any]):
        self.__dict__["_raw"] = stored

    def _once(self, name: str, make: Callable[[], Any]) -> Any:
        made = self._made
        if made is None:
            made = self.__dict__["_made"] = {}
        if name not in made:
            made[name] = make()
        return made[name]

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> "LaunchSpec":
        """The view of a stored spec. The view keeps ``spec`` itself: whoever hands it over changes it no more."""
        return cls(spec)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}: a job's spec view is read-only")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}: a job's spec view is read-only")

    def __repr__(self) -> str:
        return f"LaunchSpec(name={self.name!r}, kind={self.kind!r}, tasks={self.tasks!r})"

    @property
    def stored(self) -> Mapping[str, Any]:
        """The JSON the store keeps, as it was given (read-only)."""
        return MappingProxyType(self._raw)

    # --- the fields (the one place a job's spec is read by key after admission) ------------------

    @property
    def name(self) -> str | None:
        return self._raw.get("name")

    @property
    def kind(self) -> str:
        return self._raw.get("kind") or "batch"

    @property
    def tasks(self) -> tuple[LaunchTaskGroup, ...]:
        tasks = self._tasks
        if tasks is None:
            tasks = self.__dict__["_tasks"] = tuple(map(LaunchTaskGroup.of, self._raw.get("tasks") or ()))
        return tasks

    @property
    def vc(self) -> str | None:
        return self._raw.get("vc")

    @property
    def image(self) -> str | None:
        return self._raw.get("image")

    @property
    def command(self) -> str | None:
        """The job's command (a task group's own wins)."""
        return self._raw.get("command")

    @property
    def env(self) -> Mapping[str, str]:
        return self._once("env", lambda: _frozen(self._raw.get("env")))

    @property
    def inherited_env(self) -> Mapping[str, str]:
        """``environment.vars``: the submitter's environment (a job without an image runs in it)."""
        return self._once("inherited_env", lambda: _frozen((self._raw.get("environment") or {}).get("vars")))

    @property
    def working_dir(self) -> str | None:
        return self._raw.get("working_dir")

    @property
    def data_dir(self) -> str | None:
        return self._raw.get("data_dir")

    @property
    def files(self) -> Mapping[str, str]:
        return self._once("files", lambda: _frozen(self._raw.get("files")))

    @property
    def job_type(self) -> str | None:
        return self._raw.get("job_type")

    @property
    def runtime(self) -> PlatformRuntime:
        return self._once("runtime", lambda: PlatformRuntime.of((self._raw.get("source") or {}).get("runtime") or {}))

    @property
    def within(self) -> str | None:
        """The cell the job's tasks stay inside (the core's request)."""
        return self._raw.get("within")

    @property
    def pinned_cell(self) -> str | None:
        return self._raw.get("pinned_cell")

    @property
    def time_limit_s(self) -> float | None:
        """Each attempt's run time limit (admission stores the VC's default and its kernel cap)."""
        return self._raw.get("time_limit_s")

    @property
    def checkpoint(self) -> bool:
        """It saves a checkpoint on SIGUSR1 (docs/checkpoint.md)."""
        return bool(self._raw.get("checkpoint"))

    @property
    def min_gpus(self) -> int | None:
        """An elastic job's range: ``min_gpus``..``max_gpus`` (both given, or neither)."""
        return self._raw.get("min_gpus")

    @property
    def max_gpus(self) -> int | None:
        return self._raw.get("max_gpus")

    @property
    def depends_on(self) -> tuple[Dependency, ...]:
        return self._once("depends_on", lambda: tuple(Dependency(d["job"], d.get("when", "succeeded"))
                                                      for d in self._raw.get("depends_on") or ()))

    # --- what follows from them ------------------------------------------------------------------

    def group(self, name: str) -> LaunchTaskGroup | None:
        return next((t for t in self.tasks if t.name == name), None)

    @property
    def total_gpus(self) -> int | float:
        """GPUs over all its tasks (a share: its fraction of one GPU)."""
        return sum(t.gpus * t.count for t in self.tasks)

    @property
    def share(self) -> float | None:
        """The share of one GPU the job holds (its one task's ``gpus``), or None: whole GPUs."""
        tasks = self.tasks
        return tasks[0].gpus if len(tasks) == 1 and _a_share(tasks[0].gpus) else None

    @property
    def elastic(self) -> bool:
        """Its GPU count may change between ``min_gpus`` and ``max_gpus`` (one task, count 1)."""
        return (self.min_gpus is not None and self.max_gpus is not None
                and len(self.tasks) == 1 and self.tasks[0].count == 1)

    @property
    def gpu_kernel(self) -> bool:
        """A notebook kernel holding GPUs or a share of one (what the VCs' kernel caps bind)."""
        return self.kind == "kernel" and any(float(t.gpus or 0) > 0 for t in self.tasks)

    def task_names(self) -> list[str]:
        """Its tasks as the core names them: ``<group>-<index>``."""
        return [f"{t[0]}-{i}" for t in self.tasks for i in range(t[1])]  # (name, count)

    # --- a changed spec: a new view, and the JSON the store keeps for it ------------------------

    def as_stored(self) -> dict[str, Any]:
        """The JSON the store keeps for this spec (a copy: the caller may hand it to the store)."""
        return copy.deepcopy(dict(self._raw))

    def with_gpu_type(self, gpu_type: str) -> "LaunchSpec":
        """The spec moved to ``gpu_type``: each task group holding GPUs asks for that type."""
        stored = self.as_stored()
        for t in stored.get("tasks") or ():
            if t.get("gpus"):
                t["gpu_type"] = gpu_type
        return LaunchSpec(stored)

    def with_gpus(self, gpus: int) -> "LaunchSpec":
        """An elastic job's spec resized: its one task holds ``gpus`` GPUs."""
        stored = self.as_stored()
        stored["tasks"][0]["gpus"] = gpus
        return LaunchSpec(stored)

    def as_element(self, name: str, env: Mapping[str, str], files: Mapping[str, str] | None = None) -> "LaunchSpec":
        """An array element's spec: its own name, variables and (a sweep's) staged files (``jobs/arrays/feeder.py``)."""
        stored = dict(self._raw)  # (only its top level changes)
        stored.update(name=name, env=dict(env), **({} if files is None else {"files": dict(files)}))
        return LaunchSpec(stored)
