"""Every scheduling algorithm the project drives satisfies the one ``SchedulerCore`` protocol."""

import inspect

import pytest

from core_helpers import SMALL, job
from hive_scheduler import LiveSchedulerCore, Scheduler, SchedulerCore, load_cluster_config
from hive_scheduler.protocol import DecisionLike
from hive_scheduler.sim.baselines import FifoScheduler, QuotaScheduler

CONFIG = load_cluster_config(SMALL)
IMPLEMENTATIONS = {"hived": lambda: Scheduler(CONFIG), "quota": lambda: QuotaScheduler(CONFIG),
                   "fifo": lambda: FifoScheduler(CONFIG)}


def _signature_matches(impl, proto_cls) -> list[str]:
    """Methods of the protocol whose parameters the implementation does not take by the same names."""
    bad = []
    for name, member in inspect.getmembers(proto_cls, inspect.isfunction):
        if name.startswith("_"):
            continue
        want = [p for p in inspect.signature(member).parameters if p != "self"]
        got = list(inspect.signature(getattr(impl, name)).parameters)
        if got[:len(want)] != want:
            bad.append(f"{name}{tuple(got)} != {tuple(want)}")
    return bad


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_implementation_satisfies_the_scheduler_core_protocol(name):
    s = IMPLEMENTATIONS[name]()
    assert isinstance(s, SchedulerCore)
    assert _signature_matches(s, SchedulerCore) == []
    ds = list(s.submit(job("x", "b", 8), 0)) + list(s.submit(job("y", "b", 8), 1)) + list(s.cancel("y", 2))
    ds += list(s.finish("x", 3))
    assert all(isinstance(d, DecisionLike) for d in ds)
    events = [(d.event, d.job) for d in ds]
    assert events[0] == ("started", "x") and events[-2:] == [("finished", "y"), ("finished", "x")]
    assert all(d.to_json()["job"] == d.job for d in ds)
    assert s.free_gpu_count() == s.gpu_count() == 32


def test_the_core_satisfies_what_the_live_service_needs():
    s = Scheduler(SMALL)
    assert isinstance(s, LiveSchedulerCore)
    assert _signature_matches(s, LiveSchedulerCore) == []
    assert not isinstance(QuotaScheduler(CONFIG), LiveSchedulerCore)  # no views, no adopt
