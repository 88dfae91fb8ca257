"""Cluster configuration: HiveD's format (unchanged), the short form and built-in models.

``load_cluster_config`` validates everything and expands the config into a ``ClusterConfig``:
cell types with their levels, physical cell trees (with node names and GPU indices filled in),
virtual clusters and per-node CPU/memory. Any error raises ``ConfigError`` naming the field path.
"""

from __future__ import annotations

import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import ConfigError

DEFAULT_CPUS_PER_GPU = 8
DEFAULT_MEMORY_MB_PER_GPU = 65536
MIN_NODE_CPUS = 8
MIN_NODE_MEMORY_MB = 32768


@dataclass(frozen=True)
class CellType:
    """One cell type. Leaf types (GPU types) have ``child_type=None`` and ``level=1``."""

    name: str
    child_type: str | None
    child_number: int
    is_node_level: bool
    level: int
    leaf_count: int
    gpu_type: str


@dataclass
class PhysicalCellSpec:
    """A physical cell of the expanded config (a tree)."""

    type: str
    address: str
    chain: str
    level: int
    node: str | None = None
    gpu: int | None = None
    pinned_id: str | None = None
    children: list["PhysicalCellSpec"] = field(default_factory=list)
    explicit_address: bool = True

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(frozen=True)
class VirtualCellSpec:
    chain: str
    cell_type: str
    number: int


@dataclass(frozen=True)
class VirtualClusterSpec:
    name: str
    virtual_cells: tuple[VirtualCellSpec, ...] = ()
    pinned_cells: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeInfo:
    name: str
    cpus: float
    memory_mb: int
    gpu_count: int
    gpu_types: tuple[str, ...]


@dataclass(frozen=True)
class Chain:
    """A cell chain: the cell types from a top-level physical cell type down to its GPU type."""

    name: str
    types: tuple[str, ...]  # top -> leaf
    gpu_type: str
    node_type: str

    def type_at(self, level: int) -> str:
        return self.types[len(self.types) - level]


@dataclass
class ClusterConfig:
    """The validated, expanded cluster model."""

    cell_types: dict[str, CellType]
    physical_cells: list[PhysicalCellSpec]
    virtual_clusters: dict[str, VirtualClusterSpec]
    nodes: dict[str, NodeInfo]
    chains: dict[str, Chain]
    pinned_cells: dict[str, PhysicalCellSpec]
    node_resources: dict[str, dict[str, Any]]
    name: str = ""

    @property
    def gpu_types(self) -> list[str]:
        return sorted({c.gpu_type for c in self.chains.values()})

    def gpu_count(self) -> int:
        return sum(n.gpu_count for n in self.nodes.values())

    def vc_gpus(self, vc: str) -> int:
        spec = self.virtual_clusters[vc]
        total = sum(self.cell_types[v.cell_type].leaf_count * v.number for v in spec.virtual_cells)
        for pid in spec.pinned_cells:
            total += self.cell_types[self.pinned_cells[pid].type].leaf_count
        return total

    def to_dict(self) -> dict[str, Any]:
        """The config in HiveD's form (plus ``nodeResources``), loadable again."""

        def cell_dict(c: PhysicalCellSpec, top: bool) -> dict[str, Any]:
            d: dict[str, Any] = {}
            if top:
                d["cellType"] = c.type
            d["cellAddress"] = c.address if c.level > 1 else str(c.gpu)
            if c.pinned_id:
                d["pinnedCellId"] = c.pinned_id
            if c.children:
                d["cellChildren"] = [cell_dict(ch, False) for ch in c.children]
            return d

        types = {}
        for t in self.cell_types.values():
            if t.child_type is None:
                continue
            d = {"childCellType": t.child_type, "childCellNumber": t.child_number}
            if t.is_node_level:
                d["isNodeLevel"] = True
            types[t.name] = d
        vcs = {}
        for name, vc in self.virtual_clusters.items():
            d: dict[str, Any] = {
                "virtualCells": [
                    {"cellType": _dotted(self.chains[v.chain], v.cell_type, self.cell_types), "cellNumber": v.number}
                    for v in vc.virtual_cells
                ]
            }
            if vc.pinned_cells:
                d["pinnedCells"] = [{"pinnedCellId": p} for p in vc.pinned_cells]
            vcs[name] = d
        return {
            "physicalCluster": {
                "cellTypes": types,
                "physicalCells": [cell_dict(c, True) for c in self.physical_cells],
            },
            "virtualClusters": vcs,
            "nodeResources": {
                n.name: {"cpus": n.cpus, "memoryMB": n.memory_mb} for n in self.nodes.values()
            },
        }


def _dotted(chain: Chain, cell_type: str, types: dict[str, CellType]) -> str:
    idx = chain.types.index(cell_type)
    return ".".join(chain.types[: idx + 1])


# ----------------------------------------------------------------------------- loading


def load_cluster_config(source: Any) -> ClusterConfig:
    """Load a cluster config from a path, a YAML/JSON string, a dict or a built-in model name."""
    if isinstance(source, ClusterConfig):
        return source
    name = ""
    if isinstance(source, pathlib.Path):
        data = _read_file(str(source))
        name = source.stem
    elif isinstance(source, str):
        from .builtin_models import BUILTIN_MODELS, builtin_model

        s = source.strip()
        if s in BUILTIN_MODELS:
            data = builtin_model(s)
            name = s
        elif "\n" not in s and (os.path.exists(s) or s.endswith((".yaml", ".yml", ".json"))):
            data = _read_file(s)
            name = pathlib.Path(s).stem
        else:
            try:
                data = yaml.safe_load(s)
            except yaml.YAMLError as e:
                raise ConfigError("<source>", f"not valid YAML/JSON: {e}") from None
            if not isinstance(data, dict):
                raise ConfigError(
                    "<source>",
                    f"{s!r} is neither a built-in model ({', '.join(sorted(BUILTIN_MODELS))}), "
                    "an existing file, nor a YAML mapping",
                )
    elif isinstance(source, dict):
        data = source
    else:
        raise ConfigError("<source>", f"expected a path, YAML string, dict or model name, got {type(source).__name__}")
    if not isinstance(data, dict):
        raise ConfigError("<source>", "the configuration must be a mapping")
    if "physicalCluster" not in data:
        if "nodes" in data:
            from .shortform import expand_short_form

            data = expand_short_form(data)
        else:
            raise ConfigError(
                "physicalCluster", "missing (give HiveD's physicalCluster/virtualClusters, or the short form with nodes:)"
            )
    cfg = _parse_hived(data)
    cfg.name = name
    return cfg


def _read_file(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError("<source>", f"cannot read {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else path
        what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise ConfigError("<source>", f"{where}: not valid YAML/JSON: {what}") from None
    if not isinstance(data, dict):
        raise ConfigError("<source>", f"{path} must hold a mapping")
    return data


def _pos_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(path, f"must be a positive integer, got {value!r}")
    return value


def _parse_cell_types(raw: Any) -> dict[str, CellType]:
    path = "physicalCluster.cellTypes"
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(path, "must be a non-empty mapping of cell type name -> {childCellType, childCellNumber}")
    for name, spec in raw.items():
        p = f"{path}.{name}"
        if not isinstance(name, str) or not name or "." in name:
            raise ConfigError(p, "cell type names must be non-empty strings without '.'")
        if not isinstance(spec, dict):
            raise ConfigError(p, "must be a mapping with childCellType and childCellNumber")
        unknown = sorted(set(spec) - {"childCellType", "childCellNumber", "isNodeLevel"})
        if unknown:
            raise ConfigError(f"{p}.{unknown[0]}", "unknown field (expected childCellType, childCellNumber, isNodeLevel)")
        ct = spec.get("childCellType")
        if not isinstance(ct, str) or not ct:
            raise ConfigError(f"{p}.childCellType", f"must be a cell type name, got {ct!r}")
        if ct == name:
            raise ConfigError(f"{p}.childCellType", "a cell type cannot contain itself")
        _pos_int(spec.get("childCellNumber"), f"{p}.childCellNumber")
        nl = spec.get("isNodeLevel", False)
        if not isinstance(nl, bool):
            raise ConfigError(f"{p}.isNodeLevel", f"must be true or false, got {nl!r}")

    result: dict[str, CellType] = {}

    def resolve(name: str, stack: tuple[str, ...]) -> CellType:
        if name in result:
            return result[name]
        if name in stack:
            raise ConfigError(f"{path}.{name}.childCellType", f"cycle: {' -> '.join(stack + (name,))}")
        spec = raw.get(name)
        if spec is None:  # leaf: a GPU type
            t = CellType(name, None, 0, False, 1, 1, name)
        else:
            child = resolve(spec["childCellType"], stack + (name,))
            t = CellType(
                name,
                child.name,
                spec["childCellNumber"],
                bool(spec.get("isNodeLevel", False)),
                child.level + 1,
                child.leaf_count * spec["childCellNumber"],
                child.gpu_type,
            )
        result[name] = t
        return t

    for name in raw:
        resolve(name, ())
    return dict(sorted(result.items()))


def _node_type_of(top: CellType, types: dict[str, CellType], path: str) -> str:
    chain = []
    t: CellType | None = top
    while t is not None:
        chain.append(t)
        t = types[t.child_type] if t.child_type else None
    nodes = [c.name for c in chain if c.is_node_level]
    if len(nodes) > 1:
        raise ConfigError(path, f"chain {top.name} has more than one node level: {', '.join(nodes)}")
    if not nodes:
        if top.child_type is None:
            raise ConfigError(path, f"a top-level cell must not be a bare GPU ({top.name}); give it a node cell type")
        return top.name  # no isNodeLevel: each top-level cell is one node
    return nodes[0]


# HiveD's own top-level settings (its Kubernetes and web-server plumbing): accepted and ignored, so that a
# HiveD configuration file loads as is.
HIVED_SERVICE_FIELDS = frozenset({"kubeApiServerAddress", "kubeConfigFilePath", "webServerAddress",
                                  "forcePodBindThreshold", "waitingPodSchedulingBlockMilliSec",
                                  "quotaExcludeVCs"})


def _parse_hived(data: dict) -> ClusterConfig:
    known = {"physicalCluster", "virtualClusters", "nodeResources", "name", "description"} | HIVED_SERVICE_FIELDS
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(unknown[0], "unknown top-level field (expected physicalCluster, virtualClusters, nodeResources)")
    pc = data.get("physicalCluster")
    if not isinstance(pc, dict):
        raise ConfigError("physicalCluster", "must be a mapping with cellTypes and physicalCells")
    types = _parse_cell_types(pc.get("cellTypes"))
    raw_cells = pc.get("physicalCells")
    if not isinstance(raw_cells, list) or not raw_cells:
        raise ConfigError("physicalCluster.physicalCells", "must be a non-empty list of cells")

    chains: dict[str, Chain] = {}
    cells: list[PhysicalCellSpec] = []
    pinned: dict[str, PhysicalCellSpec] = {}
    node_gpus: dict[str, dict[int, str]] = {}  # node -> gpu index -> gpu type
    node_chain_seen: set[tuple[str, str]] = set()
    generated: dict[str, int] = {}
    addresses: set[str] = set()

    def build(raw: Any, type_name: str, chain: Chain, p: str, node: str | None) -> PhysicalCellSpec:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(p, "must be a mapping (cellType, cellAddress, pinnedCellId, cellChildren)")
        bad = sorted(set(raw) - {"cellType", "cellAddress", "pinnedCellId", "cellChildren"})
        if bad:
            raise ConfigError(f"{p}.{bad[0]}", "unknown field (expected cellType, cellAddress, pinnedCellId, cellChildren)")
        if "cellType" in raw and raw["cellType"] != type_name:
            raise ConfigError(f"{p}.cellType", f"expected {type_name} here (the parent's childCellType), got {raw['cellType']!r}")
        t = types[type_name]
        addr = raw.get("cellAddress")
        if addr is not None and not isinstance(addr, (str, int)):
            raise ConfigError(f"{p}.cellAddress", f"must be a string, got {addr!r}")
        addr = None if addr is None else str(addr)
        pin = raw.get("pinnedCellId")
        if pin is not None and (not isinstance(pin, str) or not pin):
            raise ConfigError(f"{p}.pinnedCellId", f"must be a non-empty string, got {pin!r}")
        explicit = addr is not None
        if t.name == chain.node_type:
            if addr is None:
                raise ConfigError(f"{p}.cellAddress", f"node-level cells ({t.name}) need an address (the node's host name)")
            if (addr, chain.name) in node_chain_seen:
                raise ConfigError(f"{p}.cellAddress", f"node {addr} appears twice in chain {chain.name}")
            node_chain_seen.add((addr, chain.name))
            node = addr
            node_gpus.setdefault(node, {})
        elif node is None:  # above node level
            if addr is None:
                k = generated.get(t.name, 0)
                generated[t.name] = k + 1
                addr = f"{t.name}-{k}"
            if addr in addresses:
                raise ConfigError(f"{p}.cellAddress", f"address {addr} is used twice")
            addresses.add(addr)
        spec = PhysicalCellSpec(type=t.name, address=addr or "", chain=chain.name, level=t.level, node=node,
                                pinned_id=pin, explicit_address=explicit)
        if pin is not None:
            if pin in pinned:
                raise ConfigError(f"{p}.pinnedCellId", f"{pin} is used by two cells")
            pinned[pin] = spec
        if t.child_type is None:
            return spec
        kids = raw.get("cellChildren")
        if kids is None:
            if node is None:
                raise ConfigError(f"{p}.cellChildren", f"missing: cells above node level must list their children down to the nodes ({chain.node_type}) so nodes get addresses")
            kids = [None] * t.child_number
        if not isinstance(kids, list):
            raise ConfigError(f"{p}.cellChildren", "must be a list")
        if len(kids) != t.child_number:
            raise ConfigError(f"{p}.cellChildren", f"{t.name} has childCellNumber {t.child_number} but {len(kids)} children are listed")
        for i, k in enumerate(kids):
            spec.children.append(build(k, t.child_type, chain, f"{p}.cellChildren[{i}]", node))
        return spec

    for i, raw in enumerate(raw_cells):
        p = f"physicalCluster.physicalCells[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(p, "must be a mapping with cellType")
        tname = raw.get("cellType")
        if tname not in types or types[tname].child_type is None:
            known = ", ".join(n for n, t in types.items() if t.child_type is not None)
            raise ConfigError(f"{p}.cellType", f"unknown or leaf cell type {tname!r} (known: {known})")
        if tname not in chains:
            node_type = _node_type_of(types[tname], types, f"{p}.cellType")
            seq = []
            t: CellType | None = types[tname]
            while t is not None:
                seq.append(t.name)
                t = types[t.child_type] if t.child_type else None
            chains[tname] = Chain(tname, tuple(seq), types[tname].gpu_type, node_type)
        cells.append(build(raw, tname, chains[tname], p, None))

    # GPU indices: explicit numeric leaf addresses first, then the next free index per node.
    for top_i, top in enumerate(cells):
        for c in top.walk():
            if c.level == 1 and c.explicit_address:
                m = re.search(r"(\d+)$", c.address)
                if not m:
                    raise ConfigError(f"physicalCluster.physicalCells[{top_i}]", f"GPU cell address {c.address!r} must end in its GPU index")
                idx = int(m.group(1))
                if idx in node_gpus[c.node]:
                    raise ConfigError(f"physicalCluster.physicalCells[{top_i}]", f"node {c.node} has GPU index {idx} twice")
                node_gpus[c.node][idx] = c.type
                c.gpu = idx
    for top in cells:
        for c in top.walk():
            if c.level == 1 and c.gpu is None:
                used = node_gpus[c.node]
                idx = 0
                while idx in used:
                    idx += 1
                used[idx] = c.type
                c.gpu = idx
    for top in cells:
        _fill_addresses(top, None)

    # Nodes and their CPU / memory.
    res_raw = data.get("nodeResources") or {}
    if not isinstance(res_raw, dict):
        raise ConfigError("nodeResources", "must be a mapping of node name (or '*') -> {cpus, memoryMB}")
    for key in res_raw:
        if key != "*" and key not in node_gpus:
            raise ConfigError(f"nodeResources.{key}", "no such node in physicalCells")
    nodes: dict[str, NodeInfo] = {}
    for name in sorted(node_gpus, key=_natural_key):
        gpus = node_gpus[name]
        spec = dict(res_raw.get("*") or {})
        spec.update(res_raw.get(name) or {})
        for k in spec:
            if k not in ("cpus", "memoryMB"):
                raise ConfigError(f"nodeResources.{name if name in res_raw else '*'}.{k}", "unknown field (expected cpus, memoryMB)")
        cpus = spec.get("cpus", max(MIN_NODE_CPUS, DEFAULT_CPUS_PER_GPU * len(gpus)))
        mem = spec.get("memoryMB", max(MIN_NODE_MEMORY_MB, DEFAULT_MEMORY_MB_PER_GPU * len(gpus)))
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
            raise ConfigError(f"nodeResources.{name}.cpus", f"must be a positive number, got {cpus!r}")
        if isinstance(mem, bool) or not isinstance(mem, int) or mem <= 0:
            raise ConfigError(f"nodeResources.{name}.memoryMB", f"must be a positive integer, got {mem!r}")
        nodes[name] = NodeInfo(name, cpus, mem, len(gpus), tuple(sorted(set(gpus.values()))))

    vcs = _parse_vcs(data.get("virtualClusters"), types, chains, pinned)
    cfg = ClusterConfig(types, cells, vcs, nodes, dict(sorted(chains.items())), pinned, dict(res_raw))
    check_feasible(cfg)
    return cfg


def _fill_addresses(c: PhysicalCellSpec, parent: PhysicalCellSpec | None) -> None:
    if c.level == 1:
        c.address = f"{c.node}/gpu{c.gpu}"
    elif parent is not None and parent.node is not None and c.address == "":
        idx = parent.children.index(c)
        c.address = f"{parent.address}/{idx}"
    for ch in c.children:
        _fill_addresses(ch, c)


def _natural_key(s: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def _parse_vcs(raw: Any, types: dict[str, CellType], chains: dict[str, Chain],
               pinned: dict[str, PhysicalCellSpec]) -> dict[str, VirtualClusterSpec]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("virtualClusters", "must be a mapping of VC name -> {virtualCells, pinnedCells}")
    result = {}
    pin_owner: dict[str, str] = {}
    for vc_name in sorted(raw):
        spec = raw[vc_name]
        p = f"virtualClusters.{vc_name}"
        if not isinstance(vc_name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", vc_name):
            raise ConfigError(p, "VC names use letters, digits, '-', '_' and '.'")
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise ConfigError(p, "must be a mapping with virtualCells and/or pinnedCells")
        bad = sorted(set(spec) - {"virtualCells", "pinnedCells"})
        if bad:
            raise ConfigError(f"{p}.{bad[0]}", "unknown field (expected virtualCells, pinnedCells)")
        vcells = []
        for i, vcell in enumerate(spec.get("virtualCells") or []):
            q = f"{p}.virtualCells[{i}]"
            if not isinstance(vcell, dict):
                raise ConfigError(q, "must be a mapping with cellType and cellNumber")
            dotted = vcell.get("cellType")
            if not isinstance(dotted, str) or not dotted:
                raise ConfigError(f"{q}.cellType", f"must be a dotted cell type like CHAIN.TYPE, got {dotted!r}")
            parts = dotted.split(".")
            chain = chains.get(parts[0])
            if chain is None:
                raise ConfigError(f"{q}.cellType", f"{parts[0]!r} is not a top-level physical cell type (chains: {', '.join(chains)})")
            for a, b in zip(parts, parts[1:]):
                if b not in chain.types or chain.types.index(b) <= chain.types.index(a):
                    raise ConfigError(f"{q}.cellType", f"{b!r} is not a cell type below {a!r} in chain {chain.name} ({' > '.join(chain.types)})")
            num = vcell.get("cellNumber")
            if num == 0 and type(num) is int:  # HiveD accepts none of a type (a VC's cells set to 0 by an edit)
                continue
            num = _pos_int(num, f"{q}.cellNumber")
            vcells.append(VirtualCellSpec(chain.name, parts[-1], num))
        pins = []
        for i, pc in enumerate(spec.get("pinnedCells") or []):
            q = f"{p}.pinnedCells[{i}].pinnedCellId"
            pid = pc.get("pinnedCellId") if isinstance(pc, dict) else None
            if pid not in pinned:
                raise ConfigError(q, f"no physical cell has pinnedCellId {pid!r}")
            if pid in pin_owner:
                raise ConfigError(q, f"{pid} is already pinned to VC {pin_owner[pid]}")
            pin_owner[pid] = vc_name
            pins.append(pid)
        result[vc_name] = VirtualClusterSpec(vc_name, tuple(vcells), tuple(pins))
    for pid in sorted(pinned):
        if pid not in pin_owner:
            # HiveD leaves an unreferenced pinned cell unused; that is almost always a typo.
            raise ConfigError(f"physicalCluster.physicalCells (pinnedCellId {pid})", "no VC lists this pinned cell in pinnedCells")
    return result


def free_structure(cfg: ClusterConfig, chain: str) -> dict[int, int]:
    """Per level, how many whole cells of ``chain`` are free of pinned cells (buddy's initial free lists)."""
    counts: dict[int, int] = {}

    def has_pin(c: PhysicalCellSpec) -> bool:
        return any(x.pinned_id for x in c.walk())

    def visit(c: PhysicalCellSpec):
        if c.pinned_id:
            return
        if not has_pin(c):
            counts[c.level] = counts.get(c.level, 0) + 1
            return
        for ch in c.children:
            visit(ch)

    for top in cfg.physical_cells:
        if top.chain == chain:
            visit(top)
    return counts


def greedy_shortfall(chain: Chain, types: dict[str, CellType], free: dict[int, int],
                     demand: dict[int, int]) -> tuple[int, int, int, int] | None:
    """Top-down check that ``demand`` (level -> cells) fits ``free`` (level -> whole free cells).

    Cell sizes in one chain divide each other, so serving the biggest demands from the biggest
    cells first is exact. Returns None when it fits, else (level, demand, available, shortfall)
    for the highest level that falls short.
    """
    top = types[chain.name].level
    carry = 0
    for level in range(top, 0, -1):
        avail = free.get(level, 0) + carry
        need = demand.get(level, 0)
        if need > avail:
            return level, need, avail, need - avail
        if level > 1:
            carry = (avail - need) * types[chain.type_at(level)].child_number
    return None


def check_feasible(cfg: ClusterConfig) -> None:
    for chain in cfg.chains.values():
        demand: dict[int, int] = {}
        per_vc: dict[int, list[str]] = {}
        for vc in cfg.virtual_clusters.values():
            for v in vc.virtual_cells:
                if v.chain != chain.name:
                    continue
                lvl = cfg.cell_types[v.cell_type].level
                demand[lvl] = demand.get(lvl, 0) + v.number
                per_vc.setdefault(lvl, []).append(f"{vc.name}: {v.number}")
        bad = greedy_shortfall(chain, cfg.cell_types, free_structure(cfg, chain.name), demand)
        if bad:
            level, need, avail, _ = bad
            tname = chain.type_at(level)
            asked = {}  # GPUs per VC, the sum said in a person's terms when the chain is simply too small
            for vc in cfg.virtual_clusters.values():
                for v in vc.virtual_cells:
                    if v.chain == chain.name:
                        asked[vc.name] = asked.get(vc.name, 0) + cfg.cell_types[v.cell_type].leaf_count * v.number
                for pid in vc.pinned_cells:
                    if cfg.pinned_cells[pid].chain == chain.name:
                        asked[vc.name] = asked.get(vc.name, 0) + cfg.cell_types[cfg.pinned_cells[pid].type].leaf_count
            has = sum(cfg.cell_types[top.type].leaf_count for top in cfg.physical_cells if top.chain == chain.name)
            if sum(asked.values()) > has:
                raise ConfigError("virtualClusters", f"VCs ask for {sum(asked.values())} {chain.gpu_type} GPUs "
                                  f"({', '.join(f'{n}: {g}' for n, g in asked.items())}), the cluster has {has} "
                                  f"(chain {chain.name} is short by {sum(asked.values()) - has})")
            raise ConfigError(
                "virtualClusters",
                f"infeasible assignment in chain {chain.name} at level {tname} (level {level}): "
                f"VCs ask for {need} {tname} cells ({', '.join(per_vc.get(level, []))}) but only {avail} are "
                f"available (counting cells split from higher levels and excluding pinned cells)",
            )
