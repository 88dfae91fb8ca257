"""What the scheduler tells its driver (Decision) and what a query returns about a job (JobView)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import TaskPlacement

EVENTS = ("started", "queued", "preempting", "preempted", "demoted", "finished", "rejected")


@dataclass(frozen=True)
class Decision:
    """One thing the scheduler decided. ``to_json()`` is the simulator's decision line."""

    event: str
    job: str
    t: float
    placement: tuple[TaskPlacement, ...] | None = None
    opportunistic: bool | None = None
    reason: str | None = None
    victims: tuple[str, ...] | None = None
    by: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": self.t, "job": self.job, "event": self.event}
        if self.placement is not None:
            d["placement"] = [p.to_json() for p in self.placement]
        for k in ("opportunistic", "reason", "by", "error"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.victims is not None:
            d["victims"] = list(self.victims)
        return d


@dataclass(frozen=True)
class JobView:
    """A job as the scheduler sees it now."""

    id: str
    vc: str
    user: str
    state: str                     # "waiting" | "running" | "preempting"
    priority: int
    opportunistic: bool
    placement: tuple[TaskPlacement, ...] = ()
    reason: str | None = None
    reserved_cells: tuple[str, ...] = ()
    # hive-lab extensions (compatible additions)
    preempted_by: str | None = None          # set while a running job is being stopped for a preemptor
    waiting_for: tuple[str, ...] = ()        # a preempting job's victims still running
    submit_time: float = 0.0
    gpus: int = 0
    demoted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "vc": self.vc, "user": self.user, "state": self.state, "priority": self.priority,
            "opportunistic": self.opportunistic, "placement": [p.to_dict() for p in self.placement],
            "reason": self.reason, "reserved_cells": list(self.reserved_cells), "preempted_by": self.preempted_by,
            "waiting_for": list(self.waiting_for), "submit_time": self.submit_time, "gpus": self.gpus,
            "demoted": self.demoted,
        }
