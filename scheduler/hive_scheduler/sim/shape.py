"""A flat view of a cluster model for the simulator: nodes with their GPUs, and each VC's guarantee in GPUs.

The baselines (``quota``, ``fifo``), the trace reader (VC sizes) and the metrics (guaranteed GPUs,
total GPUs) only need this much; it is derived from the core's HiveD-form configuration
(``ClusterConfig.to_dict()``), which is part of the core's contract, plus node CPU/memory from
``ClusterConfig.nodes`` when present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

__all__ = ["NodeShape", "ClusterShape", "cluster_shape"]


@dataclass(frozen=True)
class NodeShape:
    name: str
    gpu_types: tuple[str, ...]  # the type of GPU index i
    cpus: float
    memory_mb: int

    @cached_property
    def gpu_count(self) -> int:
        return len(self.gpu_types)


@dataclass(frozen=True)
class ClusterShape:
    nodes: tuple[NodeShape, ...]
    vc_gpus: Mapping[str, Mapping[str, int]]  # vc -> gpu type -> guaranteed GPUs
    pinned: Mapping[str, str] = field(default_factory=dict)  # pinned cell id -> vc

    @cached_property
    def total_gpus(self) -> int:
        return sum(n.gpu_count for n in self.nodes)

    def vc_total(self, vc: str) -> int:
        return sum(self.vc_gpus.get(vc, {}).values())

    @property
    def vcs(self) -> list[str]:
        return sorted(self.vc_gpus)

    @cached_property
    def gpu_types(self) -> list[str]:
        return sorted({t for n in self.nodes for t in n.gpu_types})

    @cached_property
    def _max_per_node(self) -> dict[str | None, int]:
        most: dict[str | None, int] = {None: 0}
        for n in self.nodes:
            most[None] = max(most[None], n.gpu_count)
            for t in set(n.gpu_types):
                most[t] = max(most.get(t, 0), n.gpu_types.count(t))
        return most

    def max_gpus_per_node(self, gpu_type: str | None = None) -> int:
        return self._max_per_node.get(gpu_type, 0)


def _default_resources(gpus: int) -> tuple[float, int]:
    # docs/core-api.md: cpus 8 * gpus, memoryMB 65536 * gpus, at least 8 CPUs / 32 GiB
    return float(max(8, 8 * gpus)), max(32768, 65536 * gpus)


def _node_resources(config: Any, name: str, gpus: int, declared: Mapping[str, Any]) -> tuple[float, int]:
    info = getattr(config, "nodes", None)
    if isinstance(info, Mapping) and name in info:
        node = info[name]
        cpus = getattr(node, "cpus", None)
        mem = getattr(node, "memory_mb", None)
        if cpus is not None and mem is not None:
            return float(cpus), int(mem)
    spec = declared.get(name) or declared.get("*")
    cpus, mem = _default_resources(gpus)
    if isinstance(spec, Mapping):
        cpus = float(spec.get("cpus", cpus))
        mem = int(spec.get("memoryMB", mem))
    return cpus, mem


def _core_leaves(config: Any) -> dict[str, dict[int, str]] | None:
    """node -> GPU index -> GPU type, from the core's ``ClusterConfig.physical_cells`` trees (None if absent)."""
    cells = getattr(config, "physical_cells", None)
    types = getattr(config, "cell_types", None)
    if not isinstance(cells, list) or not isinstance(types, Mapping):
        return None
    out: dict[str, dict[int, str]] = {}
    stack = list(cells)
    while stack:
        cell = stack.pop()
        children = getattr(cell, "children", None)
        if children:
            stack.extend(children)
            continue
        node, gpu = getattr(cell, "node", None), getattr(cell, "gpu", None)
        if node is None or gpu is None:
            return None
        ctype = types.get(cell.type)
        out.setdefault(node, {})[int(gpu)] = getattr(ctype, "gpu_type", cell.type)
    return out


def cluster_shape(config: Any) -> ClusterShape:
    """Flatten a ``ClusterConfig`` (anything with ``to_dict()``) or a HiveD-form dict."""
    if isinstance(config, ClusterShape):
        return config
    hived = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    physical = hived.get("physicalCluster") or {}
    cell_types: Mapping[str, Mapping[str, Any]] = physical.get("cellTypes") or {}

    def leaf_type(t: str) -> str:
        while t in cell_types:
            t = cell_types[t]["childCellType"]
        return t

    def leaf_count(t: str) -> int:
        n = 1
        while t in cell_types:
            n *= int(cell_types[t]["childCellNumber"])
            t = cell_types[t]["childCellType"]
        return n

    def has_node_level(t: str) -> bool:
        while t in cell_types:
            if cell_types[t].get("isNodeLevel"):
                return True
            t = cell_types[t]["childCellType"]
        return False

    node_gpus: dict[str, list[str]] = {}
    pinned_leaves: dict[str, tuple[str, int]] = {}

    def walk(cell: Mapping[str, Any], ctype: str, node: str | None, path: str) -> None:
        addr = str(cell.get("cellAddress", "")) if cell else ""
        if node is None and (cell_types.get(ctype, {}).get("isNodeLevel") or not has_node_level(ctype)):
            node = addr or path
        if cell and cell.get("pinnedCellId"):
            pinned_leaves[str(cell["pinnedCellId"])] = (leaf_type(ctype), leaf_count(ctype))
        if ctype not in cell_types:  # a leaf GPU
            node_gpus.setdefault(node or path, []).append(ctype)
            return
        child_type = cell_types[ctype]["childCellType"]
        children = list((cell or {}).get("cellChildren") or [])
        number = int(cell_types[ctype]["childCellNumber"])
        children += [{}] * (number - len(children))
        for i, child in enumerate(children):
            walk(child, child_type, node, f"{path}/{i}")

    for i, cell in enumerate(physical.get("physicalCells") or []):
        walk(cell, cell["cellType"], None, f"cell-{i}")

    declared = hived.get("nodeResources") or {}
    nodes = []
    info = getattr(config, "nodes", None)
    leaves = _core_leaves(config)
    if leaves is not None and isinstance(info, Mapping):
        # the core's expanded model: each leaf cell knows its node and GPU index (several chains per node too)
        for name, node in info.items():
            types = leaves.get(name, {})
            nodes.append(NodeShape(name=name, gpu_types=tuple(types[i] for i in sorted(types)),
                                   cpus=float(node.cpus), memory_mb=int(node.memory_mb)))
    else:
        for name, types in node_gpus.items():
            cpus, mem = _node_resources(config, name, len(types), declared)
            nodes.append(NodeShape(name=name, gpu_types=tuple(types), cpus=cpus, memory_mb=mem))

    vc_gpus: dict[str, dict[str, int]] = {}
    pinned_to_vc: dict[str, str] = {}
    for vc, spec in sorted((hived.get("virtualClusters") or {}).items()):
        counts: dict[str, int] = {}
        for vcell in (spec or {}).get("virtualCells") or []:
            ctype = str(vcell["cellType"]).split(".")[-1]
            lt = leaf_type(ctype)
            counts[lt] = counts.get(lt, 0) + leaf_count(ctype) * int(vcell.get("cellNumber", 1))
        for pin in (spec or {}).get("pinnedCells") or []:
            pid = str(pin["pinnedCellId"])
            pinned_to_vc[pid] = vc
            if pid in pinned_leaves:
                lt, n = pinned_leaves[pid]
                counts[lt] = counts.get(lt, 0) + n
        vc_gpus[vc] = counts
    return ClusterShape(nodes=tuple(nodes), vc_gpus=vc_gpus, pinned=pinned_to_vc)
