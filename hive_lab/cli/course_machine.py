"""What ``hive-lab course init`` reads from the machine it runs on, and the simulated GPUs it sets up.

- The node's name is the machine's host name (``socket.gethostname()``: what the service's GPU inventory
  calls this machine, so it finds its GPUs on that node of the course's cluster); its CPUs and memory
  are this machine's (``os.cpu_count()``, ``/proc/meminfo``), not a made-up 32 CPUs.
- ``--simulate-gpus N``: a machine without GPUs described to the fake NVML backend
  (``hive_lab_server.hardware.fake_nvml``) as N GPUs of the course's type, and a character device node
  per GPU (``/dev/nvidiaN``, major 195 minor N, as the NVIDIA driver makes them) for isolation to lock
  down (root:hive-gpu 0660) and to mask per task, so the whole course, isolation included, runs as on a
  GPU machine. Opening such a node fails (no driver answers it), which is all a simulated GPU needs.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import stat

NVIDIA_MAJOR = 195
SIMULATED_FILE = "etc/hive-lab/simulated-gpus.json"


def hostname() -> str:
    return socket.gethostname()


def cpus() -> int:
    return os.cpu_count() or 1


def memory_mb(meminfo: str = "/proc/meminfo") -> int | None:
    """The machine's memory in MB (MemTotal), or None where /proc/meminfo cannot say."""
    try:
        for line in pathlib.Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def simulated_hardware(node: str, gpus: int, gpu_type: str, cpu_count: int, memory: int | None) -> dict:
    """The fake NVML description of this machine with ``gpus`` GPUs of ``gpu_type``."""
    desc = {"hostname": node, "cpus": cpu_count, "driver_version": "simulated",
            "gpus": [{"model": f"NVIDIA {gpu_type}", "memory_mb": 16384} for _ in range(gpus)]}
    if memory:
        desc["memory_mb"] = memory
    return desc


def simulated_text(desc: dict) -> str:
    return json.dumps(desc, indent=1) + "\n"


def make_device_nodes(dev: pathlib.Path, gpus: int) -> list[str]:
    """``dev/nvidia0`` .. ``nvidia<gpus-1>``, character devices 195:N (root 0660), where missing; one
    sentence per node saying what was done (or why not)."""
    out = []
    dev.mkdir(parents=True, exist_ok=True)
    for i in range(gpus):
        path = dev / f"nvidia{i}"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR:
                out.append(f"kept: {path} (a GPU device node is there already)")
            else:
                out.append(f"left alone: {path} exists and is not a GPU device node; isolation will not lock it")
            continue
        try:
            os.mknod(path, stat.S_IFCHR | 0o660, os.makedev(NVIDIA_MAJOR, i))
            os.chmod(path, 0o660)
        except OSError as exc:
            out.append(f"could not create {path} ({exc.strerror}): run `course init` as root, or jobs run "
                       f"without GPU device isolation to try")
            continue
        out.append(f"created: {path} (char {NVIDIA_MAJOR}:{i}, simulated GPU {i}: isolation locks and masks it)")
    return out
