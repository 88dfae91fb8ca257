"""GPU inventory from NVML: what GPUs this machine has, how they are wired, and the cell tree for them.

``detect_local_cluster()`` turns one machine into a HiveD-format cluster config the core accepts
(GPU -> NVLink pair / PCIe switch / switch tree / host bridge -> CPU socket -> node, one chain per GPU
model; cell types ``<T>-PAIR``, ``<T>-SWITCH``, ``<T>-PCIE``, ``<T>-HOSTBRIDGE``, ``<T>-SOCKET``,
``<T>-NODE``, only the levels that really split the GPUs evenly), with
a ``default`` virtual cluster owning everything, so a single machine needs no config.
``compare_with_config()`` checks an admin's config against what NVML sees and says what differs.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable

import pynvml

from hive_lab_server.hardware.nvml_backend import NVMLError, load_backend, normalize_bus_id, nvml_session, text

log = logging.getLogger(__name__)

# NVML topology levels (pynvml.NVML_TOPOLOGY_*), plus one of ours for NVLink-bridged GPUs.
NVLINK = 5
LEVEL_WORDS = {
    pynvml.NVML_TOPOLOGY_INTERNAL: "on the same board",
    NVLINK: "by NVLink",
    pynvml.NVML_TOPOLOGY_SINGLE: "through one PCIe switch",
    pynvml.NVML_TOPOLOGY_MULTIPLE: "through several PCIe switches",
    pynvml.NVML_TOPOLOGY_HOSTBRIDGE: "through one PCIe host bridge",
    pynvml.NVML_TOPOLOGY_NODE: "within one CPU socket (NUMA node)",
    pynvml.NVML_TOPOLOGY_SYSTEM: "across CPU sockets",
}

_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "GRID"}
_FAMILY_WORDS = {"RTX", "GTX", "TITAN"}


def gpu_type_name(model: str) -> str:
    """The GPU type for a model name: ``"NVIDIA A100-SXM4-80GB"`` -> ``"A100"``, ``"Tesla V100-PCIE-16GB"``
    -> ``"V100"``, ``"NVIDIA GeForce RTX 4090"`` -> ``"RTX4090"``, ``"NVIDIA RTX A6000"`` -> ``"A6000"``."""
    words = [w for w in re.split(r"\s+", model.strip().upper()) if w and w not in _VENDOR_WORDS]
    if not words:
        return "GPU"
    first = words[0].split("-")[0]
    if first in _FAMILY_WORDS and len(words) > 1:
        nxt = words[1].split("-")[0]
        first = nxt if nxt[:1].isalpha() else first + nxt
    return re.sub(r"[^A-Z0-9]", "", first) or "GPU"


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    model: str  # NVML's name, e.g. "NVIDIA A100-SXM4-80GB"
    gpu_type: str  # normalised, e.g. "A100" (the cell tree's leaf type)
    memory_mb: int
    pci_bus_id: str  # normalised "0000:07:00.0"
    numa_node: int | None
    nvlink_peers: tuple[int, ...] = ()  # GPUs this one reaches directly over NVLink
    nvlinks: int = 0  # active NVLinks (to GPUs or NVSwitches)


@dataclass
class NodeInventory:
    """What NVML says about one machine."""

    node: str
    gpus: list[GpuInfo]
    levels: list[list[int]]  # levels[a][b]: NVML common-ancestor level (PCIe/CPU wiring)
    cpus: int
    memory_mb: int
    driver_version: str = ""
    errors: list[str] = field(default_factory=list)  # GPUs NVML could not read (left out)

    def pcie_level(self, a: int, b: int) -> int:
        return self.levels[self._pos(a)][self._pos(b)]

    def nvlink_pairs(self) -> list[list[int]]:
        """Groups of GPUs joined by NVLink (connected components; NVSwitch systems have none)."""
        peers = {g.index: set(g.nvlink_peers) for g in self.gpus}
        return _components(sorted(peers), lambda a, b: b in peers[a])

    def distance(self, a: int, b: int) -> int:
        """How close two GPUs are: NVLINK for an NVLink-bridged pair (a component of exactly two GPUs,
        e.g. PCIe cards with a bridge), else the PCIe common-ancestor level."""
        if a != b and any(sorted((a, b)) == g for g in self.nvlink_pairs()):
            return NVLINK
        return self.pcie_level(a, b)

    def _pos(self, index: int) -> int:
        for pos, g in enumerate(self.gpus):
            if g.index == index:
                return pos
        raise KeyError(index)


def _host_resources(nvml: Any) -> tuple[int, int]:
    cpus = getattr(nvml, "host_cpus", None) or os.cpu_count() or 1
    memory_mb = getattr(nvml, "host_memory_mb", None)
    if not memory_mb:
        try:
            memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
        except (ValueError, OSError):
            memory_mb = 65536
    return int(cpus), int(memory_mb)


def _numa_node(nvml: Any, handle: Any, cpus: int) -> int | None:
    try:
        node = nvml.nvmlDeviceGetNumaNodeId(handle)
        if node >= 0:
            return int(node)
    except (NVMLError, AttributeError):
        pass
    try:  # older drivers: the first CPU of the GPU's affinity mask stands for its socket
        words = nvml.nvmlDeviceGetCpuAffinity(handle, max(1, (cpus + 63) // 64))
        for k, w in enumerate(words):
            if w:
                return -1 - (k * 64 + (int(w) & -int(w)).bit_length() - 1)  # negative: "socket of cpu N"
    except (NVMLError, AttributeError):
        pass
    return None


def _nvlink_remotes(nvml: Any, handle: Any) -> list[str]:
    remotes = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != pynvml.NVML_FEATURE_ENABLED:
                continue
            remotes.append(normalize_bus_id(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except NVMLError:
            continue  # NotSupported / InvalidArgument: no such link
    return remotes


def discover_node(nvml: Any, node: str | None = None) -> NodeInventory:
    """Read GPUs and topology from an initialised NVML. GPUs NVML cannot read are left out (``errors``)."""
    cpus, memory_mb = _host_resources(nvml)
    node = node or getattr(nvml, "hostname", None) or socket.gethostname()
    try:
        driver = text(nvml.nvmlSystemGetDriverVersion())
    except NVMLError:
        driver = ""
    handles, raw, errors = [], [], []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(index)
            model = text(nvml.nvmlDeviceGetName(h))
            raw.append({
                "index": index,
                "uuid": text(nvml.nvmlDeviceGetUUID(h)),
                "model": model,
                "memory_mb": int(nvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)),
                "pci_bus_id": normalize_bus_id(nvml.nvmlDeviceGetPciInfo(h).busId),
                "numa_node": _numa_node(nvml, h, cpus),
                "remotes": _nvlink_remotes(nvml, h),
            })
            handles.append(h)
        except NVMLError as exc:
            errors.append(f"GPU {index}: NVML error {exc}; left out of the inventory")
    by_bus = {g["pci_bus_id"]: g["index"] for g in raw}
    _disambiguate_types(raw)
    gpus = [
        GpuInfo(
            index=g["index"], uuid=g["uuid"], model=g["model"], gpu_type=g["gpu_type"], memory_mb=g["memory_mb"],
            pci_bus_id=g["pci_bus_id"], numa_node=g["numa_node"],
            nvlink_peers=tuple(sorted({by_bus[r] for r in g["remotes"] if r in by_bus and by_bus[r] != g["index"]})),
            nvlinks=len(g["remotes"]),
        )
        for g in raw
    ]
    levels = []
    for a, ha in zip(gpus, handles):
        row = []
        for b, hb in zip(gpus, handles):
            if a.index == b.index:
                row.append(pynvml.NVML_TOPOLOGY_INTERNAL)
                continue
            try:
                level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
            except NVMLError:
                level = pynvml.NVML_TOPOLOGY_SYSTEM
            row.append(level)
        levels.append(row)
    return NodeInventory(node=node, gpus=gpus, levels=levels, cpus=cpus, memory_mb=memory_mb,
                         driver_version=driver, errors=errors)


def _disambiguate_types(raw: list[dict]) -> None:
    """Same family but different memory on one machine (A100 40GB + 80GB): distinct types."""
    for g in raw:
        g["gpu_type"] = gpu_type_name(g["model"])
    sizes: dict[str, set[int]] = {}
    for g in raw:
        sizes.setdefault(g["gpu_type"], set()).add(round(g["memory_mb"] / 1024))
    for g in raw:
        if len(sizes[g["gpu_type"]]) > 1:
            g["gpu_type"] = f"{g['gpu_type']}-{round(g['memory_mb'] / 1024)}GB"


# ---------------------------------------------------------------------------------- cell tree
def _components(indices: list[int], close: callable) -> list[list[int]]:
    groups: list[list[int]] = []
    for i in indices:
        merged = [g for g in groups if any(close(i, j) for j in g)]
        new = sorted([i] + [j for g in merged for j in g])
        groups = [g for g in groups if g not in merged] + [new]
    return sorted(groups)


def _candidate_partitions(inv: NodeInventory, chain: list[int]) -> list[tuple[str, list[list[int]]]]:
    """Coarse to fine: (level name, groups of GPU indices) as NVML sees them."""
    numa = {g.index: g.numa_node for g in inv.gpus}
    if all(numa[i] is not None for i in chain):
        sockets = sorted([[i for i in chain if numa[i] == n] for n in sorted({numa[i] for i in chain})])
    else:
        sockets = _components(chain, lambda a, b: inv.pcie_level(a, b) <= pynvml.NVML_TOPOLOGY_NODE)
    peers = {g.index: set(g.nvlink_peers) for g in inv.gpus}
    return [
        ("SOCKET", sockets),
        ("HOSTBRIDGE", _components(chain, lambda a, b: inv.pcie_level(a, b) <= pynvml.NVML_TOPOLOGY_HOSTBRIDGE)),
        ("PCIE", _components(chain, lambda a, b: inv.pcie_level(a, b) <= pynvml.NVML_TOPOLOGY_MULTIPLE)),
        ("SWITCH", _components(chain, lambda a, b: inv.pcie_level(a, b) <= pynvml.NVML_TOPOLOGY_SINGLE)),
        ("PAIR", _components(chain, lambda a, b: b in peers[a])),
    ]


def chain_levels(inv: NodeInventory, chain: list[int]) -> list[tuple[str, list[list[int]]]]:
    """The levels kept for one chain, coarse to fine: each splits every group of the level above into
    the same number of equal parts (HiveD cell types are regular), so irregular wiring (3 GPUs on one
    socket, 5 on the other) drops that level rather than produce a tree the core cannot express."""
    current = [sorted(chain)]
    kept = []
    for name, partition in _candidate_partitions(inv, chain):
        where = {i: k for k, group in enumerate(partition) for i in group}
        refined = []
        for group in current:
            parts: dict[int, list[int]] = {}
            for i in group:
                parts.setdefault(where[i], []).append(i)
            refined.append(sorted(parts.values()))
        sizes = {len(p) for parts in refined for p in parts}
        counts = {len(parts) for parts in refined}
        if name == "SWITCH" and counts == {1} and kept and kept[-1][0] == "PCIE":
            kept[-1] = ("SWITCH", kept[-1][1])  # the "switch tree" groups are single switches
            continue
        if len(sizes) == 1 and len(counts) == 1 and counts != {1} and sizes != {1}:
            current = [p for parts in refined for p in parts]
            kept.append((name, current))
    return kept


def _chains(inv: NodeInventory) -> dict[str, list[int]]:
    chains: dict[str, list[int]] = {}
    for g in inv.gpus:
        chains.setdefault(g.gpu_type, []).append(g.index)
    return chains


def build_cluster_config(inventories: NodeInventory | Iterable[NodeInventory], vcs: dict | None = None) -> dict:
    """HiveD-format config for these machines: full cell hierarchies with real GPU indices as leaf
    addresses, ``nodeResources`` from the host, and VC ``default`` owning every node-level cell
    unless ``vcs`` (HiveD ``virtualClusters``) is given."""
    if isinstance(inventories, NodeInventory):
        inventories = [inventories]
    cell_types: dict[str, dict] = {}
    physical: list[dict] = []
    node_cells: dict[str, int] = {}
    resources: dict[str, dict] = {}
    for inv in inventories:
        resources[inv.node] = {"cpus": inv.cpus, "memoryMB": inv.memory_mb}
        for gpu_type, chain in sorted(_chains(inv).items()):
            levels = chain_levels(inv, chain)
            shape = [(name, len(groups[0])) for name, groups in levels]
            node_type = _register_types(cell_types, gpu_type, shape, len(chain))
            physical.append({"cellType": node_type, "cellAddress": inv.node,
                             "cellChildren": _children(sorted(chain), levels)})
            node_cells[node_type] = node_cells.get(node_type, 0) + 1
    if vcs is None:
        vcs = {"default": {"virtualCells": [{"cellType": t, "cellNumber": n} for t, n in sorted(node_cells.items())]}}
    return {"physicalCluster": {"cellTypes": cell_types, "physicalCells": physical},
            "virtualClusters": vcs, "nodeResources": resources}


def _register_types(cell_types: dict, gpu_type: str, shape: list[tuple[str, int]], total: int) -> str:
    """Add ``<T>-<LEVEL>`` and ``<T>-NODE`` types for this shape; a second shape of the same GPU type
    (another machine wired differently) gets names suffixed with its GPU count and a counter."""
    fine_first = list(reversed(shape))

    def names(suffix: str) -> list[str]:
        return [f"{gpu_type}-{name}{suffix}" for name, _ in fine_first] + [f"{gpu_type}-NODE{suffix}"]

    def spec(suffix: str) -> dict:
        out, child = {}, gpu_type
        sizes = [size for _, size in fine_first] + [total]
        for name, size, below in zip(names(suffix), sizes, [1] + sizes[:-1]):
            out[name] = {"childCellType": child, "childCellNumber": size // below}
            child = name
        out[names(suffix)[-1]]["isNodeLevel"] = True
        return out

    for n in range(0, 100):
        suffix = "" if n == 0 else f"-{total}G{'' if n == 1 else n}"
        wanted = spec(suffix)
        if all(cell_types.get(k, v) == v for k, v in wanted.items()):
            cell_types.update(wanted)
            return names(suffix)[-1]
    raise ValueError(f"too many different shapes of {gpu_type} machines")


def _children(group: list[int], levels: list[tuple[str, list[list[int]]]]) -> list[dict]:
    if not levels:
        return [{"cellAddress": i} for i in group]
    _, groups = levels[0]
    inside = [g for g in groups if set(g) <= set(group)]
    # intermediate cells get no address: the core names them after the node ("<node>/<i>")
    return [{"cellChildren": _children(g, levels[1:])} for g in inside]


def gpu_uuid_map(inventories: NodeInventory | Iterable[NodeInventory]) -> dict[tuple[str, int], str]:
    if isinstance(inventories, NodeInventory):
        inventories = [inventories]
    return {(inv.node, g.index): g.uuid for inv in inventories for g in inv.gpus}


def detect_local_cluster(backend: Any = "auto", node: str | None = None,
                         vcs: dict | None = None) -> tuple[dict, dict[tuple[str, int], str]] | None:
    """(HiveD config dict, {(node, gpu index): UUID}) for this machine, or None when NVML is not there
    or sees no GPU (the service then uses a declared or simulated cluster).

    ``backend``: a spec for :func:`~.nvml_backend.load_backend` or an already loaded backend object.
    """
    inv = detect_local_inventory(backend, node)
    if inv is None:
        return None
    return build_cluster_config(inv, vcs), gpu_uuid_map(inv)


def detect_local_inventory(backend: Any = "auto", node: str | None = None) -> NodeInventory | None:
    nvml = load_backend(backend) if isinstance(backend, str) or backend is None else backend
    with nvml_session(nvml) as ok:
        if not ok:
            return None
        try:
            inv = discover_node(nvml, node)
        except NVMLError as exc:
            log.warning("NVML GPU discovery failed: %s", exc)
            return None
    for message in inv.errors:
        log.warning("%s", message)
    return inv if inv.gpus else None


# ---------------------------------------------------------------------------------- comparing
@dataclass
class _ConfiguredNode:
    gpus: dict[int, str] = field(default_factory=dict)  # index -> leaf cell type
    groups: list[tuple[str, list[int]]] = field(default_factory=list)  # (cell type, GPU indices) below node level


def _as_hived_dict(config: Any) -> dict:
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict) and "physicalCluster" in config:
        return config
    from hive_scheduler import load_cluster_config  # short form, paths, model names: the core expands them

    return load_cluster_config(config).to_dict()


def configured_nodes(config: Any) -> dict[str, _ConfiguredNode]:
    """Walk a HiveD config's physical cells: per node, its GPU indices with their types and its
    cells below node level (the GPU groups the config promises are close)."""
    data = _as_hived_dict(config)
    pc = data.get("physicalCluster") or {}
    types = pc.get("cellTypes") or {}
    nodes: dict[str, _ConfiguredNode] = {}

    def walk(cell_type: str, spec: dict, node: str | None, counter: dict, top_index: int) -> list[int]:
        spec = spec or {}
        if cell_type not in types:  # a leaf: one GPU
            address = spec.get("cellAddress")
            digits = re.search(r"(\d+)$", str(address)) if address is not None else None
            index = int(digits.group(1)) if digits else counter.setdefault("leaf", 0)
            counter["leaf"] = max(counter.get("leaf", 0), index) + 1
            nodes[node or "?"].gpus[index] = cell_type
            return [index]
        ct = types[cell_type]
        if ct.get("isNodeLevel"):
            node = str(spec.get("cellAddress", top_index))
            nodes.setdefault(node, _ConfiguredNode())
            counter = {}
        children = list(spec.get("cellChildren") or [])
        children += [{}] * (int(ct.get("childCellNumber", 0)) - len(children))
        leaves = []
        for k, child in enumerate(children):
            leaves += walk(ct["childCellType"], child, node, counter, k)
        if node is not None and not ct.get("isNodeLevel") and node in nodes and len(leaves) > 1:
            nodes[node].groups.append((cell_type, leaves))
        return leaves

    for k, cell in enumerate(pc.get("physicalCells") or []):
        walk(cell["cellType"], cell, None, {}, k)
    return nodes


def _type_matches(seen: str, declared: str) -> bool:
    seen_u = seen.upper().split("-")[0]
    return declared.upper() == seen.upper() or seen_u in re.split(r"[^A-Z0-9]+", declared.upper())


def _summary(types: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for t in types:
        counts[t] = counts.get(t, 0) + 1
    return ", ".join(f"{n}x {t}" for t, n in sorted(counts.items())) or "none"


def compare_with_config(discovered: NodeInventory | Iterable[NodeInventory], admin_config: Any) -> list[str]:
    """Sentences saying how the admin's config differs from what NVML sees (empty: they agree).

    Only the discovered machines are checked (an admin config usually names many nodes)."""
    if isinstance(discovered, NodeInventory):
        discovered = [discovered]
    declared = configured_nodes(admin_config)
    messages: list[str] = []
    for inv in discovered:
        conf = declared.get(inv.node)
        if conf is None:
            names = ", ".join(sorted(declared)) or "none"
            messages.append(f"this machine ({inv.node}) is not a node of the configured cluster "
                            f"(configured nodes: {names}); its {len(inv.gpus)} GPUs will not be scheduled")
            continue
        seen = {g.index: g for g in inv.gpus}
        if len(seen) != len(conf.gpus):
            messages.append(f"node {inv.node}: NVML sees {len(seen)} GPUs ({_summary(g.gpu_type for g in inv.gpus)}), "
                            f"the config declares {len(conf.gpus)} ({_summary(conf.gpus.values())})")
        for index in sorted(set(conf.gpus) - set(seen)):
            messages.append(f"node {inv.node}: the config declares GPU {index} ({conf.gpus[index]}), which NVML does not see")
        for index in sorted(set(seen) - set(conf.gpus)):
            messages.append(f"node {inv.node}: NVML sees GPU {index} ({seen[index].model}) that the config does not declare")
        for index in sorted(set(seen) & set(conf.gpus)):
            if not _type_matches(seen[index].gpu_type, conf.gpus[index]):
                messages.append(f"node {inv.node} GPU {index}: NVML sees {seen[index].model} (type {seen[index].gpu_type}), "
                                f"the config declares type {conf.gpus[index]}")
        messages += _topology_differences(inv, conf)
    return messages


def _topology_differences(inv: NodeInventory, conf: _ConfiguredNode) -> list[str]:
    seen = {g.index for g in inv.gpus}
    out = []
    for cell_type, members in conf.groups:
        members = sorted(members)
        if not set(members) <= seen:
            continue
        worst = max(((inv.distance(a, b), a, b) for a in members for b in members if a < b), default=None)
        if worst is None:
            continue
        chain_peers = [i for i, t in conf.gpus.items() if t == conf.gpus[members[0]] and i in seen and i not in members]
        best = min(((inv.distance(a, c), a, c) for a in members for c in chain_peers), default=None)
        if best is not None and best[0] < worst[0]:
            out.append(
                f"node {inv.node}: the config puts GPUs {', '.join(map(str, members))} in one {cell_type} cell, but "
                f"NVML sees GPUs {worst[1]} and {worst[2]} connected only {LEVEL_WORDS.get(worst[0], worst[0])}, "
                f"while GPU {best[1]} reaches GPU {best[2]} (outside that cell) {LEVEL_WORDS.get(best[0], best[0])}"
            )
    return out
