"""REST objects of arrays: one array with its counts by state, and a page of its elements."""

from __future__ import annotations

from typing import Any

from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.jobs.arrays.feeder import ENDED
from hive_lab_server.wire.array_spec import sweep_params

COUNT_STATES = ("pending", "submitted", "queued", "scheduled", "running", "paused", "succeeded", "failed",
                "cancelled")


def counts(row: dict[str, Any], released_states: dict[str, int]) -> dict[str, int]:
    """Elements by state: ``pending`` (not released yet), the released ones' job states, and ``cancelled``
    also counting those cancelled before release."""
    released = sum(released_states.values())
    cancelled_pending = len(row["cancelled"])  # never released (released ones are not added there)
    out = {s: 0 for s in COUNT_STATES}
    for state, n in released_states.items():
        out[state] = out.get(state, 0) + n
    out["cancelled"] += cancelled_pending
    out["pending"] = max(0, len(row["indices"]) - released - cancelled_pending)
    return out


def array_state(row: dict[str, Any], by_state: dict[str, int]) -> str:
    """``ended`` (every element ended), ``held`` (paused), ``running`` (some element runs) or ``waiting``."""
    open_ = sum(n for s, n in by_state.items() if s not in ENDED)
    if open_ == 0:
        return "ended"
    if row["held"]:
        return "held"
    if by_state.get("running", 0) or by_state.get("scheduled", 0):
        return "running"
    return "waiting"


def array_object(row: dict[str, Any], released_states: dict[str, int], reason: str = "") -> dict[str, Any]:
    by_state = counts(row, released_states)
    return {
        "id": row["id"], "name": row["name"], "user": row["user"], "vc": row["vc"],
        "state": array_state(row, by_state), "reason": reason or row.get("reason") or "",
        "count": len(row["indices"]), "throttle": row["throttle"], "held": bool(row["held"]),
        "indices": compact(row["indices"]), "sweep": row["sweep"], "counts": by_state,
        "submitted_at": iso(row["submitted_at"]),
    }


def element_objects(row: dict[str, Any], rows_by_index: dict[int, dict[str, Any]], offset: int,
                    limit: int) -> list[dict[str, Any]]:
    cancelled = set(row["cancelled"])
    out = []
    for position in range(offset, min(offset + limit, len(row["indices"]))):
        index = row["indices"][position]
        job = rows_by_index.get(index)
        obj: dict[str, Any] = {"index": index, "job_id": None, "state": "pending", "reason": "",
                               "exit_code": None, "retries": 0, "started_at": None, "finished_at": None,
                               "params": sweep_params(row["sweep"], position) if row["sweep"] is not None else None}
        if job is not None:
            obj.update(job_id=job["id"], state=job["state"], reason=job["reason"], exit_code=job["exit_code"],
                       retries=job["retries"], started_at=iso(job["started_at"]), finished_at=iso(job["finished_at"]))
        elif index in cancelled:
            obj.update(state="cancelled", reason="cancelled before it was released")
        out.append(obj)
    return out


def compact(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (what the array field would say, without the throttle)."""
    parts = []
    start = prev = None
    for i in indices:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)
