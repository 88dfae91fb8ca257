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
    inventory: Any = None


def _from_inventory(found: Any) -> tuple[Any, dict[tuple[str, int], str]] | None:
    """Accept what ``hardware.inventory.detect_local_cluster()`` gives: None (no GPUs), a config
    source (dict/str/ClusterConfig), ``(config, uuids)``, or an object with ``config``/``cluster_config``
    and ``gpu_uuids``/``uuids`` attributes."""
    if found is None:
        return None
    uuids: Any = {}
    if isinstance(found, tuple) and len(found) == 2:
        cfg, uuids = found
    elif isinstance(found, (dict, str)) or type(found).__name__ == "ClusterConfig":
        cfg = found
    else:
        cfg = getattr(found, "config", None) or getattr(found, "cluster_config", None)
        uuids = getattr(found, "gpu_uuids", None) or getattr(found, "uuids", None) or {}
        if callable(uuids):
            uuids = uuids()
    if cfg is None:
        return None
    norm: dict[tuple[str, int], str] = {}
    if isinstance(uuids, dict):
        for key, value in uuids.items():
            if isinstance(key, tuple) and len(key) == 2:
                norm[(str(key[0]), int(key[1]))] = str(value)
            elif isinstance(value, (list, tuple)):  # node -> [uuid per index]
                for i, u in enumerate(value):
                    norm[(str(key), i)] = str(u)
    return cfg, norm


def resolve_cluster(source: Any = None) -> ClusterSource:
    if source not in (None, "", {}):
        return ClusterSource(load_cluster_config(source), {}, "config")
    try:
        from .hardware import inventory  # the hardware engineer's NVML inventory
    except ImportError:
        inventory = None
    if inventory is not None and hasattr(inventory, "detect_local_cluster"):
        try:
            found = _from_inventory(inventory.detect_local_cluster())
        except Exception:  # NVML trouble must not keep the server from starting
            log.exception("hive-lab: GPU inventory failed; using the simulated default cluster")
            found = None
        if found is not None:
            cfg, uuids = found
            config = cfg if type(cfg).__name__ == "ClusterConfig" else load_cluster_config(cfg)
            return ClusterSource(config, uuids, "nvml", inventory)
    return ClusterSource(load_cluster_config("default"), {}, "default")
