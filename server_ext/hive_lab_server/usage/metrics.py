"""Prometheus metrics of one HiveLabApp, in its own registry (``HiveLabApp.metrics_registry``).

Other parts of the server add their own metrics to the same registry
(``Gauge(..., registry=app.metrics_registry)`` or ``app.metrics_registry.register(collector)``);
``GET <base_url>hive_lab/api/metrics`` serves all of it.

Per-user series (who used how much) are in a second registry, ``Metrics.user_registry``, served to
admins only: ``GET metrics`` with a non-admin's token answers the same document without them (a
scraper needs an admin's token to see them).
"""

from __future__ import annotations

from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hive_lab_server.wire.job_state import STATE_NAMES


class MetricsSource(Protocol):
    """What the collectors read of the service (``HiveService`` is one)."""

    scheduler: Any
    store: Any

    def now(self) -> float: ...

    def gpus_held(self) -> dict[str, int]: ...


JOB_STATES = STATE_NAMES


class _ScrapeCollector:
    """A collector whose series are computed at each scrape from the service (``collect``); it describes
    none ahead, so registering it runs no scrape."""

    def __init__(self, service: MetricsSource):
        self.service = service

    def describe(self):
        return []


class _ServiceCollector(_ScrapeCollector):
    """Gauges computed at scrape time from the core and the store (never stale)."""

    def collect(self):
        s = self.service
        vcs = s.scheduler.vc_view()
        queue = GaugeMetricFamily("hive_lab_queue_length", "Jobs waiting in each VC's queue", labels=["vc"])
        used = GaugeMetricFamily("hive_lab_vc_gpus_used", "GPUs used by each VC's jobs (guaranteed)", labels=["vc"])
        free = GaugeMetricFamily("hive_lab_vc_gpus_free", "Guaranteed GPUs of each VC not in use", labels=["vc"])
        guar = GaugeMetricFamily("hive_lab_vc_gpus_guaranteed", "GPUs guaranteed to each VC", labels=["vc"])
        opp = GaugeMetricFamily("hive_lab_vc_gpus_opportunistic", "GPUs each VC borrows opportunistically", labels=["vc"])
        running = GaugeMetricFamily("hive_lab_vc_running_jobs", "Running jobs per VC", labels=["vc"])
        shared = GaugeMetricFamily("hive_lab_vc_shared_gpus", "GPUs of each VC holding shares (0.5/0.25/0.125)",
                                   labels=["vc"])
        shares = GaugeMetricFamily("hive_lab_vc_gpu_shares_used", "GPUs' worth of shares each VC's jobs hold",
                                   labels=["vc"])
        for name in sorted(vcs):
            v = vcs[name]
            queue.add_metric([name], v.get("queue_length", 0))
            used.add_metric([name], v.get("used_gpus", 0))
            guar.add_metric([name], v.get("guaranteed_gpus", 0))
            free.add_metric([name], max(0, v.get("guaranteed_gpus", 0) - v.get("used_gpus", 0) - v.get("doomed_gpus", 0)))
            opp.add_metric([name], v.get("opportunistic_gpus", 0))
            running.add_metric([name], v.get("running_jobs", 0))
            shared.add_metric([name], v.get("shared_gpus", 0))
            shares.add_metric([name], v.get("share_used_gpus", 0))
        yield from (queue, used, free, guar, opp, running, shared, shares)
        total = GaugeMetricFamily("hive_lab_gpus_total", "GPUs in the cluster")
        total.add_metric([], s.scheduler.gpu_count())
        yield total
        cfree = GaugeMetricFamily("hive_lab_gpus_free", "GPUs free in the cluster")
        cfree.add_metric([], s.scheduler.free_gpu_count())
        yield cfree
        jobs = GaugeMetricFamily("hive_lab_jobs", "Jobs by state", labels=["state"])
        counts = s.store.state_counts()
        for state in JOB_STATES:
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs


class _UserCollector(_ScrapeCollector):
    """Per-user series, computed at scrape time from the accounting records and the running jobs."""

    def collect(self):
        s = self.service
        seconds = CounterMetricFamily("hive_lab_user_gpu_seconds", "GPU-seconds each user's jobs held "
                                      "(all time; running jobs up to now)", labels=["user"])
        for user, total in s.store.gpu_seconds_by_user(s.now()).items():
            seconds.add_metric([user], total)
        yield seconds
        held = GaugeMetricFamily("hive_lab_user_gpus_held", "GPUs each user's jobs hold now", labels=["user"])
        for user, n in s.gpus_held().items():
            held.add_metric([user], n)
        yield held


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry(auto_describe=False)
        self.user_registry = CollectorRegistry(auto_describe=False)  # admins only (see the module doc)
        self.scheduling_latency = Histogram(
            "hive_lab_scheduling_latency_seconds",
            "Time from a job entering the queue to the core placing it",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 1800, 3600, 14400, 86400),
            registry=self.registry,
        )
        self.submit_seconds = Histogram(
            "hive_lab_submit_handling_seconds",
            "Time the service spends accepting one submit (validate, decide, store)",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1),
            registry=self.registry,
        )
        self.transitions = Counter(
            "hive_lab_job_transitions", "Job state transitions", ["state"], registry=self.registry
        )
        self.events_dropped = Counter(
            "hive_lab_event_subscribers_dropped", "Events websocket subscribers closed for falling behind "
            "(more than events_buffer_bytes waiting)", registry=self.registry,
        )
        self.requests_shed = Counter(
            "hive_lab_requests_shed", "Requests answered 503 because max_requests_in_flight were being served",
            registry=self.registry,
        )
        self.submits_shed = Counter(
            "hive_lab_submits_shed", "Submits answered 503 because max_unfinished_jobs jobs were unfinished",
            registry=self.registry,
        )
        self.launch_seconds = Histogram(
            "hive_lab_launch_seconds", "Time the launcher takes to start a job",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=self.registry,
        )

    def attach(self, service: MetricsSource) -> None:
        self.registry.register(_ServiceCollector(service))
        self.user_registry.register(_UserCollector(service))
