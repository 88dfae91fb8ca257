"""Shares of one GPU: cells below the GPU in the same buddy scheme (halves, quarters, eighths).

A task may ask for ``gpus`` 0.5, 0.25 or 0.125 (one task on one GPU). A GPU that holds shares is,
for everything above it, one used GPU: its physical leaf is occupied and, for guaranteed shares, its
VC's virtual GPU is held, so a VC's guarantee counts shares (a VC of 4 GPUs holds at most 32
eighths) and whole-GPU jobs never land on it. Below the leaf a ``ShareGPU`` keeps the eighths in
buddy blocks (a quarter is two aligned eighths, a half four).

The leaf's ``job`` (and its virtual GPU's ``job``) names one *anchor* among the GPU's share jobs:
the one of highest priority (guaranteed before demoted), so a preemption search that may displace
the anchor may displace every share on the GPU; victims found through a shared GPU are all its
share jobs. A shared GPU is either guaranteed (its shares are one VC's guaranteed jobs) or
opportunistic (its shares run as opportunistic work): shares pack onto a GPU of the same kind and
VC, fullest first, before a new GPU is opened.
"""

from __future__ import annotations

from dataclasses import replace

EIGHTHS = 8
SHARE_SIZES = {0.5: 4, 0.25: 2, 0.125: 1}   # fraction of a GPU -> eighths
SHARE_NAMES = {4: "half", 2: "quarter", 1: "eighth"}


def share_eighths(gpus) -> int:
    """Eighths a task of ``gpus`` GPUs takes (0: not a share, i.e. whole GPUs or CPU-only)."""
    if isinstance(gpus, float) and 0 < gpus < 1:
        return SHARE_SIZES.get(gpus, 0)
    return 0


def job_share(req) -> int:
    """Eighths of one GPU the job asks for (0: the job asks for whole GPUs)."""
    tasks = req.tasks
    if len(tasks) == 1:
        return share_eighths(tasks[0].gpus)
    return 0


class ShareGPU:
    """The shares of one physical GPU: ``slots`` (eighths -> job id) and ``holders`` (job id -> (first, size))."""

    __slots__ = ("leaf", "slots", "holders", "used")

    def __init__(self, leaf):
        self.leaf = leaf
        self.slots: list = [None] * EIGHTHS
        self.holders: dict[str, tuple[int, int]] = {}
        self.used = 0

    @property
    def free(self) -> int:
        return EIGHTHS - self.used

    def block_free(self, first: int, size: int) -> bool:
        return 0 <= first and first + size <= EIGHTHS and first % size == 0 and \
            all(x is None for x in self.slots[first:first + size])

    def best_block(self, size: int) -> int | None:
        """The free aligned block of ``size`` eighths whose buddies are fullest (buddy best fit)."""
        best, best_k = None, None
        for first in range(0, EIGHTHS, size):
            if not self.block_free(first, size):
                continue
            k = []
            s = size * 2
            while s <= EIGHTHS:
                b = first - first % s
                k.append(-sum(1 for x in self.slots[b:b + s] if x is not None))
                s *= 2
            k.append(first)
            if best_k is None or k < best_k:
                best, best_k = first, k
        return best

    def add(self, jid: str, first: int, size: int) -> None:
        for i in range(first, first + size):
            self.slots[i] = jid
        self.holders[jid] = (first, size)
        self.used += size

    def remove(self, jid: str) -> None:
        first, size = self.holders.pop(jid)
        for i in range(first, first + size):
            self.slots[i] = None
        self.used -= size


def share_proxy(j):
    """``j`` as a one-GPU request: what opening a new shared GPU asks of the ordinary placement."""
    req = j.req
    proxy = type(j)(replace(req, tasks=(replace(req.tasks[0], gpus=1),)), j.seq)
    proxy.opp = j.opp
    return proxy


class SharedGPUs:
    """The cluster's shared GPUs: which one a share job packs onto, joining and leaving one, and who
    stands for a shared GPU above it (its anchor). One per cluster state; it changes the cluster only
    through ``state`` and reads ``jobs`` (the scheduler's job table, by id)."""

    __slots__ = ("state", "jobs")

    def __init__(self, state, jobs: dict):
        self.state = state
        self.jobs = jobs

    def pick(self, j, size: int):
        """The fullest shared GPU of ``j``'s kind (its VC's guaranteed ones, or opportunistic ones) with a
        free block of ``size`` eighths, on a node with the CPUs/memory free. Returns (leaf, first) or None."""
        req = j.req
        tg = req.tasks[0]
        opp = req.priority == -1
        best, best_k = None, None
        for sg in self.state.shared.values():
            leaf = sg.leaf
            if sg.free < size or not leaf.healthy or leaf.reserved_by is not None or leaf.jopp != opp:
                continue
            if not opp:
                v = leaf.vcell
                if v is None or v.vc != req.vc or v.root.pin != req.pinned_cell:
                    continue
            if tg.gpu_type is not None and self.state.chain_gpu[leaf.chain] != tg.gpu_type:
                continue
            k = (sg.free, leaf.id)
            if best_k is not None and k >= best_k:
                continue
            if not leaf.node_obj.fits(tg.cpus, tg.memory_mb):
                continue
            first = sg.best_block(size)
            if first is not None:
                best, best_k = (leaf, first), k
        return best

    def join(self, j, leaf, first: int, size: int) -> None:
        """``j`` takes eighths of ``leaf``: a GPU shared already, or one it now occupies (opening it)."""
        sg = leaf.shares
        if sg is None:
            sg = leaf.shares = ShareGPU(leaf)
            self.state.shared[leaf.id] = sg
        sg.add(j.req.id, first, size)
        self._anchor(sg)

    def leave(self, j) -> None:
        """``j`` gives its eighths back. The last share job leaves the leaf (and virtual GPU) to the
        caller to free as for any job; otherwise another share job becomes the anchor."""
        if not j.pleaves:
            return
        leaf = j.pleaves[0]
        sg = leaf.shares
        if sg is None or j.req.id not in sg.holders:
            return
        sg.remove(j.req.id)
        if not sg.holders:
            leaf.shares = None
            del self.state.shared[leaf.id]
            return
        self._anchor(sg)

    def _anchor(self, sg) -> None:
        """Make the GPU's anchor its share job of highest priority (guaranteed first, then oldest)."""
        leaf = sg.leaf
        jobs = self.jobs
        best = min(sg.holders, key=lambda jid: (jobs[jid].opp, -jobs[jid].req.priority, jobs[jid].seq))
        old = leaf.job
        if old == best:
            return
        nb = jobs[best]
        self.state.leaf_set(leaf, job=best, jopp=nb.opp)
        v = leaf.vcell
        if v is not None and old is not None and v.job == old:
            self.state.vunhold(v, jobs[old].req.priority)
            if nb.vleaves:
                self.state.vhold(v, best, nb.req.priority)

    def victims(self, ids) -> list[str]:
        """Job ids with every anchor of a shared GPU replaced by all the GPU's share jobs."""
        jobs = self.jobs
        out: dict[str, None] = {}
        for jid in ids:
            j = jobs[jid]
            leaf = j.pleaves[0] if j.pleaves and job_share(j.req) else None
            if leaf is not None and leaf.shares is not None:
                for h in sorted(leaf.shares.holders, key=lambda x: jobs[x].seq):
                    out[h] = None
            else:
                out[jid] = None
        return list(out)
