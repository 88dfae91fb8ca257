"""The one install path: every job that runs or reserves GPUs gets there through ``Installer.install``.

Commit (a placement the search found), adopt (recovery after a restart) and reconfigure (running
jobs carried into a new cluster state) differ only in how they get the virtual GPUs a guaranteed
job holds: the search holds them as it goes; adopt and reconfigure (``Installer.adopt_running``)
cover the job's given GPUs with its VC's cells (``cover_with_vcells``, binding free cells around
them when needed).
"""

from __future__ import annotations

from .decisions import Decision
from .jobs import PREEMPTING, RUNNING, Job
from .shares import SharedGPUs, job_share
from .types import TaskPlacement


class Installer:
    """Installs jobs into one cluster state: ``state`` (changed only through its primitives), ``jobs``
    (the scheduler's job table, by id), ``shares`` (the state's shared GPUs) and ``holders`` (per VC, the
    jobs holding its virtual GPUs; with the VC's ``prio_count`` the preemption search's bounds)."""

    __slots__ = ("state", "jobs", "shares", "holders", "_placements")

    def __init__(self, state, jobs: dict, shares: SharedGPUs):
        self.state = state
        self.jobs = jobs
        self.shares = shares
        self.holders: dict[str, dict[str, None]] = {vc: {} for vc in state.vcs}
        # TaskPlacements made so far, by every field and the types of the numbers (they are immutable and
        # compared by value, so an equal one is reused: building a frozen dataclass is a start's main cost)
        self._placements: dict[tuple, TaskPlacement] = {}

    def install(self, j: Job, res: list, vleaves: list, opportunistic: bool, victims: list[str], now: float,
                out: list, announce: bool, placement: tuple | None = None, detached: tuple = (),
                share_slot: int = 0) -> None:
        """Make ``j`` running on ``res`` ((group, index, node, physical leaves) per task), or preempting
        ``victims`` while it reserves those leaves. ``vleaves``: the virtual GPUs it holds (already held).
        CPUs/memory of ``res`` are already taken. ``announce``: emit ``started``/``preempting``.
        ``placement`` (reconfigure): the task placements to keep as they were; ``detached``: its tasks
        on hardware no longer in the config. A share job (``shares.py``) takes the eighths from
        ``share_slot`` of its one GPU: joining the GPU's other shares, or opening it."""
        req = j.req
        jid = req.id
        size = j.share if type(j) is Job else job_share(req)
        if size and placement:
            share_slot = placement[0].share_slot
        tasks = req.tasks
        if len(tasks) == 1:
            firsts = (0,)
        else:
            firsts, acc = [], 0
            for tg in tasks:
                firsts.append(acc)
                acc += tg.count
        placements = []
        leaves_all = []
        j.res = []
        for gi, ti, node, leaves in res:
            tg = tasks[gi]
            leaves_all.extend(leaves)
            if node is None:
                continue
            if placement is None:
                gpus = (leaves[0].gpu,) if len(leaves) == 1 else tuple(sorted(leaf.gpu for leaf in leaves))
                key = (tg.name, ti, firsts[gi] + ti, node.name, gpus, tg.cpus, type(tg.cpus), tg.memory_mb,
                       type(tg.memory_mb), tg.gpus if size else 0.0, share_slot if size else -1)
                p = self._placements.get(key)
                if p is None:
                    if len(self._placements) >= 65536:
                        self._placements.clear()
                    p = self._placements[key] = TaskPlacement(
                        task=f"{tg.name}-{ti}", group=tg.name, index=ti, rank=firsts[gi] + ti, node=node.name,
                        gpus=gpus, cpus=tg.cpus, memory_mb=tg.memory_mb,
                        share=tg.gpus if size else 0.0, share_slot=share_slot if size else -1)
                placements.append(p)
            if tg.cpus or tg.memory_mb:
                j.res.append((node, tg.cpus, tg.memory_mb))
        if placement is None:
            if len(placements) > 1:
                placements.sort(key=lambda p: p.rank)
            placement = tuple(placements)
        j.placement = placement
        j.detached = detached
        j.vleaves = list(vleaves)
        j.opp = opportunistic
        if j.vleaves:
            self.register_holder(j)
        if j.lent:  # its place in its VC only: no physical GPU, CPU or memory (``Scheduler.lend``)
            for node, cpus, mem in j.res:
                node.cpus_free += cpus
                node.memory_free += mem
            j.res = []
            leaves_all = []
        if size and not victims and leaves_all and leaves_all[0].shares is not None:  # joins a GPU shared already
            j.pleaves = leaves_all
            j.state = RUNNING
            j.started_at = now
            self.shares.join(j, leaves_all[0], share_slot, size)
            if announce:
                out.append(Decision("started", jid, now, placement=j.placement, opportunistic=j.opp))
            return
        if not victims:
            if leaves_all:
                self.state.leaves_set(leaves_all, jid, j.opp, None)
            j.pleaves = leaves_all
            j.state = RUNNING
            j.started_at = now
            if size and leaves_all:
                self.shares.join(j, leaves_all[0], share_slot, size)
            if announce:
                out.append(Decision("started", jid, now, placement=j.placement, opportunistic=j.opp))
            return
        if leaves_all:
            self.state.leaves_set(leaves_all, reserved_by=jid)
        j.reserved = leaves_all
        j.state = PREEMPTING
        j.waiting_on = list(victims)
        for vid in victims:
            v = self.jobs[vid]
            v.preemptors.append(jid)
            if v.preempted_by is None or v.preempted_by not in v.preemptors:
                v.preempted_by = jid
        if announce:
            out.append(Decision("preempting", jid, now, victims=tuple(victims)))

    def register_holder(self, j: Job) -> None:
        """``j`` now holds virtual GPUs of its VC."""
        vc = self.state.vcs[j.req.vc]
        self.holders[j.req.vc][j.req.id] = None
        vc.prio_count[j.req.priority] = vc.prio_count.get(j.req.priority, 0) + 1

    def unregister_holder(self, j: Job) -> None:
        """``j`` holds no virtual GPU of its VC any more (a no-op if it held none)."""
        h = self.holders[j.req.vc]
        if j.req.id in h:
            del h[j.req.id]
            vc = self.state.vcs[j.req.vc]
            vc.prio_count[j.req.priority] -= 1
            if not vc.prio_count[j.req.priority]:
                del vc.prio_count[j.req.priority]
            vc.dirty = True

    def strip_guarantee(self, x: Job, keep_bound: list | None = None) -> None:
        """``x`` keeps running on its GPUs but no longer holds its VC's virtual cells.

        Its virtual cells are unbound when idle, unless ``keep_bound`` collects them (a non-lazy
        victim's cells stay where they are, so the preemptor lands exactly there)."""
        state = self.state
        if x.pleaves:
            state.leaves_set(x.pleaves, jopp=True)
        roots = {}
        jid, prio = x.req.id, x.req.priority
        held = [v for v in x.vleaves if v.job == jid]
        if held:
            state.vunhold_many(held, prio)
            for v in held:
                roots[v.root.id] = v.root
        self.unregister_holder(x)
        x.vleaves = []
        x.opp = True
        if keep_bound is not None:
            keep_bound.extend(roots.values())
        else:
            state.release_idle_roots(roots.values())

    def adopt_running(self, j: Job, res: list, opportunistic: bool, now: float, out: list, demote_reason: str,
                      placement: tuple | None = None, detached: tuple = (), share_slot: int = 0,
                      coverable: bool = True) -> None:
        """Make ``j`` running on ``res`` ((group, index, node, leaves) per task) through the install path,
        guaranteed when its VC's cells can cover its GPUs, else opportunistic (``demoted``).
        ``coverable=False``: the caller knows they cannot (a reconfiguration moved them to another chain)."""
        req = j.req
        guaranteed = req.priority != -1 and not opportunistic
        vleaves: list = []
        if guaranteed:
            got = None
            if coverable:
                with self.state.trial(flags=False) as txn:
                    got = self.cover_with_vcells(j, res, detached, txn)
                    if got is not None:
                        txn.commit()
            if got is None:
                guaranteed = False
                if not opportunistic:
                    j.demoted = True
                    out.append(Decision("demoted", req.id, now, reason=demote_reason.format(vc=req.vc)))
            else:
                vleaves = got
        if opportunistic and req.priority != -1:
            j.demoted = True
        if not guaranteed and res and res[0][3] and job_share(req):
            self._demote_guaranteed_shares(res[0][3][0], req.id, now, out)
        take_resources(req, res)
        self.install(j, res, vleaves, not guaranteed, [], now, out, announce=False, placement=placement,
                     detached=detached, share_slot=share_slot)

    def _demote_guaranteed_shares(self, leaf, joining: str, now: float, out: list) -> None:
        """An opportunistic share is put back on ``leaf`` (a restart or reconfiguration adopting work
        where it runs): a shared GPU is all guaranteed or all opportunistic, so guaranteed shares
        already there run on as opportunistic (demoted, each told why) rather than anything stopping."""
        sg = leaf.shares
        if sg is None or leaf.jopp:
            return
        jobs = self.jobs
        for jid in sorted(sg.holders, key=lambda h: jobs[h].seq):
            h = jobs[jid]
            self.strip_guarantee(h)
            h.demoted = True
            out.append(Decision("demoted", jid, now, reason=f"GPU {leaf.gpu} of node {leaf.node} it shares now "
                                f"also runs the opportunistic share {joining}; it keeps running as opportunistic"))

    def cover_with_vcells(self, j: Job, res: list, detached: tuple, txn: list) -> list | None:
        """Hold the VC's virtual GPUs that ``j``'s physical GPUs in ``res`` are (binding free cells of
        the VC around them when needed), plus free virtual GPUs of the VC for its ``detached`` tasks.
        None (nothing kept once ``txn`` is rolled back) when its VC's cells cannot cover it."""
        req = j.req
        vc = self.state.vcs[req.vc]
        held = []
        for _, _, _, leaves in res:
            root = None
            for leaf in leaves:
                # a cell bound for the task's first GPU must be big enough for all of them
                v = vcell_for(self.state, vc, leaf, req, txn,
                              self.state.task_level(leaf.chain, len(leaves)) or 1 if root is None else 1)
                if v is not None and leaf.shares is not None and job_share(req):
                    # joining a shared GPU: guaranteed only beside guaranteed shares of its VC (held by their anchor)
                    if leaf.jopp or v.job is None:
                        return None
                    held.append(v)
                    continue
                if v is None or v.job is not None:
                    return None
                # one task's GPUs lie in one virtual cell of its VC, as placement puts them (HiveD: a pod's
                # cells map into one of the VC's cells): two cells that only together hold the task (a VC
                # shrunk from a node cell to its sockets) do not cover it
                if root is not None and v.root is not root:
                    return None
                root = v.root
                self.state.vhold(v, req.id, req.priority, txn)
                held.append(v)
        for p, gpu_type in detached:
            got = free_vleaves(self.state, vc, gpu_type, len(p.gpus))
            if got is None or req.pinned_cell is not None:
                return None
            for v in got:
                self.state.vhold(v, req.id, req.priority, txn)
            held.extend(got)
        return held


def take_resources(req, res: list) -> None:
    """Take the CPUs and memory of ``req``'s tasks on their nodes in ``res``."""
    for gi, _, node, _ in res:
        tg = req.tasks[gi]
        if node is not None and (tg.cpus or tg.memory_mb):
            node.cpus_free -= tg.cpus
            node.memory_free -= tg.memory_mb


def free_vleaves(state, vc, gpu_type: str | None, k: int) -> list | None:
    """``k`` virtual GPUs of ``vc`` nobody holds and whose physical GPU (if bound) is idle, from
    unbound cells first (they keep a detached task's share of the guarantee without pinning it)."""
    roots = [r for c in state.chains if gpu_type is None or state.chain_gpu[c] == gpu_type
             for r in vc.roots.get(c, ())]
    roots.sort(key=lambda r: (r.bound is not None, r.level, r.id))
    got = []
    for r in roots:
        if r.free <= 0:
            continue
        for v in r.leaves:
            p = v.pcell
            if v.job is None and (p is None or (p.healthy and p.job is None and p.reserved_by is None)):
                got.append(v)
                if len(got) == k:
                    return got
    return None


def vcell_for(state, vc, leaf, req, txn: list, min_level: int = 1):
    """The virtual GPU of ``vc`` that ``leaf`` is (binding a free VC cell of level ``min_level`` or above
    around it if needed)."""
    v = leaf.vcell
    if v is not None:
        if v.vc != vc.name or v.root.pin != req.pinned_cell:
            return None
        return v
    if req.pinned_cell is not None:
        return None
    buddy = state.buddies[leaf.chain]
    tried = set()
    for r in sorted((r for r in vc.roots.get(leaf.chain, ()) if r.bound is None and r.level >= min_level),
                    key=lambda r: (r.level, r.id)):
        if r.level in tried:
            continue
        tried.add(r.level)
        anc = leaf
        while anc is not None and anc.level < r.level:
            anc = anc.parent
        if anc is None or anc.level != r.level:
            continue
        # a partly bad cell (bad GPUs kept it split) is bound around its bad GPUs, as placement does
        if buddy.take_exact(anc) or (anc.bad and buddy.take_partly_bad(anc)):
            state.bind(r, anc, txn)
            return leaf.vcell
    return None
