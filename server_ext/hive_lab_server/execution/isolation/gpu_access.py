"""GPUs only through the scheduler: who may open the GPUs' device nodes at all.

The mechanism is the one GPU clusters use (Slurm's ``ConstrainDevices`` with locked-down nodes, the
NVIDIA driver's ``NVreg_DeviceFileGID``/``NVreg_DeviceFileMode`` options), in two layers:

1. **Ownership** (this module): every NVIDIA device node (the GPUs ``/dev/nvidiaN`` and the control
   nodes ``nvidiactl``, ``nvidia-uvm``, ...) is ``root:<Isolation.gpu_group>`` with mode 0660. Nobody is
   a member of that group, so no user's own process (a Hub-spawned server, a terminal, a plain kernel,
   an ssh login) can open a GPU. The service applies this at every start (so it survives a restart
   and a driver that re-created the nodes); ``docs/isolation.md`` shows the driver options that make the
   driver create them that way from boot.
2. **Per job** (the launchers): a task that was granted GPUs runs with the group added to its
   supplementary groups, and the nodes of the GPUs it was *not* granted are covered in its own mount
   namespace by a node it cannot open (``mask_node``), plus the cgroup v1 devices rule where that
   controller is mounted. A task without GPUs never gets the group.
"""

from __future__ import annotations

import glob
import grp
import logging
import os
import pathlib
import stat
import subprocess
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

ROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
GROUPADD = "/usr/sbin/groupadd"


@dataclass
class LockdownReport:
    group: str
    gid: int | None
    locked: list[str] = field(default_factory=list)  # nodes whose owner or mode were changed
    problems: list[str] = field(default_factory=list)


def gpu_group_gid(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def ensure_group(name: str) -> int:
    """The gid of the system group ``name``, created (``groupadd --system``) when missing."""
    gid = gpu_group_gid(name)
    if gid is not None:
        return gid
    r = subprocess.run([GROUPADD, "--system", name], env=ROOT_ENV, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, cwd="/")
    gid = gpu_group_gid(name)
    if gid is None:
        raise OSError(f"cannot create the group {name!r} for the GPUs' device nodes: {r.stderr.strip() or r.returncode}")
    return gid


def device_nodes(globs: list[str] | tuple[str, ...]) -> list[str]:
    """The character device nodes matching ``globs`` (links are not followed: a link is not a node)."""
    out: set[str] = set()
    for pattern in globs:
        for path in glob.glob(pattern):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISCHR(st.st_mode):
                out.add(path)
    return sorted(out)


def lock_down(globs: list[str] | tuple[str, ...], group: str) -> LockdownReport:
    """Make every node matching ``globs`` ``root:group`` mode 0660 (needs root)."""
    nodes = device_nodes(globs)
    report = LockdownReport(group, None)
    if not nodes:
        return report
    try:
        report.gid = ensure_group(group)
    except OSError as exc:
        report.problems.append(str(exc))
        return report
    for path in nodes:
        try:
            st = os.lstat(path)
            if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (0, report.gid, 0o660):
                os.chown(path, 0, report.gid, follow_symlinks=False)
                os.chmod(path, 0o660)
                report.locked.append(path)
        except OSError as exc:
            report.problems.append(f"{path}: {exc.strerror}")
    return report


def mask_node(state_dir: pathlib.Path) -> str:
    """A node no task can open (root:root, mode 000, the null device's numbers), to cover the GPUs a
    task was not granted. Kept in the launcher's root-only state dir."""
    path = state_dir / ".gpu-mask"
    try:
        st = os.lstat(path)
        if stat.S_ISCHR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0:
            return str(path)
        path.unlink()
    except FileNotFoundError:
        pass
    os.mknod(path, stat.S_IFCHR | 0, os.makedev(1, 3))
    os.chmod(path, 0)
    return str(path)
