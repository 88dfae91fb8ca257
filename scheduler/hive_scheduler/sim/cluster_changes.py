"""What-if changes to a cluster model, for replays: a VC with more (or fewer) GPUs, more nodes.

``apply_changes(cluster, {"vcs": {"cv-101": 12}, "nodes": 2})`` returns the changed model in HiveD's form
(a dict ``load_cluster_config`` takes) and what was done, in words. A VC's new size is written as whole
node cells plus single GPUs of its one GPU type (a VC over several GPU types, or with pinned cells, is
edited in its file instead). When the physical cluster cannot hold every VC's guarantee after a resize,
nodes like the VC's are added until it can, and the description says how many.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..config import ClusterConfig, ConfigError, load_cluster_config

__all__ = ["ChangeError", "apply_changes", "resize_vc", "add_nodes", "describe_changes"]

MAX_ADDED_NODES = 4096


class ChangeError(ValueError):
    """A change that cannot be applied; the message says what to give instead."""


def _config(cluster: Any) -> ClusterConfig:
    return cluster if isinstance(cluster, ClusterConfig) else load_cluster_config(cluster)


def _vc_chain(cfg: ClusterConfig, vc: str) -> str:
    if vc not in cfg.virtual_clusters:
        raise ChangeError(f"unknown VC {vc!r}; VCs: {', '.join(sorted(cfg.virtual_clusters))}")
    spec = cfg.virtual_clusters[vc]
    if spec.pinned_cells:
        raise ChangeError(f"VC {vc!r} has pinned cells; change it in the cluster file instead")
    chains = sorted({v.chain for v in spec.virtual_cells})
    if len(chains) > 1:
        raise ChangeError(f"VC {vc!r} spans several GPU types ({', '.join(chains)}); change it in the cluster file")
    if chains:
        return chains[0]
    if len(cfg.chains) == 1:
        return next(iter(cfg.chains))
    raise ChangeError(f"VC {vc!r} has no cells and the cluster has several GPU types; change it in the cluster file")


def _virtual_cells(cfg: ClusterConfig, chain_name: str, gpus: int) -> list[dict[str, Any]]:
    chain = cfg.chains[chain_name]
    node_path = chain.types[: chain.types.index(chain.node_type) + 1]
    per_node = cfg.cell_types[chain.node_type].leaf_count
    nodes, rest = divmod(gpus, per_node)
    cells = []
    if nodes:
        cells.append({"cellType": ".".join(node_path), "cellNumber": nodes})
    if rest:
        cells.append({"cellType": ".".join(chain.types), "cellNumber": rest})
    return cells


def add_nodes(cluster: Any, count: int, chain: str | None = None) -> dict[str, Any]:
    """The model with ``count`` more nodes, each a copy of the last top-level node cell (of ``chain``)."""
    cfg = _config(cluster)
    if count < 0:
        raise ChangeError(f"nodes: give the number of nodes to add (>= 0), got {count}")
    data = cfg.to_dict()
    cells = data["physicalCluster"]["physicalCells"]
    node_types = {c.node_type for n, c in cfg.chains.items() if chain is None or n == chain}
    tops = [c for c in cells if c["cellType"] in node_types]
    if count and not tops:
        raise ChangeError("the cluster's top-level cells are not nodes (racks?); add nodes in the cluster file")
    names = {n for n in cfg.nodes}
    for k in range(count):
        model = tops[-1]
        new = copy.deepcopy(model)
        i = k + 1
        while f"{model['cellAddress']}-x{i}" in names:
            i += 1
        new["cellAddress"] = f"{model['cellAddress']}-x{i}"
        names.add(new["cellAddress"])
        cells.append(new)
        if model["cellAddress"] in data.get("nodeResources", {}):
            data["nodeResources"][new["cellAddress"]] = dict(data["nodeResources"][model["cellAddress"]])
    return data


def resize_vc(cluster: Any, vc: str, gpus: int) -> tuple[dict[str, Any], int]:
    """The model with ``vc`` guaranteed ``gpus`` GPUs, and how many nodes had to be added for it."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ChangeError(f"vcs.{vc}: give a whole number of GPUs >= 0, got {gpus!r}")
    cfg = _config(cluster)
    chain = _vc_chain(cfg, vc)
    data = cfg.to_dict()
    data["virtualClusters"][vc] = {"virtualCells": _virtual_cells(cfg, chain, gpus)}
    guaranteed = sum(cfg.vc_gpus(v) for v, s in cfg.virtual_clusters.items()
                     if v != vc and any(c.chain == chain for c in s.virtual_cells)) + gpus
    physical = sum(cfg.cell_types[c.type].leaf_count for c in cfg.physical_cells if c.chain == chain)
    per_node = cfg.cell_types[cfg.chains[chain].node_type].leaf_count
    added = max(0, -(-(guaranteed - physical) // per_node))
    while True:
        if added > MAX_ADDED_NODES:
            raise ChangeError(f"vcs.{vc}: {gpus} GPUs would need more than {MAX_ADDED_NODES} added nodes")
        candidate = add_nodes(cfg, added, chain) if added else copy.deepcopy(cfg.to_dict())
        candidate["virtualClusters"][vc] = data["virtualClusters"][vc]
        try:
            load_cluster_config(candidate)
            return candidate, added
        except ConfigError:
            added += 1  # the buddy structure needs whole free cells; one more node


def apply_changes(cluster: Any, changes: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """``changes``: ``{"vcs": {vc: gpus, ...}, "nodes": n}`` (both optional). Returns (model, what was done)."""
    cfg = _config(cluster)
    changes = dict(changes or {})
    unknown = sorted(set(changes) - {"vcs", "nodes", "overflow", "order"})
    if unknown:
        raise ChangeError(f"unknown change {unknown[0]!r}; use vcs ({{vc: gpus}}), nodes (to add), overflow, order")
    said: list[str] = []
    data: Any = cfg
    nodes = changes.get("nodes")
    if nodes:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 0:
            raise ChangeError(f"nodes: give the number of nodes to add (>= 0), got {nodes!r}")
        data = add_nodes(cfg, nodes)
        said.append(f"{nodes} more node{'s' if nodes != 1 else ''}")
    vcs = changes.get("vcs") or {}
    if not isinstance(vcs, Mapping):
        raise ChangeError("vcs: give a mapping of VC name -> GPUs, e.g. {\"cv-101\": 12}")
    for vc in sorted(vcs):
        before = _config(data).vc_gpus(vc) if vc in _config(data).virtual_clusters else None
        data, added = resize_vc(data, vc, vcs[vc])
        text = f"{vc} at {vcs[vc]} GPUs" + (f" (was {before})" if before is not None else "")
        if added:
            text += f" and {added} more node{'s' if added != 1 else ''} to hold it"
        said.append(text)
    if "overflow" in changes:
        said.append("overflow " + ("on" if changes["overflow"] else "off"))
    if "order" in changes:
        said.append(f"order {changes['order']}")
    return (data if isinstance(data, dict) else cfg.to_dict()), said


def describe_changes(said: list[str]) -> str:
    return ", ".join(said) if said else "the live configuration"
