"""Prometheus metrics for GPUs: one custom collector reading the latest snapshot at scrape time.

A collector (rather than module-level Gauges) keeps each app's metrics on its own registry and drops
series of finished jobs instead of leaving them stale. Register it with
``GpuMetrics(registry)``; feed it with ``update(...)`` after every sample.
"""

from __future__ import annotations

import threading
from typing import Iterable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hive_lab_server.hardware.sampler import GpuSample, JobGpuUsage

GPU_LABELS = ["node", "gpu"]


class GpuMetrics:
    """The GPU metrics collector. Metric names all start with ``hive_lab_gpu_`` / ``hive_lab_job_gpu_``."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self._lock = threading.Lock()
        self._samples: list[GpuSample] = []
        self._gpus: dict[tuple[str, int], dict] = {}  # (node, index) -> {"uuid", "type", "model"}
        self._bad: dict[tuple[str, int], str] = {}
        self._drained: set[tuple[str, int]] = set()
        self._jobs: dict[str, JobGpuUsage] = {}
        self._job_labels: dict[str, dict[str, str]] = {}
        self._xids: dict[tuple[str, int, int], int] = {}
        self._health_events = 0
        self._samples_total = 0
        self._sample_errors = 0
        self._sample_seconds = 0.0
        if registry is not None:
            registry.register(self)

    # ------------------------------------------------------------------ feeding
    def set_inventory(self, gpus: Mapping[tuple[str, int], Mapping[str, str]]) -> None:
        """Static facts per GPU (uuid, type, model) for ``hive_lab_gpu_info``."""
        with self._lock:
            self._gpus = {k: dict(v) for k, v in gpus.items()}

    def update(self, samples: Iterable[GpuSample], *, bad: Mapping[tuple[str, int], str] | None = None,
               drained: Iterable[tuple[str, int]] | None = None, jobs: Mapping[str, JobGpuUsage] | None = None,
               job_labels: Mapping[str, Mapping[str, str]] | None = None, seconds: float | None = None) -> None:
        samples = list(samples)
        with self._lock:
            self._samples = samples
            for s in samples:
                for xid in s.xids:
                    self._xids[(s.node, s.index, xid)] = self._xids.get((s.node, s.index, xid), 0) + 1
            if bad is not None:
                self._bad = dict(bad)
            if drained is not None:
                self._drained = set(drained)
            if jobs is not None:
                self._jobs = dict(jobs)
            if job_labels is not None:
                self._job_labels = {k: dict(v) for k, v in job_labels.items()}
            self._samples_total += 1
            if seconds is not None:
                self._sample_seconds = seconds

    def set_state(self, *, bad: Mapping[tuple[str, int], str] | None = None,
                  drained: Iterable[tuple[str, int]] | None = None) -> None:
        """Health/drain changes between samples (an admin marked a GPU, a rule fired)."""
        with self._lock:
            if bad is not None:
                self._bad = dict(bad)
            if drained is not None:
                self._drained = set(drained)

    def count_health_event(self) -> None:
        with self._lock:
            self._health_events += 1

    def count_sample_error(self) -> None:
        with self._lock:
            self._sample_errors += 1

    # ------------------------------------------------------------------ collecting
    def describe(self):
        return []  # collected lazily; nothing to check at registration

    def collect(self):
        with self._lock:
            samples = list(self._samples)
            gpus = dict(self._gpus)
            bad, drained = dict(self._bad), set(self._drained)
            jobs, job_labels = dict(self._jobs), dict(self._job_labels)
            xids = dict(self._xids)
            counters = (self._health_events, self._samples_total, self._sample_errors, self._sample_seconds)

        def gauge(name, doc, extra=()):
            return GaugeMetricFamily(name, doc, labels=GPU_LABELS + list(extra))

        g = {
            "util": gauge("hive_lab_gpu_utilization_percent", "Percent of time a kernel ran on the GPU (NVML)"),
            "memutil": gauge("hive_lab_gpu_memory_utilization_percent", "Percent of time GPU memory was read or written"),
            "mem": gauge("hive_lab_gpu_memory_used_bytes", "GPU memory in use"),
            "memtotal": gauge("hive_lab_gpu_memory_total_bytes", "GPU memory size"),
            "temp": gauge("hive_lab_gpu_temperature_celsius", "GPU core temperature"),
            "power": gauge("hive_lab_gpu_power_watts", "GPU power draw"),
            "ecc": gauge("hive_lab_gpu_ecc_errors", "ECC errors since the driver loaded (volatile)", ["kind"]),
            "retired": gauge("hive_lab_gpu_retired_pages", "Memory pages retired", ["cause"]),
            "remapped": gauge("hive_lab_gpu_remapped_rows", "Memory rows remapped", ["kind"]),
            "remap_bad": gauge("hive_lab_gpu_memory_repair_needed", "1 while a reset or repair is pending (row remap/page retirement pending or failed)"),
            "procs": gauge("hive_lab_gpu_processes", "Compute processes on the GPU"),
            "up": gauge("hive_lab_gpu_up", "1 when NVML could read the GPU in the last sample"),
        }
        for s in samples:
            key = [s.node, str(s.index)]
            g["up"].add_metric(key, 1.0 if s.readable else 0.0)
            if not s.readable:
                continue
            for name, value in (("util", s.utilization), ("memutil", s.memory_utilization),
                                ("temp", s.temperature_c), ("power", s.power_w)):
                if value is not None:
                    g[name].add_metric(key, float(value))
            if s.memory_used_mb is not None:
                g["mem"].add_metric(key, s.memory_used_mb * 1048576.0)
            if s.memory_total_mb is not None:
                g["memtotal"].add_metric(key, s.memory_total_mb * 1048576.0)
            if s.ecc_corrected is not None:
                g["ecc"].add_metric(key + ["corrected"], float(s.ecc_corrected))
                g["ecc"].add_metric(key + ["uncorrected"], float(s.ecc_uncorrected or 0))
            if s.retired_pages_sbe is not None:
                g["retired"].add_metric(key + ["single_bit"], float(s.retired_pages_sbe))
                g["retired"].add_metric(key + ["double_bit"], float(s.retired_pages_dbe or 0))
            if s.remapped_rows_correctable is not None:
                g["remapped"].add_metric(key + ["correctable"], float(s.remapped_rows_correctable))
                g["remapped"].add_metric(key + ["uncorrectable"], float(s.remapped_rows_uncorrectable or 0))
            repair = bool(s.remap_pending or s.remap_failure or s.retired_pages_pending)
            g["remap_bad"].add_metric(key, 1.0 if repair else 0.0)
            g["procs"].add_metric(key, float(len(s.processes)))
        yield from g.values()

        keys = sorted(set(gpus) | {(s.node, s.index) for s in samples})
        info = GaugeMetricFamily("hive_lab_gpu_info", "Static facts about each GPU (value 1)",
                                 labels=GPU_LABELS + ["uuid", "type", "model"])
        healthy = GaugeMetricFamily("hive_lab_gpu_healthy", "1 when the GPU may be given out, 0 when marked bad",
                                    labels=GPU_LABELS)
        drained_g = GaugeMetricFamily("hive_lab_gpu_drained", "1 when an admin drained the GPU (or its node)",
                                      labels=GPU_LABELS)
        for node, index in keys:
            meta = gpus.get((node, index), {})
            key = [node, str(index)]
            info.add_metric(key + [meta.get("uuid") or "", meta.get("type") or "", meta.get("model") or ""], 1.0)
            healthy.add_metric(key, 0.0 if (node, index) in bad else 1.0)
            drained_g.add_metric(key, 1.0 if (node, index) in drained else 0.0)
        yield info
        yield healthy
        yield drained_g

        xid = CounterMetricFamily("hive_lab_gpu_xid_errors", "XID critical error events seen", labels=GPU_LABELS + ["xid"])
        for (node, index, code), n in sorted(xids.items()):
            xid.add_metric([node, str(index), str(code)], float(n))
        yield xid

        job_util = GaugeMetricFamily("hive_lab_job_gpu_utilization_percent", "Mean utilisation of the job's GPUs",
                                     labels=["job", "user", "vc"])
        job_mem = GaugeMetricFamily("hive_lab_job_gpu_memory_used_bytes", "GPU memory the job uses",
                                    labels=["job", "user", "vc"])
        job_gpus = GaugeMetricFamily("hive_lab_job_gpus", "GPUs the job is using", labels=["job", "user", "vc"])
        share_util = GaugeMetricFamily(
            "hive_lab_job_gpu_share_utilization_percent",
            "SM utilisation of a GPU share's own processes, in percent of its GPU (NVML per-process utilisation)",
            labels=["job", "user", "vc", "share"])
        for job, usage in sorted(jobs.items()):
            labels = job_labels.get(job, {})
            key = [job, labels.get("user", ""), labels.get("vc", "")]
            if labels.get("share") and usage.process_utilization is not None:
                share_util.add_metric(key + [labels["share"]], usage.process_utilization)
            if usage.utilization is not None:
                job_util.add_metric(key, usage.utilization)
            job_mem.add_metric(key, usage.memory_used_mb * 1048576.0)
            job_gpus.add_metric(key, float(len(usage.gpus)))
        yield job_util
        yield job_mem
        yield job_gpus
        yield share_util

        health_events, samples_total, sample_errors, sample_seconds = counters
        yield CounterMetricFamily("hive_lab_gpu_health_events", "GPUs marked bad by the health rules",
                                  value=health_events)
        yield CounterMetricFamily("hive_lab_gpu_samples", "GPU sampling rounds", value=samples_total)
        yield CounterMetricFamily("hive_lab_gpu_sample_errors", "GPU sampling rounds that failed", value=sample_errors)
        yield GaugeMetricFamily("hive_lab_gpu_sample_duration_seconds", "How long the last sampling round took",
                                value=sample_seconds)
