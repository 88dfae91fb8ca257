"""Which cluster the service schedules: a configured model, the local NVIDIA GPUs, or the default.

``resolve_cluster(source)`` returns the core's ``ClusterConfig`` and, where the inventory knows them,
the GPU UUIDs per ``(node, index)`` (used for ``CUDA_VISIBLE_DEVICES`` and docker device requests).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from hive_scheduler import load_cluster_config

log = logging.getLogger(__name__)


@dataclass
class ClusterSource:
    config: Any  # hive_scheduler.ClusterConfig
    gpu_uuids: dict[tuple[str, int], str] = field(default_factory=dict)
    origin: str = "default"  # "config", "nvml", "default"
    local: Any = None  # hardware.inventory.NodeInventory of this machine, when NVML saw GPUs

    @property
    def inventory(self) -> Any:  # what launchers were given before; same object
        return self.local


def _local_inventory(nvml_backend: str) -> Any:
    """What NVML sees on this machine (``hardware.inventory.NodeInventory``), or None; never raises."""
    try:
        from hive_lab_server.hardware.inventory import detect_local_inventory

        return detect_local_inventory(nvml_backend)
    except Exception:  # NVML trouble must not keep the server from starting
        log.exception("hive-lab: GPU inventory failed; no local GPUs used")
        return None


def resolve_cluster(source: Any = None, nvml_backend: str = "auto") -> ClusterSource:
    """A configured cluster (checked against the local GPUs when NVML sees any), else the local GPUs
    as NVML sees them (``nvml_backend``: "auto", "none" or "fake:<description>"), else "default"."""
    from hive_lab_server.hardware.inventory import build_cluster_config, compare_with_config, gpu_uuid_map

    local = _local_inventory(nvml_backend) if nvml_backend != "none" else None
    if source not in (None, "", {}):
        config = load_cluster_config(source)
        uuids: dict[tuple[str, int], str] = {}
        if local is not None:
            for line in compare_with_config(local, config):
                log.warning("hive-lab: cluster config vs NVML: %s", line)
            if local.node in config.nodes:
                uuids = gpu_uuid_map(local)
        return ClusterSource(config, uuids, "config", local)
    if local is not None:
        return ClusterSource(load_cluster_config(build_cluster_config(local)), gpu_uuid_map(local), "nvml", local)
    return ClusterSource(load_cluster_config("default"), {}, "default")
