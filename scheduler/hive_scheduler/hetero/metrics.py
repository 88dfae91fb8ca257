"""Gavel's metrics for a round-based run: makespan, JCT, utilisation, finish-time fairness, and the
number of pauses, resumes, migrations and resizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class HeteroMetrics:
    jobs: int
    finished: int
    makespan_s: float  # last completion (Gavel's definition)
    avg_jct_s: float  # completion - arrival
    median_jct_s: float
    p95_jct_s: float
    gpu_utilisation: float  # busy GPU-seconds / (GPUs x makespan)
    avg_rho: float  # finish-time fairness: JCT / JCT on an equal 1/n share (n = active jobs at arrival)
    max_rho: float
    rounds: int
    allocations: int  # how many times the policy was solved
    pauses: int
    resumes: int
    migrations: int
    resizes: int  # Gavel's traces have fixed scale factors: always 0 for them
    restart_overhead_s: float
    jct_s: dict[int, float] = field(default_factory=dict)

    def to_dict(self, with_jobs: bool = False) -> dict:
        d = asdict(self)
        if not with_jobs:
            d.pop("jct_s")
        return d


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
