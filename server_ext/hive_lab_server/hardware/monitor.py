"""The service's hardware layer: periodic sampling, health rules, live GPU data, GPU metrics.

The service creates one :class:`HardwareMonitor` and gives it callables:

- ``on_bad(node, gpu, reason)``: a GPU went bad. The service tells the core (``set_gpu_health(...,
  False)``: nothing new lands there) and fails the jobs running on it with that reason, retrying them
  elsewhere when they have retries left;
- ``on_healthy(node, gpu)``: an admin marked a bad GPU healthy; the service gives it out again unless
  it is drained (drains are the service's: they finish running jobs and take no new ones);
- ``placement()``: ``{(node, gpu): [job ids]}`` of what runs now (attribution, metrics), ``drained()``
  (for metrics), optionally ``job_resolver()`` (pid -> job) and ``job_labels()`` (job -> user, vc).

Bad GPUs stay bad until ``mark_healthy``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import pathlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from hive_lab_server.hardware.health import HealthEvent, HealthMonitor, HealthRules
from hive_lab_server.hardware.metrics import GpuMetrics
from hive_lab_server.hardware.nvml_backend import NVMLError
from hive_lab_server.hardware.sampler import GpuSample, GpuSampler, JobResolver, attribute, job_usage

log = logging.getLogger(__name__)


@dataclass
class HardwareState:
    """GPUs the health rules marked bad, with the reason (cleared by ``mark_healthy``)."""

    bad: dict[tuple[str, int], str] = field(default_factory=dict)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class HardwareMonitor:
    def __init__(self, *, nvml: Any | None, node: str | None, gpus: Iterable[tuple[str, int]],
                 on_bad: Callable[[str, int, str], Any],
                 on_healthy: Callable[[str, int], Any] | None = None,
                 drained: Callable[[], Iterable[tuple[str, int]]] | None = None,
                 placement: Callable[[], dict[tuple[str, int], list[str]]] | None = None,
                 job_resolver: Callable[[], JobResolver | None] | None = None,
                 job_labels: Callable[[], dict[str, dict[str, str]]] | None = None,
                 registry: Any | None = None, interval_s: float = 5.0, rules: HealthRules | None = None,
                 inventory: dict[tuple[str, int], dict] | None = None, on_event: Callable[[HealthEvent], Any] | None = None,
                 state_path: str | os.PathLike | None = None,
                 on_job_usage: Callable[[dict[str, Any]], Any] | None = None):
        self.nvml = nvml
        self.node = node
        self.gpus = sorted(gpus)
        self.on_bad = on_bad
        self.on_healthy = on_healthy
        self.drained = drained or (lambda: ())
        self.placement = placement or (lambda: {})
        self.job_resolver = job_resolver or (lambda: None)
        self.job_labels = job_labels or (lambda: {})
        self.interval_s = interval_s
        self.health = HealthMonitor(rules)
        self.metrics = GpuMetrics(registry)
        self.metrics.set_inventory(inventory or {})
        self.state = HardwareState()
        self.on_event = on_event
        self.on_job_usage = on_job_usage  # each round: job -> JobGpuUsage (share memory budgets)
        self.state_path = pathlib.Path(state_path) if state_path else None
        self.events: list[HealthEvent] = []  # history, newest last
        self._latest: dict[tuple[str, int], GpuSample] = {}
        self._usage: dict[str, Any] = {}  # job -> JobGpuUsage of the latest round
        self._sampler = GpuSampler(nvml, node) if nvml is not None and node else None
        self._task: asyncio.Task | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        await self.restore(self._load_state())
        if self._sampler is not None:
            try:
                await asyncio.to_thread(self._sampler.open)
            except NVMLError as exc:
                log.warning("GPU sampler not started: NVML failed (%s)", exc)
                self._sampler = None
        self.metrics.set_state(bad=self.state.bad, drained=set(self.drained()))
        if self._sampler is not None and self.interval_s > 0:
            self._task = asyncio.create_task(self._loop(), name="hive-lab-gpu-sampler")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        if self._sampler is not None:
            await asyncio.to_thread(self._sampler.close)

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                await self.sample_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep sampling: one bad round must not end monitoring
                log.exception("GPU sampling round failed")
                self.metrics.count_sample_error()
            await asyncio.sleep(self.interval_s)

    # ------------------------------------------------------------------ sampling
    async def sample_once(self) -> list[HealthEvent]:
        """One round: read every GPU, attribute jobs, apply health rules, update metrics."""
        if self._sampler is None:
            return []
        started = time.monotonic()
        samples = await asyncio.to_thread(self._sampler.sample)
        samples = attribute(samples, self.job_resolver(), self.placement())
        self._latest = {(s.node, s.index): s for s in samples}
        events = self.health.observe(samples)
        for event in events:
            await self._went_bad(event)
        usage = job_usage(samples)
        self._usage = usage
        self.metrics.update(samples, bad=self.state.bad, drained=set(self.drained()), jobs=usage,
                            job_labels=self.job_labels(), seconds=time.monotonic() - started)
        if self.on_job_usage is not None:
            await _maybe_await(self.on_job_usage(usage))
        return events

    async def _went_bad(self, event: HealthEvent) -> None:
        key = (event.node, event.gpu)
        log.warning("GPU %s/%s marked bad: %s", event.node, event.gpu, event.reason)
        self.state.bad[key] = event.reason
        self.events.append(event)
        self.metrics.count_health_event()
        self.metrics.set_state(bad=self.state.bad)
        self._save_state()
        await _maybe_await(self.on_bad(event.node, event.gpu, event.reason))
        if self.on_event is not None:
            await _maybe_await(self.on_event(event))

    # ------------------------------------------------------------------ admin actions
    def gpus_of(self, node: str, gpu: int | None) -> list[tuple[str, int]]:
        """The GPUs an admin action names; KeyError with a sentence for unknown nodes/indices."""
        targets = [k for k in self.gpus if k[0] == node and (gpu is None or k[1] == gpu)]
        if not targets:
            known = sorted({n for n, _ in self.gpus})
            if node not in known:
                raise KeyError(f"no node {node!r} (nodes: {', '.join(known) or 'none'})")
            count = len([k for k in self.gpus if k[0] == node])
            raise KeyError(f"node {node} has no GPU {gpu} (GPU indices 0..{count - 1})")
        return targets

    async def mark_healthy(self, node: str, gpu: int | None = None) -> list[tuple[str, int]]:
        """An admin says the GPU was reset or repaired: the rules start again from its current
        counters, and the service may give it out again (unless it is drained)."""
        targets = self.gpus_of(node, gpu)
        for key in targets:
            was_bad = self.state.bad.pop(key, None) is not None
            self.events.append(self.health.mark_healthy(*key))
            if was_bad and self.on_healthy is not None:
                await _maybe_await(self.on_healthy(key[0], key[1]))
        self.metrics.set_state(bad=self.state.bad)
        self._save_state()
        return targets

    async def restore(self, bad: dict[tuple[str, int], str]) -> None:
        """After a restart: put back the bad marks the service persisted."""
        for key, reason in sorted(bad.items()):
            if key in self.gpus and key not in self.state.bad:
                self.state.bad[key] = reason
                self.health.mark_bad(key[0], key[1], reason)
                await _maybe_await(self.on_bad(key[0], key[1], reason))
        self.metrics.set_state(bad=self.state.bad)

    # ------------------------------------------------------------------ persistence
    def _load_state(self) -> dict[tuple[str, int], str]:
        """Bad marks saved before a restart: a GPU stays bad until an admin says otherwise."""
        if self.state_path is None or not self.state_path.exists():
            return {}
        try:
            data = json.loads(self.state_path.read_text())
            return {(str(b["node"]), int(b["gpu"])): str(b["reason"]) for b in data.get("bad", [])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("hive-lab: cannot read GPU health state %s (%s); starting with every GPU healthy",
                        self.state_path, exc)
            return {}

    def _save_state(self) -> None:
        if self.state_path is None:
            return
        data = {"bad": [{"node": n, "gpu": g, "reason": r} for (n, g), r in sorted(self.state.bad.items())]}
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_path.with_name(self.state_path.name + ".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log.warning("hive-lab: cannot save GPU health state to %s: %s", self.state_path, exc)

    # ------------------------------------------------------------------ queries
    def job_share_utilization(self, job: str) -> float | None:
        """The SM utilisation of the job's own processes in the latest round (None: not known)."""
        u = self._usage.get(job)
        return u.process_utilization if u is not None else None

    def gpu_status(self, node: str, gpu: int) -> dict:
        """The per-GPU fields of ``GET cluster``: live readings and bad/drained flags."""
        s = self._latest.get((node, gpu))
        key = (node, gpu)
        return {
            "utilization": s.utilization if s is not None and s.readable else None,
            "memory_used_mb": s.memory_used_mb if s is not None and s.readable else None,
            "memory_total_mb": s.memory_total_mb if s is not None and s.readable else None,
            "temperature_c": s.temperature_c if s is not None and s.readable else None,
            "power_w": s.power_w if s is not None and s.readable else None,
            "bad": key in self.state.bad,
            "bad_reason": self.state.bad.get(key),
        }
