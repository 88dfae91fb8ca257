"""How a share of a GPU (``gpus: 0.5 | 0.25 | 0.125``) is enforced on its GPU, per GPU type mode.

Modes (``c.HiveLabApp.gpu_share_modes``: GPU type or ``"*"`` -> mode; ``auto`` by default):

- ``timeslice``: plain sharing: the task sees the one GPU (``CUDA_VISIBLE_DEVICES``); its memory budget
  (``gpu_memory_mb``, default its share of the GPU's memory) is enforced by the GPU sampler through
  NVML's per-process memory (``BudgetWatch``: a warning, then the job is stopped).
- ``mps``: an MPS control daemon per shared GPU, started and stopped by hive-lab
  (``nvidia-cuda-mps-control -d`` with its own pipe and log dirs); each share gets
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` and ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` for its size. Without
  the binary, shares on such a type are refused with a clear error.
- ``mig``: the GPU is in MIG mode and NVML lists its MIG devices; a share gets a free MIG device of the
  matching size (memory in eighths of the GPU's): ``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` (Docker: that device).
- ``auto``: ``mig`` where NVML lists MIG devices for the GPU, else ``timeslice``.
- ``none``: the type takes no shares (a request for one is a 400).

Pure decisions (what to run, which env) are separated from running them (``MpsDaemons``), so the
command lines and environments are tested without a GPU.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

from pynvml import NVMLError  # importable without a driver; the fake raises pynvml's own classes

MODES = ("auto", "mig", "mps", "timeslice", "none")
MPS_CONTROL = "nvidia-cuda-mps-control"


class ShareRefused(ValueError):
    """A share cannot be given on this GPU type / GPU (the message says why and what to do)."""


@dataclass(frozen=True)
class MigDevice:
    uuid: str            # MIG-...
    memory_mb: int
    eighths: int         # its size in eighths of the parent GPU's memory


@dataclass
class ShareGrant:
    """What one share's task gets: the device it sees, extra env, and its memory budget."""

    mode: str
    device: str                          # CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES value
    memory_budget_mb: int
    env: dict[str, str] = field(default_factory=dict)
    mig_uuid: str | None = None


def check_modes(modes: dict[str, str]) -> dict[str, str]:
    """Validate ``gpu_share_modes`` (ValueError names the bad entry and the modes allowed)."""
    out = {}
    for gpu_type, mode in (modes or {}).items():
        if mode not in MODES:
            raise ValueError(f"gpu_share_modes[{gpu_type!r}]: unknown mode {mode!r}; use one of {', '.join(MODES)}")
        out[str(gpu_type)] = mode
    return out


def mig_eighths(mig_memory_mb: int, gpu_memory_mb: int) -> int:
    """A MIG device's size in eighths of its GPU (memory slices: A100-40GB 1g.5gb = 1, 2g.10gb = 2, 3g.20gb = 4)."""
    if gpu_memory_mb <= 0:
        return 0
    return max(1, round(8 * mig_memory_mb / gpu_memory_mb))


def discover(nvml: Any, node: str) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], list[MigDevice]]]:
    """GPU memory (MB) and MIG devices of this machine's GPUs as NVML lists them (pynvml or the fake)."""
    memory: dict[tuple[str, int], int] = {}
    migs: dict[tuple[str, int], list[MigDevice]] = {}
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        total = int(nvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)
        memory[(node, i)] = total
        try:
            current = nvml.nvmlDeviceGetMigMode(h)[0]
        except NVMLError:
            continue  # no MIG on this GPU (not supported)
        if not current:
            continue
        found = []
        for k in range(nvml.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
            except NVMLError:
                continue  # an empty slot
            mem = int(nvml.nvmlDeviceGetMemoryInfo(mh).total) // (1024 * 1024)
            found.append(MigDevice(str(nvml.nvmlDeviceGetUUID(mh)), mem, mig_eighths(mem, total)))
        if found:
            migs[(node, i)] = found
    return memory, migs


class GpuSharing:
    """The admin's modes, what NVML says about each GPU, and the MIG devices given out."""

    def __init__(self, modes: dict[str, str] | None = None, *, gpu_memory_mb: dict[tuple[str, int], int] | None = None,
                 mig_devices: dict[tuple[str, int], list[MigDevice]] | None = None,
                 mps_binary: str | None = None, mps_root: str | os.PathLike = "/tmp/hive-lab-mps"):
        self.modes = check_modes(modes or {})
        self.gpu_memory_mb = dict(gpu_memory_mb or {})
        self.mig_devices = {k: list(v) for k, v in (mig_devices or {}).items()}
        self.mps_binary = mps_binary if mps_binary is not None else shutil.which(MPS_CONTROL)
        self.mps_root = pathlib.Path(mps_root)
        self.mig_given: dict[str, str] = {}   # MIG uuid -> job id

    # ------------------------------------------------------------------ modes
    def type_mode(self, gpu_type: str | None) -> str:
        if gpu_type is not None and gpu_type in self.modes:
            return self.modes[gpu_type]
        return self.modes.get("*", "auto")

    def mode(self, gpu_type: str | None, node: str, gpu: int) -> str:
        m = self.type_mode(gpu_type)
        if m == "auto":
            return "mig" if self.mig_devices.get((node, gpu)) else "timeslice"
        return m

    def check_request(self, gpu_types: list[str], share: float) -> None:
        """ShareRefused when a share of ``share`` may land on a GPU type whose mode forbids it or cannot
        be carried out here (MPS without its control binary)."""
        bad = []
        for t in gpu_types:
            m = self.type_mode(t)
            if m == "none":
                bad.append(f"{t} takes no shares (its mode is none)")
            elif m == "mps" and not self.mps_binary:
                bad.append(f"{t} shares through MPS but {MPS_CONTROL} is not installed on this server")
        if bad:
            allowed = [t for t in gpu_types if self.type_mode(t) not in ("none",)
                       and not (self.type_mode(t) == "mps" and not self.mps_binary)]
            hint = (f"; name a GPU type that does (gpu_type: {', '.join(allowed)})" if allowed
                    else "; ask for whole GPUs (gpus: 1) or ask an admin to allow shares")
            raise ShareRefused(f"a share of a GPU ({share:g}) cannot be given: {'; '.join(bad)}{hint}")

    # ------------------------------------------------------------------ grants
    def default_budget(self, node: str, gpu: int, share: float) -> int:
        return int(self.gpu_memory_mb.get((node, gpu), 0) * share)

    def grant(self, job_id: str, gpu_type: str | None, node: str, gpu: int, share: float, device: str,
              gpu_memory_mb: int | None = None) -> ShareGrant:
        """What the share's task gets on GPU ``gpu`` of ``node`` (``device``: its UUID or index)."""
        budget = int(gpu_memory_mb or self.default_budget(node, gpu, share))
        mode = self.mode(gpu_type, node, gpu)
        if mode == "none":
            raise ShareRefused(f"GPU type {gpu_type} takes no shares (its mode is none)")
        if mode == "mig":
            eighths = round(share * 8)
            d = self.take_mig(job_id, node, gpu, share)
            if d is not None:
                return ShareGrant("mig", d.uuid, min(budget, d.memory_mb) if gpu_memory_mb else d.memory_mb,
                                  mig_uuid=d.uuid)
            sizes = sorted({d.eighths for d in self.mig_devices.get((node, gpu), ())})
            raise ShareRefused(f"GPU {gpu} of {node} has no free MIG device of {eighths}/8 of its memory (its MIG "
                               f"devices are of {', '.join(f'{s}/8' for s in sizes) or 'no size'}); an admin "
                               "repartitions it or sets the type's mode to timeslice")
        if mode == "mps":
            if not self.mps_binary:
                raise ShareRefused(f"GPU type {gpu_type} shares through MPS but {MPS_CONTROL} is not installed")
            env = dict(self.mps_env(node, gpu, device))
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(int(round(share * 100)))
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={budget}M"  # device 0: the one GPU the task sees
            return ShareGrant("mps", device, budget, env)
        return ShareGrant("timeslice", device, budget)

    def take_mig(self, job_id: str, node: str, gpu: int, share: float) -> MigDevice | None:
        """The MIG device of the share's size on that GPU for ``job_id``: the one it holds already (also
        one held again after a restart, ``hold_mig``), else the first free one; None when none is free."""
        eighths = round(share * 8)
        devices = sorted(self.mig_devices.get((node, gpu), ()), key=lambda d: d.uuid)
        for d in devices:
            if d.eighths == eighths and self.mig_given.get(d.uuid) == job_id:
                return d
        for d in devices:
            if d.eighths == eighths and d.uuid not in self.mig_given:
                self.mig_given[d.uuid] = job_id
                return d
        return None

    def hold_mig(self, job_id: str, uuid: str) -> None:
        """A running share's MIG device, as stored with its placement: given to it again (after a restart)."""
        self.mig_given[uuid] = job_id

    def release(self, job_id: str) -> None:
        for uuid in [u for u, j in self.mig_given.items() if j == job_id]:
            del self.mig_given[uuid]

    # ------------------------------------------------------------------ MPS
    def mps_dirs(self, node: str, gpu: int) -> tuple[pathlib.Path, pathlib.Path]:
        base = self.mps_root / f"{node}-gpu{gpu}"
        return base / "pipe", base / "log"

    def mps_env(self, node: str, gpu: int, device: str) -> dict[str, str]:
        pipe, logs = self.mps_dirs(node, gpu)
        return {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}

    def mps_start_command(self, node: str, gpu: int, device: str) -> tuple[list[str], dict[str, str]]:
        """argv and env that start the GPU's MPS control daemon (it serves only that GPU)."""
        env = {"CUDA_VISIBLE_DEVICES": device, **self.mps_env(node, gpu, device)}
        return [self.mps_binary or MPS_CONTROL, "-d"], env

    def mps_stop_command(self, node: str, gpu: int, device: str) -> tuple[list[str], dict[str, str], str]:
        """argv, env and stdin that stop it (``quit`` on its control pipe)."""
        return [self.mps_binary or MPS_CONTROL], dict(self.mps_env(node, gpu, device)), "quit\n"


class MpsDaemons:
    """Starts an MPS control daemon when a GPU gets its first MPS share and stops it after its last."""

    def __init__(self, sharing: GpuSharing, run: Callable[..., Any] = subprocess.run):
        self.sharing = sharing
        self.run = run
        self.users: dict[tuple[str, int], set[str]] = {}

    def acquire(self, node: str, gpu: int, device: str, job_id: str) -> None:
        users = self.users.setdefault((node, gpu), set())
        if not users:
            pipe, logs = self.sharing.mps_dirs(node, gpu)
            pipe.mkdir(parents=True, exist_ok=True, mode=0o755)
            logs.mkdir(parents=True, exist_ok=True, mode=0o755)
            argv, env = self.sharing.mps_start_command(node, gpu, device)
            self.run(argv, env={**os.environ, **env}, check=True, capture_output=True, timeout=30)
        users.add(job_id)

    def adopt(self, node: str, gpu: int, job_id: str) -> None:
        """A share still running after a restart: its GPU's daemon runs already; only count the user."""
        self.users.setdefault((node, gpu), set()).add(job_id)

    def release(self, node: str, gpu: int, device: str, job_id: str) -> None:
        users = self.users.get((node, gpu))
        if not users or job_id not in users:
            return
        users.discard(job_id)
        if not users:
            del self.users[(node, gpu)]
            argv, env, stdin = self.sharing.mps_stop_command(node, gpu, device)
            self.run(argv, env={**os.environ, **env}, input=stdin, text=True, check=False, capture_output=True,
                     timeout=30)


@dataclass
class BudgetWatch:
    """Memory budgets of shares, checked against NVML's per-process memory each sampling round: over
    budget once -> a warning; still over at the next round -> the job is stopped with a reason."""

    budgets: dict[str, int] = field(default_factory=dict)      # job id -> MB
    warned: dict[str, int] = field(default_factory=dict)       # job id -> MB used when warned

    def check(self, used_mb: dict[str, float]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(warnings, stops): (job id, reason) each, from the jobs' GPU memory used now."""
        warnings, stops = [], []
        for job_id in sorted(self.budgets):
            budget = self.budgets[job_id]
            used = used_mb.get(job_id)
            if used is None or used <= budget:
                self.warned.pop(job_id, None)
                continue
            if job_id in self.warned:
                stops.append((job_id, f"stopped: its GPU share used {used:.0f} MB of GPU memory, over its budget "
                                      f"of {budget} MB (warned before); ask for a bigger share or gpu_memory_mb"))
                del self.warned[job_id]
            else:
                self.warned[job_id] = int(used)
                warnings.append((job_id, f"warning: its GPU share uses {used:.0f} MB of GPU memory, over its budget "
                                         f"of {budget} MB; it will be stopped if it stays over"))
        return warnings, stops

    def forget(self, job_id: str) -> None:
        self.budgets.pop(job_id, None)
        self.warned.pop(job_id, None)
