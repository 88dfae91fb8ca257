"""GPUs only through the scheduler: who may open the GPUs' device nodes at all.

Device access is per task, never a standing right (ARCHITECTURE.md): nothing a task holds may let a
user's own process open a GPU once the task ended. A supplementary group handed to tasks is such a
right: any member may ``chgrp`` a file of its own to the group and set the setgid bit, and the copy opens
the GPUs from the user's own terminal for ever. So, in two layers:

1. **Host nodes** (this module, ``lock_down``): every NVIDIA device node (the GPUs ``/dev/nvidiaN`` and
   the control nodes ``nvidiactl``, ``nvidia-uvm``, ...) is ``root:root`` mode 0600, so no user's own
   process (a Hub-spawned server, a terminal, a plain kernel, an ssh login, a setgid file of any group)
   opens a GPU. Only a launcher that cannot do without a group (Docker: the NVIDIA runtime hands a
   container the host's own nodes) gets ``root:<Isolation.gpu_group>`` 0660 instead; it then makes the
   container's host-writable mounts ``nosuid`` so no file carries the group out (``docker_spec``), and
   ``setgid_files`` reports (and disarms) setgid files of the group left in the jobs root. The service
   applies this at every start (a restart, a driver that re-created the nodes). The driver must agree:
   with its default parameters it puts the nodes back to 0666 whenever a root process uses NVML or CUDA
   (seen on a real H100), so the service does not start while ``driver_reopens_nodes`` says it would.
2. **Per task** (the local launcher, ``isolation/task_exec.py``): in the task's own mount namespace each
   node of its granted GPUs (and each control node) is covered by a *per-task node*: the same device
   numbers, owned by the task's account, mode 0600, made on a tmpfs that exists only in that namespace
   and is detached once the node is bind-mounted. Nothing the task makes opens a GPU elsewhere: a setgid
   copy carries no group that opens anything, a hard link of the node crosses mounts (``EXDEV``), and
   making a node needs ``CAP_MKNOD``. The nodes of GPUs it was not granted are covered by a node it
   cannot open (``mask_node``), plus the cgroup v1 devices rule where that controller is mounted.

Neither layer revokes a descriptor already open (a same-account process can take one out of a running
task through ``/proc/PID/root`` or a Unix socket): the third layer, ``gpu_holders``, finds and kills such
holders when the task ends and every ``Isolation.gpu_sweep_interval_s``.
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


def lock_down(globs: list[str] | tuple[str, ...], group: str | None = None) -> LockdownReport:
    """Make every node matching ``globs`` ``root:root`` 0600, or ``root:group`` 0660 when a launcher
    needs ``group`` (Docker); needs root."""
    nodes = device_nodes(globs)
    report = LockdownReport(group or "root", 0 if group is None else None)
    if not nodes:
        return report
    if group is not None:
        try:
            report.gid = ensure_group(group)
        except OSError as exc:
            report.problems.append(str(exc))
            return report
    mode = 0o600 if group is None else 0o660
    for path in nodes:
        try:
            st = os.lstat(path)
            if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (0, report.gid, mode):
                os.chown(path, 0, report.gid, follow_symlinks=False)
                os.chmod(path, mode)
                report.locked.append(path)
        except OSError as exc:
            report.problems.append(f"{path}: {exc.strerror}")
    return report


def driver_params(path: str | os.PathLike) -> dict[str, str] | None:
    """The NVIDIA driver's module parameters (``Name: value`` lines), None when no driver is loaded."""
    try:
        text = pathlib.Path(path).read_text()
    except FileNotFoundError:
        return None
    return dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines()) if _)


def driver_reopens_nodes(params_path: str | os.PathLike, gid: int, mode: int) -> str | None:
    """Why the NVIDIA driver would undo a lock to ``root:gid mode``, or None when it keeps it.

    With ``ModifyDeviceFiles`` 1 (its default) the driver's user-space side puts ``/dev/nvidiaN`` and
    ``/dev/nvidiactl`` back to its own ``DeviceFileUID``/``GID``/``Mode`` whenever they differ: NVML and CUDA
    do it in any root process (hive-lab's own GPU sampler, right after the lock) and, for every user, the
    set-uid ``nvidia-modprobe`` that CUDA runs when it cannot open a node. Seen on a real H100 (driver
    580): nodes locked to 0600 were 0666 again before the first job, and a student's own PyTorch found
    the GPU. Only the driver's own parameters make the lock hold."""
    try:
        params = driver_params(params_path)
    except OSError as exc:
        return f"cannot read the NVIDIA driver's parameters ({params_path}: {exc.strerror})"
    if params is None or params.get("ModifyDeviceFiles", "1") == "0":
        return None
    try:
        have = (int(params.get("DeviceFileUID", "0")), int(params.get("DeviceFileGID", "0")),
                int(params.get("DeviceFileMode", str(0o666))))
    except ValueError:
        return f"cannot read the NVIDIA driver's device file parameters in {params_path}"
    if have == (0, gid, mode):
        return None
    return (f"the NVIDIA driver makes its device nodes uid {have[0]} gid {have[1]} mode {have[2]:04o} again "
            f"whenever a root process uses NVML or CUDA, or anyone runs nvidia-modprobe (ModifyDeviceFiles="
            f"{params.get('ModifyDeviceFiles', '1')} in {params_path}), so locking them to root:{gid} "
            f"{mode:04o} would not hold and every user's own processes could open the GPUs outside jobs. "
            f"Give the driver the same modes once and reload it (or reboot): echo \"options nvidia "
            f"NVreg_DeviceFileUID=0 NVreg_DeviceFileGID={gid} NVreg_DeviceFileMode=0{mode:o}\" > "
            f"/etc/modprobe.d/hive-lab-gpus.conf; or run without this boundary: "
            f"c.Isolation.lock_gpu_devices = False")


def setgid_files(root: str | os.PathLike, gid: int, disarm: bool = False) -> list[str]:
    """Files below ``root`` (links not followed, other filesystems not entered) that are setgid ``gid``:
    what a task holding the group could leave behind to open the GPUs later. With ``disarm``, their
    setgid bit is cleared. Cheap for the jobs root; a scan of every home is not (docs/isolation.md)."""
    found = []
    root_dev = os.lstat(root).st_dev
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for name in dirnames:
            try:
                if os.lstat(os.path.join(dirpath, name)).st_dev == root_dev:
                    keep.append(name)
            except OSError:
                continue
        dirnames[:] = keep
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_ISGID and st.st_gid == gid:
                found.append(path)
                if disarm:
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                        try:
                            os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~(stat.S_ISGID | stat.S_ISUID))
                        finally:
                            os.close(fd)
                    except OSError:
                        pass
    return sorted(found)


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


def granted_nodes(device_glob: str, control_globs: list[str] | tuple[str, ...], gpus: tuple[int, ...]) -> list[str]:
    """The nodes a task granted ``gpus`` gets its own copy of: its GPUs' (by minor number) and the
    driver's control nodes; none for a task without GPUs."""
    if not gpus:
        return []
    own = [path for path in device_nodes([device_glob]) if os.minor(os.stat(path).st_rdev) in gpus]
    return sorted({*own, *device_nodes(list(control_globs))})


MS_NOSUID, MS_REMOUNT, MS_BIND = 2, 32, 4096


def ensure_nosuid(path: str | os.PathLike) -> bool:
    """Make ``path`` a ``nosuid`` mount (a bind mount of itself, remounted nosuid) unless it is on one
    already; True when it made the mount. Bind mounts made of it later (Docker's of a job's dir) keep the
    flag. A process whose cwd was inside ``path`` before still sees the old mount (docs/isolation.md)."""
    if os.statvfs(path).f_flag & os.ST_NOSUID:
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    target = os.fsencode(os.fspath(path))
    kept = os.statvfs(path).f_flag & (os.ST_RDONLY | os.ST_NODEV | os.ST_NOEXEC)  # same bits as MS_*
    for source, flags in ((target, MS_BIND), (None, MS_BIND | MS_REMOUNT | MS_NOSUID | kept)):
        if libc.mount(source, target, None, flags, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot make {os.fspath(path)} a nosuid mount: {os.strerror(err)}")
    return True
