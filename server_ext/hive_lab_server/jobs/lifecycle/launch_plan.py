"""What a placed job needs before and for its launch: its dirs and staged files, each task's environment,
the ``LaunchRequest`` for the launcher (also the one used to adopt or stop tasks found after a restart).

The job's stored spec is read through its typed view, ``job.spec`` (a ``LaunchSpec``, ``wire/launch_spec.py``,
made at admission or recovery), never by string keys here."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shlex
import socket
from typing import TYPE_CHECKING, Any

from hive_scheduler import JobRequest, TaskGroup, TaskPlacement

from hive_lab_server.execution.runtime_env import platform_env
from hive_lab_server.execution.secrets import unseal
from hive_lab_server.execution.launchers.base import LaunchError, Launcher, LaunchRequest, TaskLaunch
from hive_lab_server.execution.isolation.safe_files import UnsafePath
from hive_lab_server.execution.staging import dir_beneath, private_dir, write_beneath
from hive_lab_server.wire.launch_spec import LaunchSpec

if TYPE_CHECKING:
    from hive_lab_server.jobs.lifecycle.active import ActiveJob


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_path(jobs_root: pathlib.Path, job_id: str, task: str) -> pathlib.Path:
    return jobs_root / job_id / "logs" / f"{task}.log"


def progress_path(jobs_root: pathlib.Path, job_id: str, task: str) -> pathlib.Path:
    """A task's progress channel (``HIVE_PROGRESS_FILE``): ``hive_lab.progress`` lines go there, not into
    the task's output, so the log stays the user's; the server reads it as it reads the log."""
    return jobs_root / job_id / "logs" / f"{task}.progress"


def node_address(launcher: Launcher, node: str) -> str:
    """Where a task on ``node`` is reached (a kernel's ZMQ ports): the launcher's ``host_address``."""
    return launcher.host_address(node)


def checkpoint_dir(job: "ActiveJob") -> pathlib.Path:
    """``HIVE_CHECKPOINT_DIR``: the job's own dir for its checkpoints, the same for every attempt."""
    return pathlib.Path(job.working_dir) / "checkpoint"


def resumed(job: "ActiveJob") -> bool:
    """``HIVE_RESUMED=1``: an earlier attempt ran and left something in the checkpoint dir."""
    if job.lc.attempt <= 1:
        return False
    try:
        return any(checkpoint_dir(job).iterdir())
    except OSError:
        return False


def world_size(job: "ActiveJob") -> int:
    """``HIVE_WORLD_SIZE``: the GPUs of this attempt (an elastic job's size changes between attempts)."""
    return sum(len(p.gpus) for p in job.placement)


def task_dir(spec: LaunchSpec) -> str | None:
    """The spec's ``working_dir``: where the tasks start, relative to the job's own dir (None: that dir)."""
    rel = spec.working_dir
    parts = [p for p in (rel or "").replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts) or None


def in_task_dir(spec: LaunchSpec, command: str) -> str:
    """The task's command, started in ``task_dir`` (entered by the task itself, as its owner)."""
    rel = task_dir(spec)
    if rel is None:
        return command
    return f'cd -- {shlex.quote(rel)} || {{ echo "hive-lab: cannot enter working_dir {rel}" >&2; exit 126; }}\n' + command


def make_job_dir(job: "ActiveJob", launcher: Launcher) -> None:
    """The job's own dir (0700), its owner's."""
    root = pathlib.Path(job.working_dir)
    private_dir(root, launcher.task_owner(job.user), stop_at=root.parent)


def stage(job: "ActiveJob", launcher: Launcher) -> None:
    """The job's dirs (0700) and spec ``files`` (0600), owned by the Unix user its tasks run as. The dirs
    the spec names (``working_dir``, ``output_dir``, relative) are made without following a link the
    job planted in its dir on an earlier attempt."""
    spec = job.spec
    owner = launcher.task_owner(job.user)
    root = pathlib.Path(job.working_dir)
    private_dir(root, owner, stop_at=root.parent)  # also hands over a dir the kernel provisioner made
    private_dir(root / "logs", owner, stop_at=root)
    private_dir(checkpoint_dir(job), owner, stop_at=root)  # kept across attempts (docs/checkpoint.md)
    named = [("output_dir", os.path.relpath(job.output_dir, root)), ("working_dir", task_dir(spec))]
    for field, rel in named:
        if rel is None or rel == ".":
            continue
        try:
            dir_beneath(root, rel, owner)
        except UnsafePath as exc:
            raise LaunchError(f"{field}: {rel!r}: {exc}") from None
    for rel, text in spec.files.items():
        try:
            write_beneath(root, rel, text, owner)  # no link the job planted is followed
        except UnsafePath as exc:
            raise LaunchError(f"files: {rel!r}: {exc}") from None


def task_env(job: "ActiveJob", spec: LaunchSpec, p: TaskPlacement, gpu_uuids: dict, node_addr: str,
             master_addr: str, master_port: int, gpu_type: str | None = None) -> dict[str, str]:
    inherited = spec.inherited_env if not spec.image else {}
    env = {str(k): str(v) for k, v in {**inherited, **spec.env}.items()}
    uuids = [gpu_uuids.get((p.node, g)) for g in p.gpus]
    devices = ",".join(uuids) if uuids and all(uuids) else ",".join(str(g) for g in p.gpus)
    env.update({
        "CUDA_VISIBLE_DEVICES": devices,
        "NVIDIA_VISIBLE_DEVICES": devices if p.gpus else "void",
        "HIVE_JOB_ID": job.id,
        "HIVE_JOB_NAME": spec.name or "",
        "HIVE_USER": job.user,
        "HIVE_VC": job.vc,
        "HIVE_TASK_NAME": p.task,
        "HIVE_TASK_GROUP": p.group,
        "HIVE_TASK_INDEX": str(p.index),
        "HIVE_ATTEMPT": str(job.lc.attempt),
        "HIVE_OUTPUT_DIR": job.output_dir,
        "HIVE_WORKING_DIR": job.working_dir,
        "HIVE_NODE_ADDRESS": node_addr,
        "HIVE_CHECKPOINT_DIR": str(checkpoint_dir(job)),
        "HIVE_PROGRESS_FILE": str(pathlib.Path(job.working_dir) / "logs" / f"{p.task}.progress"),
        "HIVE_RESUMED": "1" if resumed(job) else "0",
        "HIVE_WORLD_SIZE": str(world_size(job)),
    })
    if spec.job_type:
        env["HIVE_JOB_TYPE"] = spec.job_type
    if gpu_type:
        env["HIVE_GPU_TYPE"] = gpu_type
    if spec.data_dir:
        env["HIVE_DATA_DIR"] = spec.data_dir
    if len(job.placement) > 1:
        env.update({"MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
                    "WORLD_SIZE": str(len(job.placement)), "RANK": str(p.rank)})
    return env


def share_env(grant) -> dict[str, str]:
    """A share's task env: the one device it sees (a MIG device under MIG), MPS limits, its budget."""
    env = {"CUDA_VISIBLE_DEVICES": grant.device, "NVIDIA_VISIBLE_DEVICES": grant.device,
           "HIVE_GPU_SHARE_MODE": grant.mode, "HIVE_GPU_MEMORY_MB": str(grant.memory_budget_mb)}
    env.update(grant.env)
    return env


def launch_request(job: "ActiveJob", launcher: Launcher, jobs_root: pathlib.Path, gpu_uuids: dict,
                   master_port: int | None = None, grant_for=None, gpu_type: str | None = None) -> LaunchRequest:
    """``grant_for(job, placement)``: a share's ``hardware.sharing.ShareGrant`` (None for whole GPUs);
    ``gpu_type``: the type of GPUs it was placed on (``HIVE_GPU_TYPE``)."""
    spec = job.spec
    placement = sorted(job.placement, key=lambda p: p.rank)
    master_addr = launcher.host_address(placement[0].node) if placement else ""
    if master_port is None:
        master_port = free_port() if len(placement) > 1 else 0
    tasks = []
    # a job sent in another platform's format gets that platform's variables, and its secrets in clear
    platform = platform_env(spec, placement, launcher.host_address, free_port)
    secrets = unseal(dict(spec.env), jobs_root)
    for p in placement:
        group = spec.group(p.group)
        uuids = tuple(gpu_uuids.get((p.node, g)) or "" for g in p.gpus)
        env = task_env(job, spec, p, gpu_uuids, launcher.host_address(p.node), master_addr, master_port, gpu_type)
        env.update(platform.get(p.task, {}))
        env.update(secrets)
        grant = grant_for(job, p) if grant_for is not None else None
        if grant is not None:
            env.update(share_env(grant))
            if grant.mig_uuid:  # Docker: the MIG device, not the whole GPU
                uuids = (grant.mig_uuid,)
        tasks.append(TaskLaunch(
            job_id=job.id, task=p.task, group=p.group, index=p.index, rank=p.rank, node=p.node,
            gpu_indices=tuple(p.gpus), gpu_uuids=uuids if uuids and all(uuids) else None,
            command=in_task_dir(spec, (group.command if group else None) or spec.command or ""),
            env=env,
            working_dir=job.working_dir, log_path=str(log_path(jobs_root, job.id, p.task)),
            cpus=float((group.cpus if group else None) or 0), memory_mb=int((group.memory_mb if group else None) or 0),
            image=spec.image, data_dir=spec.data_dir, output_dir=job.output_dir, user=job.user,
        ))
    return LaunchRequest(job_id=job.id, user=job.user, kind=spec.kind, tasks=tuple(tasks),
                         labels={"hive-lab.job": job.id, "hive-lab.user": job.user, "hive-lab.vc": job.vc,
                                 "hive-lab.attempt": str(job.lc.attempt)})


def tracking_request(job_id: str, user: str, tasks: list[str], jobs_root: pathlib.Path) -> LaunchRequest:
    """Enough for a launcher to take back tracking of (and stop) tasks found after a restart."""
    launches = tuple(
        TaskLaunch(job_id=job_id, task=t, group=t.rsplit("-", 1)[0], index=0, rank=0, node="", gpu_indices=(),
                   gpu_uuids=None, command="", env={}, working_dir=str(jobs_root / job_id),
                   log_path=str(log_path(jobs_root, job_id, t)))
        for t in sorted(tasks)
    )
    return LaunchRequest(job_id=job_id, user=user, kind="batch", tasks=launches, labels={"hive-lab.job": job_id})


def placement_row(p: TaskPlacement, opportunistic: bool, gpu_uuids: dict, mig_device: str | None = None) -> dict[str, Any]:
    """A ``placements`` row; a share of one GPU keeps its share, its slot (first eighth) and its MIG device."""
    uuids = [gpu_uuids.get((p.node, g)) for g in p.gpus]
    shared = bool(p.share)
    return {
        "task": p.task, "group": p.group, "index": p.index, "rank": p.rank, "node": p.node,
        "gpus": list(p.gpus), "gpu_uuids": uuids if uuids and all(uuids) else None,
        "cpus": float(p.cpus), "memory_mb": int(p.memory_mb), "opportunistic": opportunistic,
        "share": float(p.share) if shared else None, "share_slot": int(p.share_slot) if shared else None,
        "mig_device": mig_device if shared else None,
    }


def placement_from_rows(rows: list[dict[str, Any]]) -> list[TaskPlacement]:
    return [TaskPlacement(task=p["task"], group=p["group"], index=p["index"], rank=p["rank"], node=p["node"],
                          gpus=tuple(p["gpus"]), cpus=p["cpus"], memory_mb=p["memory_mb"],
                          share=p.get("share") or 0.0,
                          share_slot=p["share_slot"] if p.get("share") and p.get("share_slot") is not None else -1)
            for p in rows]


def share_device_from_rows(rows: list[dict[str, Any]]) -> str | None:
    """The MIG device a share job's stored placement names (None: none, or not a share)."""
    return next((p.get("mig_device") for p in rows if p.get("mig_device")), None)


def usage_row(job: Any, attempt: int, now: float, config: Any) -> dict[str, Any]:
    """The ``job_usage`` row opened when an attempt is placed: its GPUs, by type (a node with one GPU
    type gives it; else the task group's requested type, else "unknown"). Whole GPUs: share 1.0; a share of
    one GPU (``gpus: 0.25``) holds its one GPU at that rate, so it is accounted 0.25 GPU-seconds a second."""
    types: dict[str, int] = {}
    asked = {t.name: t.gpu_type for t in job.request.tasks}
    nodes = getattr(config, "nodes", {}) or {}
    for p in job.placement:
        if not p.gpus:
            continue
        node_types = tuple(getattr(nodes.get(p.node), "gpu_types", ()) or ())
        gpu_type = node_types[0] if len(node_types) == 1 else (asked.get(p.group) or "unknown")
        types[gpu_type] = types.get(gpu_type, 0) + len(p.gpus)
    tasks = job.spec.tasks
    share = tasks[0].gpus if len(tasks) == 1 else None  # a share of one GPU: 0.5, 0.25, 0.125
    share = float(share) if isinstance(share, float) and 0 < share < 1 else 1.0
    return {"job_id": job.id, "attempt": attempt, "user": job.user, "user_group": job.request.group,
            "vc": job.vc, "gpus": sum(types.values()), "share": share, "gpu_types": dict(sorted(types.items())),
            "started_at": now, "ended_at": None, "cpu_seconds": None, "peak_memory_mb": None}


def add_measured(measured: dict[str, float], exit: Any) -> None:
    """Add what a launcher measured of an ended task (``TaskExit.cpu_seconds``/``peak_memory_mb``, when
    it knows them) to its attempt's totals: CPU-seconds add up, peak memory is the largest task's."""
    cpu = getattr(exit, "cpu_seconds", None)
    if cpu is not None:
        measured["cpu_seconds"] = measured.get("cpu_seconds", 0.0) + float(cpu)
    peak = getattr(exit, "peak_memory_mb", None)
    if peak is not None:
        measured["peak_memory_mb"] = max(measured.get("peak_memory_mb", 0.0), float(peak))


def placed_request(job: "ActiveJob") -> JobRequest:
    """The request the job's current placement was made for. A job being migrated or resized already
    carries its next request; the core adopts (after a restart) what it holds now: the placement's
    groups and sizes, any GPU type."""
    from hive_lab_server.wire.states import Intent

    if job.lc.intent not in (Intent.MIGRATE, Intent.RESIZE) or not job.placement:
        return job.request
    groups: dict[str, list[TaskPlacement]] = {}
    for p in sorted(job.placement, key=lambda p: p.rank):
        groups.setdefault(p.group, []).append(p)
    old = {g.name: g for g in job.request.tasks}
    tasks = tuple(dataclasses.replace(old[name], count=len(ps), gpus=len(ps[0].gpus), gpu_type=None)
                  if name in old else TaskGroup(name=name, count=len(ps), gpus=len(ps[0].gpus))
                  for name, ps in groups.items())
    return dataclasses.replace(job.request, tasks=tasks)
