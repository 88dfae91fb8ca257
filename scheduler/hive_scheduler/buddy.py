"""Buddy cell allocation for one chain.

Free physical cells (not bound to any VC) sit in one free list per level. Binding a VC's virtual
cell of level l takes a free level-l cell, or splits the smallest free cell above it; releasing
a cell merges it with its buddies when they are all free. Cells holding a bad GPU are kept split
so that every cell in a free list is whole and healthy. Because cell sizes in a chain divide each
other, the top-down greedy check (``shortfall``) tells exactly whether the VCs' unbound cells still
fit; a bind is refused when it would make that worse (a split never takes a cell owed to another VC).

That check runs on the *structural* view (``scount``: the free cells as if all hardware were
healthy), so a bind made while some GPUs are bad can never cost another VC its cells once they
are repaired. The health-aware view (the free lists) tells how many cells are doomed right now.

Bad hardware (as in HiveD): a free cell holding a bad GPU is kept split, but when no whole healthy
cell of a level is left, a VC's virtual cell may still be bound to such a *partly bad* cell (one
whose parts are all free or bad, ``partly_bad``): only its bad GPUs are doomed, the others stay
usable. ``doomed`` counts the GPUs of unbound cells that are lost that way (or cannot fit at all).
"""

from __future__ import annotations

from typing import Callable

from .cells import BADLEAF, BOUND, FREE, INSIDE, PINNED, SPLIT, PCell, subtree
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
        self.scount: dict[int, int] = {lvl: 0 for lvl in range(1, self.top + 1)}
        # bumped by every change of a cell's buddy state, bound count or bad GPUs: ``partly_bad`` reuses its
        # candidates while it is unchanged
        self.version = 0
        self._partly_bad: dict[int, tuple[int, list[PCell]]] = {}
        for r in roots:
            self._init_structural(r)
            self.release(r)

    # ------------------------------------------------------------------ structural view
    def _init_structural(self, c: PCell) -> None:
        if c.pinned_id:
            for x in subtree(c):
                x.nbound = x.size
            return
        if not c.has_pin:
            self.scount[c.level] += 1
            return
        for ch in c.children:
            self._init_structural(ch)
        c.nbound = sum(ch.nbound for ch in c.children)

    def _scount_after_bind(self, c: PCell, counts: dict[int, int]) -> dict[int, int]:
        counts = dict(counts)
        x = c
        while x.parent is not None and x.parent.nbound == 0:
            x = x.parent
            counts[x.level - 1] += self.child_number[x.level] - 1
        counts[x.level] -= 1
        return counts

    def on_bind(self, c: PCell) -> None:
        self.version += 1
        self.scount = self._scount_after_bind(c, self.scount)
        x = c
        while x is not None:
            x.nbound += c.size
            x = x.parent

    def on_unbind(self, c: PCell) -> None:
        self.version += 1
        x = c
        while x is not None:
            x.nbound -= c.size
            x = x.parent
        self.scount[c.level] += 1
        x = c.parent
        while x is not None and x.nbound == 0:
            self.scount[x.level - 1] -= self.child_number[x.level]
            self.scount[x.level] += 1
            x = x.parent

    def structural_shortfall(self) -> int:
        return self.shortfall(self.scount, self.demand)

    def bind_ok(self, c: PCell, own_demand: bool = True) -> bool:
        """Would binding ``c`` (for a VC owed a cell of its level) keep every other VC's cells safe?"""
        if c.nbound:
            return False
        before = self.shortfall(self.scount, self.demand)
        d = dict(self.demand)
        if own_demand:
            d[c.level] -= 1
        return self.shortfall(self._scount_after_bind(c, self.scount), d) <= before

    # ------------------------------------------------------------------ free lists
    def release(self, c: PCell) -> None:
        """``c`` is no longer bound: put it (or its healthy, unpinned parts) back into the free lists."""
        self.version += 1
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
        self.version += 1
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

    def _reclaim(self, cell: PCell) -> bool:
        """Take back a split cell whose parts are all free or bad (undoing its release)."""
        self.version += 1
        parts = list(subtree(cell))
        if any(p.state in (BOUND, PINNED) for p in parts):
            return False
        for p in parts:
            if p.state == FREE:
                del self.free[p.level][p.id]
            p.state = INSIDE
        return True

    def mark_bad(self, leaf: PCell) -> None:
        """A GPU went bad: if it sits in a free cell, split that cell around it."""
        self.version += 1
        top = self.free_ancestor(leaf)
        if top is None:
            return
        if top is leaf:
            del self.free[1][leaf.id]
        else:
            self._split_down_to(top, leaf)
        leaf.state = BADLEAF

    def mark_good(self, leaf: PCell) -> None:
        self.version += 1
        if leaf.state == BADLEAF:
            self.release(leaf)

    # ------------------------------------------------------------------ partly bad cells
    def partly_bad(self, level: int, bad_leaves, skip=()) -> list[PCell]:
        """Level-``level`` cells bound to no VC whose parts are all free or bad, some GPUs healthy:
        a virtual cell may bind there when no healthy cell is left (fewest bad GPUs first).
        Found from the bad leaves (few), never by scanning the tree; cells inside ``skip`` are left out."""
        if not skip:
            got = self._partly_bad.get(level)
            if got is None or got[0] != self.version:
                got = (self.version, self._find_partly_bad(level, bad_leaves, ()))
                self._partly_bad[level] = got
            return sorted(got[1], key=lambda c: (c.bad, c.opp, c.id))
        return sorted(self._find_partly_bad(level, bad_leaves, skip), key=lambda c: (c.bad, c.opp, c.id))

    def _find_partly_bad(self, level: int, bad_leaves, skip) -> list[PCell]:
        found: dict[int, PCell] = {}
        for leaf in bad_leaves:
            c = leaf
            while c.level < level:
                c = c.parent
            if c.id in found or c.state != SPLIT or c.nbound or c.bad >= c.size:
                continue
            if skip and _inside_any(c, skip):
                continue
            found[c.id] = c
        return list(found.values())

    def take_partly_bad(self, c: PCell) -> bool:
        """Take partly bad cell ``c`` (from ``partly_bad``) for binding, if that keeps the other VCs safe."""
        if c.state != SPLIT or c.nbound or not self.bind_ok(c):
            return False
        return self.take_exact(c, force=True)

    def doomed(self, demand: dict[int, int], bad_leaves) -> int:
        """GPUs of unbound cells (``demand``: level -> count) lost to bad hardware right now: a cell that
        no whole healthy free cell holds binds to a partly bad cell (its bad GPUs are doomed) or, with
        none left, is doomed entirely."""
        free = self.counts()
        bad_leaves = list(bad_leaves)
        chosen: set[int] = set()
        carry = 0
        doomed = 0
        for lvl in range(self.top, 0, -1):
            avail = free.get(lvl, 0) + carry
            need = demand.get(lvl, 0)
            if need > avail:
                short = need - avail
                if bad_leaves and lvl > 1:
                    for c in self.partly_bad(lvl, bad_leaves, chosen)[:short]:
                        chosen.add(c.id)
                        doomed += c.bad
                        short -= 1
                        for x in _subtree_split(c):  # its healthy parts are no longer free below
                            if x.state == FREE:
                                free[x.level] -= 1
                doomed += short * self.size[lvl]
                avail = need
            carry = (avail - need) * self.child_number[lvl] if lvl > 1 else 0
        return doomed

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

    # ------------------------------------------------------------------ allocation
    def take(self, level: int, pred: Callable[[PCell], bool] | None = None,
             key: Callable[[PCell], tuple] | None = None) -> PCell | None:
        """Take a free level-``level`` cell for binding (lowest level first: buddy best fit)."""
        key = key or _default_key
        for from_level in range(level, self.top + 1):
            pool = self.free[from_level]
            if not pool:
                continue
            if from_level == level:
                cands = [c for c in pool.values() if pred is None or pred(c)]
                cands.sort(key=key)
                for best in cands:
                    if self.bind_ok(best):
                        self.version += 1
                        del pool[best.id]
                        best.state = INSIDE
                        return best
                continue
            for c in sorted(pool.values(), key=key):
                target = _find_below(c, level, pred, key, self.bind_ok)
                if target is not None:
                    self._split_down_to(c, target)
                    return target
        return None

    def take_exact(self, cell: PCell, force: bool = False) -> bool:
        """Take this particular cell (recovery/reconfiguration); False if it is not free."""
        top = self.free_ancestor(cell)
        if top is None:
            if force and cell.state == SPLIT and self._reclaim(cell):
                cell.state = INSIDE
                return True
            return False
        if not force and not self.bind_ok(cell):
            return False
        if top is cell:
            self.version += 1
            del self.free[cell.level][cell.id]
            cell.state = INSIDE
        else:
            self._split_down_to(top, cell)
        return True


def _subtree_split(c: PCell):
    """``c`` and the cells below it down to (and including) its free-list or bad parts."""
    yield c
    if c.state == SPLIT:
        for ch in c.children:
            yield from _subtree_split(ch)


def _inside_any(c: PCell, ids) -> bool:
    x = c
    while x is not None:
        if x.id in ids:
            return True
        x = x.parent
    return False


def _default_key(c: PCell) -> tuple:
    return (c.opp > 0, c.opp, c.id)


def _find_below(c: PCell, level: int, pred, key, ok) -> PCell | None:
    if c.level == level:
        return c if (pred is None or pred(c)) and ok(c) else None
    for ch in sorted(c.children, key=key):
        r = _find_below(ch, level, pred, key, ok)
        if r is not None:
            return r
    return None
