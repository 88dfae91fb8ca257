"""The trace-driven discrete-event simulator: replay an event script or a job trace against a policy.

``simulate(cluster, events, policy)`` runs ``hived`` (the core ``Scheduler``), ``quota`` (YARN-CS style
GPU quotas), ``fifo`` (one global queue) or ``private`` (each VC alone on a cluster of its own cells: the
reference of the sharing anomaly) and returns the decisions and the metrics.
File formats: :mod:`hive_scheduler.sim.events` (events JSONL), :mod:`hive_scheduler.sim.trace` (CSV traces).
"""

from .engine import POLICIES, SimResult, simulate, simulate_policies
from .events import EventError, load_events
from .metrics import Metrics, compute_metrics
from .trace import load_trace

__all__ = [
    "simulate", "simulate_policies", "load_events", "load_trace", "SimResult", "Metrics", "EventError", "POLICIES",
    "compute_metrics",
]
