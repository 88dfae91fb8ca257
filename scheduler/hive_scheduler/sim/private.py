"""The ``private`` policy: every VC alone on a cluster made of exactly its own cells.

HiveD's sharing anomaly (OSDI'20, sec. 2) is the extra queueing a tenant suffers in the shared cluster
compared with a *private* cluster built from exactly its guaranteed cells. This module builds those
private clusters from a ``ClusterConfig`` and replays each VC's jobs on its own with the core
``Scheduler`` (same order inside the VC):

- each of the VC's virtual cells becomes a top-level physical cell of the same cell type (so the same
  hierarchy below it: a ``P40-RACK`` virtual cell gives a rack of 16 nodes, a ``P40-NODE`` one a node);
  a cell below node level (e.g. a 4-GPU socket) becomes a node of its own, with the CPUs and memory of
  its share of an original node; a single GPU (HiveD lets a VC own or pin a leaf cell) becomes a one-GPU
  node (type ``<leaf>-PRIVATE-NODE``); pinned cells are copied with their pinned id;
- nodes are named ``<vc>-node-<k>`` (the decisions of ``private`` name these, not the shared nodes);
- the VC keeps its virtual cells (now its private cluster's top-level cells) and its pins;
- hardware events (``node_down``, ``gpu_down`` ...) concern the shared nodes and are ignored: a private
  cluster stays healthy; ``reconfigure`` rebuilds the private clusters from the new config (running jobs
  keep running, as in the core).

A VC with no cells has no private cluster: its jobs are rejected, as the shared cluster rejects them.
"""

from __future__ import annotations

from typing import Any

from ..config import ClusterConfig, PhysicalCellSpec, load_cluster_config
from ..errors import RequestError

__all__ = ["private_cluster", "private_unavailable", "PrivateScheduler"]


def _node_resources(config: ClusterConfig, chain: str) -> tuple[float, int, int]:
    """CPUs, memory and GPU count of the first node of ``chain`` in the shared cluster."""
    for top in config.physical_cells:
        if top.chain != chain:
            continue
        for c in top.walk():
            if c.node is not None:
                node = config.nodes[c.node]
                return float(node.cpus), int(node.memory_mb), node.gpu_count
    raise ValueError(f"chain {chain} has no nodes")  # a parsed config always has some


def private_cluster(config: ClusterConfig, vc: str) -> ClusterConfig | None:
    """The HiveD config of VC ``vc`` alone on its own cells (None when the VC has no cells)."""
    spec = config.virtual_clusters[vc]
    types = config.cell_types
    cell_types = {
        t.name: {"childCellType": t.child_type, "childCellNumber": t.child_number,
                 **({"isNodeLevel": True} if t.is_node_level else {})}
        for t in types.values() if t.child_type is not None
    }
    cells: list[dict[str, Any]] = []
    resources: dict[str, dict[str, Any]] = {}
    names = iter(f"{vc}-node-{k}" for k in range(10**9))

    def has_node_level(t: str) -> bool:
        while t is not None:
            if types[t].is_node_level:
                return True
            t = types[t].child_type
        return False

    def new_node(t: str, chain: str) -> str:
        name = next(names)
        cpus, mem, gpus = _node_resources(config, chain)
        share = min(1.0, types[t].leaf_count / gpus) if gpus else 1.0
        resources[name] = {"cpus": cpus * share, "memoryMB": max(1, int(mem * share))}
        return name

    def top_type(t: str) -> str:
        """``t``, or for a leaf (a single GPU: a HiveD VC may own one) a one-GPU node type made for it."""
        if types[t].child_type is not None:
            return t
        name = f"{t}-PRIVATE-NODE"
        while name in types:
            name += "_"
        cell_types[name] = {"childCellType": t, "childCellNumber": 1, "isNodeLevel": True}
        return name

    def build(t: str, chain: str, top: bool, pinned: PhysicalCellSpec | None = None) -> dict[str, Any]:
        if top and types[t].child_type is None:  # a leaf-level cell: its own one-GPU node
            d = {"cellType": top_type(t), "cellAddress": new_node(t, chain)}
            if pinned is not None and pinned.pinned_id:
                d["pinnedCellId"] = pinned.pinned_id
            return d
        d: dict[str, Any] = {"cellType": t} if top else {}
        if pinned is not None and pinned.pinned_id and top:
            d["pinnedCellId"] = pinned.pinned_id
        at_node = types[t].is_node_level or (top and not has_node_level(t))
        if at_node:
            d["cellAddress"] = new_node(t, chain)
            return d  # children below node level are filled in by the parser
        kids = pinned.children if pinned is not None else [None] * types[t].child_number
        d["cellChildren"] = [build(types[t].child_type, chain, False, k) for k in kids]
        return d

    vcells: dict[str, int] = {}
    for v in spec.virtual_cells:
        own = top_type(v.cell_type)
        vcells[own] = vcells.get(own, 0) + v.number
        for _ in range(v.number):
            cells.append(build(v.cell_type, v.chain, True))
    for pid in spec.pinned_cells:
        pc = config.pinned_cells[pid]
        cells.append(build(pc.type, pc.chain, True, pc))
    if not cells:
        return None
    vdict: dict[str, Any] = {"virtualCells": [{"cellType": t, "cellNumber": n} for t, n in vcells.items()]}
    if spec.pinned_cells:
        vdict["pinnedCells"] = [{"pinnedCellId": p} for p in spec.pinned_cells]
    cfg = load_cluster_config({
        "physicalCluster": {"cellTypes": cell_types, "physicalCells": cells},
        "virtualClusters": {vc: vdict},
        "nodeResources": resources,
    })
    cfg.name = f"{config.name or 'cluster'}:private:{vc}"
    return cfg


def private_unavailable(config: ClusterConfig) -> str | None:
    """Why the private clusters of ``config`` cannot be built (so the sharing anomaly is not computable),
    or None when they can. A safety net: every configuration the core accepts is meant to have them."""
    for vc in sorted(config.virtual_clusters):
        try:
            private_cluster(config, vc)
        except (ValueError, KeyError) as exc:
            return f"no private cluster for VC {vc}: {exc}"
    return None


class PrivateScheduler:
    """One core ``Scheduler`` per VC, each on the VC's private cluster; calls go to the job's VC.

    ``queueing``: the rule inside each VC, as the shared cluster's (``skip``, ``strict`` or ``backfill``;
    see ``Scheduler``): the baseline a policy is measured against queues as that policy does."""

    name = "private"

    def __init__(self, config: Any, order: str = "fifo", queueing: str = "skip"):
        self._order = order
        self._queueing = queueing
        self._scheds: dict[str, Any] = {}
        self._vc_of: dict[str, str] = {}
        self._load(load_cluster_config(config), now=None)

    def _load(self, config: ClusterConfig, now: float | None) -> list[Any]:
        from ..scheduler import Scheduler

        self.config = config
        out: list[Any] = []
        for vc in sorted(config.virtual_clusters):
            cfg = private_cluster(config, vc)
            if cfg is None:
                continue
            if vc in self._scheds and now is not None:
                out += self._scheds[vc].reconfigure(cfg, now)
            else:
                self._scheds[vc] = Scheduler(cfg, policy=self._order, backfill=self._queueing == "backfill",
                                             strict_order=self._queueing == "strict")
        # a VC that left the config keeps its scheduler: its running jobs run to their end there
        return out

    def _sched_of(self, job_id: str) -> Any:
        vc = self._vc_of.get(job_id)
        if vc is None:
            raise RequestError("job_id", f"unknown job {job_id!r}")
        return self._scheds[vc]

    def gpu_count(self) -> int:
        return sum(self.config.vc_gpus(vc) for vc in self._scheds if vc in self.config.virtual_clusters)

    def submit(self, job: Any, now: float) -> list[Any]:
        if job.id in self._vc_of:
            raise RequestError("id", f"job {job.id!r} already exists; use a new job id")
        sched = self._scheds.get(job.vc)
        if sched is None or job.vc not in self.config.virtual_clusters:
            known = ", ".join(sorted(self.config.virtual_clusters)) or "none"
            raise RequestError("vc", f"unknown virtual cluster {job.vc!r} or one without cells (VCs: {known})")
        out = sched.submit(job, now)  # raises before anything changed when the request is bad
        self._vc_of[job.id] = job.vc
        return out

    def finish(self, job_id: str, now: float) -> list[Any]:
        out = self._sched_of(job_id).finish(job_id, now)
        del self._vc_of[job_id]
        return out

    def preemption_done(self, job_id: str, now: float, requeue: bool = True) -> list[Any]:
        out = self._sched_of(job_id).preemption_done(job_id, now, requeue=requeue)
        if not requeue or any(_event(d) == "rejected" and _job(d) == job_id for d in out):
            self._vc_of.pop(job_id, None)
        return out

    def set_node_health(self, node: str, healthy: bool, now: float) -> list[Any]:
        return []  # the shared cluster's hardware: private clusters stay healthy

    def set_gpu_health(self, node: str, gpu: int, healthy: bool, now: float) -> list[Any]:
        return []

    def reconfigure(self, config: Any, now: float) -> list[Any]:
        return self._load(load_cluster_config(config), now)

    def schedule(self, now: float) -> list[Any]:
        out: list[Any] = []
        for vc in sorted(self._scheds):
            out += self._scheds[vc].schedule(now)
        return out


def _event(d: Any) -> str:
    return d["event"] if isinstance(d, dict) else d.event


def _job(d: Any) -> str:
    return d["job"] if isinstance(d, dict) else d.job
