"""Seeded differential replay of the overflow wrapper against the bare core (issue 25).

The same random calls (submits incl. pinned cells and opportunistic jobs, finishes of running and of
waiting jobs, preemptions carried out with and without requeue, node and GPU health, reconfiguration,
a restart that adopts what runs) go to the bare core and to ``OverflowScheduler`` around a core (both modes: an overflowed job's place in its
VC's queue withdrawn, or kept so that it moves into its VC's cells when its turn comes, and the latter with
the simulator's ghosts: a job that ran to its end is ``complete``d and the ghosts' ends are fired in time
order, as the simulator's heap does). After
every step: neither raises anything but a ``RequestError`` for a bad request, and both refuse exactly
the same submits; no shadow id shows in a decision; the core's structural invariants hold inside the
wrapper; every job the driver knows is known to the wrapper in the state its decisions said (no job
lost, none unknown). Bounded and deterministic (fixed seeds, no clock): a few seconds.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import yaml

from core_helpers import HIVED_EXAMPLE, MIXED, SMALL, check_invariants
from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup
from hive_scheduler.overflow import SHADOW_SUFFIX, OverflowScheduler

DESIGN = yaml.safe_load((Path(__file__).parent / "hived_configs" / "design.yaml").read_text())
DESIGN_B = {**DESIGN, "virtualClusters": {  # VC2 gives its CT1 node and a socket back; VC1 keeps its own
    "VC1": DESIGN["virtualClusters"]["VC1"],
    "VC2": {"virtualCells": [{"cellType": "3-DGX1-P100-NODE.DGX1-P100-NODE", "cellNumber": 2},
                             {"cellType": "3-DGX1-P100-NODE.DGX1-P100-NODE.DGX1-P100-CPU-SOCKET", "cellNumber": 1}]},
    "VC3": {"virtualCells": [{"cellType": "CT1-NODE.CT1", "cellNumber": 2}]},
}}
SMALL_B = dict(SMALL, vcs={"a": 8, "b": 16, "c": {"cells": {"socket": 2}}})

# name: (config, other configs to reconfigure to, VCs, pinned cells by VC, GPU sizes, GPU types)
CLUSTERS = {
    "design": (DESIGN, [DESIGN_B], ["VC1", "VC2", "VC3"],
               {"VC1": ["VC1-YQW-CT1", "VC1-YQW-DGX2", "VC1-YQW-IB-DGX2"]},
               [1, 2, 3, 4, 8, 16], [None, None, "DGX2-V100", "DGX1-P100", "CT1"]),
    "hived": (HIVED_EXAMPLE, [], ["VC1", "VC2"], {"VC2": ["pin1"]}, [1, 2, 4, 8], [None]),
    "small": (SMALL, [SMALL_B], ["a", "b", "c"], {}, [1, 2, 4, 8], [None]),
    "mixed": (MIXED, [], ["v", "k", "mix"], {}, [1, 2, 4], [None, "V100", "K80"]),
}


class Driver:
    """Calls one scheduler as the simulator and the service do, and remembers what its decisions said."""

    def __init__(self, sched, config):
        self.s = sched
        self.config = config
        self.timers: list[tuple[float, str, int]] = []  # ghosts' ends (hold_private_time), as the simulator keeps them
        self.state: dict[str, str] = {}  # job -> queued | running | stopping (preempting decided)
        self.req: dict[str, JobRequest] = {}
        self.opp: dict[str, bool] = {}
        self.down_nodes: set[str] = set()
        self.down_gpus: set[tuple[str, int]] = set()

    def apply(self, decisions) -> None:
        take = getattr(self.s, "take_timers", None)
        if take is not None:
            self.timers.extend(take())
        for d in decisions:
            assert SHADOW_SUFFIX not in d.job and all(SHADOW_SUFFIX not in v for v in (d.victims or ())), d
            if d.event in ("queued",):
                self.state.setdefault(d.job, "queued")
            elif d.event == "started":
                self.state[d.job] = "running"
                self.opp[d.job] = bool(d.opportunistic)
            elif d.event == "preempting":
                for v in d.victims:
                    assert v in self.state, f"victim {v} unknown to the driver"
                    self.state[v] = "stopping"
            elif d.event == "preempted":
                self.state[d.job] = "queued"  # requeued (finished/rejected follows otherwise)
            elif d.event in ("finished", "rejected"):
                self.state.pop(d.job, None)
                self.req.pop(d.job, None)
            elif d.event == "demoted":
                self.opp[d.job] = True

    def fire_timers(self, t: float) -> None:
        """The ghosts' ends due by ``t``, in time order (what the simulator's event heap does)."""
        while True:
            due = sorted(x for x in self.timers if x[0] <= t)
            if not due:
                return
            self.timers.remove(due[0])
            end, job, generation = due[0]
            self.apply(self.s.ghost_end(job, generation, end))

    def submit(self, req, t):
        out = self.s.submit(req, t)
        self.req[req.id] = req
        self.state[req.id] = "queued"
        self.apply(out)

    def check(self) -> None:
        core = self.s.inner if isinstance(self.s, OverflowScheduler) else self.s
        check_invariants(core)
        for jid, st in self.state.items():
            view = self.s.job(jid)
            assert view is not None, f"{jid} lost"
            # a preemptor waiting for its victims to stop is "preempting" in the core
            want = {"queued": ("waiting", "preempting"), "running": ("running",), "stopping": ("running", "preempting")}[st]
            assert view.state in want, f"{jid}: driver says {st}, scheduler {view.state}"
        known = {v.id for v in self.s.jobs()}
        running = {j for j, st in self.state.items() if st != "queued"}
        assert running <= known


def restart(drv: Driver, make, t: float) -> Driver:
    """A server restart: a fresh scheduler adopts what runs (as the store says: opportunistic or not)
    and gets the waiting jobs submitted again."""
    new = Driver(make(drv.config), drv.config)
    for node in sorted(drv.down_nodes):
        new.apply(new.s.set_node_health(node, False, t))
    for node, g in sorted(drv.down_gpus):
        new.apply(new.s.set_gpu_health(node, g, False, t))
    new.down_nodes, new.down_gpus = set(drv.down_nodes), set(drv.down_gpus)
    for jid in sorted(drv.state):
        if drv.state[jid] == "running":
            view = drv.s.job(jid)
            new.req[jid] = drv.req[jid]
            new.state[jid] = "running"
            new.opp[jid] = view.opportunistic
            new.apply(new.s.adopt(drv.req[jid], [p.to_dict() for p in view.placement], view.opportunistic, t))
    for jid in sorted(drv.state):
        if drv.state[jid] == "queued":
            new.submit(drv.req[jid], t)
    return new


def random_request(rng, n, vcs, pins, sizes, types) -> JobRequest:
    vc = rng.choice(vcs)
    prio = rng.choice([-1, 0, 0, 0, 5])
    gpus = rng.choice(sizes)
    count = rng.choice([1, 1, 2])
    kw = {}
    if pins.get(vc) and prio >= 0 and rng.random() < 0.3:
        kw["pinned_cell"] = rng.choice(pins[vc])
    else:
        gpu_type = rng.choice(types)
        if gpu_type:
            kw["gpu_type"] = gpu_type
    task = TaskGroup("w", count, gpus, gpu_type=kw.pop("gpu_type", None))
    return JobRequest(id=f"j{n}", vc=vc, user=f"u{n % 3}", priority=prio, tasks=(task,),
                      lazy_preemption=rng.random() < 0.3, **kw)


def nodes_of(s) -> list[str]:
    core = s.inner if isinstance(s, OverflowScheduler) else s
    return sorted(core.state.nodes)


def replay(cluster: str, seed: int, steps: int = 120) -> None:
    config, alt, vcs, pins, sizes, types = CLUSTERS[cluster]
    rng = random.Random(seed)
    makers = {"bare": lambda cfg: Scheduler(cfg), "overflow": lambda cfg: OverflowScheduler(Scheduler(cfg)),
              "keep_place": lambda cfg: OverflowScheduler(Scheduler(cfg), keep_place=True),
              "ghosts": lambda cfg: OverflowScheduler(Scheduler(cfg, private_placement=True), keep_place=True,
                                                      hold_private_time=True)}
    drivers = {k: Driver(m(config), config) for k, m in makers.items()}
    for step in range(steps):
        t = float(step)
        op = rng.choice(["submit"] * 5 + ["finish", "finish", "withdraw", "stop", "stop", "node", "gpu",
                                          "reconfigure", "restart", "tick"])
        args = [rng.random() for _ in range(4)]
        if op == "submit":
            req = random_request(rng, step, vcs, pins, sizes, types)
            refused = {}
            for k, drv in drivers.items():
                try:
                    drv.submit(req, t)
                    refused[k] = None
                except RequestError as exc:
                    refused[k] = exc.field
            assert len(set(refused.values())) == 1, f"step {step}: {req} refused {refused}"
        for k, drv in drivers.items():
            s = drv.s
            drv.fire_timers(t)
            if op == "finish" or op == "withdraw":
                want = "running" if op == "finish" else "queued"
                ids = sorted(j for j, st in drv.state.items() if st == want) or sorted(drv.state)
                if ids:
                    jid = ids[int(args[0] * len(ids))]
                    # a running job that ran to its end (ghosts may hold its cells on), or a cancel
                    end = s.complete if op == "finish" and args[1] < 0.7 and hasattr(s, "complete") else s.finish
                    drv.apply(end(jid, t) if drv.state.get(jid) == "running" else s.finish(jid, t))
            elif op == "stop":
                ids = sorted(j for j, st in drv.state.items() if st == "stopping")
                if ids:
                    jid = ids[int(args[0] * len(ids))]
                    if s.job(jid).preempted_by is None:  # called off (its preemptor left): it runs on
                        drv.state[jid] = "running"
                    else:
                        requeue = args[1] < 0.8
                        drv.apply(s.preemption_done(jid, t, requeue=requeue))
                        if not requeue:  # stopped for good (the service: cancelled while being stopped)
                            drv.state.pop(jid, None)
            elif op == "node":
                node = nodes_of(s)[int(args[0] * len(nodes_of(s)))]
                up = node in drv.down_nodes and args[1] < 0.7
                (drv.down_nodes.discard if up else drv.down_nodes.add)(node)
                drv.apply(s.set_node_health(node, up, t))
            elif op == "gpu":
                node = nodes_of(s)[int(args[0] * len(nodes_of(s)))]
                core = s.inner if isinstance(s, OverflowScheduler) else s
                gpus = sorted(core.state.nodes[node].gpu_leaves)
                key = (node, gpus[int(args[1] * len(gpus))])
                up = key in drv.down_gpus and args[2] < 0.7
                (drv.down_gpus.discard if up else drv.down_gpus.add)(key)
                drv.apply(s.set_gpu_health(key[0], key[1], up, t))
            elif op == "reconfigure" and alt:
                choices = [config] + alt
                drv.config = choices[(choices.index(drv.config) + 1) % len(choices)]
                drv.apply(s.reconfigure(drv.config, t))
            elif op == "restart":
                core = s.inner if isinstance(s, OverflowScheduler) else s
                if not any(j.detached for j in core._jobs.values()) and not any(
                        st == "stopping" for st in drv.state.values()):
                    drivers[k] = drv = restart(drv, makers[k], t)
            elif op == "tick":
                drv.apply(drv.s.schedule(t))
            drv.check()
    # the end: hardware back, every preemption carried out, every job finished; nothing left anywhere
    for drv in drivers.values():
        t = float(steps)
        for node in sorted(drv.down_nodes):
            drv.apply(drv.s.set_node_health(node, True, t))
        for node, g in sorted(drv.down_gpus):
            drv.apply(drv.s.set_gpu_health(node, g, True, t))
        while drv.state:
            stopping = sorted(j for j, st in drv.state.items() if st == "stopping")
            jid = stopping[0] if stopping else sorted(drv.state)[0]
            if stopping and drv.s.job(jid).preempted_by is None:
                drv.state[jid] = "running"
                continue
            drv.apply(drv.s.preemption_done(jid, t, requeue=False) if stopping else drv.s.finish(jid, t))
            drv.state.pop(jid, None)
            drv.check()
        while drv.timers:  # the ghosts' holds run out (a waiting ghost starts once cells are free)
            t = max(t, min(x[0] for x in drv.timers))
            drv.fire_timers(t)
            drv.check()
        core = drv.s.inner if isinstance(drv.s, OverflowScheduler) else drv.s
        assert not core._jobs, f"left in the core: {sorted(core._jobs)}"


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
@pytest.mark.parametrize("seed", range(4))
def test_overflow_wrapper_survives_every_event_order(cluster, seed):
    replay(cluster, seed)
