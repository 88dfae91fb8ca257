"""Compact grid layout of a cluster's GPUs for heatmaps (pure; no bokeh, no widgets).

Every GPU is a 1x1 cell. GPUs are grouped by the ``path`` of ancestor cell addresses from
``GET cluster`` (rack -> node -> socket -> switch ...); each group is packed into a near-rectangular
block (shelf packing of its children, with gaps growing with the group's level), recursively, so a
4-GPU machine and a 20,000-GPU cluster both come out as a readable, roughly 2:1 picture.
"""

from __future__ import annotations

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
    groups: list[GroupBox]


def _group_path(gpu: dict) -> tuple:
    path = gpu.get("path")
    if path:
        return tuple(str(p) for p in path)
    return (str(gpu.get("node", "?")),)


def _build_tree(gpus: list[dict]) -> _Group:
    root = _Group(key=())
    index: dict[tuple, _Group] = {(): root}
    for i, gpu in enumerate(gpus):
        path = _group_path(gpu)
        parent = root
        for depth in range(1, len(path) + 1):
            key = path[:depth]
            group = index.get(key)
            if group is None:
                group = _Group(key=key)
                index[key] = group
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


def _pack(group: _Group, aspect: float) -> tuple[float, float, list, list]:
    """Returns (w, h, [(gpu, x, y)], [(group, x0, y0, x1, y1)]) relative to the group's corner."""
    blocks = []
    for child in group.children:
        if isinstance(child, _Group):
            blocks.append(_pack(child, INNER_ASPECT) + (child,))
        else:
            blocks.append((1.0, 1.0, [(child, 0.0, 0.0)], [], None))
    gap = gap_for(group.height)
    sizes = {(w, h) for w, h, *_ in blocks}
    if len(sizes) == 1:
        # equal blocks (the usual case): a regular grid with the best column count
        (bw, bh), = sizes
        cols = _best_columns(len(blocks), bw + gap, bh + gap, aspect)
        target = cols * (bw + gap) - gap
    else:
        area = sum((w + gap) * (h + gap) for w, h, *_ in blocks)
        target = max(max(w for w, *_ in blocks), math.sqrt(area * aspect))
    cells, boxes = [], []
    x = y = shelf_h = width = 0.0
    for w, h, sub_cells, sub_boxes, child in blocks:
        if x > 0 and x + w > target * (1.0001 if len(sizes) == 1 else WRAP_SLACK):
            y += shelf_h + gap
            x = shelf_h = 0.0
        cells.extend((g, x + cx, y + cy) for g, cx, cy in sub_cells)
        boxes.extend((b, x + bx0, y + by0, x + bx1, y + by1) for b, bx0, by0, bx1, by1 in sub_boxes)
        if child is not None:
            boxes.append((child, x, y, x + w, y + h))
        width = max(width, x + w)
        shelf_h = max(shelf_h, h)
        x += w + gap
    return width, y + shelf_h, cells, boxes


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
    w, h, cells, boxes = _pack(top, TOP_ASPECT)
    xs = [0.0] * len(gpus)
    ys = [0.0] * len(gpus)
    for g, x, y in cells:
        xs[g] = x
        ys[g] = y
    node_names = {str(g.get("node")) for g in gpus}
    groups = []
    if top is not root:
        groups.append((top, 0.0, 0.0, w, h))
    groups.extend(boxes)
    out = [
        GroupBox(address=b.key[-1], path=b.key, is_node=b.key[-1] in node_names, depth=len(b.key),
                 x0=x0, y0=y0, x1=x1, y1=y1)
        for b, x0, y0, x1, y1 in groups
    ]
    out.sort(key=lambda b: (b.depth, b.y0, b.x0))
    return Layout(xs, ys, w, h, out)
