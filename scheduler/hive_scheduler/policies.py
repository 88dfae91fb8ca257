"""In-VC ordering policies: which waiting job of a VC is tried first.

``fifo`` (default): submit time, then arrival order. ``priority``: higher priority first, then FIFO.
``drf``: dominant resource fairness over GPU/CPU/memory across the users of the VC: the next job
comes from the user with the smallest dominant share of the VC (ties: user name), FIFO per user.
``fair_share`` (``fair_share.py``): lowest time-decayed GPU-seconds relative to the owner's share.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Protocol, runtime_checkable


class UsageSource(Protocol):
    """What a dynamic order may ask the core about a VC (the Scheduler provides it)."""

    def vc_usage(self, vc: str) -> dict[str, list[float]]: ...        # user -> [gpus, cpus, memory_mb] in use
    def vc_capacity(self, vc: str) -> tuple[float, float, float]: ...  # the VC's share of GPUs, CPUs, memory


@runtime_checkable
class QueueOrder(Protocol):
    """How the waiting jobs of a VC are ordered (a queue-sort plug-in).

    ``key(job)`` is the static sort key of the VC's queue (kept sorted by it, ties by job id).
    ``dynamic`` orders also depend on what runs: ``arrange`` then re-orders the key-sorted jobs
    (``started(job)`` tells it after each job whether the caller started it). Register a new order
    with ``register_order``; ``Scheduler(policy=name)`` picks it by name.
    """

    name: str
    dynamic: bool

    def key(self, job) -> tuple: ...

    def arrange(self, jobs: list, usage: UsageSource, vc: str,
                started: Callable[[object], bool] | None = None) -> Iterable: ...


class Fifo:
    """Submit time, then arrival order."""

    name = "fifo"
    dynamic = False

    @staticmethod
    def key(j) -> tuple:
        return (j.req.submit_time, j.seq)

    def arrange(self, jobs, usage, vc, started=None):
        return jobs


class Priority(Fifo):
    """Higher priority first, then FIFO."""

    name = "priority"

    @staticmethod
    def key(j) -> tuple:
        return (-j.req.priority, j.req.submit_time, j.seq)


class Drf(Fifo):
    """Dominant resource fairness over the users of the VC, FIFO per user."""

    name = "drf"
    dynamic = True

    def arrange(self, jobs, usage, vc, started=None):
        return drf_order(jobs, usage.vc_usage(vc), usage.vc_capacity(vc), started=started)


ORDERS: dict[str, QueueOrder] = {}


def register_order(order: QueueOrder) -> QueueOrder:
    """Make ``order`` available by its name (replaces an order of the same name)."""
    if not isinstance(order, QueueOrder):
        raise TypeError(f"{order!r} is not a QueueOrder (needs name, dynamic, key, arrange)")
    ORDERS[order.name] = order
    return order


from .fair_share import FairShare  # noqa: E402  (kept apart: it brings its usage ledger)

for _order in (Fifo(), Priority(), Drf(), FairShare()):
    register_order(_order)

POLICIES = tuple(ORDERS)  # compatible name: the built-in orders


def get_order(name: str) -> QueueOrder | None:
    return ORDERS.get(name)


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
