"""Drains and GPU health as lifecycle facts: an admin's drain/undrain, a GPU the health rules marked
bad (its jobs are lost and retried elsewhere) or an admin marked healthy again.

``HardwareEvents`` is one part of the service: it is handed the nodes of the cluster, the core, the
store, the unfinished jobs, the unit of work (``work.Work``) and a way to ask the hardware monitor
(set by the app once it runs) which GPUs it found bad. It owns the drained nodes and GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.jobs.lifecycle.work import Work

if TYPE_CHECKING:
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.hardware.monitor import HardwareMonitor
    from hive_lab_server.jobs.lifecycle.active import ActiveJob
    from hive_lab_server.store import Store


class HardwareEvents:
    def __init__(self, *, nodes: Mapping[str, Any], core: LiveSchedulerCore, store: Store, active: Mapping[str, ActiveJob],
                 work: Work, monitor: Callable[[], HardwareMonitor | None]):
        self.nodes = nodes
        self.core = core
        self.store = store
        self.active = active
        self.work = work
        self.monitor = monitor
        self.drained_nodes: set[str] = set()
        self.drained_gpus: set[tuple[str, int]] = set()

    def set_drain(self, node: str, gpu: int | None, drained: bool, by: str) -> None:
        if node not in self.nodes:
            raise ServiceError(404, f"node {node} does not exist; see GET cluster for node names")
        if gpu is not None:
            count = self.node_gpu_count(node)
            if not 0 <= gpu < count:
                raise ServiceError(404, f"node {node} has no GPU {gpu}; its GPUs are 0..{count - 1}")

        def write(batch, at: float) -> None:
            if drained:
                self.store.add_drain(batch, node, gpu, at, by)
            else:
                self.store.remove_drain(batch, node, gpu)

        self.work.unit([], request=True, write=write)  # stored first, then the core hears of it
        now = self.work.now()
        if gpu is None:
            (self.drained_nodes.add if drained else self.drained_nodes.discard)(node)
            decisions = self.core.set_node_health(node, not drained, now)
        else:
            (self.drained_gpus.add if drained else self.drained_gpus.discard)((node, gpu))
            decisions = self.core.set_gpu_health(node, gpu, not drained, now)
        if not drained:  # undraining never gives out a GPU the health rules marked bad
            for g in self.bad_gpus(node):
                if gpu is None or g == gpu:
                    decisions += self.core.set_gpu_health(node, g, False, now)
        self.work.unit(self.work.facts_of(decisions))
        self.work.publish([], cluster=True)

    def bad_gpus(self, node: str) -> list[int]:
        monitor = self.monitor()
        bad = monitor.state.bad if monitor is not None else {}
        return sorted(g for n, g in bad if n == node)

    def gpu_failed(self, node: str, gpu: int, reason: str) -> None:
        """A GPU went bad: nothing new lands on it, and the jobs on it stop; each is retried elsewhere
        while it has retries left (as a lost job), else it fails with the reason."""
        facts = self.work.facts_of(self.core.set_gpu_health(node, gpu, False, self.work.now()))
        why = f"GPU {gpu} on {node} failed: {reason}"
        facts += [(job.id, m.Lost(why)) for job in list(self.active.values())
                  if job.lc.intent is None and any(p.node == node and gpu in p.gpus for p in job.placement)]
        self.work.unit(facts)
        self.work.publish([], cluster=True)

    def gpu_repaired(self, node: str, gpu: int) -> None:
        """An admin marked a bad GPU healthy: give it out again unless the GPU itself is drained (the
        core keeps node health apart, so a drained node's GPU returns with the node's undrain)."""
        if (node, gpu) in self.drained_gpus:
            return
        self.work.unit(self.work.facts_of(self.core.set_gpu_health(node, gpu, True, self.work.now())))
        self.work.publish([], cluster=True)

    def node_gpu_count(self, node: str) -> int:
        info = self.nodes.get(node)
        return int(getattr(info, "gpu_count", 0)) if info is not None else 0
