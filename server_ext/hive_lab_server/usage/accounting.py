"""Accounting: what each job attempt used, summed per user, VC or day, and the fair-share ledger
derived from the same records.

The service records one ``job_usage`` row per attempt (``store.open_usage`` when the core places it,
``store.close_usage`` when its GPUs are given back). Everything here is a pure function of those rows
and an explicit ``now`` (no clock is read here):

- ``parse_since("7d" | "24h" | "90m" | "2026-11-01" | "2026-11-01T12:00:00Z", now)`` -> UNIX seconds;
- ``usage_table(rows, since, now, by)`` -> ``[{"user": ..., "gpu_seconds": ..., "cpu_seconds": ...,
  "jobs": ...}, ...]``: GPU-seconds of the part of each attempt inside ``[since, now]`` (a running
  attempt counts up to ``now``; ``by="day"`` splits attempts at UTC midnights, ``by="job"`` sums a
  job's attempts); CPU-seconds and peak
  memory belong to the attempt's end (they are known when it ends, and only where the launcher
  measures them), so they count in the window (and day) the attempt ended in;
- ``fair_share_snapshot(rows, now, half_life_s)`` -> the core's usage ledger snapshot
  (``Scheduler.restore_usage``): each attempt's GPUs decayed exactly as the core decays them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any, Iterable

from hive_scheduler.fair_share import SNAPSHOT_VERSION

BY = ("user", "vc", "day", "job")
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhm])\s*$")
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0}
DAY_S = 86400.0
FORGOTTEN_AFTER_HALF_LIVES = 50  # usage older than this many half-lives weighs < 1e-15 of its GPU-seconds


class UsageQueryError(ValueError):
    """A bad ``since`` or ``by``: the message says what to send instead."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def parse_since(text: str | None, now: float, default: str = "7d") -> float:
    """The start of the window: ``7d``/``24h``/``90m`` before ``now``, or an ISO date/time (UTC unless it
    names a zone). Starts before 1970 begin in 1970 (everything); ``0d`` or a start after ``now`` is an
    empty window (the answer's ``since``/``until`` show it). Anything else: UsageQueryError."""
    raw = default if text is None or text.strip() == "" else text.strip()
    m = _RELATIVE.match(raw)
    if m:
        return _not_before_1970(now - float(m.group(1)) * _UNIT_S[m.group(2)])
    try:
        when = dt.datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)
    except ValueError:
        raise UsageQueryError("since", f"since must be a duration like 7d, 24h or 90m, or an ISO date like "
                                       f"2026-11-01 (UTC), got {raw!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    try:
        return _not_before_1970(when.timestamp())
    except (OverflowError, OSError, ValueError):  # e.g. year 1 with a zone east of UTC
        return 0.0


def _not_before_1970(start: float) -> float:
    return start if math.isfinite(start) and start > 0 else 0.0


def check_by(by: str | None) -> str:
    by = (by or "user").strip()
    if by not in BY:
        raise UsageQueryError("by", f"by must be one of {', '.join(BY)}, got {by!r}")
    return by


def day_of(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d")


def _day_pieces(start: float, end: float) -> Iterable[tuple[str, float]]:
    """``[start, end]`` cut at UTC midnights: (day, seconds) pieces."""
    t = start
    while t < end:
        midnight = (math.floor(t / DAY_S) + 1) * DAY_S
        stop = min(end, midnight)
        yield day_of(t), stop - t
        t = stop


def usage_table(rows: Iterable[dict[str, Any]], since: float, now: float, by: str = "user") -> list[dict[str, Any]]:
    """Totals per ``by`` key over ``[since, now]``, sorted by key."""
    by = check_by(by)
    out: dict[str, dict[str, Any]] = {}
    job_sets: dict[str, set[str]] = {}

    def bucket(key: str) -> dict[str, Any]:
        if key not in out:
            out[key] = {by: key, "gpu_seconds": 0.0, "cpu_seconds": None, "peak_memory_mb": None, "jobs": 0,
                        "gpu_seconds_by_type": {}}
            job_sets[key] = set()
        return out[key]

    def add_gpu(b: dict[str, Any], row: dict[str, Any], seconds: float) -> None:
        rate = float(row["share"] if row.get("share") is not None else 1.0)
        b["gpu_seconds"] += row["gpus"] * rate * seconds
        types = row.get("gpu_types") or {}
        for gpu_type, n in types.items():
            b["gpu_seconds_by_type"][gpu_type] = b["gpu_seconds_by_type"].get(gpu_type, 0.0) + n * rate * seconds

    for row in rows:
        start = max(since, float(row["started_at"]))
        end = min(now, float(row["ended_at"]) if row.get("ended_at") is not None else now)
        ended_inside = row.get("ended_at") is not None and since <= row["ended_at"] <= now
        if end <= start and not ended_inside:
            continue
        if by == "day":
            touched = [(day, s) for day, s in _day_pieces(start, end)] if end > start else []
            for day, seconds in touched:
                b = bucket(day)
                add_gpu(b, row, seconds)
                job_sets[day].add(row["job_id"])
            end_key = day_of(row["ended_at"]) if ended_inside else None
        else:
            key = str(row["job_id" if by == "job" else by])
            b = bucket(key)
            if end > start:
                add_gpu(b, row, end - start)
            job_sets[key].add(row["job_id"])
            end_key = key if ended_inside else None
        if end_key is not None:
            b = bucket(end_key)
            job_sets[end_key].add(row["job_id"])
            if row.get("cpu_seconds") is not None:
                b["cpu_seconds"] = (b["cpu_seconds"] or 0.0) + float(row["cpu_seconds"])
            if row.get("peak_memory_mb") is not None:
                b["peak_memory_mb"] = max(b["peak_memory_mb"] or 0.0, float(row["peak_memory_mb"]))
    result = []
    for key in sorted(out):
        b = out[key]
        b["jobs"] = len(job_sets[key])
        b["gpu_seconds"] = round(b["gpu_seconds"], 3)
        b["gpu_seconds_by_type"] = {t: round(v, 3) for t, v in sorted(b["gpu_seconds_by_type"].items())}
        result.append(b)
    return result


def fair_share_snapshot(rows: Iterable[dict[str, Any]], now: float, half_life_s: float) -> dict[str, Any]:
    """The decayed GPU-seconds per user and group at ``now`` (``Scheduler.restore_usage``'s input): an
    attempt holding ``g`` GPUs over ``[s, e]`` adds ``g/lam * (exp(-lam (now-e)) - exp(-lam (now-s)))``,
    the integral of the core's exponential decay (``hive_scheduler.fair_share``)."""
    lam = math.log(2) / half_life_s
    users: dict[str, float] = {}
    groups: dict[str, float] = {}
    for row in rows:
        start = float(row["started_at"])
        end = min(now, float(row["ended_at"])) if row.get("ended_at") is not None else now
        if end <= start:
            continue
        gpus = row["gpus"] * float(row["share"] if row.get("share") is not None else 1.0)
        value = gpus / lam * (math.exp(-lam * (now - end)) - math.exp(-lam * (now - start)))
        if value <= 0:
            continue
        users[row["user"]] = users.get(row["user"], 0.0) + value
        group = row.get("user_group") or ""
        groups[group] = groups.get(group, 0.0) + value
    return {"version": SNAPSHOT_VERSION, "half_life_s": half_life_s, "at": now,
            "users": dict(sorted(users.items())), "groups": dict(sorted(groups.items()))}
