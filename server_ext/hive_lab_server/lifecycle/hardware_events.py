"""Drains and GPU health as lifecycle facts: an admin's drain/undrain, a GPU the health rules marked
bad (its jobs are lost and retried elsewhere) or an admin marked healthy again.

``HardwareEvents`` is a part of ``HiveService`` (it uses ``active``, ``_unit``, ``_publish``, the store,
the core and ``hardware``, the monitor the app sets).
"""

from __future__ import annotations

from typing import Any

from . import machine as m
from .shell import ServiceError


class HardwareEvents:
    def set_drain(self, node: str, gpu: int | None, drained: bool, by: str) -> None:
        if node not in self.scheduler_nodes():
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

        self._unit([], request=True, write=write)  # stored first, then the core hears of it
        now = self.now()
        if gpu is None:
            (self.drained_nodes.add if drained else self.drained_nodes.discard)(node)
            decisions = self.scheduler.set_node_health(node, not drained, now)
        else:
            (self.drained_gpus.add if drained else self.drained_gpus.discard)((node, gpu))
            decisions = self.scheduler.set_gpu_health(node, gpu, not drained, now)
        if not drained:  # undraining never gives out a GPU the health rules marked bad
            for g in self._bad_gpus(node):
                if gpu is None or g == gpu:
                    decisions += self.scheduler.set_gpu_health(node, g, False, now)
        self._unit(self._facts_of(decisions))
        self._publish([], cluster=True)

    def _bad_gpus(self, node: str) -> list[int]:
        bad = self.hardware.state.bad if self.hardware is not None else {}
        return sorted(g for n, g in bad if n == node)

    def gpu_failed(self, node: str, gpu: int, reason: str) -> None:
        """A GPU went bad: nothing new lands on it, and the jobs on it stop; each is retried elsewhere
        while it has retries left (as a lost job), else it fails with the reason."""
        facts = self._facts_of(self.scheduler.set_gpu_health(node, gpu, False, self.now()))
        why = f"GPU {gpu} on {node} failed: {reason}"
        facts += [(job.id, m.Lost(why)) for job in list(self.active.values())
                  if job.lc.intent is None and any(p.node == node and gpu in p.gpus for p in job.placement)]
        self._unit(facts)
        self._publish([], cluster=True)

    def gpu_repaired(self, node: str, gpu: int) -> None:
        """An admin marked a bad GPU healthy: give it out again unless the GPU itself is drained (the
        core keeps node health apart, so a drained node's GPU returns with the node's undrain)."""
        if (node, gpu) in self.drained_gpus:
            return
        self._unit(self._facts_of(self.scheduler.set_gpu_health(node, gpu, True, self.now())))
        self._publish([], cluster=True)

    def scheduler_nodes(self) -> dict[str, Any]:
        return self.config.nodes

    def node_gpu_count(self, node: str) -> int:
        info = self.scheduler_nodes().get(node)
        return int(getattr(info, "gpu_count", 0)) if info is not None else 0
