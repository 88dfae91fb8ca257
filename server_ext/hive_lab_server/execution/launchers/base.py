"""The one interface every launcher (local, docker, slurm) implements.

The service decides *what* runs *where* (through the core); a launcher only executes: it starts the
tasks of a placed job, stops them, reports how they ended, and finds them again after a restart.
Logs always land in files (``TaskLaunch.log_path``) so the service serves them the same way for every
launcher.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from traitlets.config import LoggingConfigurable
from traitlets.traitlets import MetaHasTraits


#: the signal a task gets before it is paused, preempted, migrated or resized (see docs/checkpoint.md)
CHECKPOINT_SIGNAL = "SIGUSR1"


class LaunchError(RuntimeError):
    """The job cannot be started (missing image, bad mount, ...). The message is shown to the user."""


class UnsupportedSpec(ValueError):
    """A job this launcher can never run, found at submit (``Launcher.validate``): a 400 naming ``field``."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = f"{field}: {message}"


@dataclass(frozen=True)
class TaskLaunch:
    job_id: str
    task: str  # "<group>-<index>", unique within the job
    group: str
    index: int  # index within the group
    rank: int  # index within the job (RANK)
    node: str
    gpu_indices: tuple[int, ...]  # leaf indices within the node, as placed by the core
    gpu_uuids: tuple[str, ...] | None  # NVML UUIDs when the inventory knows them, else None
    command: str  # run with /bin/sh -c
    env: dict[str, str]  # complete task environment: HIVE_*, CUDA_VISIBLE_DEVICES, MASTER_ADDR, ...
    working_dir: str  # host path, created by the service
    log_path: str  # host path; stdout and stderr of the task go here
    cpus: float = 0.0  # 0 = no limit asked
    memory_mb: int = 0  # 0 = no limit asked
    image: str | None = None
    data_dir: str | None = None
    output_dir: str | None = None
    user: str = ""


@dataclass(frozen=True)
class LaunchRequest:
    job_id: str
    user: str
    kind: str  # "batch" | "kernel"
    tasks: tuple[TaskLaunch, ...]
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskExit:
    job_id: str
    task: str
    exit_code: int | None  # None when unknown (lost)
    reason: str = ""  # "", "OOMKilled", "lost", "stopped", a launcher error ...
    # what the task used, where the launcher measures it (accounting); None = not known
    cpu_seconds: float | None = None
    peak_memory_mb: float | None = None


class _LauncherMeta(MetaHasTraits, abc.ABCMeta):
    """Launchers are traitlets Configurables with abstract methods."""


class Launcher(LoggingConfigurable, metaclass=_LauncherMeta):
    """Executes placed jobs. All methods are called from the service's event loop.

    A launcher is a traitlets ``LoggingConfigurable``: its options are ``config=True`` traits, set in
    ``jupyter_server_config.py`` as ``c.<ClassName>.<option>`` (``python -m hive_lab_server --help-all``
    lists them); the app creates it with ``parent=`` the HiveLabApp. An option its class does not have
    is an error (a typo would otherwise be silently ignored).
    """

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._refuse_unknown_options()

    def _refuse_unknown_options(self) -> None:
        section = type(self).__name__
        if section not in self.config:
            return
        known = sorted(self.class_trait_names(config=True))
        unknown = sorted(set(self.config[section]) - set(known))
        if unknown:
            raise ValueError(f"c.{section}: unknown option(s) {', '.join(unknown)}; known: {', '.join(known) or 'none'}")

    name: str = "abstract"
    #: whether jobs may name a container ``image`` (the launcher runs them in it)
    supports_images: bool = False
    #: whether its tasks reach GPUs through the group owning the device nodes (Isolation.gpu_group): the
    #: nodes are then root:<group> 0660 and the jobs root nosuid; else root:root 0600 (isolation/gpu_access.py)
    needs_gpu_group: bool = False

    #: how often (seconds) the service's loop calls ``sweep_gpus``; 0: never (nothing to sweep)
    gpu_sweep_interval_s: float = 0.0

    def validate(self, spec: Any) -> None:
        """Raise ``UnsupportedSpec`` at submit for a job spec (``spec.JobSpec``) this launcher can never
        run, so it is refused with a 400 instead of failing (or being silently changed) at launch."""
        if spec.image is not None and not self.supports_images:
            raise UnsupportedSpec("image", f"the {self.name} launcher runs tasks as processes, not in container "
                                  f"images: submit with --no-image (hive-lab submit FILE --no-image; the panel's "
                                  f"drop offers it) to run the commands as processes here, image ({spec.image!r}) "
                                  f"listed as not applied; or remove image, or ask an admin for the docker launcher")

    @abc.abstractmethod
    async def start(self, request: LaunchRequest) -> None:
        """Start every task of the job. Raise LaunchError if it cannot start (nothing left running)."""

    @abc.abstractmethod
    async def stop(self, job_id: str, grace_s: float) -> None:
        """Ask the job's tasks to stop (SIGTERM or equivalent), kill them after ``grace_s``.

        Returns once they are gone. Their exits are still reported by ``poll``.
        """

    async def checkpoint(self, job_id: str, grace_s: float) -> None:
        """The checkpoint protocol's first step (docs/checkpoint.md): send the job's tasks the checkpoint
        signal (``CHECKPOINT_SIGNAL``, SIGUSR1) and return once they have all exited or ``grace_s``
        passed; ``stop`` follows either way. A launcher that cannot signal its tasks does nothing (its
        jobs are simply restarted)."""

    @abc.abstractmethod
    async def poll(self) -> list[TaskExit]:
        """Tasks that ended since the last call (each reported once by this process; a launcher that
        keeps exit records reports them again after a restart until they are acknowledged)."""

    def ack(self, exits: list[TaskExit]) -> None:
        """The service stored these exits: their records may go. Until then a restarted server must
        still be told about them (a store fault must not turn a finished task into a lost one)."""

    @abc.abstractmethod
    async def running(self) -> dict[str, set[str]]:
        """job id -> task names of everything this launcher runs now, found by its labels.

        Used after a restart to adopt what still runs and to mark the rest lost.
        """

    async def sweep_gpus(self) -> None:
        """Kill the processes that hold a GPU's device node without the right to (no GPU descriptor
        outlives its task: isolation/gpu_holders.py); called by the service's loop every
        ``gpu_sweep_interval_s``. A launcher whose tasks reach GPUs some other way does nothing."""

    def task_owner(self, user: str) -> tuple[int, int] | None:
        """(uid, gid) the tasks of ``user``'s jobs run as when that is not the server's own Unix user,
        else None. The service creates the job's dirs and staged files owned by it (they are 0700/0600)."""
        return None

    def run_as_refusal(self, user: str) -> str:
        """Why ``user``'s jobs cannot run here (no Unix account, root not allowed: ``task_owner`` refuses
        them), or "" when they can. Asked before a job is queued, so it is refused with a 403 then."""
        try:
            self.task_owner(user)
        except LaunchError as exc:
            return str(exc)
        return ""

    def task_pids(self) -> dict[int, str]:
        """pid -> job id of the task processes it started and tracks (the hardware monitor maps a GPU's
        processes to jobs by them); empty when it runs no task as a process of this machine."""
        return {}

    def task_containers(self) -> dict[str, str]:
        """container id -> job id of the task containers it tracks; empty when it runs none."""
        return {}

    def host_address(self, node: str) -> str:
        """Where tasks on ``node`` are reached (``MASTER_ADDR``, a kernel's ports)."""
        return "127.0.0.1"

    async def adopt(self, request: LaunchRequest) -> None:
        """Take back tracking of an already running job found by ``running`` (after a restart)."""

    async def close(self) -> None:
        """Release connections; running tasks keep running."""
