"""Compact grid layout of a cluster's GPUs for heatmaps (pure; no bokeh, no widgets).

Every GPU is a 1x1 cell. GPUs are grouped by the ``path`` of ancestor cell addresses from
``GET cluster`` (rack -> node -> socket -> switch ...); each group is packed into a near-rectangular
block (shelf packing of its children, with gaps growing with the group's level), recursively, so a
4-GPU machine and a 20,000-GPU cluster both come out as a readable, roughly 2:1 picture.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

INNER_ASPECT = 2.0   # width / height aimed at for nodes and the groups inside them
TOP_ASPECT = 2.4     # width / height aimed at for the whole picture
WRAP_SLACK = 1.15    # a shelf may exceed the target width by this factor before wrapping


@dataclass
class _Group:
    key: tuple
    children: list = field(default_factory=list)  # _Group or int (GPU index into the list)
    height: int = 1  # levels below (1: children are GPUs)
    by_address: dict = field(default_factory=dict)
    w: float = 1.0
    h: float = 1.0
    offsets: list = field(default_factory=list)  # (x, y) of each child inside this group


@dataclass(frozen=True)
class GroupBox:
    """The rectangle of one group (a node, a rack ...), for outlines and labels."""

    address: str
    path: tuple
    is_node: bool
    depth: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Layout:
    x: list[float]        # left edge of each GPU's cell (same order as the input)
    y: list[float]        # top edge (y grows downwards: flip the y range when drawing)
    width: float
    height: float
    groups: list[GroupBox]  # nodes and the groups above them


def _group_path(gpu: dict) -> list:
    path = gpu.get("path")
    if path:
        return path
    return [gpu.get("node", "?")]


def _build_tree(gpus: list[dict]) -> _Group:
    root = _Group(key=())
    for i, gpu in enumerate(gpus):
        parent = root
        for address in _group_path(gpu):
            group = parent.by_address.get(address)
            if group is None:
                group = _Group(key=parent.key + (str(address),))
                parent.by_address[address] = group
                parent.children.append(group)
            parent = group
        parent.children.append(i)
    _heights(root)
    return root


def _heights(group: _Group) -> int:
    h = 1
    for child in group.children:
        if isinstance(child, _Group):
            h = max(h, _heights(child) + 1)
    group.height = h
    return h


def gap_for(height: int) -> float:
    """Space between the children of a group ``height`` levels above the GPUs."""
    return 0.0 if height <= 1 else 0.15 + 0.35 * (height - 2)


def _size(group: _Group, aspect: float) -> None:
    """Set ``group.w/h`` and the offsets of its children (children first); O(GPUs) in all."""
    sizes = []
    for child in group.children:
        if isinstance(child, _Group):
            _size(child, INNER_ASPECT)
            sizes.append((child.w, child.h))
        else:
            sizes.append((1.0, 1.0))
    gap = gap_for(group.height)
    distinct = set(sizes)
    if len(distinct) == 1:
        # equal blocks (the usual case): a regular grid with the best column count
        (bw, bh), = distinct
        cols = _best_columns(len(sizes), bw + gap, bh + gap, aspect)
        target, slack = cols * (bw + gap) - gap, 1.0001
    else:
        area = sum((w + gap) * (h + gap) for w, h in sizes)
        target, slack = max(max(w for w, _ in sizes), math.sqrt(area * aspect)), WRAP_SLACK
    offsets = []
    x = y = shelf_h = width = 0.0
    for w, h in sizes:
        if x > 0 and x + w > target * slack:
            y += shelf_h + gap
            x = shelf_h = 0.0
        offsets.append((x, y))
        width = max(width, x + w)
        shelf_h = max(shelf_h, h)
        x += w + gap
    group.w, group.h, group.offsets = width, y + shelf_h, offsets


def _place(group: _Group, x0: float, y0: float, xs: list, ys: list, boxes: list) -> None:
    for child, (ox, oy) in zip(group.children, group.offsets):
        if isinstance(child, _Group):
            boxes.append((child, x0 + ox, y0 + oy, x0 + ox + child.w, y0 + oy + child.h))
            _place(child, x0 + ox, y0 + oy, xs, ys, boxes)
        else:
            xs[child] = x0 + ox
            ys[child] = y0 + oy


@functools.lru_cache(maxsize=4096)
def _best_columns(n: int, w: float, h: float, aspect: float) -> int:
    """Column count for ``n`` equal ``w x h`` blocks: close to ``aspect``, few empty slots."""
    best, best_cost = n, float("inf")
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        if cols > 1 and math.ceil(n / (cols - 1)) == rows:
            continue  # same rows with fewer columns is at least as good
        shape = (cols * w) / (rows * h)
        empty = (rows * cols - n) / n
        cost = abs(math.log(shape / aspect)) + 2.0 * empty
        if cost < best_cost:
            best, best_cost = cols, cost
    return best


def compute_layout(gpus: list[dict]) -> Layout:
    """Place every GPU of ``GET cluster``'s ``gpus`` list (order kept) on a compact grid."""
    if not gpus:
        return Layout([], [], 0.0, 0.0, [])
    root = _build_tree(gpus)
    # a single top group (one rack, one node) adds nothing: pack its children at the top aspect
    top = root
    while len(top.children) == 1 and isinstance(top.children[0], _Group):
        top = top.children[0]
    _size(top, TOP_ASPECT)
    w, h = top.w, top.h
    xs = [0.0] * len(gpus)
    ys = [0.0] * len(gpus)
    boxes: list = []
    _place(top, 0.0, 0.0, xs, ys, boxes)
    node_names = {str(g.get("node")) for g in gpus}
    groups = []
    if top is not root:
        groups.append((top, 0.0, 0.0, w, h))
    groups.extend(boxes)
    # nodes and the groups above them (racks ...); the small groups inside nodes are left out
    node_depth = max((len(b.key) for b, *_ in groups if b.key[-1] in node_names), default=0)
    out = [
        GroupBox(address=b.key[-1], path=b.key, is_node=b.key[-1] in node_names, depth=len(b.key),
                 x0=x0, y0=y0, x1=x1, y1=y1)
        for b, x0, y0, x1, y1 in groups if len(b.key) <= node_depth or not node_depth
    ]
    out.sort(key=lambda b: (b.depth, b.y0, b.x0))
    return Layout(xs, ys, w, h, out)
