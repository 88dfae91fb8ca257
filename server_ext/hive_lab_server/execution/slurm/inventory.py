"""What a Slurm cluster has, read from Slurm itself, turned into the core's HiveD cluster config.

Slurm already knows the nodes (``sinfo --json`` or slurmrestd's ``/nodes``), their GPUs (GRES with
types), CPUs, memory and state, and the network (``scontrol show topology`` from ``topology.conf``).
``cluster_config_from_slurm()`` builds the HiveD form from that, so the admin describes the cluster
once (in Slurm) and only adds the virtual clusters::

    # jupyter_server_config.py
    from hive_lab_server.execution.slurm.inventory import cluster_config_from_slurm
    c.HiveLabApp.launcher = "slurm"
    c.HiveLabApp.cluster_config = cluster_config_from_slurm(vcs={"research": 8, "cv-101": {"gpus": 4}})

Mapping: each leaf switch of ``topology.conf`` becomes a rack cell, each node a node cell
(``isNodeLevel``), each GPU a leaf cell whose address is its GRES index. GPU types come from the GRES
type: ``gpu:a100:4`` (four A100), or hive-lab's per-index form ``gpu:a100_g0:1,gpu:a100_g1:1,...``
(docs/slurm.md) where the type also names the device index. Drained, down and failed nodes are
reported in ``SlurmInventory.bad_nodes`` (the service marks them bad in the core).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import hostlist

from hive_lab_server.execution.slurm.cli import SlurmCLI

PER_INDEX_TYPE = re.compile(r"^(?P<model>.+)_g(?P<index>\d+)$")
BAD_STATES = {"down", "error", "fail", "failing", "future", "unknown"}
BAD_FLAGS = {"DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING", "MAINTENANCE", "MAINT", "REBOOT_REQUESTED",
             "POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN", "INVALID_REG"}  # NOT_RESPONDING alone is transient: DOWN follows


@dataclass(frozen=True)
class SlurmGpu:
    index: int  # device index on the node (the GRES bitmap position)
    model: str  # "a100"
    gres_type: str  # what a job asks for: "a100_g2" (per-index) or "a100"; "" for untyped GRES


@dataclass
class SlurmNode:
    name: str
    address: str
    cpus: int
    memory_mb: int
    gpus: list[SlurmGpu]
    state: str  # "idle", "mixed", "allocated", "down", ...
    flags: tuple[str, ...] = ()
    reason: str = ""

    @property
    def bad(self) -> bool:
        return self.state.lower() in BAD_STATES or bool(set(self.flags) & BAD_FLAGS)

    @property
    def per_index(self) -> bool:
        """Every GPU has its own GRES type, so a job can name exactly which ones it gets."""
        return bool(self.gpus) and len({g.gres_type for g in self.gpus}) == len(self.gpus) and all(g.gres_type for g in self.gpus)

    def gpu(self, index: int) -> SlurmGpu | None:
        return next((g for g in self.gpus if g.index == index), None)


@dataclass
class SlurmInventory:
    nodes: dict[str, SlurmNode]
    racks: dict[str, list[str]] = field(default_factory=dict)  # leaf switch -> node names

    @property
    def bad_nodes(self) -> dict[str, str]:
        """node -> why it must not get new work (Slurm's state and reason)."""
        out = {}
        for name, n in sorted(self.nodes.items()):
            if n.bad:
                what = "+".join([n.state.upper(), *n.flags])
                out[name] = f"Slurm says {what}" + (f": {n.reason}" if n.reason else "")
        return out


# --- parsing ------------------------------------------------------------------------------------


def parse_gres(gres: str, default_model: str = "gpu") -> list[SlurmGpu]:
    """GPUs of one node from its ``Gres=`` string (``gpu:a100:4(S:0-1)``, ``gpu:a100_g0:1,...``, ``gpu:2``).

    Indices follow Slurm's order of the node's GPU GRES (gres.conf order), which is what
    ``SLURM_JOB_GPUS`` reports.
    """
    gpus: list[SlurmGpu] = []
    if not gres or gres in ("(null)", "N/A"):
        return gpus
    for item in re.split(r",(?![^()]*\))", gres):
        item = re.sub(r"\(.*\)$", "", item.strip())
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 2:
            gtype, count = "", parts[1]
        elif len(parts) == 3:
            gtype, count = parts[1], parts[2]
        else:
            continue
        try:
            n = int(count)
        except ValueError:
            continue
        m = PER_INDEX_TYPE.match(gtype)
        for _ in range(n):
            if m and n == 1:
                gpus.append(SlurmGpu(int(m.group("index")), m.group("model"), gtype))
            else:
                gpus.append(SlurmGpu(-1, gtype or default_model, gtype))
    # indices: per-index types name theirs; the rest take the next free ones, in order
    used = {g.index for g in gpus if g.index >= 0}
    out, nxt = [], 0
    for g in gpus:
        if g.index < 0:
            while nxt in used:
                nxt += 1
            used.add(nxt)
            g = SlurmGpu(nxt, g.model, g.gres_type)
        out.append(g)
    return sorted(out, key=lambda g: g.index)


def parse_node(raw: dict[str, Any], default_model: str = "gpu") -> SlurmNode:
    """One node from ``sinfo --json`` (or slurmrestd ``/nodes``; same field names in v0.0.38)."""
    state = raw.get("state") or ""
    if isinstance(state, list):  # newer data_parser versions: a list of flags
        flags = tuple(str(s).upper() for s in state[1:])
        state = str(state[0]) if state else ""
    else:
        flags = tuple(str(s).upper() for s in raw.get("state_flags") or ())
    return SlurmNode(
        name=raw["name"],
        address=raw.get("address") or raw.get("hostname") or raw["name"],
        cpus=int(raw.get("cpus") or 0),
        memory_mb=int(raw.get("real_memory") or 0),
        gpus=parse_gres(raw.get("gres") or "", default_model),
        state=str(state).lower(),
        flags=flags,
        reason=raw.get("reason") or "",
    )


def parse_topology(text: str) -> dict[str, list[str]]:
    """Leaf switches -> node names, from ``scontrol show topology`` or ``topology.conf`` text."""
    racks: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        name, nodes = fields.get("SwitchName"), fields.get("Nodes")
        # a switch with Switches= is above racks (``scontrol show topology`` also lists its Nodes=)
        if name and nodes and not fields.get("Switches"):
            racks[name] = hostlist.expand_hostlist(nodes)
    return racks


def read_inventory(cli: SlurmCLI | None = None, partition: str | None = None, default_model: str = "gpu") -> SlurmInventory:
    """The cluster as Slurm sees it now (nodes of ``partition`` only, when given)."""
    cli = cli or SlurmCLI()
    raw_nodes = cli.nodes_sync()
    return inventory_from(raw_nodes, cli.topology_sync(), partition, default_model)


def inventory_from(raw_nodes: list[dict[str, Any]], topology_text: str = "", partition: str | None = None,
                   default_model: str = "gpu") -> SlurmInventory:
    nodes: dict[str, SlurmNode] = {}
    for raw in raw_nodes:
        if partition and partition not in (raw.get("partitions") or []):
            continue
        node = parse_node(raw, default_model)
        nodes.setdefault(node.name, node)  # sinfo lists a node once per partition
    racks = {s: [n for n in names if n in nodes] for s, names in parse_topology(topology_text).items()}
    return SlurmInventory(nodes, {s: names for s, names in racks.items() if names})


# --- HiveD config -------------------------------------------------------------------------------


def _type_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-]", "-", model).upper()


def cluster_config_from_inventory(
    inv: SlurmInventory,
    vcs: dict[str, Any] | None = None,
    levels: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """The HiveD config dict for the core (``load_cluster_config`` accepts it).

    ``vcs``: VC name -> GPUs (int), ``{"gpus": N, "gpu_type": "A100"}``, ``{"cells": {"node": 1, "rack": 1}}``
    or HiveD's own ``{"virtualCells": [...], "pinnedCells": [...]}``.
    ``levels``: cell levels inside a node, each splitting in two (``["pair"]`` on 4 GPUs: GPU -> pair -> node),
    as in the core's short form; Slurm does not know NVLink, so this is the admin's word.
    """
    by_model: dict[str, dict[int, list[SlurmNode]]] = {}  # model -> GPUs per node -> nodes
    for node in sorted(inv.nodes.values(), key=lambda n: _natural(n.name)):
        if not node.gpus:
            continue  # CPU-only nodes hold no cells
        models = {g.model for g in node.gpus}
        if len(models) != 1:
            raise ValueError(f"node {node.name} has GPUs of several types ({', '.join(sorted(models))}); "
                             "hive-lab cells need one GPU type per node")
        by_model.setdefault(_type_name(models.pop()), {}).setdefault(len(node.gpus), []).append(node)
    if not by_model:
        raise ValueError("Slurm reports no node with GPU GRES (gres.conf / Gres=gpu:...); nothing to schedule")

    cell_types: dict[str, dict[str, Any]] = {}
    node_type_of: dict[str, str] = {}  # node -> node cell type
    leaf_of: dict[str, str] = {}
    for model, counts in by_model.items():
        for n_gpus, nodes in counts.items():
            suffix = "" if len(counts) == 1 else f"-{n_gpus}"
            child, child_n = model, n_gpus
            if n_gpus % (2 ** len(levels)):
                raise ValueError(f"levels {list(levels)} split {n_gpus} GPUs in two {len(levels)} times; "
                                 f"nodes {', '.join(n.name for n in nodes)} have {n_gpus} GPUs")
            size = 1
            for level in levels:
                size *= 2
                name = f"{model}-{level.upper()}{suffix}"
                cell_types[name] = {"childCellType": child, "childCellNumber": 2}
                child, child_n = name, n_gpus // size
            node_type = f"{model}-NODE{suffix}"
            cell_types[node_type] = {"childCellType": child, "childCellNumber": child_n, "isNodeLevel": True}
            for n in nodes:
                node_type_of[n.name] = node_type
                leaf_of[n.name] = model

    def node_cell(node: SlurmNode) -> dict[str, Any]:
        leaves = [{"cellAddress": str(g.index)} for g in node.gpus]
        for _ in levels:  # group leaves in pairs, then pairs of pairs ...
            leaves = [{"cellChildren": leaves[i:i + 2]} for i in range(0, len(leaves), 2)]
        return {"cellAddress": node.name, "cellChildren": leaves}

    physical: list[dict[str, Any]] = []
    placed: set[str] = set()
    for rack in sorted(inv.racks, key=_natural):
        groups: dict[str, list[SlurmNode]] = {}
        for name in inv.racks[rack]:
            if name in node_type_of and name not in placed:
                groups.setdefault(node_type_of[name], []).append(inv.nodes[name])
        for node_type, nodes in sorted(groups.items()):
            rack_type = f"{node_type.replace('-NODE', '-RACK', 1)}-{len(nodes)}"
            cell_types[rack_type] = {"childCellType": node_type, "childCellNumber": len(nodes)}
            address = rack if len(groups) == 1 else f"{rack}-{node_type}"
            physical.append({"cellType": rack_type, "cellAddress": address,
                             "cellChildren": [node_cell(n) for n in nodes]})
            placed.update(n.name for n in nodes)
    for name in sorted(node_type_of, key=_natural):
        if name not in placed:
            physical.append(dict(node_cell(inv.nodes[name]), cellType=node_type_of[name]))

    # rack types named by their size only when sizes differ
    rack_types = [t for t in cell_types if "-RACK" in t]
    by_node_type: dict[str, list[str]] = {}
    for t in rack_types:
        by_node_type.setdefault(cell_types[t]["childCellType"], []).append(t)
    rename = {ts[0]: ts[0].rsplit("-", 1)[0] for ts in by_node_type.values() if len(ts) == 1}
    if rename:
        cell_types = {rename.get(k, k): v for k, v in cell_types.items()}
        for c in physical:
            c["cellType"] = rename.get(c["cellType"], c["cellType"])

    config: dict[str, Any] = {
        "physicalCluster": {"cellTypes": cell_types, "physicalCells": physical},
        "virtualClusters": virtual_clusters(vcs or {}, cell_types, physical),
        "nodeResources": {n: {"cpus": inv.nodes[n].cpus or 1, "memoryMB": inv.nodes[n].memory_mb or 1}
                          for n in sorted(node_type_of, key=_natural)},
    }
    return config


def virtual_clusters(vcs: dict[str, Any], cell_types: dict[str, dict[str, Any]],
                     physical: list[dict[str, Any]]) -> dict[str, Any]:
    """hive-lab's VC shorthand -> HiveD ``virtualClusters`` over the chains built from Slurm."""
    chains = _chains(cell_types, physical)  # top type -> [top, ..., leaf], largest first
    out: dict[str, Any] = {}
    for name, spec in vcs.items():
        if isinstance(spec, dict) and ("virtualCells" in spec or "pinnedCells" in spec):
            out[name] = spec
            continue
        if isinstance(spec, bool) or not isinstance(spec, (int, dict)):
            raise ValueError(f"vcs.{name}: give a GPU count, {{gpus: N, gpu_type: T}}, {{cells: {{node: N}}}} "
                             f"or HiveD virtualCells, got {spec!r}")
        spec = {"gpus": spec} if isinstance(spec, int) else dict(spec)
        gpu_type = spec.get("gpu_type")
        usable = [c for c in chains if gpu_type is None or c[-1] == _type_name(str(gpu_type))]
        if not usable:
            raise ValueError(f"vcs.{name}.gpu_type: no Slurm node has GPUs of type {gpu_type!r} "
                             f"(types: {', '.join(sorted({c[-1] for c in chains}))})")
        chain = usable[0]
        if "cells" in spec:
            cells = []
            for level, number in spec["cells"].items():
                match = [t for t in chain if t.split("-", 1)[-1].split("-")[0] == str(level).upper()
                         or (str(level).lower() in ("gpu", "leaf") and t == chain[-1])]
                if not match:
                    raise ValueError(f"vcs.{name}.cells.{level}: no such level in {' > '.join(chain)}")
                cells.append({"cellType": _dotted(chain, match[0]), "cellNumber": int(number)})
            out[name] = {"virtualCells": cells}
            continue
        gpus = int(spec.get("gpus", 0))
        if gpus <= 0:
            raise ValueError(f"vcs.{name}.gpus: must be a positive number of GPUs, got {spec.get('gpus')!r}")
        node_type = next(t for t in chain if cell_types.get(t, {}).get("isNodeLevel"))
        per_node = _gpus_in(node_type, cell_types)
        cells = []
        if gpus // per_node:
            cells.append({"cellType": _dotted(chain, node_type), "cellNumber": gpus // per_node})
        if gpus % per_node:
            cells.append({"cellType": _dotted(chain, chain[-1]), "cellNumber": gpus % per_node})
        out[name] = {"virtualCells": cells}
    return out


def _chains(cell_types: dict[str, dict[str, Any]], physical: list[dict[str, Any]]) -> list[list[str]]:
    tops: dict[str, int] = {}
    for c in physical:
        tops[c["cellType"]] = tops.get(c["cellType"], 0) + _gpus_in(c["cellType"], cell_types)
    chains = []
    for top in sorted(tops, key=lambda t: -tops[t]):
        seq, t = [top], top
        while t in cell_types:
            t = cell_types[t]["childCellType"]
            seq.append(t)
        chains.append(seq)
    return chains


def _dotted(chain: list[str], cell_type: str) -> str:
    return ".".join(chain[: chain.index(cell_type) + 1])


def _gpus_in(cell_type: str, cell_types: dict[str, dict[str, Any]]) -> int:
    n = 1
    while cell_type in cell_types:
        n *= cell_types[cell_type]["childCellNumber"]
        cell_type = cell_types[cell_type]["childCellType"]
    return n


def _natural(s: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def cluster_config_from_slurm(vcs: dict[str, Any] | None = None, *, slurm_conf: str | None = None,
                              partition: str | None = None, levels: list[str] | tuple[str, ...] = (),
                              default_model: str = "gpu") -> dict[str, Any]:
    """Read the inventory from Slurm (CLI) and return the HiveD config dict (see module doc)."""
    inv = read_inventory(SlurmCLI(slurm_conf), partition, default_model)
    return cluster_config_from_inventory(inv, vcs, levels)
