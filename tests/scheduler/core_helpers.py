"""Shared helpers for the core's tests: cluster configs, job builders, an event-script runner
and the invariant checker used after every step (also by the property tests)."""

from __future__ import annotations

from collections import Counter

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.shares import job_share

HIVED_EXAMPLE = """
physicalCluster:
  cellTypes:
    V100-SWITCH: {childCellType: V100, childCellNumber: 2}
    V100-NODE:   {childCellType: V100-SWITCH, childCellNumber: 4, isNodeLevel: true}
    V100-RACK:   {childCellType: V100-NODE, childCellNumber: 2}
  physicalCells:
  - cellType: V100-RACK
    cellChildren:
    - cellAddress: n1
    - cellAddress: n2
      cellChildren: [{pinnedCellId: pin1}, {}, {}, {}]
virtualClusters:
  VC1: {virtualCells: [{cellType: V100-RACK.V100-NODE, cellNumber: 1}]}
  VC2: {virtualCells: [{cellType: V100-RACK.V100-NODE.V100-SWITCH, cellNumber: 2}],
        pinnedCells: [{pinnedCellId: pin1}]}
"""

# two chains (GPU types); node m1 holds cells of both
MIXED = {
    "physicalCluster": {
        "cellTypes": {
            "V100-PAIR": {"childCellType": "V100", "childCellNumber": 2},
            "V100-NODE": {"childCellType": "V100-PAIR", "childCellNumber": 2, "isNodeLevel": True},
            "K80-NODE": {"childCellType": "K80", "childCellNumber": 2, "isNodeLevel": True},
            "K80-POOL": {"childCellType": "K80-NODE", "childCellNumber": 2},
        },
        "physicalCells": [
            {"cellType": "V100-NODE", "cellAddress": "m1"},
            {"cellType": "V100-NODE", "cellAddress": "m2"},
            {"cellType": "K80-POOL", "cellChildren": [{"cellAddress": "m1"}, {"cellAddress": "k1"}]},
        ],
    },
    "virtualClusters": {
        "v": {"virtualCells": [{"cellType": "V100-NODE", "cellNumber": 1},
                               {"cellType": "V100-NODE.V100-PAIR", "cellNumber": 1}]},
        "k": {"virtualCells": [{"cellType": "K80-POOL.K80-NODE", "cellNumber": 1}]},
        "mix": {"virtualCells": [{"cellType": "V100-NODE.V100-PAIR", "cellNumber": 1},
                                 {"cellType": "K80-POOL.K80-NODE", "cellNumber": 1}]},
    },
    "nodeResources": {"*": {"cpus": 16, "memoryMB": 65536}},
}

# a single workstation: 4 GPUs in NVLink pairs, one VC owns the whole node cell
WORKSTATION = {"nodes": ["ws"], "gpus_per_node": 4, "gpu_type": "A6000", "levels": ["pair"], "vcs": {"default": 4}}

# 4 nodes x 8 GPUs, two racks; VC a: 2 nodes, VC b: 1 node, VC c: 2 sockets (4 GPUs each)
SMALL = {
    "nodes": 4, "gpus_per_node": 8, "gpu_type": "A100", "levels": ["pair", "socket"], "racks": 2,
    "cpus_per_node": 32, "memory_mb_per_node": 262144,
    "vcs": {"a": 16, "b": 8, "c": {"cells": {"socket": 2}}},
}


def job(jid, vc, gpus=1, count=1, priority=0, user="u", **kw) -> JobRequest:
    tg = kw.pop("group", None) or TaskGroup("w", count, gpus, kw.pop("gpu_type", None),
                                             kw.pop("cpus", 0), kw.pop("memory_mb", 0))
    return JobRequest(jid, vc, user=user, tasks=(tg,), priority=priority, **kw)


def events(decisions):
    """Decisions as compact tuples for assertions."""
    out = []
    for d in decisions:
        if d.event == "started":
            out.append(("started", d.job, d.opportunistic))
        elif d.event == "preempting":
            out.append(("preempting", d.job, list(d.victims)))
        elif d.event == "preempted":
            out.append(("preempted", d.job, d.by))
        else:
            out.append((d.event, d.job))
    return out


def run_script(s: Scheduler, script: list[dict]) -> list[dict]:
    """Run an event script: each step is one call; ``expect`` (optional) lists the compact decisions."""
    results = []
    for step in script:
        op = step["op"]
        t = step.get("t", 0)
        if op == "submit":
            kw = {k: v for k, v in step.items() if k not in ("op", "t", "expect", "job", "vc", "gpus", "count")}
            ds = s.submit(job(step["job"], step["vc"], step.get("gpus", 1), step.get("count", 1), **kw), t)
        elif op == "finish":
            ds = s.finish(step["job"], t)
        elif op == "preemption_done":
            ds = s.preemption_done(step["job"], t, step.get("requeue", True))
        elif op == "node_down":
            ds = s.set_node_health(step["node"], False, t)
        elif op == "node_up":
            ds = s.set_node_health(step["node"], True, t)
        elif op == "gpu_down":
            ds = s.set_gpu_health(step["node"], step["gpu"], False, t)
        elif op == "gpu_up":
            ds = s.set_gpu_health(step["node"], step["gpu"], True, t)
        else:
            raise ValueError(op)
        got = [list(e) for e in events(ds)]
        if "expect" in step:
            want = [list(e) for e in step["expect"]]
            assert got == want, f"step {step}: got {got}"
        check_invariants(s)
        results.append({"step": step, "decisions": ds})
    return results


def check_invariants(s: Scheduler) -> None:
    """Structural invariants of the core (see tests/scheduler/test_properties.py)."""
    seen = {}
    for j in s._jobs.values():
        if j.state == "running":
            assert j.placement, f"{j.req.id} running without placement"
            n_tasks = sum(t.count for t in j.req.tasks)
            assert len(j.placement) == n_tasks, "gang must be all-or-nothing"
            if job_share(j.req):
                check_share(s, j)
                continue
            assert sum(len(p.gpus) for p in j.placement) == j.req.total_gpus
            for leaf in j.pleaves:
                assert leaf.job == j.req.id
                key = (leaf.node, leaf.gpu)
                assert key not in seen, f"GPU {key} used twice ({seen.get(key)} and {j.req.id})"
                seen[key] = j.req.id
        elif j.state == "waiting":
            assert not j.pleaves and not j.vleaves and not j.reserved and not j.placement
            # (the start estimates' snapshot copies no more of a waiting job: estimates._WaitingCopy)
            assert j.preempted_by is None and not j.detached, f"{j.req.id} waits with a preemptor or detached tasks"
        elif j.state == "preempting":
            assert j.waiting_on and (j.reserved or j.lent)  # (a lent job reserves no physical GPU)
    # every used leaf belongs to a running job (a shared GPU: to its anchor, see check_shared_gpus)
    for c in s.state.cells:
        if c.level == 1 and c.job is not None:
            assert s._jobs[c.job].state == "running"
            assert (c.node, c.gpu) in seen or c.shares is not None
    check_shared_gpus(s, seen)
    # guaranteed work only inside its own VC's bound cells (tasks on removed hardware hold unbound ones)
    for j in s._jobs.values():
        unbound = 0
        for v in j.vleaves:
            assert v.vc == j.req.vc and (v.job == j.req.id or (job_share(j.req) and v.pcell is not None
                                                               and v.pcell.shares is not None
                                                               and v.job in v.pcell.shares.holders))
            if v.pcell is None:
                unbound += 1
            else:
                assert v.root.bound is not None
        assert unbound <= sum(len(p.gpus) for p, _ in j.detached), f"{j.req.id} holds unbound cells"
        for leaf in j.pleaves:
            if not j.opp:
                assert leaf.vcell is not None and leaf.vcell.vc == j.req.vc
    # each VC's count of its queue's shapes (the pass's shortcut starts from it) is the queue's
    for vc in s.state.vcs.values():
        assert vc.shapes == dict(Counter(s._jobs[jid].shape for _, jid in vc.queue)), f"VC {vc.name}'s shapes"
    # node resources never over-committed
    for n in s.state.nodes.values():
        assert n.cpus_free >= -1e-9 and n.memory_free >= 0
    recount(s)
    # buddy consistency: every GPU is covered by exactly one free / bound / pinned cell or is a bad leaf
    for name, b in s.state.buddies.items():
        listed = {c.id for d in b.free.values() for c in d.values()}
        for d in b.free.values():
            for c in d.values():
                assert c.state == "free"
        for leaf in (c for c in s.state.cells if c.level == 1 and c.chain == name):
            owners = []
            x = leaf
            while x is not None:
                if x.state in ("free", "bound", "pinned", "badleaf"):
                    owners.append(x)
                x = x.parent
            assert len(owners) == 1, f"{leaf} covered by {owners}"
            o = owners[0]
            assert (o.state == "free") == (o.id in listed)
            if o.state == "badleaf":
                assert not leaf.healthy
            if o.state == "bound":
                assert o.vcell is not None and o.vcell.root.bound is o
    # safety: every VC's unbound cells still fit the free buddy cells; bound cells hold no other VC's work
    for name, b in s.state.buddies.items():
        # structurally (as if all hardware were healthy) every VC's unbound cells still fit
        assert b.structural_shortfall() == 0, f"chain {name} lost its VCs' guarantee"
        if not any(not leaf.healthy for leaf in s.state.cells if leaf.level == 1 and leaf.chain == name):
            assert b.counts() == b.scount
            assert b.shortfall(b.counts(), b.demand) == 0, f"chain {name} lost its VCs' guarantee"
    for vc in s.state.vcs.values():
        for roots in list(vc.roots.values()) + [[p] for p in vc.pins.values()]:
            for r in roots:
                if r.bound is None:
                    continue
                for leaf in r.bound.leaves:
                    if leaf.job is not None:
                        owner = s._jobs[leaf.job]
                        assert owner.opp or owner.req.vc == vc.name, \
                            f"{owner.req.id} of VC {owner.req.vc} runs guaranteed in VC {vc.name}'s cell"


def check_share(s: Scheduler, j) -> None:
    """A running share job: one task on one GPU, holding its eighths of that GPU's ShareGPU."""
    (p,) = j.placement
    assert len(p.gpus) == 1 and p.share == j.req.tasks[0].gpus, f"{j.req.id}: {p}"
    if j.detached:  # on hardware a reconfiguration removed: it runs on there, holding no physical GPU
        assert not j.pleaves
        return
    assert len(j.pleaves) == 1, f"{j.req.id}: {p} on {j.pleaves}"
    leaf = j.pleaves[0]
    assert (leaf.node, leaf.gpu) == (p.node, p.gpus[0])
    sg = leaf.shares
    assert sg is not None and sg.holders[j.req.id] == (p.share_slot, job_share(j.req)), f"{j.req.id}: share slot"
    assert leaf.job is not None and leaf.jopp == j.opp, f"{j.req.id}: shared GPU {leaf} mixes kinds"


def check_shared_gpus(s: Scheduler, whole: dict) -> None:
    """Shared GPUs: no whole-GPU job on them, slots match holders, the anchor is the highest-priority
    holder, guaranteed shares sit in their VC's cell (held by the anchor)."""
    from hive_scheduler.shares import EIGHTHS

    listed = {c.id for c in s.state.cells if c.level == 1 and c.shares is not None}
    assert listed == set(s.state.shared), "registry of shared GPUs"
    for sg in s.state.shared.values():
        leaf = sg.leaf
        assert sg.holders and (leaf.node, leaf.gpu) not in whole, f"{leaf}: shares beside a whole-GPU job"
        slots = [None] * EIGHTHS
        for jid, (first, size) in sg.holders.items():
            assert first % size == 0 and first + size <= EIGHTHS
            h = s._jobs[jid]
            assert h.state == "running" and h.pleaves == [leaf] and job_share(h.req) == size
            for i in range(first, first + size):
                assert slots[i] is None, f"{leaf}: eighth {i} given twice"
                slots[i] = jid
        assert slots == sg.slots and sg.used == sum(x is not None for x in slots)
        assert leaf.job in sg.holders
        anchor = s._jobs[leaf.job]
        for jid in sg.holders:
            h = s._jobs[jid]
            assert (anchor.opp, -anchor.req.priority, anchor.seq) <= (h.opp, -h.req.priority, h.seq)
            if not h.opp:
                assert leaf.vcell is not None and leaf.vcell.vc == h.req.vc and leaf.vcell.job == leaf.job


def recount(s: Scheduler) -> None:
    """Every counter the core keeps incrementally equals the same count made from scratch."""
    from hive_scheduler.cells import BOUND, PINNED

    leaves = [c for c in s.state.cells if c.level == 1]
    in_pin = set()
    for c in s.state.cells:
        if c.pinned_id:
            stack = [c]
            while stack:
                x = stack.pop()
                in_pin.add(x.id)
                stack.extend(x.children)

    def below(c):
        stack = [c]
        while stack:
            x = stack.pop()
            yield x
            stack.extend(x.children)

    # physical cells: per-cell counters over their leaves
    for c in s.state.cells:
        ls = c.leaves
        want = {
            "used": sum(1 for x in ls if x.job is not None),
            "opp": sum(1 for x in ls if x.job is not None and x.jopp),
            "bad": sum(1 for x in ls if not x.healthy),
            "reserved": sum(1 for x in ls if x.reserved_by is not None),
            "avail": sum(1 for x in ls if x.job is None and x.healthy and x.reserved_by is None and not x.in_pin),
        }
        got = {k: getattr(c, k) for k in want}
        assert got == want, f"{c}: counters {got} != recount {want}"
        nb = c.size if c.id in in_pin else sum(d.size for d in below(c) if d.state in (BOUND, PINNED))
        assert c.nbound == nb, f"{c}: nbound {c.nbound} != {nb}"
    assert s.state.opp_leaves == sum(1 for x in leaves if x.job is not None and x.jopp)
    # leaf flags agree with the jobs
    for x in leaves:
        if x.job is not None:
            j = s._jobs[x.job]
            assert x in j.pleaves and x.jopp == j.opp, f"{x}: job {x.job} flags"
            if x.shares is None:
                assert not job_share(j.req), f"{x}: share job {x.job} without its ShareGPU"
        if x.reserved_by is not None:
            assert x in s._jobs[x.reserved_by].reserved
    # health: bad leaves are exactly the unhealthy ones, per chain
    for chain, bad in s.state.bad_leaves.items():
        assert sorted(bad) == sorted(x.id for x in leaves if x.chain == chain and not x.healthy)
    for x in leaves:
        assert x.healthy == (x.node not in s.state.node_down and (x.node, x.gpu) not in s.state.gpu_down)
    # buddy: structural free counts and the VCs' unbound demand
    for chain, b in s.state.buddies.items():
        cells = [c for c in s.state.cells if c.chain == chain]
        inside = set()
        for c in cells:
            if c.state in (BOUND, PINNED):
                inside.update(x.id for x in below(c))
        scount = {lvl: 0 for lvl in b.scount}
        for c in cells:
            if c.id not in inside and c.nbound == 0 and (c.parent is None or c.parent.nbound > 0):
                scount[c.level] += 1
        assert b.scount == scount, f"chain {chain}: scount {b.scount} != {scount}"
        demand = {lvl: 0 for lvl in b.demand}
        for vc in s.state.vcs.values():
            for r in vc.roots.get(chain, ()):
                if r.bound is None:
                    demand[r.level] += 1
        assert b.demand == demand, f"chain {chain}: demand {b.demand} != {demand}"
        # the cached partly bad candidates equal a fresh search
        for lvl, (version, _) in list(b._partly_bad.items()):
            if version == b.version:
                key = lambda c: (c.bad, c.opp, c.id)  # noqa: E731
                fresh = sorted(b._find_partly_bad(lvl, s.state.bad_leaves[chain].values(), ()), key=key)
                assert b.partly_bad(lvl, s.state.bad_leaves[chain].values()) == fresh, f"chain {chain}: partly bad cache"
    # binding: virtual and physical cells point at each other
    for vc in s.state.vcs.values():
        roots = [r for rs in vc.roots.values() for r in rs] + list(vc.pins.values())
        for r in roots:
            for v in below(r):
                if r.bound is None:
                    assert v.pcell is None
                else:
                    assert v.pcell is not None and v.pcell.vcell is v
    # virtual cells: free / held / held per priority
    prio_of = {jid: j.req.priority for jid, j in s._jobs.items()}
    for vc in s.state.vcs.values():
        roots = [r for rs in vc.roots.values() for r in rs] + list(vc.pins.values())
        for r in roots:
            for v in below(r):
                ls = v.leaves
                free = sum(1 for x in ls if x.job is None and not (x.pcell is not None and not x.pcell.healthy))
                held = sum(1 for x in ls if x.job is not None)
                hp: dict = {}
                for x in ls:
                    if x.job is not None:
                        hp[prio_of[x.job]] = hp.get(prio_of[x.job], 0) + 1
                assert (v.free, v.held, v.hp) == (free, held, hp), f"{v}: {(v.free, v.held, v.hp)} != {(free, held, hp)}"
                if v.job is not None:
                    assert v in s._jobs[v.job].vleaves
        for chain in vc.free:
            rs = vc.roots.get(chain, ())
            assert vc.free[chain] == sum(r.free for r in rs), f"VC {vc.name} free[{chain}]"
            assert vc.held[chain] == sum(r.held for r in rs), f"VC {vc.name} held[{chain}]"
            assert vc.total[chain] == sum(r.size for r in rs)
            assert vc.unbound[chain] == sum(1 for r in rs if r.bound is None), f"VC {vc.name} unbound[{chain}]"
        holders = [j for j in s._jobs.values() if j.req.vc == vc.name and j.vleaves]
        assert sorted(s.installer.holders[vc.name]) == sorted(j.req.id for j in holders)
        pc: dict = {}
        for j in holders:
            pc[j.req.priority] = pc.get(j.req.priority, 0) + 1
        assert vc.prio_count == pc, f"VC {vc.name}: prio_count {vc.prio_count} != {pc}"
        # its queue: exactly its waiting guaranteed jobs, sorted
        waiting = sorted(j.qkey for j in s._jobs.values()
                         if j.req.vc == vc.name and j.state == "waiting" and j.req.priority != -1)
        assert vc.queue == waiting, f"VC {vc.name}: queue {vc.queue} != {waiting}"
    assert s.state.opp_queue == sorted(j.qkey for j in s._jobs.values() if j.state == "waiting" and j.req.priority == -1)
    # node CPUs / memory: what the started jobs' tasks take
    cpus = {n: 0.0 for n in s.state.nodes}
    mem = {n: 0 for n in s.state.nodes}
    for j in s._jobs.values():
        for node, c, m in j.res:
            assert j.state != "waiting"
            cpus[node.name] += c
            mem[node.name] += m
    for name, n in s.state.nodes.items():
        assert abs(n.cpus_free - (n.cpus - cpus[name])) < 1e-6, f"node {name}: cpus_free"
        assert n.memory_free == n.memory_mb - mem[name], f"node {name}: memory_free"
