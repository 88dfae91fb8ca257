"""Live cluster state (``ClusterState``): physical and virtual cells, nodes, buddy allocators, VC
states, health and counters, and the primitive changes (occupy a GPU, hold a virtual cell,
bind/unbind, health) that keep every counter exact. The Scheduler holds one as ``scheduler.state``.

Every primitive can record its inverse in a transaction list (``txn``) so a gang placement that
fails half-way is rolled back completely (``rollback``).
"""

from __future__ import annotations

from .buddy import Buddy
from .cells import BOUND, Node, PCell, VCell, build_physical, build_virtual, flat
from .config import ClusterConfig

_KEEP = object()


class VCState:
    """One virtual cluster: its virtual cell roots per chain, pinned roots, counters and queue."""

    __slots__ = ("name", "roots", "pins", "free", "held", "total", "queue", "shapes", "dirty", "prio_count",
                 "min_bypass", "unbound", "held_for")

    def __init__(self, name: str):
        self.name = name
        self.roots: dict[str, list[VCell]] = {}
        self.pins: dict[str, VCell] = {}
        self.free: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self.total: dict[str, int] = {}
        self.queue: list = []          # sorted [(policy key, job id)] of waiting guaranteed jobs
        # shape -> how many of ``queue``'s jobs have it (a pass's shortcut starts from it; see
        # ``Scheduler._pass_vc_jobs``): kept by ``Scheduler.enqueue`` and ``_dequeue``, the queue's only writers
        self.shapes: dict = {}
        self.dirty = True
        self.prio_count: dict[int, int] = {}   # priority -> jobs of this VC holding virtual cells
        self.min_bypass = None
        self.unbound: dict[str, int] = {}      # chain -> its virtual cells bound to no physical cell
        # its last pass decided nothing and ended held back for an overtaken job: (that job, the cells it
        # reserved or None when it holds the VC back, ``prio_count`` then); None otherwise
        # (``Scheduler._pass_needed``)
        self.held_for: tuple | None = None

    def guaranteed(self) -> int:
        return sum(self.total.values())


def rollback(txn: list, mark: int = 0) -> None:
    """Undo the primitive changes recorded in ``txn`` after position ``mark``, newest first (a savepoint
    inside a ``Trial``: a placement undoes one option before it tries the next)."""
    while len(txn) > mark:
        txn.pop()()


class Trial(list):
    """One try at changing the cluster, undone when the ``with`` block ends unless ``commit()`` was called.

    It is the ``txn`` list the state's primitives record their inverses in (pass it wherever a ``txn`` is
    asked for; ``len(trial)`` is a savepoint, ``undo_to(mark)`` goes back to it). Undoing the whole trial
    also puts back what the primitives touched beside the cells: the scheduling flags (``VCState.dirty``,
    ``opp_dirty``) as they were at the start (unless ``flags=False``, or ``forget_flags()`` after changes
    made outside the trial); with ``placement``, the virtual cells it bound for the try (``pending_idle``:
    the rollback unbound them); with ``jobs`` and ``job``, the job entered in the job table for the try
    (placement looks its job up by id). Made by ``ClusterState.trial`` and ``Scheduler.trial``."""

    __slots__ = ("state", "flags", "placement", "idle_mark", "jobs", "job", "committed")

    def __init__(self, state, flags: bool = True, placement=None, jobs: dict | None = None, job=None):
        self.state = state
        self.flags = state.dirty_snapshot() if flags else None
        self.placement = placement
        self.idle_mark = len(placement.pending_idle) if placement is not None else 0
        self.jobs = jobs
        self.job = job
        self.committed = False
        if job is not None:
            jobs[job.req.id] = job

    def __enter__(self) -> "Trial":
        return self

    def __exit__(self, *exc) -> None:
        if not self.committed:
            self.undo()

    def commit(self) -> None:
        """Keep every change made in the trial (and the job it entered)."""
        self.committed = True

    def undo_to(self, mark: int = 0) -> None:
        """Undo the changes recorded after savepoint ``mark`` (the flags stay as they are now)."""
        rollback(self, mark)

    def forget_flags(self) -> None:
        """Changes outside the trial were made (e.g. victims demoted): the flags they raised stay on undo."""
        self.flags = None

    def undo(self) -> None:
        """Undo the whole trial now: the cells' changes, the flags, the bound cells' list and the job's entry."""
        rollback(self)
        if self.flags is not None:
            self.state.dirty_restore(self.flags)
        placement = self.placement
        if placement is not None:
            del placement.pending_idle[self.idle_mark:]
        if self.job is not None:
            self.jobs.pop(self.job.req.id, None)
            self.job = None


class ClusterState:
    """The live cluster: physical cells and nodes, buddy allocators, VC states, health, counters.

    It owns every primitive change of them (occupy or reserve a GPU, hold a virtual GPU, bind and
    unbind a virtual cell, health). Each keeps all counters exact and, given a transaction list
    ``txn``, records its inverse there (``rollback``). It knows nothing of jobs beyond their ids:
    callers pass a holding job's priority. The scheduling flags ``VCState.dirty`` / ``opp_dirty``
    (a pass may start something now) are raised here when capacity appears.
    """

    rollback = staticmethod(rollback)

    def __init__(self, cfg: ClusterConfig):
        self.config = cfg
        self.roots, self.cells, self.nodes = build_physical(cfg)
        self.node_list: list[Node] = list(self.nodes.values())
        self.max_node_resources = (max(n.cpus for n in self.node_list), max(n.memory_mb for n in self.node_list))
        types = cfg.cell_types
        self.types = types
        self.node_level = {ch.name: types[ch.node_type].level for ch in cfg.chains.values()}
        self.chain_gpu = {ch.name: ch.gpu_type for ch in cfg.chains.values()}
        self.chains = sorted(cfg.chains)
        self.buddies = {
            name: Buddy(ch, types, [r for r in self.roots if r.chain == name]) for name, ch in sorted(cfg.chains.items())
        }
        self.chain_nodes: dict[str, list[PCell]] = {c: [] for c in self.chains}
        for n in self.node_list:
            for c in n.cells:
                self.chain_nodes[c.chain].append(c)
        self._level_cache: dict[tuple[str, int], int | None] = {}
        # (GPU types a job asks for, VC or None) -> job_chains (the chains and VC totals are fixed per state)
        self._chains_cache: dict[tuple, list[str]] = {}
        # request shapes validation accepted on this config (validation.py; it checks each shape once)
        self.valid_shapes: dict[tuple, None] = {}
        self.pin_cells = {}
        for c in self.cells:
            if c.pinned_id:
                self.pin_cells[c.pinned_id] = c
        self.vcs: dict[str, VCState] = {}
        ids = [0]
        for name, spec in cfg.virtual_clusters.items():
            vc = VCState(name)
            for chain in self.chains:
                vc.free[chain] = vc.held[chain] = vc.total[chain] = vc.unbound[chain] = 0
            for v in spec.virtual_cells:
                lvl = types[v.cell_type].level
                for _ in range(v.number):
                    root = build_virtual(name, v.chain, v.cell_type, cfg, ids)
                    vc.roots.setdefault(v.chain, []).append(root)
                    vc.unbound[v.chain] += 1
                self.buddies[v.chain].demand[lvl] += v.number
                vc.total[v.chain] += types[v.cell_type].leaf_count * v.number
                vc.free[v.chain] += types[v.cell_type].leaf_count * v.number
            for pid in spec.pinned_cells:
                pc = self.pin_cells[pid]
                root = build_virtual(name, pc.chain, pc.type, cfg, ids)
                root.pin = pid
                vc.pins[pid] = root
                self.bind(root, pc, None)
            self.vcs[name] = vc
        self.vc_order = sorted(self.vcs)
        self.vcs_in_order = [self.vcs[name] for name in self.vc_order]  # (the VCs are fixed per state)
        self.gpu_down: set[tuple[str, int]] = set()
        self.node_down: set[str] = set()
        # bad GPUs per chain (id -> leaf, in the order they went bad): finding partly bad cells to bind
        # walks these few leaves, never the whole tree
        self.bad_leaves: dict[str, dict[int, PCell]] = {c: {} for c in self.chains}
        self.opp_queue: list = []      # sorted [(FIFO key, job id)] of waiting opportunistic jobs (cluster-wide)
        self.opp_dirty = True
        self.opp_leaves = 0   # GPUs running opportunistic work (fast path: skip preemption search)
        self.shared: dict = {}  # leaf id -> ShareGPU: the GPUs holding shares (shares.py), in the order opened

    # ------------------------------------------------------------------ lookups
    def task_level(self, chain: str, gpus: int) -> int | None:
        """The smallest level of ``chain`` holding ``gpus`` GPUs of one node (None: no node is that big)."""
        key = (chain, gpus)
        lvl = self._level_cache.get(key, 0)
        if lvl != 0:
            return lvl
        lvl = None
        ch = self.config.chains[chain]
        for t in reversed(ch.types):
            ct = self.types[t]
            if ct.level > self.node_level[chain]:
                break
            if ct.leaf_count >= gpus:
                lvl = ct.level
                break
        self._level_cache[key] = lvl
        return lvl

    def job_chains(self, req, vcs) -> list[str]:
        """The chains ``req``'s GPU tasks may use (in ``vcs``'s guarantee; None: the whole cluster)."""
        tasks = req.tasks
        if len(tasks) == 1:  # (the common case, keyed without building a set)
            t = tasks[0]
            key = (t.gpu_type if t.gpus > 0 and t.gpu_type else None, vcs.name if vcs is not None else None)
        else:
            key = (frozenset(t.gpu_type for t in tasks if t.gpus > 0 and t.gpu_type),
                   vcs.name if vcs is not None else None)
        got = self._chains_cache.get(key)
        if got is not None:
            return got
        types = {t.gpu_type for t in tasks if t.gpus > 0 and t.gpu_type}
        if vcs is None:
            chains = self.chains
        else:
            chains = [c for c in self.chains if vcs.total.get(c)]
        got = self._chains_cache[key] = [c for c in chains if not types or types <= {self.chain_gpu[c]}] or \
            [c for c in chains if self.chain_gpu[c] in types]
        return got

    def avail_gpus(self) -> int:
        """GPUs an opportunistic task could take now (healthy, unused, unreserved, not pinned), cluster-wide."""
        return sum(r.avail for r in self.roots)

    def dirty_snapshot(self):
        return [vc.dirty for vc in self.vcs.values()], self.opp_dirty

    def dirty_restore(self, snap) -> None:
        flags, opp = snap
        for vc, f in zip(self.vcs.values(), flags):
            vc.dirty = f
        self.opp_dirty = opp

    def trial(self, flags: bool = True) -> Trial:
        """A ``Trial`` of primitive changes: ``with state.trial() as txn: ...; txn.commit()`` keeps them,
        anything else undoes them (``flags``: also put the scheduling flags back)."""
        return Trial(self, flags)

    def mark_all_dirty(self) -> None:
        """Every VC's pass and the opportunistic pass may start something now."""
        for vc in self.vcs.values():
            vc.dirty = True
        self.opp_dirty = True

    # ------------------------------------------------------------------ physical leaves
    def leaf_set(self, leaf: PCell, job=_KEEP, jopp=_KEEP, reserved_by=_KEEP, healthy=_KEEP, txn=None) -> None:
        job0, jopp0, res0, healthy0 = leaf.job, leaf.jopp, leaf.reserved_by, leaf.healthy
        if job is _KEEP:
            job = job0
        else:
            leaf.job = job
        if jopp is _KEEP:
            jopp = jopp0
        else:
            leaf.jopp = jopp
        if reserved_by is _KEEP:
            reserved_by = res0
        else:
            leaf.reserved_by = reserved_by
        if healthy is _KEEP:
            healthy = healthy0
        else:
            leaf.healthy = healthy
        u0 = job0 is not None
        u1 = job is not None
        r1 = reserved_by is not None
        du = u1 - u0
        do = (u1 and jopp) - (u0 and jopp0)
        db = (not healthy) - (not healthy0)
        dr = r1 - (res0 is not None)
        da = (1 if (not u1 and healthy and not r1 and not leaf.in_pin) else 0) - leaf.avail
        if du or do or db or dr or da:
            self.opp_leaves += do
            c = leaf
            if db or dr:
                while c is not None:
                    c.used += du
                    c.opp += do
                    c.bad += db
                    c.reserved += dr
                    c.avail += da
                    c = c.parent
            else:  # (the common changes: a job starts or ends on the GPU)
                while c is not None:
                    c.used += du
                    c.opp += do
                    c.avail += da
                    c = c.parent
            if da > 0:
                self.opp_dirty = True
        if txn is not None:
            txn.append(lambda: self.leaf_set(leaf, job0, jopp0, res0, healthy0))

    def leaves_set(self, leaves: list, job=_KEEP, jopp=_KEEP, reserved_by=_KEEP) -> None:
        """``leaf_set`` of each of ``leaves`` (one job's GPUs) in one call: the same walks up the cells,
        without a call and the health bookkeeping per leaf (their health does not change)."""
        dopp = 0
        freed = False
        for leaf in leaves:
            job0, jopp0, res0 = leaf.job, leaf.jopp, leaf.reserved_by
            j = job0 if job is _KEEP else job
            o = jopp0 if jopp is _KEEP else jopp
            r = res0 if reserved_by is _KEEP else reserved_by
            leaf.job, leaf.jopp, leaf.reserved_by = j, o, r
            u0 = job0 is not None
            u1 = j is not None
            r1 = r is not None
            du = u1 - u0
            do = (u1 and o) - (u0 and jopp0)
            dr = r1 - (res0 is not None)
            da = (1 if (not u1 and leaf.healthy and not r1 and not leaf.in_pin) else 0) - leaf.avail
            c = leaf
            if dr:
                while c is not None:
                    c.used += du
                    c.opp += do
                    c.reserved += dr
                    c.avail += da
                    c = c.parent
            elif du or do or da:
                while c is not None:
                    c.used += du
                    c.opp += do
                    c.avail += da
                    c = c.parent
            dopp += do
            if da > 0:
                freed = True
        self.opp_leaves += dopp
        if freed:
            self.opp_dirty = True

    # ------------------------------------------------------------------ virtual leaves
    def vdelta(self, v: VCell, dfree: int, dheld: int, prio: int = 0) -> None:
        x = v
        if dheld:
            while x is not None:
                x.free += dfree
                x.held += dheld
                hp = x.hp
                n = hp.get(prio, 0) + dheld
                if n:
                    hp[prio] = n
                else:
                    del hp[prio]
                x = x.parent
        else:
            while x is not None:
                x.free += dfree
                x = x.parent
        root = v.root
        if root.pin is None:
            vc = self.vcs[v.vc]
            vc.free[v.chain] += dfree
            vc.held[v.chain] += dheld
        if dfree > 0:
            self.vcs[v.vc].dirty = True

    def vhold(self, v: VCell, job_id: str, prio: int, txn=None) -> None:
        """Job ``job_id`` (of priority ``prio``) holds virtual GPU ``v``."""
        was_free = v.job is None and not (v.pcell is not None and not v.pcell.healthy)
        v.job = job_id
        self.vdelta(v, -1 if was_free else 0, 1, prio)
        if txn is not None:
            txn.append(lambda: self.vunhold(v, prio))

    def vunhold(self, v: VCell, prio: int, txn=None) -> None:
        """``v``'s holder (of priority ``prio``) lets it go."""
        old = v.job
        v.job = None
        self.vdelta(v, 0 if (v.pcell is not None and not v.pcell.healthy) else 1, -1, prio)
        if txn is not None:
            txn.append(lambda: self.vhold(v, old, prio))

    def vswap(self, v: VCell, job_id: str, old_prio: int, prio: int) -> None:
        """``v`` passes from its holder (priority ``old_prio``) to ``job_id`` (priority ``prio``): exactly
        ``vunhold(v, old_prio)`` then ``vhold(v, job_id, prio)``, in one walk up the cells (the preemption
        search hands GPUs from holder to holder, and back, many times per search). The free and held
        counts do not change; the priority counts change as the two calls change them, in the same order."""
        v.job = job_id
        x = v
        while x is not None:
            hp = x.hp
            n = hp.get(old_prio, 0) - 1
            if n:
                hp[old_prio] = n
            else:
                del hp[old_prio]
            n = hp.get(prio, 0) + 1
            if n:
                hp[prio] = n
            else:
                del hp[prio]
            x = x.parent
        if v.pcell is None or v.pcell.healthy:  # (vunhold freed a healthy GPU for a moment: its VC is dirty)
            self.vcs[v.vc].dirty = True

    def vhold_many(self, vs: list, job_id: str, prio: int, txn=None) -> None:
        """``vhold`` of each of ``vs`` (free virtual GPUs of one VC, e.g. one task's), in one walk up the
        cells they share (``_vcells_up``)."""
        if len(vs) == 1:
            self.vhold(vs[0], job_id, prio, txn)
            return
        dfree = []
        for v in vs:
            p = v.pcell
            dfree.append(-1 if v.job is None and (p is None or p.healthy) else 0)
            v.job = job_id
        self._vcells_up(vs, dfree, 1, prio)
        if txn is not None:
            txn.append(lambda: self.vunhold_many(vs, prio))

    def vunhold_many(self, vs: list, prio: int) -> None:
        """``vunhold`` of each of ``vs`` (held by one job of priority ``prio``), in one walk up."""
        if len(vs) == 1:
            self.vunhold(vs[0], prio)
            return
        dfree = []
        for v in vs:
            p = v.pcell
            dfree.append(0 if p is not None and not p.healthy else 1)
            v.job = None
        self._vcells_up(vs, dfree, -1, prio)

    def vswap_many(self, vs: list, jobs: list, old_prios: list, prios: list) -> None:
        """``vswap(vs[i], jobs[i], old_prios[i], prios[i])`` for each ``i``: only the priority counts change
        (as ``vswap``), in one walk up per pair of priorities involved (the preemption search hands a
        task's GPUs from their holders to the preemptor, and back)."""
        if len(vs) == 1:
            self.vswap(vs[0], jobs[0], old_prios[0], prios[0])
            return
        groups: dict = {}
        dirty = False
        for v, job, op, np in zip(vs, jobs, old_prios, prios):
            v.job = job
            g = groups.get((op, np))
            if g is None:
                groups[(op, np)] = [v]
            else:
                g.append(v)
            if v.pcell is None or v.pcell.healthy:
                dirty = True
        for (op, np), cells in groups.items():
            counts = dict.fromkeys(cells, 1)
            while counts:
                up: dict = {}
                for x, n in counts.items():
                    hp = x.hp
                    m = hp[op] - n
                    if m:
                        hp[op] = m
                    else:
                        del hp[op]
                    hp[np] = hp.get(np, 0) + n
                    p = x.parent
                    if p is not None:
                        up[p] = up.get(p, 0) + n
                counts = up
        if dirty:  # (as ``vswap``)
            self.vcs[vs[0].vc].dirty = True

    def _vcells_up(self, vs: list, dfree: list, dheld: int, prio: int) -> None:
        """Add ``dfree[i]`` free and ``dheld`` held at priority ``prio`` to each ``vs[i]`` (distinct virtual
        GPUs) and to every cell above them, each ancestor once with the sum of its descendants' changes;
        and to their VCs' counters (as ``vdelta`` does per leaf)."""
        changed = {x: [df, dheld] for x, df in zip(vs, dfree)}  # (the leaves first, then level by level)
        while changed:
            up: dict = {}
            for x, d in changed.items():
                df, dh = d
                x.free += df
                x.held += dh
                hp = x.hp
                n = hp.get(prio, 0) + dh
                if n:
                    hp[prio] = n
                else:
                    del hp[prio]
                p = x.parent
                if p is not None:
                    e = up.get(p)
                    if e is None:
                        up[p] = [df, dh]
                    else:
                        e[0] += df
                        e[1] += dh
                else:  # a root: its VC's counters (a pinned cell counts in none)
                    vc = self.vcs[x.vc]
                    if x.pin is None:
                        vc.free[x.chain] += df
                        vc.held[x.chain] += dh
                    if df > 0:
                        vc.dirty = True
            changed = up

    # ------------------------------------------------------------------ binding
    def bind(self, root: VCell, pcell: PCell, txn=None) -> None:
        root.bound = pcell
        if not pcell.pinned_id:
            self.vcs[root.vc].unbound[root.chain] -= 1
            pcell.state = BOUND
            buddy = self.buddies[root.chain]
            buddy.demand[root.level] -= 1
            buddy.on_bind(pcell)
        for v, p in zip(flat(root), flat(pcell)):
            v.pcell = p
            p.vcell = v
        if pcell.bad:
            for leaf in pcell.leaves:
                if not leaf.healthy and leaf.vcell.job is None:
                    self.vdelta(leaf.vcell, -1, 0)
        if txn is not None:
            txn.append(lambda: self.unbind(root, mark_dirty=False))

    def unbind(self, root: VCell, txn=None, mark_dirty: bool = True) -> None:
        pcell = root.bound
        if pcell.bad:
            for leaf in pcell.leaves:
                if not leaf.healthy and leaf.vcell.job is None:
                    self.vdelta(leaf.vcell, 1, 0)
        for v, p in zip(flat(root), flat(pcell)):
            v.pcell = None
            p.vcell = None
        root.bound = None
        self.vcs[root.vc].unbound[root.chain] += 1
        buddy = self.buddies[root.chain]
        buddy.demand[root.level] += 1
        buddy.on_unbind(pcell)
        buddy.release(pcell)
        if mark_dirty:  # buddy space grew: binding may work again for the VCs with cells to bind there
            chain = root.chain
            for vc in self.vcs.values():
                if vc.unbound[chain]:
                    vc.dirty = True
        if txn is not None:
            # re-taking exactly this cell restores the state bit-for-bit
            txn.append(lambda: (buddy.take_exact(pcell, force=True), self.bind(root, pcell)))

    def release_idle_roots(self, roots) -> None:
        for r in roots:
            if r.held == 0 and r.pin is None and r.bound is not None:
                self.unbind(r)

    # ------------------------------------------------------------------ health
    def effective_health(self, leaf: PCell) -> bool:
        return leaf.node not in self.node_down and (leaf.node, leaf.gpu) not in self.gpu_down

    def apply_health(self, leaf: PCell) -> None:
        healthy = self.effective_health(leaf)
        if healthy == leaf.healthy:
            return
        buddy = self.buddies[leaf.chain]
        v = leaf.vcell
        if v is not None and v.job is None:
            self.vdelta(v, 1 if healthy else -1, 0)
        self.leaf_set(leaf, healthy=healthy)
        if healthy:
            self.bad_leaves[leaf.chain].pop(leaf.id, None)
            buddy.mark_good(leaf)
        else:
            self.bad_leaves[leaf.chain][leaf.id] = leaf
            buddy.mark_bad(leaf)
        self.mark_all_dirty()

