"""hive_scheduler: the scheduling core of hive-lab.

Pure Python and deterministic: no Jupyter, tornado or docker imports, no wall clock.
See docs/core-api.md for the contract the service, the simulator and the UIs rely on.
"""

TYPE_CHECKING = False  # not typing's: importing typing costs ~2.5 ms of a process that needs one part of the core

# Each name is imported when first used (PEP 562): a process that needs one part of the core (the
# heterogeneous simulator, a CLI command, task_exec's callers) does not pay for the rest (~0.1 s).
_WHERE = {
    "ClusterConfig": "config", "NodeInfo": "config", "load_cluster_config": "config",
    "Decision": "decisions", "JobView": "decisions",
    "ConfigError": "errors", "RequestError": "errors",
    "FairShareSettings": "fair_share",
    "ORDERS": "policies", "QueueOrder": "policies", "register_order": "policies",
    "LiveSchedulerCore": "protocol", "SchedulerCore": "protocol",
    "Scheduler": "scheduler",
    "JobRequest": "types", "TaskGroup": "types", "TaskPlacement": "types",
    "simulate": "sim", "load_events": "sim", "load_trace": "sim",
}

if TYPE_CHECKING:  # what type checkers and readers see
    from .config import ClusterConfig, NodeInfo, load_cluster_config
    from .decisions import Decision, JobView
    from .errors import ConfigError, RequestError
    from .fair_share import FairShareSettings
    from .policies import ORDERS, QueueOrder, register_order
    from .protocol import LiveSchedulerCore, SchedulerCore
    from .scheduler import Scheduler
    from .sim import load_events, load_trace, simulate
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


def __getattr__(name):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'hive_scheduler' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value  # the next use is a plain module attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
