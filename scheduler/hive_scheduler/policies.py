"""In-VC ordering policies: which waiting job of a VC is tried first.

``fifo`` (default): submit time, then arrival order. ``priority``: higher priority first, then FIFO.
``drf``: dominant resource fairness over GPU/CPU/memory across the users of the VC: the next job
comes from the user with the smallest dominant share of the VC (ties: user name), FIFO per user.
"""

from __future__ import annotations

from typing import Callable, Iterator

POLICIES = ("fifo", "priority", "drf")


def static_key(policy: str) -> Callable:
    if policy == "priority":
        return lambda j: (-j.req.priority, j.req.submit_time, j.seq)
    return lambda j: (j.req.submit_time, j.seq)


def drf_order(jobs: list, usage: dict[str, list[float]], capacity: tuple[float, float, float],
              started: Callable[[object], bool] | None = None) -> Iterator:
    """Yield ``jobs`` (already FIFO-sorted) in DRF order.

    ``usage``: user -> [gpus, cpus, memory_mb] in use. After each yielded job the caller may have
    started it: ``started(job)`` tells, and the user's share grows accordingly.
    """
    per_user: dict[str, list] = {}
    for j in jobs:
        per_user.setdefault(j.req.user, []).append(j)
    pos = {u: 0 for u in per_user}
    use = {u: list(usage.get(u, (0.0, 0.0, 0.0))) for u in per_user}

    def share(u: str) -> float:
        g, c, m = use[u]
        return max(g / capacity[0] if capacity[0] else 0.0, c / capacity[1] if capacity[1] else 0.0,
                   m / capacity[2] if capacity[2] else 0.0)

    while True:
        best = None
        for u in sorted(per_user):
            if pos[u] >= len(per_user[u]):
                continue
            k = (share(u), u)
            if best is None or k < best[0]:
                best = (k, u)
        if best is None:
            return
        u = best[1]
        j = per_user[u][pos[u]]
        pos[u] += 1
        yield j
        if started is not None and started(j):
            use[u][0] += j.req.total_gpus
            use[u][1] += sum(g.cpus * g.count for g in j.req.tasks)
            use[u][2] += sum(g.memory_mb * g.count for g in j.req.tasks)
