"""Wiring the hardware layer into the running service (called from ``HiveLabApp``).

``make_monitor(service, cluster, cluster_gpus, nvml_backend, interval_s, registry)`` builds the
:class:`~.monitor.HardwareMonitor` for the local machine: it samples the GPUs NVML sees on the node
this server runs on (when that node is part of the scheduled cluster; ``cluster_gpus``: the cluster
view's ``gpus``), reports bad GPUs to ``service.hardware_events.gpu_failed`` and repaired ones to
``service.hardware_events.gpu_repaired``, and feeds the GPU metrics.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

from hive_lab_server.hardware.monitor import HardwareMonitor
from hive_lab_server.hardware.nvml_backend import load_backend
from hive_lab_server.hardware.sampler import JobResolver
from hive_lab_server.hardware.sharing import discover

log = logging.getLogger(__name__)


def make_monitor(service: Any, cluster: Any, cluster_gpus: list[dict[str, Any]], nvml_backend: str = "auto",
                 interval_s: float = 5.0, registry: Any = None) -> HardwareMonitor:
    local = getattr(cluster, "local", None)  # NodeInventory of this machine, when NVML saw GPUs
    gpus = [(g["node"], int(g["index"])) for g in cluster_gpus if g.get("index") is not None]
    node = None
    nvml = None
    if local is not None and any(n == local.node for n, _ in gpus):
        node = local.node
        nvml = load_backend(nvml_backend)
    elif local is not None:
        log.warning("hive-lab: this machine (%s) is not a node of the scheduled cluster; its GPUs are not monitored",
                    local.node)
    if nvml is not None and getattr(service, "sharing", None) is not None:
        try:  # GPU memory (a share's default budget) and MIG devices (mig mode) of this machine's GPUs
            nvml.nvmlInit()
            try:
                service.sharing.gpu_memory_mb, service.sharing.mig_devices = discover(nvml, node)
            finally:
                nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 (NVML refusing leaves shares on their stated budgets only)
            log.exception("hive-lab: could not read GPU memory / MIG devices for GPU shares")
    types = {(g["node"], int(g["index"])): g.get("type") or "" for g in cluster_gpus}
    models = {(local.node, g.index): g.model for g in local.gpus} if local is not None else {}
    inventory = {key: {"uuid": service.gpu_uuids.get(key, ""), "type": types.get(key, ""), "model": models.get(key, "")}
                 for key in gpus}

    def placement() -> dict[tuple[str, int], list[str]]:
        out: dict[tuple[str, int], list[str]] = {}
        for job in service.active.values():
            for p in job.placement:
                for g in p.gpus:
                    out.setdefault((p.node, int(g)), []).append(job.id)
        return out

    def labels() -> dict[str, dict[str, str]]:
        out = {}
        for job in service.active.values():
            share = job.spec.share
            out[job.id] = {"user": job.user, "vc": job.vc}
            if share is not None:
                out[job.id]["share"] = f"{share:g}"  # a share of its GPU: its per-process utilisation series
        return out

    def drained() -> set[tuple[str, int]]:
        drains = service.hardware_events
        return {k for k in gpus if k[0] in drains.drained_nodes or k in drains.drained_gpus}

    return HardwareMonitor(
        nvml=nvml, node=node, gpus=gpus,
        # looked up when called, so the monitor can be built before the service grows these methods
        on_bad=lambda node_, gpu, reason: service.hardware_events.gpu_failed(node_, gpu, reason),
        on_healthy=lambda node_, gpu: service.hardware_events.gpu_repaired(node_, gpu), drained=drained,
        placement=placement, job_labels=labels,
        # the launcher's own tasks (processes, containers): ``Launcher.task_pids`` / ``task_containers``
        job_resolver=lambda: JobResolver(service.launcher.task_pids(), service.launcher.task_containers()),
        registry=registry, interval_s=interval_s, inventory=inventory,
        state_path=pathlib.Path(service.jobs_root) / ".hardware" / "health.json",
        on_job_usage=lambda usage: service.shares.share_memory({j: u.memory_used_mb for j, u in usage.items()}),
    )
