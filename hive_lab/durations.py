"""Run time limits as people write them: ``2h``, ``90m``, ``1h30m``, ``45s``, ``3600`` (seconds)."""

from __future__ import annotations

import re

from .errors import BadRequest

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(min|sec|d|h|m|s)?", re.IGNORECASE)
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "min": 60, "s": 1, "sec": 1, None: 1}


def parse_duration(text, option: str = "--time-limit") -> float:
    """Seconds of ``text`` (``2h``, ``90m``, ``1h30m``, ``1d``, ``3600``); BadRequest saying what to write."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        s = re.sub(r"\s+(?=[a-z])|(?<=[a-z])\s+(?=\d)", "", str(text).strip().lower())  # "2 h" -> "2h"; "30 90" stays wrong
        pos, seconds, units = 0, 0.0, []
        while pos < len(s):
            m = _PART.match(s, pos)
            if m is None or m.end() == pos:
                break
            unit = m.group(2)
            if unit is None and m.end() != len(s):
                break
            units.append(unit)
            seconds += float(m.group(1)) * _UNIT_S[unit]
            pos = m.end()
        if not s or pos != len(s) or (None in units and len(units) > 1):
            raise BadRequest(f"{option}: write a duration like 2h, 90m, 1h30m, 45s or seconds (3600), got {text!r}",
                             field="time_limit_s")
    if seconds <= 0:
        raise BadRequest(f"{option}: the limit must be more than 0, got {text!r}", field="time_limit_s")
    return seconds
