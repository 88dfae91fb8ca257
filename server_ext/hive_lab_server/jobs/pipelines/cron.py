"""Cron expressions in a time zone (``cronsim``, the parser healthchecks.io uses): validate one, and
find the times it names after an instant. Five fields (minute hour day month weekday), with cronsim's
extensions (``L``, ``#``, ``W``); nicknames ``@hourly``, ``@daily``/``@midnight``, ``@weekly``,
``@monthly``, ``@yearly``/``@annually``. Wall-clock times that a daylight-saving change skips or
repeats follow cronsim (a skipped time runs once, at the change; a repeated one once)."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

from cronsim import CronSim, CronSimError

NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
             "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


class CronError(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.message = message
        self.field = field


def zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise CronError(f"timezone: {name!r} is not an IANA time zone; use e.g. UTC, Europe/Berlin, "
                        "America/New_York", "timezone") from None


def expression(text: str) -> str:
    """The five-field form of ``text`` (nicknames expanded); CronError says what is wrong."""
    expr = NICKNAMES.get(text.strip().lower(), text.strip())
    try:
        CronSim(expr, dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    except CronSimError as exc:
        raise CronError(f"cron: {text!r} is not a cron expression ({exc}); use five fields, minute hour "
                        "day-of-month month day-of-week, e.g. '0 2 * * *' (02:00 every day) or '@hourly'",
                        "cron") from None
    return expr


def next_after(expr: str, tz: str, t: float) -> float:
    """The first time ``expr`` names in ``tz`` strictly after UNIX time ``t``."""
    start = dt.datetime.fromtimestamp(t, zone(tz)).replace(microsecond=0)
    return next(iter(CronSim(expression(expr), start))).timestamp()


def times_between(expr: str, tz: str, after: float, until: float, limit: int) -> list[float]:
    """The times ``expr`` names in ``(after, until]``, at most ``limit`` of them (the earliest)."""
    out: list[float] = []
    start = dt.datetime.fromtimestamp(after, zone(tz)).replace(microsecond=0)
    for when in CronSim(expression(expr), start):
        ts = when.timestamp()
        if ts > until or len(out) >= limit:
            break
        if ts > after:
            out.append(ts)
    return out


def latest_at_or_before(expr: str, tz: str, t: float) -> float | None:
    """The last time ``expr`` names in ``tz`` at or before UNIX time ``t`` (seconds resolution)."""
    start = dt.datetime.fromtimestamp(int(t) + 1, zone(tz))
    found = next(iter(CronSim(expression(expr), start, reverse=True)), None)
    return found.timestamp() if found is not None else None


def explain(expr: str) -> str:
    """``expr`` in words, as a person says it: ``every day at 00:00``, ``on Monday through Friday at 02:30``,
    ``every 15th minute of every hour`` (cronsim's English, the time moved after the days)."""
    text = CronSim(expression(expr), dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)).explain()
    m = re.fullmatch(r"At (\d\d:\d\d) (every day|on .+)", text)
    if m:
        return f"{m.group(2)} at {m.group(1)}"
    return text[:1].lower() + text[1:]


def local_iso(t: float | None, tz: str) -> str | None:
    """UNIX time ``t`` as an ISO time in the zone ``tz`` with its offset (``2026-11-28T00:00:00+01:00``)."""
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, zone(tz)).isoformat(timespec="seconds")
