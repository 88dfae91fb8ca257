"""Time-decayed fair share (Slurm-style fairshare) as a queue order inside a VC.

Usage is GPU-seconds decayed exponentially with a half-life: a GPU held for ``s`` seconds counts
``s`` GPU-seconds now and half of that one half-life later. The ledger is advanced by the core at
each call from the core's injected ``now`` (never the wall clock), with the GPUs its users held since
the previous call (state only changes at calls, so that is exact): for a constant rate ``r`` over
``dt`` with ``lam = ln 2 / half_life``, ``U <- U * exp(-lam dt) + r * (1 - exp(-lam dt)) / lam``.

The order: the next free cells of a VC go to the waiting job whose group, then whose user, has the
lowest decayed usage relative to its share (equal shares unless configured); ties by submit order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

DEFAULT_HALF_LIFE_S = 86400.0
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class FairShareSettings:
    """Half-life of usage and the shares (weights, default 1) of users and groups."""

    half_life_s: float = DEFAULT_HALF_LIFE_S
    user_shares: Mapping[str, float] = field(default_factory=dict)
    group_shares: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if not (isinstance(self.half_life_s, (int, float)) and math.isfinite(self.half_life_s)
                and self.half_life_s > 0):
            raise ValueError(f"fair share half_life_s must be a positive number of seconds, got {self.half_life_s!r}")
        for what, shares in (("user", self.user_shares), ("group", self.group_shares)):
            for name, s in shares.items():
                if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
                    raise ValueError(f"fair share of {what} {name!r} must be a positive number, got {s!r}")


class UsageLedger:
    """Decayed GPU-seconds per user and per group, as of ``at`` (a time of the core's clock)."""

    def __init__(self, settings: FairShareSettings | None = None):
        self.settings = settings or FairShareSettings()
        self._lam = math.log(2) / self.settings.half_life_s
        self.at: float | None = None
        self.users: dict[str, float] = {}
        self.groups: dict[str, float] = {}

    def advance(self, now: float, user_gpus: Mapping[str, float], group_gpus: Mapping[str, float]) -> None:
        """Decay to ``now`` and add what was held since ``at`` (``*_gpus``: GPUs held over that time)."""
        if self.at is None:
            self.at = now
            return
        dt = now - self.at
        if dt <= 0:
            return
        d = math.exp(-self._lam * dt)
        gain = (1.0 - d) / self._lam
        for table, rates in ((self.users, user_gpus), (self.groups, group_gpus)):
            for k in list(table):
                table[k] *= d
            for k, r in rates.items():
                if r:
                    table[k] = table.get(k, 0.0) + r * gain
        self.at = now

    def user_ratio(self, user: str) -> float:
        return self.users.get(user, 0.0) / self.settings.user_shares.get(user, 1.0)

    def group_ratio(self, group: str) -> float:
        return self.groups.get(group, 0.0) / self.settings.group_shares.get(group, 1.0)

    def snapshot(self) -> dict[str, Any]:
        """A plain dict (JSON-ready) the service can store and give back to ``restore``."""
        return {"version": SNAPSHOT_VERSION, "half_life_s": self.settings.half_life_s, "at": self.at,
                "users": dict(sorted(self.users.items())), "groups": dict(sorted(self.groups.items()))}

    def restore(self, snap: Mapping[str, Any]) -> None:
        """Replace the ledger by ``snap`` (from ``snapshot``); checked whole before anything changes."""
        if not isinstance(snap, Mapping) or snap.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"usage snapshot: expected a dict with version {SNAPSHOT_VERSION}")
        at = snap.get("at")
        if at is not None and not (isinstance(at, (int, float)) and math.isfinite(at)):
            raise ValueError(f"usage snapshot: 'at' must be a number or null, got {at!r}")
        tables = []
        for key in ("users", "groups"):
            t = snap.get(key, {})
            if not isinstance(t, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, (int, float)) and math.isfinite(v) and v >= 0
                    for k, v in t.items()):
                raise ValueError(f"usage snapshot: {key!r} must map names to GPU-seconds >= 0")
            tables.append({k: float(v) for k, v in t.items()})
        self.at = None if at is None else float(at)
        self.users, self.groups = tables


class FairShare:
    """Lowest decayed usage / share first (group, then user), then submit order."""

    name = "fair_share"
    dynamic = True

    @staticmethod
    def key(j) -> tuple:
        return (j.req.submit_time, j.seq)

    def arrange(self, jobs: list, usage, vc: str, started: Callable[[object], bool] | None = None) -> Iterable:
        ledger: UsageLedger = usage.usage_ledger()
        # jobs come FIFO-sorted; a stable sort keeps submit order among equal ratios
        return sorted(jobs, key=lambda j: (ledger.group_ratio(j.req.group), ledger.user_ratio(j.req.user)))
