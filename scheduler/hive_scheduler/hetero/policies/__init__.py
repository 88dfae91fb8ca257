"""Gavel's policies by Gavel's names; each module holds one family (agnostic and ``_perf`` variants)."""

from __future__ import annotations

from .base import PackedAllocation, Policy, Problem
from .fifo import Fifo, FifoPerf
from .gandiva import Gandiva

# LP policies import scipy; they are loaded on first use so that fifo/gandiva runs start fast
_LP = {
    "max_min_fairness": ("max_min_fairness", "MaxMinFairness"),
    "max_min_fairness_perf": ("max_min_fairness", "MaxMinFairnessPerf"),
    "finish_time_fairness": ("finish_time_fairness", "FinishTimeFairness"),
    "finish_time_fairness_perf": ("finish_time_fairness", "FinishTimeFairnessPerf"),
    "min_total_duration": ("min_total_duration", "MinTotalDuration"),
    "min_total_duration_perf": ("min_total_duration", "MinTotalDurationPerf"),
    "max_sum_throughput_perf": ("max_sum_throughput", "MaxSumThroughputPerf"),
}

POLICIES = ("fifo", "fifo_perf", "gandiva", *_LP)


def make_policy(name: str, seed: int = 0) -> Policy:
    if name == "fifo":
        return Fifo(seed)
    if name == "fifo_perf":
        return FifoPerf(seed)
    if name == "gandiva":
        return Gandiva(seed)
    if name in _LP:
        import importlib

        module, cls = _LP[name]
        return getattr(importlib.import_module(f".{module}", __name__), cls)()
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")


__all__ = ["POLICIES", "PackedAllocation", "Policy", "Problem", "make_policy"]
