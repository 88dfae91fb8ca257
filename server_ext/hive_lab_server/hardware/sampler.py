"""Per-GPU readings from NVML, XID events, and which job uses which GPU.

:class:`GpuSampler` is synchronous (NVML calls block briefly); the service runs ``sample()`` in a
worker thread. A GPU that cannot be read does not stop the others: its sample carries the error.
"""

from __future__ import annotations

import ctypes
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import pynvml

from hive_lab_server.hardware.nvml_backend import NVMLError, text

log = logging.getLogger(__name__)

_LOST_CODES = {pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_GPU_NOT_FOUND}


@dataclass
class ProcessSample:
    pid: int
    used_memory_mb: int | None
    job: str | None = None
    sm_util: int | None = None  # percent of the GPU's SMs it kept busy (nvmlDeviceGetProcessUtilization)


@dataclass
class GpuSample:
    node: str
    index: int
    uuid: str | None = None
    at: float = 0.0  # wall-clock seconds
    lost: bool = False  # fell off the bus (NVMLError_GpuIsLost / GpuNotFound)
    error: str | None = None  # NVML error that made the whole GPU unreadable
    error_code: int | None = None
    utilization: int | None = None  # percent of time a kernel ran
    memory_utilization: int | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    ecc_corrected: int | None = None  # volatile counts (since the driver loaded)
    ecc_uncorrected: int | None = None
    ecc_uncorrected_aggregate: int | None = None  # lifetime
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    processes: list[ProcessSample] = field(default_factory=list)
    xids: list[int] = field(default_factory=list)  # XID critical errors since the previous sample
    jobs: list[str] = field(default_factory=list)  # jobs attributed to this GPU (see attribute())
    read_errors: list[str] = field(default_factory=list)  # single readings that failed (not NotSupported)

    @property
    def readable(self) -> bool:
        return not self.lost and self.error is None


class GpuSampler:
    """Reads every GPU of one machine. ``open()`` once, ``sample()`` periodically, ``close()`` at the end."""

    def __init__(self, nvml: Any, node: str, clock: Callable[[], float] = time.time):
        self.nvml = nvml
        self.node = node
        self.clock = clock
        self._handles: dict[int, Any] = {}
        self._uuids: dict[int, str] = {}
        self._util_stamps: dict[int, int] = {}  # GPU -> newest per-process utilisation sample seen (us)
        self._events = None
        self._count = 0
        self._open = False

    def open(self) -> None:
        self.nvml.nvmlInit()
        self._open = True
        self._count = self.nvml.nvmlDeviceGetCount()
        try:
            self._events = self.nvml.nvmlEventSetCreate()
        except NVMLError as exc:
            log.info("NVML event sets unavailable (%s): XID errors will not be seen", exc)
        for index in range(self._count):
            try:
                self._handle(index)
            except NVMLError as exc:  # a GPU already lost: reported by sample(), retried each round
                log.warning("GPU %d: NVML cannot open it (%s)", index, exc)

    def close(self) -> None:
        if not self._open:
            return
        if self._events is not None:
            try:
                self.nvml.nvmlEventSetFree(self._events)
            except NVMLError:
                pass
        try:
            self.nvml.nvmlShutdown()
        except NVMLError:
            pass
        self._open = False

    def _handle(self, index: int) -> Any:
        if index in self._handles:
            return self._handles[index]
        h = self.nvml.nvmlDeviceGetHandleByIndex(index)  # raises for a lost GPU; retried next sample
        self._handles[index] = h
        try:
            self._uuids[index] = text(self.nvml.nvmlDeviceGetUUID(h))
        except NVMLError:
            pass
        if self._events is not None:
            try:
                self.nvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, self._events)
            except NVMLError as exc:
                log.info("GPU %d: cannot register for XID events (%s)", index, exc)
        return h

    def _drain_xids(self) -> dict[int, list[int]]:
        """XID events waiting in the event set, per GPU index (never blocks)."""
        out: dict[int, list[int]] = {}
        if self._events is None:
            return out
        index_of = {_handle_key(h): i for i, h in self._handles.items()}
        for _ in range(1000):
            try:
                data = self.nvml.nvmlEventSetWait(self._events, 0)
            except NVMLError:
                break  # Timeout: nothing more (other errors: try again next sample)
            if data.eventType != pynvml.nvmlEventTypeXidCriticalError:
                continue
            index = index_of.get(_handle_key(data.device))
            if index is None:
                index = self._index_of_handle(data.device)
            if index is not None:
                out.setdefault(index, []).append(int(data.eventData))
        return out

    def _index_of_handle(self, handle: Any) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetIndex(handle))
        except (NVMLError, AttributeError):
            return None

    def sample(self) -> list[GpuSample]:
        if not self._open:
            self.open()
        xids = self._drain_xids()
        now = self.clock()
        return [self._sample_one(index, now, xids.get(index, [])) for index in range(self._count)]

    def _sample_one(self, index: int, now: float, xids: list[int]) -> GpuSample:
        s = GpuSample(node=self.node, index=index, uuid=self._uuids.get(index), at=now, xids=xids)
        nvml = self.nvml
        try:
            h = self._handle(index)
            s.uuid = self._uuids.get(index)
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            s.memory_used_mb = int(mem.used // (1024 * 1024))
            s.memory_total_mb = int(mem.total // (1024 * 1024))
            self._optional(s, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
            self._optional(s, "temperature", lambda: nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
            self._optional(s, "power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
            self._optional(s, "ecc", lambda: self._ecc(h))
            self._optional(s, "retired", lambda: self._retired(h))
            self._optional(s, "remap", lambda: nvml.nvmlDeviceGetRemappedRows(h))
            self._optional(s, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
            if s.processes:
                self._process_utilization(s, h)
        except NVMLError as exc:
            s.error, s.error_code = str(exc), getattr(exc, "value", None)
            s.lost = s.error_code in _LOST_CODES
            if s.lost:
                self._handles.pop(index, None)  # get a fresh handle if it comes back
        return s

    def _process_utilization(self, s: GpuSample, h: Any) -> None:
        """Each process's SM utilisation since the previous round (its newest sample; none since: 0)."""
        stamps = self._util_stamps
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(h, stamps.get(s.index, 0))
        except NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _LOST_CODES:
                raise
            if code == pynvml.NVML_ERROR_NOT_FOUND:  # no samples since the last round: nothing ran
                for p in s.processes:
                    p.sm_util = 0
            elif code != pynvml.NVML_ERROR_NOT_SUPPORTED:
                s.read_errors.append(f"process_utilization: {exc}")
            return
        newest: dict[int, Any] = {}
        for x in samples:
            if int(x.pid) not in newest or int(x.timeStamp) > int(newest[int(x.pid)].timeStamp):
                newest[int(x.pid)] = x
        if newest:
            stamps[s.index] = max(int(x.timeStamp) for x in newest.values())
        for p in s.processes:
            x = newest.get(p.pid)
            p.sm_util = int(x.smUtil) if x is not None else 0

    def _optional(self, s: GpuSample, what: str, read: Callable[[], Any]) -> None:
        """One reading; NotSupported leaves it None, lost GPUs propagate, other errors are noted."""
        try:
            value = read()
        except NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _LOST_CODES:
                raise
            if code != pynvml.NVML_ERROR_NOT_SUPPORTED:
                s.read_errors.append(f"{what}: {exc}")
            return
        if what == "utilization":
            s.utilization, s.memory_utilization = int(value.gpu), int(value.memory)
        elif what == "temperature":
            s.temperature_c = int(value)
        elif what == "power":
            s.power_w = value / 1000.0
        elif what == "ecc":
            s.ecc_corrected, s.ecc_uncorrected, s.ecc_uncorrected_aggregate = value
        elif what == "retired":
            s.retired_pages_sbe, s.retired_pages_dbe, s.retired_pages_pending = value
        elif what == "remap":
            corr, unc, pending, failure = value
            s.remapped_rows_correctable, s.remapped_rows_uncorrectable = int(corr), int(unc)
            s.remap_pending, s.remap_failure = bool(pending), bool(failure)
        elif what == "processes":
            s.processes = [
                ProcessSample(pid=int(p.pid), used_memory_mb=None if p.usedGpuMemory is None else int(p.usedGpuMemory // (1024 * 1024)))
                for p in value
            ]

    def _ecc(self, h: Any) -> tuple[int, int, int | None]:
        nvml = self.nvml
        corrected = nvml.nvmlDeviceGetTotalEccErrors(h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC)
        uncorrected = nvml.nvmlDeviceGetTotalEccErrors(h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        try:
            aggregate = nvml.nvmlDeviceGetTotalEccErrors(h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC)
        except NVMLError:
            aggregate = None
        return int(corrected), int(uncorrected), aggregate

    def _retired(self, h: Any) -> tuple[int, int, bool]:
        nvml = self.nvml
        sbe = nvml.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        dbe = nvml.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = nvml.nvmlDeviceGetRetiredPagesPendingStatus(h)
        return len(sbe), len(dbe), bool(pending)


def _handle_key(handle: Any) -> Any:
    """Handles from different calls are different Python objects: compare what they point at."""
    index = getattr(handle, "index", None)  # fake handles
    if index is not None:
        return ("fake", index)
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


# ---------------------------------------------------------------------------------- attribution
_CONTAINER_ID = re.compile(r"([0-9a-f]{64})")


def parent_pid(pid: int, proc: str = "/proc") -> int | None:
    try:
        with open(f"{proc}/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


def container_id(pid: int, proc: str = "/proc") -> str | None:
    """The Docker container a process runs in, from its cgroup path (None outside containers)."""
    try:
        with open(f"{proc}/{pid}/cgroup") as f:
            m = _CONTAINER_ID.search(f.read())
    except OSError:
        return None
    return m.group(1) if m else None


class JobResolver:
    """pid -> job: the job whose task started this process or one of its ancestors (local launcher),
    or whose container holds it (docker launcher). NVML reports host pids, so /proc answers."""

    def __init__(self, task_pids: Mapping[int, str] | None = None, containers: Mapping[str, str] | None = None,
                 proc: str = "/proc"):
        self.task_pids = dict(task_pids or {})
        self.containers = dict(containers or {})
        self.proc = proc

    def __call__(self, pid: int) -> str | None:
        seen = 0
        p: int | None = pid
        while p and seen < 64:
            if p in self.task_pids:
                return self.task_pids[p]
            p = parent_pid(p, self.proc)
            seen += 1
        if self.containers:
            cid = container_id(pid, self.proc)
            if cid:
                for prefix, job in self.containers.items():
                    if cid.startswith(prefix):
                        return job
        return None


def attribute(samples: Iterable[GpuSample], pid_to_job: Callable[[int], str | None] | Mapping[int, str] | None = None,
              placement: Mapping[tuple[str, int], Iterable[str]] | None = None) -> list[GpuSample]:
    """Fill ``jobs`` of each sample (and ``job`` of its processes): the jobs the scheduler placed on the
    GPU, plus jobs found through the GPU's processes (catching a job using a GPU it was not given)."""
    lookup = pid_to_job.get if isinstance(pid_to_job, Mapping) else pid_to_job
    out = list(samples)
    for s in out:
        jobs = list((placement or {}).get((s.node, s.index), ()))
        for p in s.processes:
            p.job = lookup(p.pid) if lookup else None
            if p.job and p.job not in jobs:
                jobs.append(p.job)
        s.jobs = jobs
    return out


@dataclass
class JobGpuUsage:
    job: str
    gpus: list[tuple[str, int]] = field(default_factory=list)
    utilization: float | None = None  # mean over its GPUs
    memory_used_mb: int = 0
    # its own processes' SM utilisation (sum, percent of a GPU): what a share uses of its shared GPU;
    # None where NVML gives no per-process utilisation
    process_utilization: float | None = None


def job_usage(samples: Iterable[GpuSample]) -> dict[str, JobGpuUsage]:
    """Per job: its GPUs, their mean utilisation, and its GPU memory (its processes' memory where NVML
    reports it, else the memory used on GPUs it holds alone)."""
    usage: dict[str, JobGpuUsage] = {}
    utils: dict[str, list[int]] = {}
    for s in samples:
        for job in s.jobs:
            u = usage.setdefault(job, JobGpuUsage(job))
            u.gpus.append((s.node, s.index))
            if s.utilization is not None:
                utils.setdefault(job, []).append(s.utilization)
            busy = [p.sm_util for p in s.processes if p.job == job and p.sm_util is not None]
            if busy:
                u.process_utilization = (u.process_utilization or 0.0) + sum(busy)
            mine = [p.used_memory_mb for p in s.processes if p.job == job and p.used_memory_mb is not None]
            if mine:
                u.memory_used_mb += sum(mine)
            elif len(s.jobs) == 1 and s.memory_used_mb is not None:
                u.memory_used_mb += s.memory_used_mb
    for job, values in utils.items():
        usage[job].utilization = sum(values) / len(values)
    return usage

