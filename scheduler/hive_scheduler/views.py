"""Queries (pure): job views with human-readable wait reasons, cluster tree, VC usage, totals.

Functions of the scheduler (``core``) that change nothing; its query methods (``job``, ``jobs``,
``cluster_view``, ``vc_view``, ...) call them. They read its public view (``job_table``, ``now``,
``order``, ``state``: docs/core-api.md "The public view"), never its private attributes."""

from __future__ import annotations

from bisect import bisect_left

from .decisions import JobView
from .jobs import HeldBack, OverLimit, Requeued, Reserved
from .shares import SHARE_NAMES, job_share


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------ reasons
def describe(core, req) -> str:
    parts = []
    for t in req.tasks:
        if job_share(req):
            parts.append(f"{t.gpus:g} of one {t.gpu_type + ' ' if t.gpu_type else ''}GPU")
        elif t.gpus:
            parts.append(f"{t.count} x {t.gpus} {t.gpu_type + ' ' if t.gpu_type else ''}GPU{'s' if t.gpus != 1 else ''}")
        else:
            parts.append(f"{t.count} CPU-only task{'s' if t.count != 1 else ''}")
    s = " + ".join(parts)
    if req.within:
        s += f" within one {req.within}"
    if req.pinned_cell:
        s += f" in pinned cell {req.pinned_cell}"
    return s


def jobs_ahead(core, j) -> int:
    if j.req.priority == -1:
        lst = core.state.opp_queue
    else:
        lst = core.state.vcs[j.req.vc].queue
    if core.order.dynamic and j.req.priority != -1:
        return sum(1 for _, jid in lst if jid != j.req.id and core.job_table[jid].req.submit_time <= j.req.submit_time
                   and core.job_table[jid].seq < j.seq)
    # the queue is sorted and keys are unique: a binary search, not a walk (submit asks for every job)
    i = bisect_left(lst, j.qkey) if j.qkey is not None else len(lst)
    return i if i < len(lst) and lst[i] == j.qkey else len(lst)


def vc_doomed(core, name: str) -> int:
    return sum(vc_doomed_by_chain(core, name).values())


def vc_doomed_by_chain(core, name: str) -> dict[str, int]:
    """chain -> the VC's guaranteed GPUs on bad (or drained) hardware: doomed, not usable now."""
    vc = core.state.vcs[name]
    bad: dict[str, int] = {}
    demand: dict[str, dict[int, int]] = {}
    for chain, roots in vc.roots.items():
        for r in roots:
            if r.bound is not None:
                bad[chain] = bad.get(chain, 0) + r.bound.bad
            else:
                d = demand.setdefault(chain, {})
                d[r.level] = d.get(r.level, 0) + 1
    for p in vc.pins.values():
        bad[p.chain] = bad.get(p.chain, 0) + p.bound.bad
    for chain, d in demand.items():
        b = core.state.buddies[chain]
        bl = core.state.bad_leaves[chain]
        bad[chain] = bad.get(chain, 0) + (b.doomed(d, bl.values()) if bl else b.shortfall(b.counts(), d))
    return bad


def largest_free(core, vc, chain: str, level: int) -> int:
    best = 0
    for r in vc.roots.get(chain, ()):
        if r.level < level:
            continue
        if r.bound is None:
            best = max(best, core.state.types[core.config.chains[chain].type_at(level)].leaf_count)
            continue
        stack = [r]
        while stack:
            v = stack.pop()
            if v.free <= best:
                continue
            if v.level == level:
                best = v.free
            else:
                stack.extend(v.children)
    return best


def wait_reason(core, j, ahead: int | None = None) -> str | None:
    req = j.req
    if j.state == "running":
        if j.preempted_by is not None:
            return f"being preempted for {j.preempted_by}"
        return None
    if j.state == "preempting":
        return f"waiting for {_plural(len(j.waiting_on), 'preempted job')} to stop: {', '.join(j.waiting_on)}"
    fail = j.fail
    if isinstance(fail, HeldBack):
        h = core.job_table.get(fail.for_job)
        need = h.req.total_gpus if h else 0
        if fail.reserved:
            return (f"not enough free GPUs in VC {j.req.vc} outside the cells reserved for {fail.for_job} (needs "
                    f"{need} GPUs, overtaken for more than {core.starvation_after:g} s)")
        return (f"held back so that {fail.for_job} (needs {need} GPUs, overtaken for more than "
                f"{core.starvation_after:g} s) can start first")
    if isinstance(fail, (Requeued, OverLimit)):
        return fail.reason
    if isinstance(fail, Reserved):
        h = core.job_table.get(fail.for_job)
        need = h.req.total_gpus if h else 0
        head = f"waits behind {fail.for_job}'s reservation (needs {need} GPUs"
        if fail.start is None and fail.limit is not None:
            return head + "; its start is unknown, so no job may pass it yet)"
        if fail.start is None:
            return head + "); only jobs with a time limit that ends before it starts may pass it"
        return (head + f", estimated to start in {max(0.0, fail.start - core.now):.0f} s); only jobs with a time "
                "limit that ends before then may pass it")
    if ahead is None:
        ahead = jobs_ahead(core, j)
    ahead_s = f"; {_plural(ahead, 'job')} ahead" if ahead else ""
    desc = describe(core, req)
    if job_share(req):
        return share_wait_reason(core, j, ahead_s)
    if req.priority == -1:
        types = {t.gpu_type for t in req.tasks if t.gpus and t.gpu_type}
        free = sum(r.avail for c in core.state.chains if not types or core.state.chain_gpu[c] in types
                   for r in core.state.buddies[c].roots)
        largest = max((n.avail for c in core.state.chains for n in core.state.chain_nodes[c]
                       if not types or core.state.chain_gpu[c] in types), default=0)
        return (f"opportunistic: needs {desc}; {free} GPUs are free for opportunistic work, the largest "
                f"free on one node is {largest}{ahead_s}")
    vc = core.state.vcs[req.vc]
    doomed = vc_doomed(core, req.vc)
    doomed_s = f"; {doomed} of its guaranteed GPUs are on bad hardware" if doomed else ""
    if req.pinned_cell is not None:
        pin = vc.pins[req.pinned_cell]
        return (f"pinned cell {req.pinned_cell} of VC {req.vc} has {pin.free}/{pin.size} GPUs free; "
                f"needs {desc}{ahead_s}")
    chains = core.state.job_chains(req, vc)
    total = sum(vc.total[c] for c in chains)
    held = sum(vc.held[c] for c in chains)
    free = sum(vc.free[c] for c in chains)
    types = sorted({core.state.chain_gpu[c] for c in chains})
    tdesc = f" {'/'.join(types)}" if len(core.state.chains) > 1 else ""
    nominal = total - held
    if req.total_gpus > nominal:
        need = f" and the job needs {req.total_gpus}" if req.total_gpus > 1 else ""
        return f"VC {req.vc} is using {held}/{total} guaranteed{tdesc} GPUs{need}{ahead_s}{doomed_s}"
    if doomed and req.total_gpus > nominal - doomed:
        return (f"VC {req.vc} has {nominal} free guaranteed{tdesc} GPUs but {doomed} of them "
                f"{'is' if doomed == 1 else 'are'} on bad hardware (doomed); the job needs "
                f"{req.total_gpus}{ahead_s}")
    big = max((t for t in req.tasks if t.gpus), key=lambda t: t.gpus, default=None)
    if big is None:
        return f"needs {desc}; no node has the CPUs/memory free{ahead_s}"
    if req.within:
        wl = core.state.types[req.within].level
        largest = max((largest_free(core, vc, c, wl) for c in chains if req.within in core.config.chains[c].types),
                      default=0)
        return f"needs {desc}; largest free {req.within} in VC {req.vc} has {largest}{ahead_s}{doomed_s}"
    # the first of the job's chains with a cell that can hold its largest task (a VC may own chains of
    # different sizes, e.g. HiveD's 2-GPU CT1 nodes beside 8-GPU DGX-1s)
    c0 = next((c for c in chains if core.state.task_level(c, big.gpus)), None)
    if c0 is not None:
        lvl = core.state.task_level(c0, big.gpus)
        largest = largest_free(core, vc, c0, lvl)
        if largest < big.gpus:
            tname = core.config.chains[c0].type_at(lvl)
            return (f"needs {desc}; VC {req.vc} has {free} free guaranteed GPUs but the largest free "
                    f"{tname} has {largest}{ahead_s}{doomed_s}")
    if any(t.cpus or t.memory_mb for t in req.tasks):
        return f"needs {desc}; the VC's nodes lack the CPUs/memory asked for{ahead_s}{doomed_s}"
    return f"needs {desc}; not enough free guaranteed GPUs of the right shape in VC {req.vc}{ahead_s}{doomed_s}"


def share_wait_reason(core, j, ahead_s: str) -> str:
    """Why a share did not start: the GPUs it could share are full or hold whole-GPU jobs."""
    req = j.req
    size = job_share(req)
    name = SHARE_NAMES[size]
    opp = req.priority == -1
    mine = [sg for sg in core.state.shared.values()
            if sg.leaf.jopp == opp and (opp or (sg.leaf.vcell is not None and sg.leaf.vcell.vc == req.vc))]
    full = sum(1 for sg in mine if sg.best_block(size) is None)
    if opp:
        free = sum(r.avail for c in core.state.chains for r in core.state.buddies[c].roots)
        return (f"opportunistic: no GPU has a free {name} for opportunistic work; {_plural(len(mine), 'shared GPU')}"
                f" ({full} without a free {name}), {free} GPUs free{ahead_s}")
    vc = core.state.vcs[req.vc]
    chains = core.state.job_chains(req, vc)
    total = sum(vc.total[c] for c in chains)
    held = sum(vc.held[c] for c in chains)
    whole = held - len(mine)
    free = sum(vc.free[c] for c in chains)
    parts = [f"{whole} of {total} GPUs hold whole-GPU jobs"]
    if mine:
        parts.append(f"{len(mine)} {'is' if len(mine) == 1 else 'are'} shared ({full} without a free {name})")
    if free:
        parts.append(f"{free} free but not placeable now")
    return f"no GPU of VC {req.vc} has a free {name}; {', '.join(parts)}{ahead_s}"


# ------------------------------------------------------------------ queries
def job_view(core, j, ahead: int | None = None) -> JobView:
    return JobView(
        id=j.req.id, vc=j.req.vc, user=j.req.user, state=j.state.value, priority=j.req.priority,
        opportunistic=j.opp, placement=j.placement, reason=wait_reason(core, j, ahead),
        reserved_cells=tuple(leaf.address for leaf in j.reserved), preempted_by=j.preempted_by,
        waiting_for=tuple(j.waiting_on), submit_time=j.req.submit_time, gpus=j.req.total_gpus,
        demoted=j.demoted,
    )


def job(core, job_id: str) -> JobView:
    return job_view(core, core.job_record(job_id))


def job_views(core) -> list[JobView]:
    out = []
    by_vc: dict[str, list] = {name: [] for name in core.state.vc_order}
    for j in core.job_table.values():
        if j.state != "waiting":  # (a VC a reconfiguration removed keeps its running jobs: listed last)
            by_vc.setdefault(j.req.vc, []).append(j)
    opp_wait: dict[str, list] = {name: [] for name in by_vc}
    for _, jid in core.state.opp_queue:
        j = core.job_table[jid]
        opp_wait.setdefault(j.req.vc, []).append(j)
        by_vc.setdefault(j.req.vc, [])
    opp_pos = {jid: i for i, (_, jid) in enumerate(core.state.opp_queue)}
    gone = sorted(set(by_vc) - set(core.state.vc_order))
    for name in list(core.state.vc_order) + gone:
        running = sorted(by_vc[name], key=lambda j: j.seq)
        vc = core.state.vcs.get(name)
        waiting = [core.job_table[jid] for _, jid in vc.queue] if vc is not None else []
        pos = {j.req.id: i for i, j in enumerate(waiting)}
        if core.order.dynamic:
            waiting = list(core.order.arrange(waiting, core, name))
            pos = None  # a dynamic order: "ahead" counts earlier submissions (see jobs_ahead)
        out.extend(job_view(core, j) for j in running)
        out.extend(job_view(core, j, pos[j.req.id] if pos is not None else None) for j in waiting)
        out.extend(job_view(core, j, opp_pos[j.req.id]) for j in opp_wait.get(name, ()))
    return out


def gpu_count(core) -> int:
    return sum(r.size for r in core.state.roots)


def free_gpu_count(core) -> int:
    """GPUs that are healthy, unused and unreserved (pinned ones included)."""
    return sum(r.size - r.used - r.reserved - r.bad + bad_overlap(core, r) for r in core.state.roots)


def bad_overlap(core, r) -> int:
    # a bad GPU can still be running (the driver decides when to stop it): don't subtract it twice
    if not r.bad:
        return 0
    return sum(1 for leaf in r.leaves if not leaf.healthy and (leaf.job is not None or leaf.reserved_by is not None))


def cluster_view(core) -> dict:
    def cell(c) -> dict:
        if c.level == 1:
            jobs = [c.job] if c.job else []
            if not c.healthy:
                state = "bad"
            elif c.job is not None:
                state = "used"
            elif c.reserved_by is not None:
                state = "reserved"
            else:
                state = "free"
        else:
            if c.bad == c.size:
                state = "bad"
            elif c.used:
                state = "used"
            elif c.reserved:
                state = "reserved"
            else:
                state = "free"
            jobs = None
        vc = None
        v = c.vcell
        if v is not None:
            vc = v.vc
        d = {
            "address": c.address, "type": c.type, "level": c.level, "node": c.node,
            "state": state, "vc": vc, "opportunistic": bool(c.used and c.opp == c.used),
            "gpus": c.size, "used_gpus": c.used, "bad_gpus": c.bad, "reserved_gpus": c.reserved,
        }
        if c.pinned_id:
            d["pinned_cell"] = c.pinned_id
        if c.level == 1:
            d["gpu"] = c.gpu
            sg = c.shares
            if sg is not None:  # a shared GPU: its shares and who holds each
                jobs = sorted(sg.holders)
                d["shares"] = [{"job": jid, "slot": first, "share": size / 8}
                               for jid, (first, size) in sorted(sg.holders.items(), key=lambda kv: kv[1])]
                d["free_share"] = sg.free / 8
            d["jobs"] = jobs
            if c.reserved_by:
                d["reserved_by"] = c.reserved_by
            d["children"] = []
        else:
            kids = [cell(ch) for ch in c.children]
            seen = {}
            for k in kids:
                for jid in k["jobs"]:
                    seen[jid] = None
            d["jobs"] = sorted(seen)
            d["children"] = kids
        return d

    return {"cells": [cell(r) for r in core.state.roots]}


def vc_view(core) -> dict[str, dict]:
    out = {}
    opp_use: dict[str, int] = {name: 0 for name in core.state.vc_order}
    running: dict[str, int] = {name: 0 for name in core.state.vc_order}
    queue: dict[str, int] = {name: len(core.state.vcs[name].queue) for name in core.state.vc_order}
    for j in core.job_table.values():
        if j.state != "waiting":
            running[j.req.vc] += 1
            if j.opp:
                opp_use[j.req.vc] += j.req.total_gpus
    for _, jid in core.state.opp_queue:
        queue[core.job_table[jid].req.vc] += 1
    for name in core.state.vc_order:
        vc = core.state.vcs[name]
        spec = core.config.virtual_clusters[name]
        cells: dict[str, int] = {}
        for v in spec.virtual_cells:
            cells[v.cell_type] = cells.get(v.cell_type, 0) + v.number
        pinned_gpus = 0
        pinned_used = 0
        shared = [sg for sg in core.state.shared.values()
                  if not sg.leaf.jopp and sg.leaf.vcell is not None and sg.leaf.vcell.vc == name]
        for pid, p in vc.pins.items():
            cells[p.type] = cells.get(p.type, 0) + 1
            pinned_gpus += p.size
            pinned_used += p.held
        out[name] = {
            "guaranteed_gpus": vc.guaranteed() + pinned_gpus,
            "guaranteed_cells": cells,
            "used_gpus": sum(vc.held.values()) + pinned_used,
            "opportunistic_gpus": opp_use[name],
            "doomed_gpus": vc_doomed(core, name),
            "queue_length": queue[name],
            "running_jobs": running[name],
            "free_gpus": sum(vc.free.values()) + sum(p.free for p in vc.pins.values()),
            "pinned_cells": sorted(vc.pins),
            # of used_gpus: GPUs holding its guaranteed shares, and the GPUs' worth those shares take
            "shared_gpus": len(shared),
            "share_used_gpus": sum(sg.used for sg in shared) / 8,
        }
    return out
