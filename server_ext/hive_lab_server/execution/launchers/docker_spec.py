"""Turn one placed task (``TaskLaunch``) into the arguments of ``docker.containers.create``.

Pure: no engine is contacted, so the security rules (what a container may see) are easy to read and
to test. A container gets exactly what its task asked for and the admin allowed:

- the job's working dir, bind-mounted at the same path (also its cwd); ``data_dir`` (read-only) and
  ``output_dir`` only when they lie under the job's working dir or under ``allowed_mount_roots``;
- CPU (``nano_cpus``) and memory (``mem_limit`` = ``memswap_limit``: no swap on top) limits from the task;
- GPUs: by NVML UUID through a device request when the node has real NVIDIA GPUs
  (``TaskLaunch.gpu_uuids``); with no GPU granted ``NVIDIA_VISIBLE_DEVICES=void``, so a CUDA base
  image cannot grab every GPU under the NVIDIA runtime; on a simulated inventory only the variables;
- a container granted GPUs holds the group of the GPUs' nodes (the NVIDIA runtime hands it the host's own
  nodes): each of its host-writable mounts must then be on a ``nosuid`` mount (the server makes its jobs
  root one at start), so no setgid file of that group outlives the job (``isolation/gpu_access.py``);
- never privileged, every capability dropped, ``no-new-privileges``, a pid limit, and it runs as the
  server's own uid:gid unless configured otherwise (files it writes stay the server's to serve/clean).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hive_lab_server.execution.launchers.base import LaunchError, TaskLaunch

LABEL_JOB = "hive-lab.job"
LABEL_TASK = "hive-lab.task"
LABEL_OWNER = "hive-lab.owner"
LABEL_KIND = "hive-lab.kind"
LABEL_INSTANCE = "hive-lab.instance"
LABEL_LOG = "hive-lab.log-path"

# Host-only variables that would break or leak into an image: the image brings its own.
HOST_ONLY_ENV = frozenset(
    {"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "VIRTUAL_ENV", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD"}
)


@dataclass(frozen=True)
class ContainerPolicy:
    """What the admin allows containers (set once per launcher)."""

    allowed_mount_roots: tuple[str, ...] = ()
    network_mode: str = "host"  # "host" (multi-task jobs reach MASTER_ADDR), "none" (isolated), a network name
    user: str | None = None  # "uid:gid"; None = the server's own
    pids_limit: int = 4096
    init: bool = True  # docker-init as PID 1: signals forwarded, zombies reaped
    default_image: str | None = None
    # the group owning the GPUs' device nodes (Isolation.gpu_group, isolation/gpu_access.py): a container
    # granted GPUs runs with it as a supplementary group (its writable mounts nosuid), one without does not
    gpu_gid: int | None = None


def container_name(job_id: str, task: str) -> str:
    raw = f"hive-lab-{job_id}-{task}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", raw)


def _under(path: str, root: str) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_mount(kind: str, path: str, working_dir: str, policy: ContainerPolicy) -> str:
    """The real path to bind-mount, or LaunchError naming the path and the allowed roots."""
    if not os.path.isabs(path):
        raise LaunchError(f"{kind} {path!r} must be an absolute path")
    real = os.path.realpath(path)
    if _under(real, working_dir) or any(_under(real, r) for r in policy.allowed_mount_roots):
        if not os.path.exists(real):
            if kind == "output_dir":
                os.makedirs(real, exist_ok=True)
            else:
                raise LaunchError(f"{kind} {path!r} does not exist on this node")
        return real
    roots = ", ".join(policy.allowed_mount_roots) or "none configured (DockerLauncher.allowed_mount_roots)"
    raise LaunchError(
        f"{kind} {path!r} is not under an allowed mount root; allowed: the job's working dir, {roots}"
    )


def check_nosuid(kind: str, real: str) -> None:
    """A writable mount of a container holding the GPU group must not honour set-id bits on the host:
    else a setgid copy of that group left there opens the GPUs from the user's own shell after the job."""
    if not os.statvfs(real).f_flag & os.ST_NOSUID:
        raise LaunchError(
            f"{kind} {real!r} is not on a nosuid mount, so a container granted GPUs could leave a file there "
            f"that opens the GPUs after the job; mount it nosuid (the server does so for its jobs root at start) "
            f"or run the job without GPUs"
        )


def container_env(task: TaskLaunch) -> dict[str, str]:
    env = {k: v for k, v in task.env.items() if k not in HOST_ONLY_ENV}
    env["HOME"] = task.working_dir
    if task.gpu_uuids:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(task.gpu_uuids)
    elif not task.gpu_indices:
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return env


def container_kwargs(task: TaskLaunch, labels: dict[str, str], policy: ContainerPolicy) -> dict:
    """Keyword arguments for ``DockerClient.containers.create``."""
    from docker.types import DeviceRequest, Mount

    image = task.image or policy.default_image
    if not image:
        raise LaunchError("the job names no image and DockerLauncher.default_image is not set")
    mounts = [Mount(target=task.working_dir, source=os.path.realpath(task.working_dir), type="bind")]
    if task.data_dir:
        real = check_mount("data_dir", task.data_dir, task.working_dir, policy)
        if not _under(real, task.working_dir):
            mounts.append(Mount(target=task.data_dir, source=real, type="bind", read_only=True))
    holds_gpu_group = policy.gpu_gid is not None and bool(task.gpu_uuids or task.gpu_indices)
    if holds_gpu_group:
        check_nosuid("the job's working dir", os.path.realpath(task.working_dir))
    if task.output_dir:
        real = check_mount("output_dir", task.output_dir, task.working_dir, policy)
        if not _under(real, task.working_dir):
            if holds_gpu_group:
                check_nosuid("output_dir", real)
            mounts.append(Mount(target=task.output_dir, source=real, type="bind"))
    kwargs: dict = dict(
        image=image,
        command=["/bin/sh", "-c", task.command],
        entrypoint=[],
        name=container_name(task.job_id, task.task),
        environment=container_env(task),
        working_dir=task.working_dir,
        mounts=mounts,
        labels=labels,
        network_mode=policy.network_mode,
        user=policy.user or f"{os.getuid()}:{os.getgid()}",
        privileged=False,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=policy.pids_limit,
        init=policy.init,
        detach=True,
    )
    if task.cpus and task.cpus > 0:
        kwargs["nano_cpus"] = int(task.cpus * 1e9)
    if task.memory_mb and task.memory_mb > 0:
        kwargs["mem_limit"] = f"{int(task.memory_mb)}m"
        kwargs["memswap_limit"] = f"{int(task.memory_mb)}m"
    if holds_gpu_group:
        kwargs["group_add"] = [str(policy.gpu_gid)]
    if task.gpu_uuids:
        kwargs["device_requests"] = [
            DeviceRequest(driver="nvidia", device_ids=list(task.gpu_uuids), capabilities=[["gpu"]])
        ]
    return kwargs
