"""One cgroup per local task, as Slurm's task/cgroup does: limits from the task's request, its
devices narrowed to its GPUs, and a kill that reaches every descendant (``setsid`` daemons included).

cgroup v2 is used when its root offers the cpu, memory and pids controllers; else the v1 hierarchies
(cpu, memory, pids, devices, freezer - those that are mounted). The well-known Python libraries
(cgroupspy, cgroupy) speak v1 only and are unmaintained, so this is one small module over the
cgroup file system. Devices are constrained on v1 only (v2 needs a BPF program).

Layout: ``<hierarchy>/<Isolation.cgroup_name>/<scope>/<job>/<task>`` (``scope``: one per launcher
state dir, so two servers on one machine never share a job's cgroup); a process joins by writing its pid to
``cgroup.procs`` of each (``TaskCgroup.procs_files``), which the launcher's wrapper does as its first act.
"""

from __future__ import annotations

import glob
import logging
import os
import pathlib
import signal
import stat
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

V1_CONTROLLERS = ("cpu", "memory", "pids", "devices", "freezer")
V2_NEEDED = ("cpu", "memory", "pids")


class CgroupError(OSError):
    pass


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of the cgroup file systems."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                out.append((parts[1].replace("\\040", " "), parts[2], set(parts[3].split(","))))
    return out


def v2_root() -> pathlib.Path | None:
    for point, fstype, _ in _mounts():
        if fstype == "cgroup2":
            return pathlib.Path(point)
    return None


def v1_roots() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for point, fstype, opts in _mounts():
        if fstype == "cgroup":
            for c in V1_CONTROLLERS:
                if c in opts:
                    found.setdefault(c, pathlib.Path(point))
    return found


def detect(mode: str = "auto") -> str:
    """"v2", "v1" or "off": what ``mode`` ("auto" | "v2" | "v1" | "off") gives on this machine."""
    if mode == "off":
        return "off"
    root = v2_root()
    if mode in ("auto", "v2") and root is not None:
        try:
            available = set((root / "cgroup.controllers").read_text().split())
        except OSError:
            available = set()
        if set(V2_NEEDED) <= available and os.access(root / "cgroup.subtree_control", os.W_OK):
            return "v2"
        if mode == "v2":
            raise CgroupError(f"cgroup v2 at {root} lacks the {', '.join(sorted(set(V2_NEEDED) - available))} controller(s)")
    if mode in ("auto", "v1"):
        roots = v1_roots()
        if "freezer" in roots or "memory" in roots:
            if all(os.access(p, os.W_OK) for p in roots.values()):
                return "v1"
        if mode == "v1":
            raise CgroupError("no writable cgroup v1 hierarchies (memory, freezer) are mounted")
    return "off"


@dataclass(frozen=True)
class Limits:
    cpus: float = 0.0  # 0 = no limit
    memory_bytes: int = 0
    pids_max: int = 0
    deny_devices: tuple[tuple[str, int, int], ...] = ()  # ("c", major, minor)


def gpu_device_nodes(device_glob: str) -> list[tuple[str, int, int]]:
    """(path, major, minor) of the char devices matching ``device_glob`` (``/dev/nvidia[0-9]*``)."""
    out = []
    for path in sorted(glob.glob(device_glob)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out.append((path, os.major(st.st_rdev), os.minor(st.st_rdev)))
    return out


def gpu_devices_to_deny(device_glob: str, own_gpus: tuple[int, ...]) -> tuple[tuple[str, int, int], ...]:
    """The char devices matching ``device_glob`` whose minor number is not one of ``own_gpus``. NVIDIA
    numbers ``/dev/nvidiaN`` by the GPU's minor number, which NVML reports."""
    return tuple(("c", major, minor) for _, major, minor in gpu_device_nodes(device_glob) if minor not in own_gpus)


def gpu_device_paths_to_mask(device_glob: str, own_gpus: tuple[int, ...]) -> tuple[str, ...]:
    """The device node paths of the GPUs a task was not granted (covered in its mount namespace)."""
    return tuple(path for path, _, minor in gpu_device_nodes(device_glob) if minor not in own_gpus)


class TaskCgroup:
    """The cgroup(s) of one task: ``create`` makes and limits them, ``kill`` empties them."""

    def __init__(self, version: str, dirs: dict[str, pathlib.Path]):
        self.version = version
        self.dirs = dirs  # controller (or "unified") -> dir

    @classmethod
    def of(cls, version: str, base: str, job_id: str, task: str) -> "TaskCgroup | None":
        """The task's cgroup as ``create`` makes it (existing or not); ``job_id`` may be "scope/job"."""
        rel = pathlib.Path(base, job_id, task)
        if version == "v2":
            root = v2_root()
            return cls("v2", {"unified": root / rel}) if root else None
        if version == "v1":
            return cls("v1", {c: p / rel for c, p in v1_roots().items()})
        return None

    @classmethod
    def create(cls, version: str, base: str, job_id: str, task: str, limits: Limits) -> "TaskCgroup | None":
        cg = cls.of(version, base, job_id, task)
        if cg is None:
            return None
        if version == "v2":
            root = v2_root()
            parts = pathlib.Path(base, job_id).parts
            _enable_v2(root, *(root.joinpath(*parts[:i + 1]) for i in range(len(parts))))
        for d in cg.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        cg.apply_limits(limits)
        return cg

    def apply_limits(self, limits: Limits) -> None:
        """Write ``limits`` (memory, CPU, pids, denied devices) into the task's cgroup (``create`` does, once)."""
        if self.version == "v2":
            d = self.dirs["unified"]
            if limits.memory_bytes:
                _write(d / "memory.max", limits.memory_bytes)
                _write(d / "memory.swap.max", 0, optional=True)
            if limits.cpus:
                _write(d / "cpu.max", f"{max(1000, int(limits.cpus * 100000))} 100000")
            if limits.pids_max:
                _write(d / "pids.max", limits.pids_max)
            return
        if limits.memory_bytes and "memory" in self.dirs:
            m = self.dirs["memory"]
            _write(m / "memory.limit_in_bytes", limits.memory_bytes)
            _write(m / "memory.memsw.limit_in_bytes", limits.memory_bytes, optional=True)  # no escape to swap
        if limits.cpus and "cpu" in self.dirs:
            c = self.dirs["cpu"]
            _write(c / "cpu.cfs_period_us", 100000)
            _write(c / "cpu.cfs_quota_us", max(1000, int(limits.cpus * 100000)))
        if limits.pids_max and "pids" in self.dirs:
            _write(self.dirs["pids"] / "pids.max", limits.pids_max)
        if "devices" in self.dirs:
            for kind, major, minor in limits.deny_devices:
                _write(self.dirs["devices"] / "devices.deny", f"{kind} {major}:{minor} rwm")

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return out

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this task (its memory limit)."""
        if self.version == "v2":
            f = self.dirs["unified"] / "memory.events"
        elif "memory" in self.dirs:
            f = self.dirs["memory"] / "memory.oom_control"
        else:
            return False
        try:
            for line in f.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def peak_memory_bytes(self) -> int | None:
        """The task's peak memory use (v2 ``memory.peak``, kernel 5.19+; v1 ``memory.max_usage_in_bytes``),
        None when the kernel does not keep it or the cgroup is gone."""
        if self.version == "v2":
            f = self.dirs["unified"] / "memory.peak"
        elif "memory" in self.dirs:
            f = self.dirs["memory"] / "memory.max_usage_in_bytes"
        else:
            return None
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every process in the cgroup (frozen first, so none forks away); True once empty."""
        if self.version == "v2":
            k = self.dirs["unified"] / "cgroup.kill"
            if k.exists():
                _write(k, 1, optional=True)
        freezer = self.dirs.get("freezer")
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            if freezer is not None:
                _write(freezer / "freezer.state", "FROZEN", optional=True)
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if freezer is not None:
                _write(freezer / "freezer.state", "THAWED", optional=True)
            if time.monotonic() > deadline:
                log.warning("hive-lab: processes %s of %s survived SIGKILL", sorted(self.pids()), self.dirs)
                return False
            time.sleep(0.01)

    def remove(self) -> None:
        """Remove the task's (now empty) cgroup and its job's (and scope's) when empty too."""
        for d in self.dirs.values():
            for p in (d, d.parent, d.parent.parent):
                try:
                    p.rmdir()
                except OSError:
                    break


def remove_scope(base: str, scope: str) -> None:
    """Kill every process left under ``<hierarchy>/<base>/<scope>`` and remove those cgroups (what a
    test does when it throws a server and its launcher state away)."""
    roots = [v2_root()] + list(v1_roots().values())
    for root in {r for r in roots if r is not None}:
        top = root / base / scope
        if not top.is_dir():
            continue
        for dirpath in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
            v2 = root == v2_root()
            cg = TaskCgroup("v2" if v2 else "v1", {"unified" if v2 else root.name: dirpath})
            cg.kill(timeout_s=5)
            try:
                dirpath.rmdir()
            except OSError:
                pass


def _enable_v2(root: pathlib.Path, *dirs: pathlib.Path) -> None:
    """Create ``dirs`` and delegate cpu/memory/pids down to their children."""
    parent = root
    for d in dirs:
        _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in V2_NEEDED), optional=parent == root)
        d.mkdir(exist_ok=True)
        parent = d
    _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in V2_NEEDED))


def _write(path: pathlib.Path, value, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(f"{value}\n")
    except OSError as exc:
        if not optional:
            raise CgroupError(exc.errno, f"cannot write {value!r} to {path}: {exc.strerror}") from None
