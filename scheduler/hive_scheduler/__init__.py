"""hive_scheduler: the scheduling core of hive-lab.

Pure Python and deterministic: no Jupyter, tornado or docker imports, no wall clock.
See docs/core-api.md for the contract the service, the simulator and the UIs rely on.
"""

from .config import ClusterConfig, NodeInfo, load_cluster_config
from .decisions import Decision, JobView
from .errors import ConfigError, RequestError
from .fair_share import FairShareSettings
from .policies import ORDERS, QueueOrder, register_order
from .protocol import LiveSchedulerCore, SchedulerCore
from .scheduler import Scheduler
from .types import JobRequest, TaskGroup, TaskPlacement

__all__ = [
    "ClusterConfig",
    "ConfigError",
    "Decision",
    "FairShareSettings",
    "JobRequest",
    "JobView",
    "LiveSchedulerCore",
    "NodeInfo",
    "ORDERS",
    "QueueOrder",
    "RequestError",
    "Scheduler",
    "SchedulerCore",
    "TaskGroup",
    "TaskPlacement",
    "load_cluster_config",
    "load_events",
    "load_trace",
    "register_order",
    "simulate",
]


def __getattr__(name):  # the simulator lives in hive_scheduler.sim (built by another module owner)
    if name in ("simulate", "load_events", "load_trace"):
        from . import sim

        return getattr(sim, name)
    raise AttributeError(f"module 'hive_scheduler' has no attribute {name!r}")
