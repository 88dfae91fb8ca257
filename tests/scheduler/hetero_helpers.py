"""Small hand-made problems for the heterogeneity-aware policies."""

from __future__ import annotations

import numpy as np

from hive_scheduler.hetero.policies import Problem


def problem(throughput, gpus, scale_factor=None, remaining=None, priority=None, since=None, pairs=None) -> Problem:
    t = np.asarray(throughput, dtype=float)
    n, k = t.shape
    return Problem(
        job_ids=list(range(n)),
        gpu_types=[f"g{j}" for j in range(k)],
        gpus=np.asarray(gpus, dtype=int),
        throughput=t,
        scale_factor=np.asarray(scale_factor if scale_factor is not None else [1] * n, dtype=int),
        remaining_steps=np.asarray(remaining if remaining is not None else [1000.0] * n, dtype=float),
        priority_weight=np.asarray(priority if priority is not None else [1.0] * n, dtype=float),
        time_since_start=np.asarray(since if since is not None else [0.0] * n, dtype=float),
        job_keys=[(f"job{i}", 1) for i in range(n)],
        pair_throughput=pairs,
    )


def per_job_time(allocation, n: int) -> np.ndarray:
    """Each job's total time fraction over all units (a packed allocation counts a pair for both jobs)."""
    from hive_scheduler.hetero.policies import PackedAllocation

    if isinstance(allocation, PackedAllocation):
        out = np.zeros(n)
        for unit, row in zip(allocation.units, allocation.x):
            for u in unit:
                out[u] += np.sum(row)
        return out
    return np.asarray(allocation).sum(axis=1)


def per_type_gpus(allocation, scale_factor) -> np.ndarray:
    """GPUs used per type on average (a pair shares its GPUs)."""
    from hive_scheduler.hetero.policies import PackedAllocation

    if isinstance(allocation, PackedAllocation):
        sf = np.array([scale_factor[u[0]] for u in allocation.units])
        return (np.asarray(allocation.x) * sf[:, None]).sum(axis=0)
    return (np.asarray(allocation) * np.asarray(scale_factor)[:, None]).sum(axis=0)
