"""The short form for common machines, expanded into HiveD's configuration.

    nodes: 4                 # or a list of names
    gpus_per_node: 8
    gpu_type: A100
    levels: [pair, socket]   # cell levels between GPU and node, each splitting in two
    racks: 2                 # optional: number of racks, nodes split evenly -> a rack level
    cpus_per_node: 64
    memory_mb_per_node: 512000
    vcs: {research: 16, teaching: {gpus: 8}, ops: {cells: {node: 1}}}
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ConfigError

_KEYS = {"nodes", "gpus_per_node", "gpu_type", "levels", "racks", "cpus_per_node", "memory_mb_per_node", "vcs",
         "name", "description"}


def _pos_int(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(path, f"must be a positive integer, got {v!r}")
    return v


def expand_short_form(data: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(unknown[0], f"unknown short-form field (expected {', '.join(sorted(_KEYS - {'name', 'description'}))})")
    nodes = data.get("nodes")
    if isinstance(nodes, list):
        if not nodes or not all(isinstance(n, str) and n for n in nodes):
            raise ConfigError("nodes", "must be a positive integer or a non-empty list of node names")
        if len(set(nodes)) != len(nodes):
            raise ConfigError("nodes", "node names must be unique")
        names = list(nodes)
    else:
        names = [f"node-{i}" for i in range(_pos_int(nodes, "nodes"))]
    g = _pos_int(data.get("gpus_per_node", 8), "gpus_per_node")
    gpu = data.get("gpu_type", "GPU")
    if not isinstance(gpu, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]*", gpu):
        raise ConfigError("gpu_type", f"must be a name like A100, got {gpu!r}")
    levels = data.get("levels", [])
    if not isinstance(levels, list) or not all(isinstance(x, str) and re.fullmatch(r"[A-Za-z0-9_\-]+", x) for x in levels):
        raise ConfigError("levels", "must be a list of level names, e.g. [pair, socket]")
    if len(set(levels)) != len(levels) or {x.lower() for x in levels} & {"node", "rack", "gpu"}:
        raise ConfigError("levels", "level names must be unique and not node/rack/gpu")
    if g % (2 ** len(levels)):
        raise ConfigError("levels", f"{len(levels)} levels splitting in two need gpus_per_node divisible by {2 ** len(levels)}, got {g}")
    racks = data.get("racks")
    if racks is not None:
        racks = _pos_int(racks, "racks")
        if len(names) % racks:
            raise ConfigError("racks", f"{len(names)} nodes cannot be split evenly into {racks} racks")

    types: dict[str, dict[str, Any]] = {}
    child = gpu
    for lvl in levels:
        types[f"{gpu}-{lvl}"] = {"childCellType": child, "childCellNumber": 2}
        child = f"{gpu}-{lvl}"
    node_t = f"{gpu}-NODE"
    types[node_t] = {"childCellType": child, "childCellNumber": g // (2 ** len(levels)), "isNodeLevel": True}
    sizes = [(gpu, 1)] + [(f"{gpu}-{lvl}", 2 ** (i + 1)) for i, lvl in enumerate(levels)] + [(node_t, g)]
    if racks:
        rack_t = f"{gpu}-RACK"
        per_rack = len(names) // racks
        types[rack_t] = {"childCellType": node_t, "childCellNumber": per_rack}
        sizes.append((rack_t, g * per_rack))
        cells = [
            {"cellType": rack_t, "cellChildren": [{"cellAddress": n} for n in names[r * per_rack:(r + 1) * per_rack]]}
            for r in range(racks)
        ]
        top = rack_t
    else:
        cells = [{"cellType": node_t, "cellAddress": n} for n in names]
        top = node_t
    chain_types = [t for t, _ in reversed(sizes)]

    def dotted(t: str) -> str:
        return ".".join(chain_types[: chain_types.index(t) + 1])

    aliases = {"gpu": gpu, "node": node_t, "rack": f"{gpu}-RACK"}
    for lvl in levels:
        aliases[lvl.lower()] = f"{gpu}-{lvl}"

    vcs_raw = data.get("vcs")
    if vcs_raw is None:
        vcs_raw = {"default": len(names) * g}
    if not isinstance(vcs_raw, dict):
        raise ConfigError("vcs", "must be a mapping of VC name -> GPU count, {gpus: N} or {cells: {level: N}}")
    vcs: dict[str, Any] = {}
    for name, spec in vcs_raw.items():
        p = f"vcs.{name}"
        counts: dict[str, int] = {}
        if isinstance(spec, dict) and "cells" in spec:
            if set(spec) != {"cells"} or not isinstance(spec["cells"], dict):
                raise ConfigError(p, "use {cells: {level: count}} or {gpus: N}")
            for lvl, n in spec["cells"].items():
                t = aliases.get(str(lvl).lower(), lvl)
                if t not in dict(sizes):
                    raise ConfigError(f"{p}.cells.{lvl}", f"unknown level (known: {', '.join(sorted(aliases))})")
                counts[t] = counts.get(t, 0) + _pos_int(n, f"{p}.cells.{lvl}")
        else:
            if isinstance(spec, dict):
                if set(spec) != {"gpus"}:
                    raise ConfigError(p, "use a GPU count, {gpus: N} or {cells: {level: N}}")
                spec = spec["gpus"]
            want = _pos_int(spec, p if not isinstance(vcs_raw[name], dict) else f"{p}.gpus")
            for t, size in reversed(sizes):  # largest cells first
                if want >= size:
                    counts[t] = want // size
                    want %= size
        vcs[name] = {"virtualCells": [{"cellType": dotted(t), "cellNumber": n} for t, n in
                                      sorted(counts.items(), key=lambda kv: -dict(sizes)[kv[0]])]}
    out: dict[str, Any] = {
        "physicalCluster": {"cellTypes": types, "physicalCells": cells},
        "virtualClusters": vcs,
    }
    res = {}
    if data.get("cpus_per_node") is not None:
        res["cpus"] = data["cpus_per_node"]
    if data.get("memory_mb_per_node") is not None:
        res["memoryMB"] = data["memory_mb_per_node"]
    if res:
        out["nodeResources"] = {"*": res}
    assert top  # chain root
    return out
