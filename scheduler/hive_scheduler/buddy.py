"""Buddy cell allocation for one chain.

Free physical cells (not bound to any VC) sit in one free list per level. Binding a VC's virtual
cell of level l takes a free level-l cell, or splits the smallest free cell above it; releasing
a cell merges it with its buddies when they are all free. Cells holding a bad GPU are kept split
so that every cell in a free list is whole and healthy. Because cell sizes in a chain divide each
other, the top-down greedy check (``shortfall``) tells exactly whether the VCs' unbound cells still
fit; a bind is refused when it would make that worse (a split never takes a cell owed to another VC).
"""

from __future__ import annotations

from typing import Callable

from .cells import BADLEAF, BOUND, FREE, INSIDE, PINNED, SPLIT, PCell
from .config import CellType, Chain


class Buddy:
    def __init__(self, chain: Chain, types: dict[str, CellType], roots: list[PCell]):
        self.chain = chain
        self.top = types[chain.name].level
        self.child_number = {types[t].level: types[t].child_number for t in chain.types}
        self.size = {types[t].level: types[t].leaf_count for t in chain.types}
        self.free: dict[int, dict[int, PCell]] = {lvl: {} for lvl in range(1, self.top + 1)}
        self.demand: dict[int, int] = {lvl: 0 for lvl in range(1, self.top + 1)}  # unbound VC cells per level
        self.roots = roots
        for r in roots:
            self.release(r)

    # ------------------------------------------------------------------ free lists
    def release(self, c: PCell) -> None:
        """``c`` is no longer bound: put it (or its healthy, unpinned parts) back into the free lists."""
        if c.pinned_id:
            c.state = PINNED
            return
        if c.has_pin or c.bad > 0:
            if c.level == 1:
                c.state = BADLEAF
                return
            c.state = SPLIT
            for ch in c.children:
                self.release(ch)
            return
        c.state = FREE
        self.free[c.level][c.id] = c
        self._merge_up(c)

    def _merge_up(self, c: PCell) -> None:
        p = c.parent
        while (p is not None and p.state == SPLIT and not p.has_pin and p.bad == 0
               and all(ch.state == FREE for ch in p.children)):
            for ch in p.children:
                del self.free[ch.level][ch.id]
                ch.state = INSIDE
            p.state = FREE
            self.free[p.level][p.id] = p
            p = p.parent

    def free_ancestor(self, c: PCell) -> PCell | None:
        """The free-list cell containing ``c`` (itself or an ancestor), if any."""
        x = c
        while x is not None:
            if x.state == FREE:
                return x
            if x.state in (BOUND, PINNED, SPLIT, BADLEAF):
                return None
            x = x.parent
        return None

    def _split_down_to(self, top: PCell, target: PCell) -> None:
        """Split free cell ``top`` along the path to ``target``; ``target`` leaves the free lists."""
        path = []
        x = target
        while x is not top:
            path.append(x)
            x = x.parent
        del self.free[top.level][top.id]
        top.state = SPLIT
        cur = top
        for nxt in reversed(path):
            for ch in cur.children:
                if ch is not nxt:
                    ch.state = FREE
                    self.free[ch.level][ch.id] = ch
            nxt.state = SPLIT
            cur = nxt
        target.state = INSIDE  # caller sets BOUND / BADLEAF

    def mark_bad(self, leaf: PCell) -> None:
        """A GPU went bad: if it sits in a free cell, split that cell around it."""
        top = self.free_ancestor(leaf)
        if top is None:
            return
        if top is leaf:
            del self.free[1][leaf.id]
        else:
            self._split_down_to(top, leaf)
        leaf.state = BADLEAF

    def mark_good(self, leaf: PCell) -> None:
        if leaf.state == BADLEAF:
            self.release(leaf)

    # ------------------------------------------------------------------ safety
    def counts(self) -> dict[int, int]:
        return {lvl: len(d) for lvl, d in self.free.items()}

    def shortfall(self, free: dict[int, int], demand: dict[int, int]) -> int:
        """GPUs of ``demand`` that the free cells cannot hold (0 = every unbound cell still fits)."""
        carry = 0
        short = 0
        for lvl in range(self.top, 0, -1):
            avail = free.get(lvl, 0) + carry
            need = demand.get(lvl, 0)
            if need > avail:
                short += (need - avail) * self.size[lvl]
                avail = need
            carry = (avail - need) * self.child_number[lvl] if lvl > 1 else 0
        return short

    def _counts_after_take(self, level: int, from_level: int) -> dict[int, int]:
        f = self.counts()
        f[from_level] -= 1
        for lvl in range(from_level - 1, level - 1, -1):
            f[lvl] += self.child_number[lvl + 1] - 1
        return f

    def take_ok(self, level: int, from_level: int, own_demand: bool = True) -> bool:
        """Would taking a level-``level`` cell out of a free level-``from_level`` cell keep the others' cells safe?"""
        before = self.shortfall(self.counts(), self.demand)
        d = dict(self.demand)
        if own_demand:
            d[level] -= 1
        after = self.shortfall(self._counts_after_take(level, from_level), d)
        return after <= before

    # ------------------------------------------------------------------ allocation
    def take(self, level: int, pred: Callable[[PCell], bool] | None = None,
             key: Callable[[PCell], tuple] | None = None) -> PCell | None:
        """Take a free level-``level`` cell for binding (lowest level first: buddy best fit)."""
        key = key or _default_key
        for from_level in range(level, self.top + 1):
            pool = self.free[from_level]
            if not pool:
                continue
            if not self.take_ok(level, from_level):
                return None
            if from_level == level:
                best = None
                best_k = None
                for c in pool.values():
                    if pred is not None and not pred(c):
                        continue
                    k = key(c)
                    if best_k is None or k < best_k:
                        best, best_k = c, k
                if best is None:
                    continue
                del pool[best.id]
                best.state = INSIDE
                return best
            for c in sorted(pool.values(), key=key):
                target = _find_below(c, level, pred, key)
                if target is not None:
                    self._split_down_to(c, target)
                    return target
        return None

    def take_exact(self, cell: PCell, force: bool = False) -> bool:
        """Take this particular cell (recovery/reconfiguration); False if it is not free."""
        top = self.free_ancestor(cell)
        if top is None:
            return False
        if not force and not self.take_ok(cell.level, top.level):
            return False
        if top is cell:
            del self.free[cell.level][cell.id]
            cell.state = INSIDE
        else:
            self._split_down_to(top, cell)
        return True


def _default_key(c: PCell) -> tuple:
    return (c.opp > 0, c.opp, c.id)


def _find_below(c: PCell, level: int, pred, key) -> PCell | None:
    if c.level == level:
        return c if pred is None or pred(c) else None
    for ch in sorted(c.children, key=key):
        r = _find_below(ch, level, pred, key)
        if r is not None:
            return r
    return None
