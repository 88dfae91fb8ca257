"""Topology-aware gang placement of guaranteed jobs.

Guaranteed jobs are placed in their VC's *virtual* cells (binding a virtual cell to a physical
one the first time it is used); opportunistic jobs directly on free physical GPUs (``physical.py``,
functions of the cluster state). Both pack: candidates are tried most-used first (fewest free GPUs
that still fit), and one task's GPUs come from the smallest cell that can hold them, so they share
the closest common ancestor.

Modes for guaranteed placement (``jobs.Mode``): FREE = only GPUs nobody uses; OPPORTUNISTIC = may
take GPUs running opportunistic work (their jobs become victims); DISPLACE = the preemption search
(``preemption.py``): also the VC's own jobs of priority <= the search's cutoff.
"""

from __future__ import annotations

from .cells import VCell
from .jobs import DISPLACE, FREE
from .physical import bind_key, bind_pred, cpu_node, take_node
from .state import rollback
from .types import TaskGroup


class GuaranteedPlacement:
    """Places guaranteed jobs: one per cluster state (the scheduler makes a new one with each new state).

    It changes the cluster only through ``state`` (a ``ClusterState``) and reads ``jobs`` (the
    scheduler's job table, by id: who holds a virtual GPU, at what priority). The rest is the context
    of one attempt, set by its caller: ``cut`` and ``stolen`` (the running preemption search: jobs of
    priority <= ``cut`` may be displaced; the holders it took), ``claimable`` (the victims the
    preemptor being placed stops: their GPUs are its to take) and ``pending_idle`` (virtual cells bound
    for the attempt: the scheduler unbinds them again if nothing ended up in them)."""

    __slots__ = ("state", "jobs", "cut", "stolen", "claimable", "pending_idle", "fenced")

    def __init__(self, state, jobs: dict):
        self.state = state
        self.jobs = jobs
        self.cut = -1                              # -1: no preemption search running
        self.stolen: list = []
        self.claimable: frozenset[str] = frozenset()
        self.pending_idle: list = []
        # virtual cells a starving job of the VC reserves (``starvation.py``): unavailable to the jobs behind
        # it, except to a preemption search (DISPLACE), which may take anything of a lower priority
        self.fenced: frozenset = frozenset()

    # ------------------------------------------------------------------ guaranteed (virtual space)
    def _vavail(self, v: VCell, mode: int) -> int:
        """GPUs of ``v`` a placement in ``mode`` may take (an upper bound: ``_vleaf_ok`` has the last word)."""
        if mode == DISPLACE:  # (first: the search's walks call this most; a fence does not bind it)
            hp = v.hp
            if not hp:
                return v.free
            cut = self.cut
            a = v.free
            for p, n in hp.items():  # a plain loop: this is the hottest function of the search
                if p <= cut:
                    a += n
            return a
        if self.fenced and v in self.fenced:
            return 0
        if mode == FREE and v.pcell is not None:
            a = v.free - v.pcell.opp
            return a if a > 0 else 0
        return v.free

    def _kids(self, v: VCell, mode: int, least: int) -> list:
        """``[(available, index, child)]`` of ``v``'s children with at least ``least`` (>= 1) available: what
        ``_vavail`` says of each, computed here without a call per child (the walks' inner loop)."""
        children = v.children
        if mode == DISPLACE:
            cut = self.cut
            out = []
            for c in children:
                a = c.free
                hp = c.hp
                if hp:
                    for p, n in hp.items():
                        if p <= cut:
                            a += n
                if a >= least:
                    out.append((a, c.index, c))
            return out
        if self.fenced:
            vavail = self._vavail
            return [(a, c.index, c) for c in children if (a := vavail(c, mode)) >= least]
        if mode == FREE:  # (a negative difference is 0 to ``_vavail``: below ``least`` either way)
            return [(a, c.index, c) for c in children
                    if (a := (c.free - c.pcell.opp if c.pcell is not None else c.free)) >= least]
        return [(c.free, c.index, c) for c in children if c.free >= least]

    def _vleaf_ok(self, v: VCell, mode: int) -> bool:
        if v.job is not None:
            if mode != DISPLACE:
                return False
            # a displaced job's GPU is usable only if healthy (never hand a preemptor a bad GPU)
            return self.jobs[v.job].req.priority <= self.cut and (v.pcell is None or v.pcell.healthy)
        p = v.pcell
        if p is None:
            return True
        if not p.healthy or (p.reserved_by is not None):
            return False
        if p.job is None:
            return True
        if mode == FREE:
            return False
        x = self.jobs[p.job]
        if x.opp and not x.demoted and x.req.priority >= 0:
            # a guaranteed job being stopped for a preemptor: its GPUs are not opportunistic work anyone
            # may claim, only that preemptor (``claimable``) or a search that may displace its priority
            # (else an equal priority would ride on the preemption, and keep it going if the preemptor is
            # withdrawn)
            return (mode == DISPLACE and x.req.priority <= self.cut) or p.job in self.claimable
        return True

    def _vtake(self, v: VCell, k: int, mode: int, out: list) -> None:
        """Append to ``out`` up to ``k`` GPUs of ``v`` (whose availability is at least ``k``) that may be taken."""
        if k == v.size and (mode == DISPLACE or not self.fenced):
            # all of ``v``: every child is wholly available, so the walk below would visit every leaf in
            # index order (the children of a cell are of one type: equal sizes) and keep those that may be
            # taken; a fence (a starving job's cells, below ``v``) would hide some, so not with one
            leaf_ok = self._vleaf_ok
            for leaf in v.leaves:
                if leaf_ok(leaf, mode):
                    out.append(leaf)
            return
        if v.level == 1:
            if self._vleaf_ok(v, mode):
                out.append(v)
            return
        kids = self._kids(v, mode, 1)
        fit = [x for x in kids if x[0] >= k]
        if fit:
            if mode == DISPLACE:  # free GPUs before preemptible ones (HiveD), else in order
                self._vtake(min(fit, key=lambda x: (max(0, k - x[2].free), x[1]))[2], k, mode, out)
            else:
                self._vtake(min(fit)[2], k, mode, out)
            return
        need = k
        for a, _, c in sorted(kids, key=lambda x: (-x[0], x[1])):
            before = len(out)
            self._vtake(c, min(need, a), mode, out)
            need -= len(out) - before
            if need <= 0:
                return

    def _vdescend(self, v: VCell, g: int, level: int, node_level: int, tg: TaskGroup, mode: int,
                  checked: bool = False):
        """The first place (node, GPUs) for one task of ``g`` GPUs in ``v``, descending to ``level``
        (``checked``: the caller saw at least ``g`` available in ``v``)."""
        if not checked and self._vavail(v, mode) < g:
            return None
        if v.level <= node_level:
            node = v.pcell.node_obj
            if not node.fits(tg.cpus, tg.memory_mb):
                return None
        if v.level == level:
            out: list = []
            self._vtake(v, g, mode, out)
            if len(out) < g:
                return None
            return v.pcell.node_obj, out[:g]
        if level == 1 and v.level == 2:  # its children are GPUs: each has 0 or 1 available, so the
            return self._first_vleaf(v, node_level, tg, mode)  # packing order is theirs (by index)
        if mode == DISPLACE:
            # its order does not depend on what is available: sort the children, then check each in turn
            # (the walk usually ends at the first, and the rest need not be summed up)
            cut = self.cut
            for c in sorted(v.children, key=_displace_order(g, v.level - 1 >= node_level)):
                a = c.free
                hp = c.hp
                if hp:
                    for p, n in hp.items():
                        if p <= cut:
                            a += n
                if a >= g:
                    r = self._vdescend(c, g, level, node_level, tg, mode, True)
                    if r is not None:
                        return r
            return None
        kids = self._kids(v, mode, g)
        kids.sort()  # by (available, index): indices differ, so the cells themselves are never compared
        for _, _, c in kids:
            r = self._vdescend(c, g, level, node_level, tg, mode, True)
            if r is not None:
                return r
        return None

    def _first_vleaf(self, v: VCell, node_level: int, tg: TaskGroup, mode: int):
        """``_vdescend`` of a one-GPU task in ``v`` whose children are GPUs: the first (by index) that is
        available and may be taken, as (node, [it]); None if none. The general descent sorts the
        children by (available, index); a GPU has 0 or 1 available, so that is index order among those
        with 1."""
        vavail = self._vavail
        leaf_ok = self._vleaf_ok
        check_node = v.level > node_level  # (else v's node, the same, was checked)
        children = v.children
        if mode == DISPLACE:  # free GPUs before preemptible ones (HiveD), each in order
            children = sorted(children, key=lambda c: (c.free < 1, c.index))
        for c in children:
            if vavail(c, mode) < 1:
                continue
            node = c.pcell.node_obj
            if check_node and not node.fits(tg.cpus, tg.memory_mb):
                continue
            if leaf_ok(c, mode):
                return node, [c]
        return None

    def _try_bind(self, root: VCell, tg: TaskGroup, mode: int, txn: list) -> bool:
        pc = self.state.buddies[root.chain].take(root.level, bind_pred(self.state, root, tg, mode), bind_key)
        if pc is None:
            return False
        self.state.bind(root, pc, txn)
        self.pending_idle.append(root)  # unbound again after the attempt if nothing ended up in it
        return True

    def _bind_options(self, root: VCell, tg: TaskGroup, mode: int, txn: list):
        """Bind unbound ``root`` for an attempt, one option per step: a whole healthy free cell first,
        then (HiveD: binding avoids the bad GPUs of a partly bad cell) partly bad cells, fewest bad
        GPUs first. The caller rolls ``txn`` back before asking for the next option."""
        if self._try_bind(root, tg, mode, txn):
            yield
        bad = self.state.bad_leaves[root.chain]
        if not bad or root.level == 1:
            return
        buddy = self.state.buddies[root.chain]
        node_level = self.state.node_level[root.chain]
        for pc in buddy.partly_bad(root.level, bad.values()):
            usable = pc.avail if mode == FREE else pc.avail + pc.opp
            if usable < tg.gpus or pc.reserved:
                continue
            if root.level <= node_level and not pc.node_obj.fits(tg.cpus, tg.memory_mb):
                continue
            if not buddy.take_partly_bad(pc):
                continue
            self.state.bind(root, pc, txn)
            self.pending_idle.append(root)
            yield

    def _find_vtask(self, vcs, chain: str, tg: TaskGroup, scope: VCell | None, mode: int, txn: list):
        g = tg.gpus
        state = self.state
        level = state.task_level(chain, g)
        if level is None:
            return None
        nl = state.node_level[chain]
        if scope is not None:
            if scope.level < level:
                return None
            return self._vdescend(scope, g, level, nl, tg, mode)
        roots = vcs.roots.get(chain, ())
        vavail = self._vavail
        bound = [(a, r.level, r.id, r) for r in roots
                 if r.bound is not None and r.level >= level and (a := vavail(r, mode)) >= g]
        if mode == DISPLACE:  # most used first (HiveD's cross-priority packing), then as below
            bound.sort(key=lambda x: (x[3].free - x[3].size, x[1], x[2]))
        else:
            bound.sort()  # by (available, level, id): ids are unique, so the cells themselves are never compared
        for _, _, _, r in bound:
            res = self._vdescend(r, g, level, nl, tg, mode, True)
            if res is not None:
                return res
        tried_levels = set()
        for r in sorted((r for r in roots if r.bound is None and r.level >= level), key=lambda r: (r.level, r.id)):
            if r.level in tried_levels:
                continue
            tried_levels.add(r.level)
            mark = len(txn)
            for _ in self._bind_options(r, tg, mode, txn):
                res = self._vdescend(r, g, level, nl, tg, mode)
                if res is not None:
                    return res
                rollback(txn, mark)
        return None

    def _within_scopes(self, vcs, chains: list[str], wlevel: int, total: int, mode: int):
        """Candidate virtual cells of level ``wlevel`` (bound ones most-used first, then fresh binds)."""
        for chain in chains:
            cands = []
            for r in vcs.roots.get(chain, ()):
                if r.bound is None or r.level < wlevel:
                    continue
                stack = [r]
                while stack:
                    v = stack.pop()
                    if self._vavail(v, mode) < total:
                        continue
                    if v.level == wlevel:
                        cands.append(v)
                    else:
                        stack.extend(v.children)
            cands.sort(key=lambda v: (self._vavail(v, mode), v.id))
            for v in cands:
                yield v, None
            levels = set()
            for r in sorted((r for r in vcs.roots.get(chain, ()) if r.bound is None and r.level >= wlevel),
                            key=lambda r: (r.level, r.id)):
                if r.level not in levels:
                    levels.add(r.level)
                    yield None, r

    def _whole_cells_free(self, vcs, chain: str, level: int, mode: int, need: int) -> bool:
        """Are there at least ``need`` wholly free level-``level`` cells in the VC (cheap pre-check)?"""
        size = self.state.types[self.state.config.chains[chain].type_at(level)].leaf_count
        kids = self._kids  # availability: an upper bound in every mode, only used to reject
        n = 0
        for r in vcs.roots.get(chain, ()):
            if r.level < level:
                continue
            if r.bound is None:
                n += r.size // size
            elif r.level == level:
                n += self._vavail(r, mode) >= size
            elif self._vavail(r, mode) >= size:
                stack = [r]
                while stack:
                    v = stack.pop()
                    if v.level == level + 1:  # (its children are the cells counted)
                        n += len(kids(v, mode, size))
                        if n >= need:
                            return True
                    else:
                        stack.extend(c for _, _, c in kids(v, mode, size))
            if n >= need:
                return True
        return False

    def _surely_unplaceable(self, req, vcs, mode: int) -> bool:
        """Quick reject for gangs of whole cells (e.g. 4 x 8 GPUs) that cannot fit: saves a
        hold-and-roll-back of the first tasks."""
        tasks = req.tasks
        if req.within is not None or req.pinned_cell is not None or (len(tasks) == 1 and tasks[0].count <= 1):
            return False  # (one task is never a gang of several cells)
        chains = self.state.job_chains(req, vcs)
        if len(chains) != 1:
            return False
        chain = chains[0]
        need: dict[int, int] = {}
        for t in req.tasks:
            if not t.gpus:
                continue
            level = self.state.task_level(chain, t.gpus)
            if level is None:
                return False
            if self.state.types[self.state.config.chains[chain].type_at(level)].leaf_count != t.gpus:
                return False
            need[level] = need.get(level, 0) + t.count
        if len(need) != 1:
            return False
        (level, count), = need.items()
        return count > 1 and not self._whole_cells_free(vcs, chain, level, mode, count)

    def place(self, job, mode: int, txn: list):
        """Hold virtual GPUs for every task of ``job`` (all or nothing), recording every change in
        ``txn`` (roll it back to undo). Returns the task list ``[(group, index, node, leaves)]`` or None.
        DISPLACE (the preemption search, always undone) holds nothing for the last task: it only notes
        in ``stolen`` whose GPUs that task takes."""
        req = job.req
        vcs = self.state.vcs[req.vc]
        if self._surely_unplaceable(req, vcs, mode):
            return None
        order = (0,) if len(req.tasks) == 1 else sorted(range(len(req.tasks)), key=lambda i: (-req.tasks[i].gpus, i))
        if req.pinned_cell is not None:
            return self._place_groups_v(job, vcs, order, vcs.pins[req.pinned_cell], mode, txn)
        if req.within is None:
            return self._place_groups_v(job, vcs, order, None, mode, txn)
        wlevel = self.state.types[req.within].level
        chains = [c for c in self.state.job_chains(req, vcs) if req.within in self.state.config.chains[c].types]
        for scope, unbound_root in self._within_scopes(vcs, chains, wlevel, req.total_gpus, mode):
            mark = len(txn)
            if unbound_root is None:
                res = self._place_groups_v(job, vcs, order, scope, mode, txn)
                if res is not None:
                    return res
                rollback(txn, mark)
                continue
            for _ in self._bind_options(unbound_root, req.tasks[order[0]], mode, txn):
                scope = unbound_root
                while scope.level > wlevel:
                    scope = scope.children[0]
                res = self._place_groups_v(job, vcs, order, scope, mode, txn)
                if res is not None:
                    return res
                rollback(txn, mark)
        return None

    def _place_groups_v(self, job, vcs, order, scope: VCell | None, mode: int, txn: list):
        req = job.req
        jid, prio = req.id, req.priority
        state = self.state
        chain_gpu = state.chain_gpu
        out = []
        used_nodes: list = []
        last_chain = None
        for gi in order:
            tg = req.tasks[gi]
            if scope is not None:
                chains = [scope.chain] if tg.gpu_type in (None, chain_gpu[scope.chain]) else []
            else:
                chains = [c for c in state.chains if vcs.total.get(c)
                          and (tg.gpu_type is None or chain_gpu[c] == tg.gpu_type)]
                if last_chain in chains:
                    chains.remove(last_chain)
                    chains.insert(0, last_chain)
            for ti in range(tg.count):
                if tg.gpus == 0:
                    node = cpu_node(self.state, tg, used_nodes, vcs, scope.pcell if scope is not None else None)
                    if node is None:
                        return None
                    take_node(node, tg, txn)
                    used_nodes.append(node)
                    out.append((gi, ti, node, []))
                    continue
                found = None
                for ch in chains:
                    found = self._find_vtask(vcs, ch, tg, scope, mode, txn)
                    if found is not None:
                        last_chain = ch
                        break
                if found is None:
                    return None
                node, leaves = found
                if mode == DISPLACE and ti == tg.count - 1 and gi == order[-1]:
                    # the search's last task: nothing after it reads what it would hold, and the search is
                    # always undone, so it only notes whose GPUs it takes (in order, as ``_vsteal`` does)
                    self.stolen.extend(v.job for v in leaves if v.job is not None)
                    out.append((gi, ti, node, [v.pcell for v in leaves]))
                    continue
                free = [v for v in leaves if v.job is None]
                if len(free) < len(leaves):  # (the preemption search: it takes held GPUs too)
                    self._vsteal([v for v in leaves if v.job is not None], jid, prio, txn)
                if free:
                    state.vhold_many(free, jid, prio, txn)
                take_node(node, tg, txn)
                used_nodes.append(node)
                out.append((gi, ti, node, [v.pcell for v in leaves]))
        return out

    def _vsteal(self, vs: list, job_id: str, prio: int, txn: list) -> None:
        """Tentatively hand held virtual GPUs ``vs`` to ``job_id`` (priority ``prio``; the preemption
        search, always rolled back)."""
        state = self.state
        olds = [v.job for v in vs]
        jobs = self.jobs
        old_prios = [jobs[old].req.priority for old in olds]
        stolen = self.stolen
        stolen.extend(olds)
        n = len(vs)
        state.vswap_many(vs, [job_id] * n, old_prios, [prio] * n)

        def undo():
            state.vswap_many(vs, olds, [prio] * n, old_prios)
            del stolen[-n:]

        txn.append(undo)


def _displace_order(g: int, node_or_above: bool):
    """The order in which the preemption search (DISPLACE) tries the children (cells) that can hold a task of
    ``g`` GPUs, as HiveD's intra-VC scheduler with preemption does: nodes (and cells above them) most
    used first, whatever the priorities using them (cross-priority packing; among equals in order), so
    that among holders of equal priority the victim is the one on the fullest node; inside a node, the
    cells needing the fewest GPUs taken from others first (free GPUs before preemptible ones)."""
    if node_or_above:
        return lambda c: (c.free - c.size, c.index)
    return lambda c: (max(0, g - c.free), c.index)
