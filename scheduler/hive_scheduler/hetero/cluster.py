"""GPUs per type (and per VC) for the round-based simulator.

Two forms: the short form ``v100:8,p100:16,k80:24`` (one VC, ``default``), or a HiveD config
(``load_cluster_config``) with one chain per GPU type: its physical cells give the GPUs per type,
its virtual clusters each VC's own GPUs per type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHORT = re.compile(r"\s*([A-Za-z][\w.-]*)\s*[:=x]\s*(\d+)\s*")


class ClusterSpecError(ValueError):
    pass


@dataclass(frozen=True)
class GpuCluster:
    """GPUs per type for the whole cluster and, where VCs are defined, for each VC."""

    gpus: dict[str, int]  # type -> count, in the order given
    vcs: dict[str, dict[str, int]]  # vc -> type -> count

    @property
    def gpu_types(self) -> list[str]:
        return list(self.gpus)


def parse_short_form(text: str) -> GpuCluster | None:
    """``v100:8,p100:16`` -> GpuCluster, or None if ``text`` is not in that form."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        return None
    gpus: dict[str, int] = {}
    for part in parts:
        m = _SHORT.fullmatch(part)
        if m is None:
            return None
        name, count = m.group(1).lower(), int(m.group(2))
        if name in gpus:
            raise ClusterSpecError(f"cluster {text!r}: GPU type {name} is named twice")
        if count < 1:
            raise ClusterSpecError(f"cluster {text!r}: {name} needs at least 1 GPU")
        gpus[name] = count
    return GpuCluster(gpus, {"default": dict(gpus)})


def from_hived_config(config) -> GpuCluster:
    """GPUs per type from a loaded HiveD config (``hive_scheduler.load_cluster_config``)."""
    gpus: dict[str, int] = {}
    for cell in config.physical_cells:
        ct = config.cell_types[cell.type]
        key = ct.gpu_type.lower()
        gpus[key] = gpus.get(key, 0) + ct.leaf_count
    vcs: dict[str, dict[str, int]] = {}
    for name, spec in sorted(config.virtual_clusters.items()):
        share: dict[str, int] = {}
        for v in spec.virtual_cells:
            ct = config.cell_types[v.cell_type]
            key = ct.gpu_type.lower()
            share[key] = share.get(key, 0) + ct.leaf_count * v.number
        for pid in spec.pinned_cells:
            ct = config.cell_types[config.pinned_cells[pid].type]
            key = ct.gpu_type.lower()
            share[key] = share.get(key, 0) + ct.leaf_count
        vcs[name] = share
    if not vcs:
        vcs = {"default": dict(gpus)}
    return GpuCluster(gpus, vcs)


def load_gpu_cluster(text: str) -> GpuCluster:
    short = parse_short_form(text)
    if short is not None:
        return short
    from ..config import load_cluster_config

    return from_hived_config(load_cluster_config(text))
