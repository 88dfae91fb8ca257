"""No GPU descriptor outlives its task: the GPU descriptor sweep.

Per-task device nodes (``gpu_access``, ``task_exec``) decide who may *open* a GPU; nothing revokes a
descriptor already open. While a task runs, another process of the same account (outside any job) can
open the task's own node through ``/proc/<task pid>/root/dev/nvidiaN`` (same uid: ptrace-read access is
allowed), be handed a descriptor by the task over a Unix socket (``SCM_RIGHTS``) or take one with
``pidfd_getfd``, and keep it, and the GPU, after the task ended: Linux cannot revoke an open device file
(Slurm's ``ConstrainDevices`` has the same gap). So the server looks, and kills:

- ``holdings``: the processes holding a GPU's device node (an open descriptor whose file is a character
  device with the numbers of a node matching ``Isolation.gpu_device_glob`` / ``gpu_control_globs``, in
  any of its descriptor tables (a thread may have its own), or a memory mapping of one), read from
  ``/proc`` only. Files are examined with ``statx(AT_STATX_DONT_SYNC)``
  so a descriptor of a file on a user's FUSE (or a dead NFS) mount cannot hold a sweep up.
- ``verdict``: a holder may keep its node when it is root (every uid 0: the driver's daemons, the server,
  MPS) or a member of a running task granted that GPU (any GPU, for a control node). Anything else, a
  user's process outside any job or one in a job not granted that GPU, is killed.
- ``sweep``: finds the holders, then (after they were found, so a task started meanwhile counts) asks who
  runs which task, re-checks each suspect and kills it with SIGKILL through a pidfd (a recycled pid is
  never hit). ``GpuSweep`` runs sweeps on one worker thread, never on the event loop, and logs each kill
  with user, pid, command and device.

The local launcher runs a sweep of a GPU task's nodes when the task ends (before its exit is reported,
so its GPUs are free of strangers before the next job gets them) and the service's loop a full one every
``Isolation.gpu_sweep_interval_s``. What remains: a descriptor taken out of a running task is usable until
the next sweep; one in flight in a socket (sent, not yet received) is in no process's table and is caught
by the first sweep after it is received (so a process that keeps one parked in a socket and takes it out
only between sweeps is not caught), and a file registered in an io_uring's fixed-file table is not seen.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import logging
import os
import platform
import pwd
import signal
import stat
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from hive_lab_server.execution.isolation.gpu_access import device_nodes

log = logging.getLogger(__name__)

PROC = "/proc"


@dataclass(frozen=True)
class GpuNode:
    path: str  # the host's node
    rdev: int  # its device numbers (a task's own node has the same)
    gpu: int | None  # the GPU's index (the node's minor number); None for a control node (nvidiactl, ...)

    def describe(self, how: str) -> str:
        """``/dev/nvidia0 (GPU 0, fd 3)``: the node and how it is held."""
        return f"{self.path} ({how})" if self.gpu is None else f"{self.path} (GPU {self.gpu}, {how})"


def gpu_nodes(device_glob: str, control_globs: Iterable[str]) -> dict[int, GpuNode]:
    """rdev -> node, for the GPUs' nodes and the driver's control nodes as they are now."""
    nodes: dict[int, GpuNode] = {}
    for globs, is_gpu in ((list(control_globs), False), ([device_glob], True)):
        for path in device_nodes(globs):
            try:
                rdev = os.stat(path).st_rdev
            except OSError:
                continue
            nodes[rdev] = GpuNode(path, rdev, os.minor(rdev) if is_gpu else None)
    return nodes


# --- reading /proc -----------------------------------------------------------------------------------

_AT_FDCWD, _AT_NO_AUTOMOUNT, _AT_STATX_DONT_SYNC, _STATX_TYPE = -100, 0x800, 0x4000, 0x1
_libc = ctypes.CDLL(None, use_errno=True)
_statx = getattr(_libc, "statx", None)


def char_rdev(path: str) -> int | None:
    """The device numbers of the file ``path`` leads to when it is a character device, else None; never
    asks a file system's server (``AT_STATX_DONT_SYNC``), so a user's FUSE daemon cannot stall it."""
    if _statx is None:  # a libc without statx (before glibc 2.28)
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_rdev if stat.S_ISCHR(st.st_mode) else None
    buf = ctypes.create_string_buffer(256)
    if _statx(_AT_FDCWD, os.fsencode(path), _AT_NO_AUTOMOUNT | _AT_STATX_DONT_SYNC, _STATX_TYPE, buf) != 0:
        return None
    mode = int.from_bytes(buf.raw[28:30], "little")
    if not stat.S_ISCHR(mode):
        return None
    return os.makedev(int.from_bytes(buf.raw[128:132], "little"), int.from_bytes(buf.raw[132:136], "little"))


_SYS_KCMP = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_FILES = 2


def process_status(pid: int, proc: str = PROC) -> tuple[tuple[int, ...], str, int] | None:
    """(real, effective, saved, filesystem uid), the command name and the thread count of ``pid``; None
    when it is gone. (``/proc/PID``'s owner is no guide: a process that made itself non-dumpable shows as
    root's.)"""
    try:
        with open(f"{proc}/{pid}/status", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    uids: tuple[int, ...] = ()
    name, threads = "?", 1
    for line in text.splitlines():
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Uid:"):
            uids = tuple(int(x) for x in line[4:].split())
        elif line.startswith("Threads:"):
            threads = int(line[8:])
            break
    return (uids, name, threads) if uids else None


def _fd_tables(pid: int, threads: int, proc: str) -> list[tuple[str, str]]:
    """(dir, label) of each descriptor table of ``pid``: its own, and that of each thread that has one of
    its own (``unshare(CLONE_FILES)``: invisible in ``/proc/PID/fd``, as is everything once the first
    thread exited), told apart with ``kcmp`` (every thread's when ``kcmp`` is not there)."""
    tables = [(f"{proc}/{pid}/fd", "")]
    if threads <= 1:
        return tables
    try:
        tids = [int(t) for t in os.listdir(f"{proc}/{pid}/task") if t.isdigit() and int(t) != pid]
    except OSError:
        return tables
    for tid in tids:
        if _SYS_KCMP is None or _libc.syscall(_SYS_KCMP, pid, tid, _KCMP_FILES, 0, 0) != 0:
            tables.append((f"{proc}/{pid}/task/{tid}/fd", f" of thread {tid}"))
    return tables


@dataclass
class ScanCounts:
    """What one scan looked at (benchmarks/gpu_sweep.py prints it)."""
    processes: int = 0
    judged: int = 0  # processes not wholly root, whose descriptors and mappings were read
    fds: int = 0
    mappings: int = 0


@dataclass(frozen=True)
class Holding:
    pid: int
    uids: tuple[int, ...]
    command: str
    node: GpuNode
    via: str  # "fd 5" | "a memory mapping"
    ref: str  # the /proc path that showed it (read again before a kill)


def holdings(nodes: dict[int, GpuNode], *, proc: str = PROC, skip_root: bool = True, maps: bool = True,
             counts: ScanCounts | None = None) -> list[Holding]:
    """Every process holding one of ``nodes`` open or mapped. Processes whose uids are all 0 are not read
    (root may hold a GPU) unless ``skip_root`` is off (the benchmark's upper bound)."""
    counts = counts if counts is not None else ScanCounts()
    found: list[Holding] = []
    mapped: dict[tuple[str, str], int | None] = {}  # (fs device, inode) -> rdev: each file examined once
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        pid = int(entry)
        counts.processes += 1
        status = process_status(pid, proc)
        if status is None or (skip_root and not any(status[0])):
            continue
        counts.judged += 1
        uids, command, threads = status
        for table, label in _fd_tables(pid, threads, proc):
            try:
                fds = os.listdir(table)
            except OSError:
                continue
            for fd in fds:
                counts.fds += 1
                ref = f"{table}/{fd}"
                node = nodes.get(char_rdev(ref))
                if node is not None:
                    found.append(Holding(pid, uids, command, node, f"fd {fd}{label}", ref))
        if maps:
            found.extend(_mapped(pid, uids, command, nodes, mapped, proc, counts))
    return found


def _mapped(pid: int, uids: tuple[int, ...], command: str, nodes: dict[int, GpuNode],
            seen: dict[tuple[str, str], int | None], proc: str, counts: ScanCounts) -> list[Holding]:
    """The nodes ``pid`` has mapped (a mapping keeps the device file, and the GPU, after its descriptor is
    closed). Each mapped file (device, inode) is examined once per sweep, through ``map_files``."""
    try:
        with open(f"{proc}/{pid}/maps", "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[4] == "0":
            continue  # anonymous memory
        counts.mappings += 1
        key = (parts[3], parts[4])
        ref = f"{proc}/{pid}/map_files/{parts[0]}"
        if key not in seen:
            seen[key] = char_rdev(ref)
        node = nodes.get(seen[key])
        if node is not None and not any(h.node == node for h in out):
            out.append(Holding(pid, uids, command, node, "a memory mapping", ref))
    return out


# --- deciding -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskGrant:
    """A running task: which GPUs it was granted and its processes (as the host numbers them)."""
    job_id: str
    task: str
    gpus: frozenset[int] | None  # None: not recorded (a task started by an older server): any GPU
    pids: frozenset[int] = field(default_factory=frozenset)


def verdict(holding: Holding, grants: Iterable[TaskGrant]) -> str | None:
    """None when ``holding`` may stay; else why not, as the log says it."""
    if not any(holding.uids):
        return None  # root: the driver's daemons, the server itself, MPS
    gpu = holding.node.gpu
    tasks = [g for g in grants if holding.pid in g.pids]
    for g in tasks:
        if g.gpus is None or (gpu is None and g.gpus) or gpu in g.gpus:
            return None
    if not tasks:
        return "outside any job"
    what = "any GPU" if gpu is None else f"GPU {gpu}"
    return f"in job {tasks[0].job_id} (task {tasks[0].task}), which was not granted {what}"


@dataclass(frozen=True)
class Kill:
    pid: int
    user: str
    command: str
    held: tuple[str, ...]  # each node and how: "/dev/nvidia0 (GPU 0, fd 3)"
    why: str

    def sentence(self) -> str:
        return (f"hive-lab: killed pid {self.pid} ({self.command}) of user {self.user}: it held "
                f"{' and '.join(self.held)} {self.why}; a GPU is used only by the job it was granted to")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def sweep(nodes: dict[int, GpuNode], grants: Callable[[], list[TaskGrant]], *, proc: str = PROC,
          maps: bool = True) -> list[Kill]:
    """Kill every process holding one of ``nodes`` that may not (``verdict``). ``grants`` is called only
    after the holders were found: a task started meanwhile is in it, so its processes are spared."""
    if not nodes:
        return []
    suspects = holdings(nodes, proc=proc, maps=maps)
    if not suspects:
        return []
    pidfds: dict[int, int] = {}
    for h in suspects:
        if h.pid not in pidfds:
            try:
                pidfds[h.pid] = os.pidfd_open(h.pid)
            except OSError:  # gone
                continue
    kills: list[Kill] = []
    try:
        running = grants()
        for pid, fd in pidfds.items():
            # what decides is read again now that the pidfd pins the process: a signal through it
            # reaches this process or none (never one that got the pid later)
            status = process_status(pid, proc)
            if status is None:
                continue
            held = [replace(h, uids=status[0], command=status[1]) for h in suspects
                    if h.pid == pid and char_rdev(h.ref) == h.node.rdev]
            bad = [(h, why) for h in held if (why := verdict(h, running)) is not None]
            if not bad:
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                continue
            h, why = bad[0]
            kills.append(Kill(pid, _user(h.uids[0]), h.command, tuple(b.node.describe(b.via) for b, _ in bad), why))
    finally:
        for fd in pidfds.values():
            os.close(fd)
    return kills


class GpuSweep:
    """Runs sweeps on one worker thread (it only reads /proc and sends signals): never on the event loop,
    never two at once; each kill goes to ``logger`` as a warning naming user, pid, command and device."""

    def __init__(self, nodes: Callable[[], dict[int, GpuNode]], grants: Callable[[], list[TaskGrant]],
                 logger: logging.Logger | None = None):
        self._nodes = nodes
        self._grants = grants
        self.log = logger or log
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hive-gpu-sweep")

    async def run(self, gpus: Iterable[int] | None = None) -> list[Kill]:
        """A sweep of every GPU node, or of ``gpus``' nodes and the control nodes."""
        only = None if gpus is None else frozenset(gpus)
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._run, only)

    def _run(self, only: frozenset[int] | None) -> list[Kill]:
        nodes = self._nodes()
        if only is not None:
            nodes = {rdev: n for rdev, n in nodes.items() if n.gpu is None or n.gpu in only}
        kills = sweep(nodes, self._grants)
        for k in kills:
            self.log.warning("%s", k.sentence())
        return kills

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
