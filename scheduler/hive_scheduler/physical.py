"""Placement in physical space, as functions of the cluster state (``state.ClusterState``) and a request.

Opportunistic jobs are placed directly on free physical GPUs (``place_opportunistic``): candidates
are tried most-used first, avoiding nodes with guaranteed work and cells bound to a VC, and one
task's GPUs come from the smallest cell that can hold them. Also here, for both placements: which
free physical cell a virtual cell binds to (``bind_pred`` / ``bind_key``) and the node of a
CPU-only task (``cpu_node``, ``take_node``). Each change is recorded in the transaction ``txn``.
"""

from __future__ import annotations

from .cells import PCell, VCell
from .jobs import FREE
from .state import ClusterState, rollback
from .types import TaskGroup


def bind_pred(state: ClusterState, root: VCell, tg: TaskGroup, mode: int):
    """Which free physical cells unbound virtual cell ``root`` may bind to for task group ``tg``."""
    node_level = state.node_level[root.chain]

    def pred(c: PCell) -> bool:
        if c.bad or c.reserved:
            return False
        if mode == FREE and c.opp:
            return False
        if root.level <= node_level and not c.node_obj.fits(tg.cpus, tg.memory_mb):
            return False
        return True

    return pred


def bind_key(c: PCell) -> tuple:
    """The order in which free physical cells are bound: fewest opportunistic GPUs to disturb,
    then the most-used parent (keep big cells whole)."""
    # fewest opportunistic GPUs to disturb; then the most-used parent (keep big cells whole)
    p = c.parent
    busy = -sum(1 for s in p.children if s.state != "free") if p is not None else 0
    return (c.opp, busy, c.id)


def take_node(node, tg: TaskGroup, txn: list) -> None:
    """Take a task's CPUs and memory on ``node`` (undone by rolling ``txn`` back)."""
    if not tg.cpus and not tg.memory_mb:
        return
    node.cpus_free -= tg.cpus
    node.memory_free -= tg.memory_mb

    def undo():
        node.cpus_free += tg.cpus
        node.memory_free += tg.memory_mb

    txn.append(undo)


def cpu_node(state: ClusterState, tg: TaskGroup, used_nodes: list, vcs, scope: PCell | None = None):
    """A node for a CPU-only task: one the job already uses, else the fullest that fits
    (inside ``scope`` when the job asked for ``within``)."""
    if scope is not None:
        nodes = list(dict.fromkeys(leaf.node_obj for leaf in scope.leaves))
    else:
        nodes = state.node_list
    for n in used_nodes:
        if n.fits(tg.cpus, tg.memory_mb) and (scope is None or n in nodes):
            return n
    best = None
    best_k = None
    for n in nodes:
        if not n.fits(tg.cpus, tg.memory_mb):
            continue
        # guaranteed CPU tasks prefer nodes of their own VC's cells, opportunistic ones nodes
        # without guaranteed work; then the fullest node (packing)
        if vcs is not None:
            pref = not any(leaf.vcell is not None and leaf.vcell.vc == vcs.name
                           for leaf in n.gpu_leaves.values())
        else:
            pref = any(c.used - c.opp > 0 for c in n.cells)
        k = (pref, n.cpus_free, n.memory_free, n.order)
        if best_k is None or k < best_k:
            best, best_k = n, k
    return best


def pdescend(c: PCell, g: int, level: int, node_level: int, tg: TaskGroup):
    if c.avail < g:
        return None
    if c.level <= node_level and not c.node_obj.fits(tg.cpus, tg.memory_mb):
        return None
    if c.level == level:
        out: list = []
        ptake(c, g, out)
        return (c.node_obj, out) if len(out) >= g else None
    if level == 1 and c.level == 2:  # its children are GPUs: no sort needed (see first_free_gpu)
        return first_free_gpu(c, node_level, tg)
    kids = [k for k in c.children if k.avail >= g]
    kids.sort(key=lambda k: (k.used - k.opp > 0, k.vcell is not None, k.avail, k.index))
    for k in kids:
        r = pdescend(k, g, level, node_level, tg)
        if r is not None:
            return r
    return None


def first_free_gpu(c: PCell, node_level: int, tg: TaskGroup):
    """``pdescend`` of a one-GPU task in ``c`` whose children are GPUs, as (node, [GPU]) or None.

    The general descent tries the children with a GPU available sorted by (used by guaranteed work,
    bound to a VC, available, index); a GPU available is unused and has exactly one available, so that
    order is: GPUs outside VC cells by index, then those inside by index."""
    check_node = c.level > node_level  # (else c's node, the same, was checked)
    bound = None
    for k in c.children:
        if k.avail < 1 or (check_node and not k.node_obj.fits(tg.cpus, tg.memory_mb)):
            continue
        if k.vcell is None:
            return k.node_obj, [k]
        if bound is None:
            bound = k
    return (bound.node_obj, [bound]) if bound is not None else None


def ptake(c: PCell, k: int, out: list) -> None:
    if c.level == 1:
        if c.avail:
            out.append(c)
        return
    kids = [x for x in c.children if x.avail > 0]
    fit = [x for x in kids if x.avail >= k]
    if fit:
        ptake(min(fit, key=lambda x: (x.avail, x.index)), k, out)
        return
    need = k
    for x in sorted(kids, key=lambda x: (-x.avail, x.index)):
        before = len(out)
        ptake(x, min(need, x.avail), out)
        need -= len(out) - before
        if need <= 0:
            return


def find_ptask(state: ClusterState, chain: str, tg: TaskGroup, scope: PCell | None):
    g = tg.gpus
    level = state.task_level(chain, g)
    if level is None:
        return None
    nl = state.node_level[chain]
    if scope is not None:
        return pdescend(scope, g, level, nl, tg)
    best = None
    best_k = None
    for n in state.chain_nodes[chain]:
        a = n.avail
        if a < g:
            continue
        # avoid nodes with guaranteed work, then cells bound to a VC; pack onto the fullest
        k = (n.used - n.opp > 0, n.vcell is not None, a, n.id)
        if best_k is None or k < best_k:
            if not n.node_obj.fits(tg.cpus, tg.memory_mb):
                continue
            best, best_k = n, k
            if k[0] is False and k[1] is False and a == g:
                break
    if best is None:
        return None
    return pdescend(best, g, level, nl, tg)


def place_opportunistic(state: ClusterState, job, txn: list):
    """Reserve free physical GPUs for every task of opportunistic ``job`` (all or nothing, recorded in
    ``txn``). Returns the list of (group index, task index, node, leaves), or None."""
    req = job.req
    order = (0,) if len(req.tasks) == 1 else sorted(range(len(req.tasks)), key=lambda i: (-req.tasks[i].gpus, i))
    if req.within is None:
        return place_groups_p(state, job, order, None, txn)
    chains = state.job_chains(req, None)
    wlevel = state.types[req.within].level
    total = req.total_gpus
    for chain in chains:
        if req.within not in state.config.chains[chain].types:
            continue
        cands = []
        for r in state.buddies[chain].roots:
            stack = [r]
            while stack:
                c = stack.pop()
                if c.avail < total:
                    continue
                if c.level == wlevel:
                    cands.append(c)
                else:
                    stack.extend(c.children)
        cands.sort(key=lambda c: (c.used - c.opp > 0, c.avail, c.id))
        for scope in cands:
            mark = len(txn)
            res = place_groups_p(state, job, order, scope, txn)
            if res is not None:
                return res
            rollback(txn, mark)
    return None


def place_groups_p(state: ClusterState, job, order, scope: PCell | None, txn: list):
    req = job.req
    chain_gpu = state.chain_gpu
    out = []
    used_nodes: list = []
    for gi in order:
        tg = req.tasks[gi]
        if scope is not None:
            chains = [scope.chain] if tg.gpu_type in (None, chain_gpu[scope.chain]) else []
        else:
            chains = [c for c in state.chains if tg.gpu_type is None or chain_gpu[c] == tg.gpu_type]
        for ti in range(tg.count):
            if tg.gpus == 0:
                node = cpu_node(state, tg, used_nodes, None, scope)
                if node is None:
                    return None
                take_node(node, tg, txn)
                used_nodes.append(node)
                out.append((gi, ti, node, []))
                continue
            found = None
            for ch in chains:
                found = find_ptask(state, ch, tg, scope)
                if found is not None:
                    break
            if found is None:
                return None
            node, leaves = found
            for leaf in leaves:
                state.leaf_set(leaf, reserved_by=req.id, txn=txn)
            take_node(node, tg, txn)
            used_nodes.append(node)
            out.append((gi, ti, node, leaves))
    return out
