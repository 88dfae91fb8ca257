"""A fake NVML: the subset of the ``pynvml`` API hive-lab calls, driven by a hardware description.

It is what the tests (and demos on machines without GPUs) use instead of the real library. Names,
signatures, return structures, constants and error classes are pynvml's own (the constants, the
``NVMLError_*`` classes and the ctypes structures are taken from the installed ``pynvml`` module,
which imports fine without a driver), so code written against this fake runs unchanged on real NVML.

Description (a dict, or a YAML/JSON file)::

    hostname: gpu-box                  # optional node name (default: the machine's host name)
    cpus: 64                           # optional host CPU count (cpu affinity masks, node resources)
    memory_mb: 515000                  # optional host memory
    driver_version: "550.54.15"
    pcie_switches: {sw-root0: {}, sw0: {parent: sw-root0}}   # optional: switch tree (MULTIPLE)
    gpus:
    - model: NVIDIA A100-SXM4-80GB     # nvmlDeviceGetName
      memory_mb: 81920
      uuid: GPU-...                    # default derived from the index
      pci_bus_id: "00000000:07:00.0"   # default derived from the index
      numa_node: 0                     # CPU socket / NUMA node (default 0)
      host_bridge: hb0                 # default "hb<numa_node>"
      pcie_switch: sw0                 # default none (GPU on a root port of its host bridge)
      utilization: 0                   # steady-state readings (all optional)
      memory_used_mb: 0
      temperature: 35
      power_w: 60
      ecc_supported: true              # false -> ECC calls raise NVMLError_NotSupported
      row_remapping: true              # true: remapped rows (Ampere+); false: retired pages
      processes: [{pid: 1234, used_memory_mb: 500, sm_util: 30}]   # per-process GPU memory (share budgets)
                                       # and SM utilisation (nvmlDeviceGetProcessUtilization; optional)
      mig_devices: [{uuid: MIG-..., memory_mb: 10240}] # optional: the GPU is in MIG mode with these devices
    nvlink: [[0, 1], {gpus: [2, 3], links: 4}, ...]   # GPU pairs bridged by NVLink
    nvswitch: false                    # true: every GPU has NVLinks to an NVSwitch
    faults:                            # scripted over time (seconds since nvmlInit)
    - {at: 5, gpu: 2, xid: 79}
    - {at: 10, gpu: 1, ecc_uncorrected: 2}          # counters rise by that much
    - {at: 12, gpu: 3, lost: true}                  # every call on it: NVMLError_GpuIsLost
    - {at: 3, gpu: 0, utilization: 90, memory_used_mb: 4000, processes: [{pid: 77, used_memory_mb: 3900}]}
    - {at: 4, gpu: 0, error: Unknown}               # every call on it raises that NVMLError_*
    - {at: 6, gpu: 0, remapped_rows: {uncorrectable: 1, pending: 1, failure: 0}}
    - {at: 6, gpu: 0, retired_pages: {dbe: 1, sbe: 0, pending: 1}}
    - {at: 9, gpu: 0, recover: true}                # clears lost/error

When the description is a file, its ``faults`` are re-read whenever the file changes, so a test can
script a fault while a server is running (``at: 0`` fires at once).

A capture made on real hardware by ``hive_lab_server.hardware.capture`` (``{"format":
"hive-lab-nvml-capture/1", ...}``) is accepted as a description too: its recorded answers
(common-ancestor matrix, NVLink remote bus ids, NUMA nodes, ...) are replayed as they were.
"""

from __future__ import annotations

import copy
import ctypes
import json
import os
import pathlib
import threading
import time
from typing import Any, Callable

import pynvml as _pynvml
import yaml

CAPTURE_FORMAT = "hive-lab-nvml-capture/1"

# Re-export pynvml's constants and error classes so callers can use this module exactly like pynvml.
for _name in dir(_pynvml):
    if _name.startswith(("NVML_", "NVMLError", "nvmlEventType", "nvmlClocksEvent")):
        globals()[_name] = getattr(_pynvml, _name)
NVMLError = _pynvml.NVMLError
nvmlExceptionClass = _pynvml.nvmlExceptionClass
c_nvmlMemory_t = _pynvml.c_nvmlMemory_t
c_nvmlUtilization_t = _pynvml.c_nvmlUtilization_t
nvmlPciInfo_t = _pynvml.nvmlPciInfo_t
nvmlFriendlyObject = _pynvml.nvmlFriendlyObject

_NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId/computeInstanceId outside MIG


class DescriptionError(ValueError):
    """The hardware description is malformed; the message names the field."""


class FakeHandle:
    """Stands in for ``c_nvmlDevice_t``; only identity and the index matter to callers."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.index}>"


class FakeMigHandle(FakeHandle):
    """A MIG device of GPU ``index`` (``nvmlDeviceGetMigDeviceHandleByIndex``)."""

    __slots__ = ("mig",)

    def __init__(self, index: int, mig: int):
        super().__init__(index)
        self.mig = mig

    def __repr__(self) -> str:
        return f"<fake MIG device {self.index}/{self.mig}>"


class FakeEventData:
    """Same attribute names as ``pynvml.c_nvmlEventData_t``."""

    def __init__(self, device: FakeHandle, event_type: int, event_data: int):
        self.device = device
        self.eventType = event_type
        self.eventData = event_data
        self.gpuInstanceId = _NO_INSTANCE
        self.computeInstanceId = _NO_INSTANCE


class _EventSet:
    def __init__(self):
        self.registered: dict[int, int] = {}  # gpu index -> event type mask
        self.delivered: set[int] = set()  # ids of faults already delivered


def _error(code: int) -> Exception:
    return _pynvml.NVMLError(code)


def _error_code(name_or_code: Any) -> int:
    if isinstance(name_or_code, int):
        return name_or_code
    key = str(name_or_code)
    cls = getattr(_pynvml, key if key.startswith("NVMLError_") else f"NVMLError_{key}", None)
    if cls is None:
        raise DescriptionError(f"faults[].error: unknown NVML error {name_or_code!r} (use e.g. Unknown, GpuIsLost)")
    return cls().value


def _bus_id_default(index: int) -> str:
    return f"00000000:{0x07 + 0x10 * index:02X}:00.0"


def _load(source: Any) -> tuple[dict, pathlib.Path | None]:
    if isinstance(source, dict):
        return copy.deepcopy(source), None
    path = pathlib.Path(source)
    if not path.exists():
        raise DescriptionError(f"hardware description {path} does not exist")
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise DescriptionError(f"hardware description {path}: expected a mapping at the top level")
    return data, path


class FakeNvml:
    """One fake machine. Use the instance like the ``pynvml`` module."""

    def __init__(self, description: Any, clock: Callable[[], float] | None = None):
        data, self._path = _load(description)
        self._mtime = self._path.stat().st_mtime_ns if self._path else None
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._t0: float | None = None
        self._init_count = 0
        self.capture = data.get("format") == CAPTURE_FORMAT
        self.hostname: str | None = data.get("hostname")
        self.host_cpus: int | None = data.get("cpus")
        self.host_memory_mb: int | None = data.get("memory_mb")
        self.driver_version: str = str(data.get("driver_version", "550.54.15"))
        self._gpus = self._parse_gpus(data)
        self._switch_parent = {k: (v or {}).get("parent") for k, v in (data.get("pcie_switches") or {}).items()}
        self._ancestor = data.get("common_ancestor")  # capture: explicit matrix
        self._nvlinks = self._parse_nvlink(data)
        self._faults = self._parse_faults(data.get("faults") or [])

    # ---------------------------------------------------------------- description parsing
    def _parse_gpus(self, data: dict) -> list[dict]:
        gpus = data.get("gpus")
        if not isinstance(gpus, list):
            raise DescriptionError("gpus: expected a list of GPUs")
        out = []
        for i, g in enumerate(gpus):
            if not isinstance(g, dict) or not g.get("model"):
                raise DescriptionError(f"gpus[{i}].model: every GPU needs a model name, e.g. 'NVIDIA A100-SXM4-80GB'")
            numa = g.get("numa_node", 0)
            out.append(
                {
                    "model": str(g["model"]),
                    "memory_mb": int(g.get("memory_mb", 16384)),
                    "uuid": str(g.get("uuid") or f"GPU-fa4e0000-0000-4000-8000-{i:012x}"),
                    "pci_bus_id": str(g.get("pci_bus_id") or _bus_id_default(i)),
                    "numa_node": numa,
                    "host_bridge": str(g.get("host_bridge", f"hb{numa}")),
                    "pcie_switch": g.get("pcie_switch"),
                    "utilization": int(g.get("utilization", 0)),
                    "memory_util": int(g.get("memory_util", 0)),
                    "memory_used_mb": int(g.get("memory_used_mb", 0)),
                    "temperature": int(g.get("temperature", 35)),
                    "power_w": float(g.get("power_w", 60)),
                    "ecc_supported": bool(g.get("ecc_supported", True)),
                    "row_remapping": bool(g.get("row_remapping", True)),
                    "ecc": {"corrected": int(g.get("ecc_corrected", 0)), "uncorrected": int(g.get("ecc_uncorrected", 0))},
                    "processes": list(g.get("processes") or []),
                    "mig_devices": [{"uuid": str(d["uuid"]), "memory_mb": int(d["memory_mb"])}
                                    for d in (g.get("mig_devices") or [])],
                    "cpu_affinity": g.get("cpu_affinity"),  # capture: list of 64-bit words
                    "nvlink_remote": g.get("nvlink_remote"),  # capture: {link: bus id}
                    "retired_pages": dict(g.get("retired_pages") or {}),  # starting state
                    "remapped_rows": dict(g.get("remapped_rows") or {}),
                    # capture: calls that failed on the real machine -> {key: {"code": ...}}
                    "unsupported": dict((data.get("unsupported") or {}).get(f"gpus[{i}]") or {}),
                }
            )
        return out

    def _refuse(self, s: dict, *keys: str) -> None:
        """Replay a failure recorded by a capture (e.g. NotSupported on a consumer card)."""
        for key in keys:
            if key in s["unsupported"]:
                raise _error(int(s["unsupported"][key].get("code") or _pynvml.NVML_ERROR_NOT_SUPPORTED))

    def _parse_nvlink(self, data: dict) -> dict[int, list[str]]:
        """gpu index -> list of remote PCI bus ids, one per active link."""
        links: dict[int, list[str]] = {i: [] for i in range(len(self._gpus))}
        if self.capture:
            for i, g in enumerate(self._gpus):
                remote = g.get("nvlink_remote") or {}
                links[i] = [remote[k] for k in sorted(remote, key=int)]
            return links
        for n, pair in enumerate(data.get("nvlink") or []):
            gpus, count = (pair.get("gpus"), int(pair.get("links", 1))) if isinstance(pair, dict) else (pair, 1)
            if not isinstance(gpus, list) or len(gpus) != 2 or not all(isinstance(x, int) and 0 <= x < len(self._gpus) for x in gpus):
                raise DescriptionError(f"nvlink[{n}]: expected a pair of GPU indices below {len(self._gpus)}, got {gpus!r}")
            a, b = gpus
            links[a] += [self._gpus[b]["pci_bus_id"]] * count
            links[b] += [self._gpus[a]["pci_bus_id"]] * count
        if data.get("nvswitch"):
            for i in links:
                links[i] += [f"00000000:{0xC0 + k:02X}:00.0" for k in range(6)]
        return links

    def _parse_faults(self, faults: list) -> list[dict]:
        out = []
        for n, f in enumerate(faults):
            if not isinstance(f, dict) or "gpu" not in f:
                raise DescriptionError(f"faults[{n}]: each fault needs 'gpu' (an index) and 'at' (seconds)")
            gpu = f["gpu"]
            if not isinstance(gpu, int) or not 0 <= gpu < len(self._gpus):
                raise DescriptionError(f"faults[{n}].gpu: expected an index below {len(self._gpus)}, got {gpu!r}")
            if "error" in f:
                _error_code(f["error"])
            out.append({**f, "at": float(f.get("at", 0)), "id": n})
        return out

    def _reload_faults(self) -> None:
        if self._path is None:
            return
        try:
            mtime = self._path.stat().st_mtime_ns
        except OSError:
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            data, _ = _load(self._path)
            self._faults = self._parse_faults(data.get("faults") or [])
        except (DescriptionError, yaml.YAMLError, json.JSONDecodeError):
            pass  # a half-written file: keep the previous script, read again on the next change

    # ---------------------------------------------------------------- time and state
    def now(self) -> float:
        """Seconds since nvmlInit (the time faults are scripted in)."""
        return 0.0 if self._t0 is None else self._clock() - self._t0

    def _state(self, index: int) -> dict:
        """The GPU's readings now: its description with every due fault applied in order."""
        self._reload_faults()
        t = self.now()
        s = copy.deepcopy(self._gpus[index])
        s.update(lost=False, error=None,
                 retired={"sbe": 0, "dbe": 0, "pending": 0, **s["retired_pages"]},
                 remap={"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0, **s["remapped_rows"]})
        for f in self._faults:
            if f["gpu"] != index or f["at"] > t:
                continue
            if f.get("recover"):
                s["lost"], s["error"] = False, None
            if f.get("lost"):
                s["lost"] = True
            if "error" in f:
                s["error"] = _error_code(f["error"])
            if f.get("xid") in (79,):
                s["lost"] = True  # XID 79: the GPU has fallen off the bus
            for key in ("utilization", "memory_util", "memory_used_mb", "temperature", "power_w", "processes"):
                if key in f:
                    s[key] = f[key]
            s["ecc"]["corrected"] += int(f.get("ecc_corrected", 0))
            s["ecc"]["uncorrected"] += int(f.get("ecc_uncorrected", 0))
            for key, value in (f.get("retired_pages") or {}).items():
                s["retired"][key] = int(value)
            for key, value in (f.get("remapped_rows") or {}).items():
                s["remap"][key] = int(value)
        return s

    def _require_init(self) -> None:
        if self._init_count <= 0:
            raise _error(_pynvml.NVML_ERROR_UNINITIALIZED)

    def _device(self, handle: Any) -> dict:
        self._require_init()
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self._gpus):
            raise _error(_pynvml.NVML_ERROR_INVALID_ARGUMENT)
        s = self._state(handle.index)
        if s["lost"]:
            raise _error(_pynvml.NVML_ERROR_GPU_IS_LOST)
        if s["error"] is not None:
            raise _error(s["error"])
        return s

    # ---------------------------------------------------------------- init / system
    def nvmlInit(self) -> None:
        with self._lock:
            if self._t0 is None:
                self._t0 = self._clock()
            self._init_count += 1

    def nvmlInitWithFlags(self, flags) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        with self._lock:
            self._require_init()
            self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._require_init()
        return self.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._require_init()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index) -> FakeHandle:
        self._require_init()
        if not 0 <= int(index) < len(self._gpus):
            raise _error(_pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self._state(int(index))["lost"]:
            raise _error(_pynvml.NVML_ERROR_GPU_IS_LOST)
        return FakeHandle(int(index))

    # ---------------------------------------------------------------- identity
    def nvmlDeviceGetIndex(self, handle) -> int:
        self._device(handle)
        return handle.index

    def nvmlDeviceGetUUID(self, handle) -> str:
        s = self._device(handle)
        if isinstance(handle, FakeMigHandle):
            return s["mig_devices"][handle.mig]["uuid"]
        return s["uuid"]

    def nvmlDeviceGetName(self, handle) -> str:
        return self._device(handle)["model"]

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        s = self._device(handle)
        if isinstance(handle, FakeMigHandle):
            total = s["mig_devices"][handle.mig]["memory_mb"] * 1024 * 1024
            return _pynvml.c_nvmlMemory_t(total=total, free=total, used=0)
        total = s["memory_mb"] * 1024 * 1024
        used = min(total, s["memory_used_mb"] * 1024 * 1024)
        return _pynvml.c_nvmlMemory_t(total=total, free=total - used, used=used)

    # ---------------------------------------------------------------- MIG
    def nvmlDeviceGetMigMode(self, device) -> list[int]:
        s = self._device(device)
        on = int(bool(s["mig_devices"]))
        return [on, on]  # [current, pending]

    def nvmlDeviceGetMaxMigDeviceCount(self, device) -> int:
        return 7 if self._device(device)["mig_devices"] else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index) -> FakeMigHandle:
        s = self._device(device)
        if not s["mig_devices"]:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= int(index) < len(s["mig_devices"]):
            raise _error(_pynvml.NVML_ERROR_NOT_FOUND)
        return FakeMigHandle(device.index, int(index))

    def nvmlDeviceIsMigDeviceHandle(self, device) -> bool:
        self._device(device)
        return isinstance(device, FakeMigHandle)

    def nvmlDeviceGetPciInfo(self, handle):
        return self._pci(self._device(handle)["pci_bus_id"])

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    @staticmethod
    def _pci(bus_id: str):
        domain, bus, rest = bus_id.split(":")
        device = rest.split(".")[0]
        info = _pynvml.nvmlPciInfo_t()
        info.busId = bus_id.encode()
        info.busIdLegacy = f"{int(domain, 16) & 0xFFFF:04X}:{bus}:{rest}".encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(device, 16)
        info.pciDeviceId = 0x20B510DE
        return info

    # ---------------------------------------------------------------- topology
    def _level(self, a: int, b: int) -> int:
        if self._ancestor is not None:
            if self._ancestor[a][b] is None:
                raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
            return int(self._ancestor[a][b])
        if a == b:
            return _pynvml.NVML_TOPOLOGY_INTERNAL
        ga, gb = self._gpus[a], self._gpus[b]
        if ga["pcie_switch"] is not None and ga["pcie_switch"] == gb["pcie_switch"]:
            return _pynvml.NVML_TOPOLOGY_SINGLE
        if ga["pcie_switch"] is not None and gb["pcie_switch"] is not None:
            chain_a = self._switch_chain(ga["pcie_switch"])
            if any(sw in chain_a for sw in self._switch_chain(gb["pcie_switch"])):
                return _pynvml.NVML_TOPOLOGY_MULTIPLE
        if ga["host_bridge"] == gb["host_bridge"]:
            return _pynvml.NVML_TOPOLOGY_HOSTBRIDGE
        if (ga["numa_node"] or 0) == (gb["numa_node"] or 0):
            return _pynvml.NVML_TOPOLOGY_NODE
        return _pynvml.NVML_TOPOLOGY_SYSTEM

    def _switch_chain(self, switch: str) -> list[str]:
        chain, seen = [], set()
        while switch is not None and switch not in seen:
            chain.append(switch)
            seen.add(switch)
            switch = self._switch_parent.get(switch)
        return chain

    def nvmlDeviceGetTopologyCommonAncestor(self, device1, device2) -> int:
        self._device(device1)
        self._device(device2)
        return self._level(device1.index, device2.index)

    def nvmlDeviceGetTopologyNearestGpus(self, device, level) -> list[FakeHandle]:
        self._device(device)
        return [FakeHandle(j) for j in range(len(self._gpus))
                if j != device.index and self._level(device.index, j) <= level]

    def nvmlDeviceGetNumaNodeId(self, handle) -> int:
        s = self._device(handle)
        self._refuse(s, "numa_node")
        if s["numa_node"] is None:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(s["numa_node"])

    def nvmlDeviceGetCpuAffinity(self, handle, cpuSetSize):
        s = self._device(handle)
        self._refuse(s, "cpu_affinity")
        words = (ctypes.c_ulonglong * cpuSetSize)()
        if s["cpu_affinity"] is not None:
            for k, w in enumerate(s["cpu_affinity"][:cpuSetSize]):
                words[k] = int(w)
            return words
        numa = int(s["numa_node"] or 0)
        sockets = max(int(g["numa_node"] or 0) for g in self._gpus) + 1
        per_socket = max(1, (self.host_cpus or 16 * sockets) // sockets)
        for cpu in range(numa * per_socket, (numa + 1) * per_socket):
            if cpu // 64 < cpuSetSize:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def nvmlDeviceGetNvLinkState(self, device, link) -> int:
        s = self._device(device)
        if not 0 <= link < _pynvml.NVML_NVLINK_MAX_LINKS:
            raise _error(_pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if link >= len(self._nvlinks[device.index]):
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _pynvml.NVML_FEATURE_ENABLED if s else _pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device, link):
        self.nvmlDeviceGetNvLinkState(device, link)
        return self._pci(self._nvlinks[device.index][link])

    # ---------------------------------------------------------------- readings
    def nvmlDeviceGetUtilizationRates(self, handle):
        s = self._device(handle)
        self._refuse(s, "utilization")
        return _pynvml.c_nvmlUtilization_t(gpu=int(s["utilization"]), memory=int(s["memory_util"]))

    def nvmlDeviceGetTemperature(self, handle, sensor) -> int:
        s = self._device(handle)
        self._refuse(s, "temperature")
        if sensor != _pynvml.NVML_TEMPERATURE_GPU:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(s["temperature"])

    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        s = self._device(handle)
        self._refuse(s, "power")
        return int(s["power_w"] * 1000)  # milliwatts, as NVML

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType) -> int:
        s = self._device(handle)
        if not s["ecc_supported"]:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._refuse(s, "ecc_uncorrected" if errorType == _pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "ecc_corrected")
        key = "uncorrected" if errorType == _pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "corrected"
        return int(s["ecc"][key])

    def nvmlDeviceGetRetiredPages(self, device, sourceFilter) -> list[int]:
        s = self._device(device)
        if s["row_remapping"] or not s["ecc_supported"]:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        key = "dbe" if sourceFilter == _pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else "sbe"
        self._refuse(s, f"retired_{key}")
        return [0x1000 * (k + 1) for k in range(s["retired"][key])]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device) -> int:
        s = self._device(device)
        if s["row_remapping"] or not s["ecc_supported"]:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._refuse(s, "retired_pending")
        return int(bool(s["retired"]["pending"]))

    def nvmlDeviceGetRemappedRows(self, device) -> tuple[int, int, int, int]:
        s = self._device(device)
        if not s["row_remapping"] or not s["ecc_supported"]:
            raise _error(_pynvml.NVML_ERROR_NOT_SUPPORTED)
        r = s["remap"]
        return (r["correctable"], r["uncorrectable"], int(bool(r["pending"])), int(bool(r["failure"])))

    def nvmlDeviceGetComputeRunningProcesses(self, handle) -> list:
        s = self._device(handle)
        self._refuse(s, "processes")
        return [
            _pynvml.nvmlFriendlyObject({
                "pid": int(p["pid"]),
                "usedGpuMemory": int(p.get("used_memory_mb", 0)) * 1024 * 1024,
                "gpuInstanceId": _NO_INSTANCE,
                "computeInstanceId": _NO_INSTANCE,
            })
            for p in s["processes"]
        ]

    def nvmlDeviceGetProcessUtilization(self, handle, timeStamp) -> list:
        """Per-process utilisation samples newer than ``timeStamp`` (microseconds), one per process that
        states ``sm_util``; NVML_ERROR_NOT_FOUND when there are none (as NVML answers for idle GPUs)."""
        s = self._device(handle)
        self._refuse(s, "process_utilization")
        self._util_stamp = max(int(timeStamp) + 1, getattr(self, "_util_stamp", 0) + 1)
        out = [_pynvml.c_nvmlProcessUtilizationSample_t(pid=int(p["pid"]), timeStamp=self._util_stamp,
                                                         smUtil=int(p["sm_util"]), memUtil=int(p.get("mem_util", 0)),
                                                         encUtil=0, decUtil=0)
               for p in s["processes"] if p.get("sm_util") is not None]
        if not out:
            raise _error(_pynvml.NVML_ERROR_NOT_FOUND)
        return out

    # ---------------------------------------------------------------- events
    def nvmlEventSetCreate(self) -> _EventSet:
        self._require_init()
        return _EventSet()

    def nvmlDeviceGetSupportedEventTypes(self, handle) -> int:
        self._device(handle)
        return (_pynvml.nvmlEventTypeXidCriticalError | _pynvml.nvmlEventTypeDoubleBitEccError
                | _pynvml.nvmlEventTypeSingleBitEccError)

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet) -> None:
        self._device(handle)
        eventSet.registered[handle.index] = eventSet.registered.get(handle.index, 0) | int(eventTypes)

    def nvmlEventSetWait(self, eventSet, timeoutms):
        """Deliver the next due XID fault on a registered GPU, else NVMLError_Timeout (after the wait)."""
        self._require_init()
        deadline = time.monotonic() + timeoutms / 1000.0
        while True:
            self._reload_faults()
            t = self.now()
            for f in self._faults:
                if ("xid" in f and f["at"] <= t and f["id"] not in eventSet.delivered
                        and eventSet.registered.get(f["gpu"], 0) & _pynvml.nvmlEventTypeXidCriticalError):
                    eventSet.delivered.add(f["id"])
                    return FakeEventData(FakeHandle(f["gpu"]), _pynvml.nvmlEventTypeXidCriticalError, int(f["xid"]))
            if time.monotonic() >= deadline:
                raise _error(_pynvml.NVML_ERROR_TIMEOUT)
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    nvmlEventSetWait_v2 = nvmlEventSetWait

    def nvmlEventSetFree(self, eventSet) -> None:
        eventSet.registered.clear()

    # ---------------------------------------------------------------- test helpers (not pynvml)
    def fake_set_faults(self, faults: list[dict]) -> None:
        """Replace the fault script (in-process tests; a file description can be edited instead)."""
        self._faults = self._parse_faults(faults)


def write_description(path: str | os.PathLike, description: dict) -> None:
    """Write a description atomically, so a running fake never reads half a file."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(description, sort_keys=False))
    os.replace(tmp, path)
