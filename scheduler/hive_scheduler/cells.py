"""The live cell trees: physical cells (with per-cell counters kept up to date incrementally)
and each VC's virtual cells (bound lazily to physical cells of the same type)."""

from __future__ import annotations

from .config import ClusterConfig, PhysicalCellSpec

# Buddy states of a physical cell (only meaningful for cells that are buddy roots or split).
FREE = "free"        # whole cell in its chain's free list
SPLIT = "split"      # children carry the state
BOUND = "bound"      # bound to a VC's virtual cell (its descendants are inside)
PINNED = "pinned"    # a pinned cell (always bound to its VC's pinned virtual cell)
BADLEAF = "badleaf"  # a bad GPU not inside any bound/pinned cell: kept out of the free lists
INSIDE = "inside"    # inside a free, bound or pinned cell


class PCell:
    """A physical cell. Counters cover the leaves below it."""

    __slots__ = (
        "id", "type", "level", "chain", "parent", "children", "address", "node", "gpu", "pinned_id",
        "has_pin", "leaves", "size", "state", "vcell", "used", "opp", "bad", "reserved", "avail",
        "job", "reserved_by", "healthy", "node_obj", "index", "jopp", "in_pin", "nbound", "flat", "shares",
    )

    def __init__(self, spec: PhysicalCellSpec, cid: int, parent: "PCell | None", index: int):
        self.id = cid
        self.type = spec.type
        self.level = spec.level
        self.chain = spec.chain
        self.parent = parent
        self.index = index
        self.children: list[PCell] = []
        self.address = spec.address
        self.node = spec.node if spec.level > 0 else None
        self.gpu = spec.gpu
        self.pinned_id = spec.pinned_id
        self.has_pin = False
        self.leaves: list[PCell] = []
        self.size = 0
        self.state = INSIDE
        self.vcell = None          # the VCell bound to this cell (bound roots and, after bind, all below)
        self.used = 0              # leaves running a job
        self.opp = 0               # leaves running a job that holds no virtual cell (opportunistic)
        self.bad = 0               # bad leaves
        self.reserved = 0          # leaves reserved by a preemptor
        self.avail = 0             # leaves an opportunistic task could take: healthy, unused, unreserved, unpinned
        self.job = None            # leaf: job id running here
        self.reserved_by = None    # leaf: preemptor job id
        self.healthy = True
        self.node_obj = None
        self.jopp = False          # leaf: the job here holds no virtual cell (opportunistic / losing its cell)
        self.in_pin = False        # inside a pinned cell
        self.nbound = 0            # leaves inside bound or pinned cells (structural buddy view)
        self.flat = None           # cached depth-first list of the subtree (see cells.flat)
        self.shares = None         # leaf: its ShareGPU while it holds shares (shares.py)

    def __repr__(self):
        return f"PCell({self.address} {self.type})"


class Node:
    """A machine: its CPUs/memory (never over-committed) and its node-level cells (one per chain)."""

    __slots__ = ("name", "cpus", "memory_mb", "cpus_free", "memory_free", "cells", "healthy", "gpu_leaves", "order")

    def __init__(self, name: str, cpus: float, memory_mb: int, order: int):
        self.name = name
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.cpus_free = cpus
        self.memory_free = memory_mb
        self.cells: list[PCell] = []
        self.healthy = True
        self.gpu_leaves: dict[int, PCell] = {}
        self.order = order

    def fits(self, cpus: float, memory_mb: int) -> bool:
        return self.healthy and self.cpus_free >= cpus and self.memory_free >= memory_mb


class VCell:
    """A virtual cell of a VC. Only roots (preassigned or pinned cells) are bound; below a bound
    root every virtual cell points at the physical cell with the same position (``pcell``)."""

    __slots__ = ("id", "vc", "chain", "type", "level", "parent", "children", "root", "size",
                 "free", "held", "hp", "leaves", "pin", "bound", "pcell", "job", "index", "flat")

    def __init__(self, vc: str, chain: str, ctype: str, level: int, parent: "VCell | None", cid: int, index: int):
        self.id = cid
        self.vc = vc
        self.chain = chain
        self.type = ctype
        self.level = level
        self.parent = parent
        self.index = index
        self.root = parent.root if parent is not None else self
        self.children: list[VCell] = []
        self.size = 0
        self.free = 0              # leaves not held by a job of the VC and not known bad
        self.held = 0              # leaves held by a job of the VC
        self.hp: dict[int, int] = {}  # priority -> leaves held by jobs of that priority
        self.leaves: list[VCell] = []
        self.pin = None
        self.bound: PCell | None = None   # roots only
        self.pcell: PCell | None = None   # set while the root is bound
        self.job = None            # leaves: the job holding it
        self.flat = None

    def __repr__(self):
        return f"VCell({self.vc} {self.type}#{self.id})"


def build_physical(cfg: ClusterConfig):
    """Build the physical trees. Returns (roots, all cells by id, nodes by name)."""
    cells: list[PCell] = []
    nodes: dict[str, Node] = {}
    for i, info in enumerate(cfg.nodes.values()):
        nodes[info.name] = Node(info.name, info.cpus, info.memory_mb, i)

    def make(spec: PhysicalCellSpec, parent: PCell | None, index: int) -> PCell:
        c = PCell(spec, len(cells), parent, index)
        cells.append(c)
        for i, ch in enumerate(spec.children):
            c.children.append(make(ch, c, i))
        if c.level == 1:
            c.leaves = [c]
            c.node_obj = nodes[c.node]
            nodes[c.node].gpu_leaves[c.gpu] = c
        else:
            for ch in c.children:
                c.leaves.extend(ch.leaves)
        c.size = len(c.leaves)
        c.avail = c.size if not spec.pinned_id else 0
        c.has_pin = bool(spec.pinned_id) or any(ch.has_pin for ch in c.children)
        if c.node is not None:
            c.node_obj = nodes[c.node]
        return c

    roots = [make(spec, None, i) for i, spec in enumerate(cfg.physical_cells)]
    # pinned cells do not count as available for opportunistic work
    for c in cells:
        if c.pinned_id:
            for x in subtree(c):
                x.in_pin = True
                x.avail = 0
            p = c.parent
            while p is not None:
                p.avail -= c.size
                p = p.parent
    for c in cells:
        if c.node is not None and c.level == cfg.cell_types[cfg.chains[c.chain].node_type].level:
            nodes[c.node].cells.append(c)
    return roots, cells, nodes


def build_virtual(vc: str, chain: str, ctype: str, cfg: ClusterConfig, ids: list) -> VCell:
    """A virtual cell tree of ``ctype`` for ``vc`` (ids: a shared counter list)."""
    types = cfg.cell_types

    def make(t: str, parent: VCell | None, index: int) -> VCell:
        ct = types[t]
        v = VCell(vc, chain, t, ct.level, parent, ids[0], index)
        ids[0] += 1
        if ct.child_type is None:
            v.leaves = [v]
        else:
            for i in range(ct.child_number):
                ch = make(ct.child_type, v, i)
                v.children.append(ch)
                v.leaves.extend(ch.leaves)
        v.size = len(v.leaves)
        v.free = v.size
        return v

    return make(ctype, None, 0)


def subtree(c):
    """``c`` and every cell below it, depth first, children in order (physical or virtual cells)."""
    stack = [c]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(x.children))


def flat(c) -> list:
    """``subtree(c)`` as a list, cached on the cell (binding zips a virtual and a physical subtree)."""
    got = c.flat
    if got is None:
        got = c.flat = list(subtree(c))
    return got
