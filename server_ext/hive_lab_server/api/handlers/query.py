"""Query parameters, read one way by every handler, with the schemas the OpenAPI document states for them.

A parameter left out takes its default. A parameter given but empty (``offset=``), given twice
(``offset=1&offset=2``) or malformed (``limit=x``, ``elements=maybe``) is a 400 whose message names it and
says what to send: an empty value is never read as "absent", so what the document calls invalid the
server refuses, and what it calls valid the server takes (tests/server/api/test_fuzz.py holds both to it).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from hive_lab_server.api.handlers.base import HiveError

MAX_QUERY_INT = 2**62  # integers above this are refused (file offsets overflow at 2**63)
MAX_OFFSET = 10**9  # of a list page
FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_INTEGER = re.compile(r"^-?[0-9]{1,30}$")  # ASCII digits only (int() would also take "1_0" and "٣")

#: the document's schemas for the kinds of parameter read here (openapi.py uses them)
FLAG_SCHEMA = {"type": "string", "enum": list(FLAGS)}
NAMES_SCHEMA = {"type": "string", "pattern": r"^[^,]+(,[^,]+)*$"}
TEXT_SCHEMA = {"type": "string", "minLength": 1}
AFTER_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_QUERY_INT}
AFTER_HELP = ("the cursor: the previous page's next; this page holds what comes after it, whatever arrived since "
              "(not with offset)")
OFFSET_HELP = "skip this many (unstable: pages shift as new ones arrive; use after)"


def integer_schema(lo: int, hi: int = MAX_QUERY_INT, default: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi}
    if default is not None:
        out["default"] = default
    return out


def raw(handler: Any, name: str, what: str) -> str | None:
    """The parameter as sent (None when left out); ``what`` says what to send, for the 400s."""
    values = handler.get_query_arguments(name, strip=False)
    if not values:
        return None
    if len(values) > 1:
        raise HiveError(400, f"query parameter {name} was given {len(values)} times; give it once ({what})", name)
    if values[0] == "":
        raise HiveError(400, f"query parameter {name} is empty; {what}, or leave {name} out", name)
    return values[0]


def integer(handler: Any, name: str, default: Any, lo: int, hi: int = MAX_QUERY_INT) -> Any:
    """An integer ``lo..hi``; ``default`` (an int, or None) when left out."""
    what = f"give an integer {lo}..{hi}"
    value = raw(handler, name, what)
    if value is None:
        return default
    if not _INTEGER.match(value):
        raise HiveError(400, f"query parameter {name} must be an integer, got {value[:40]!r}; {what}", name)
    number = int(value)
    if not lo <= number <= hi:
        raise HiveError(400, f"query parameter {name} must be {lo}..{hi}, got {number}", name)
    return number


def flag(handler: Any, name: str, default: bool = False) -> bool:
    what = "use true or false"
    value = raw(handler, name, what)
    if value is None:
        return default
    if value not in FLAGS:
        raise HiveError(400, f"query parameter {name}: {what} (or 1/0, yes/no), got {value[:40]!r}", name)
    return FLAGS[value]


def text(handler: Any, name: str, what: str, default: str | None = None) -> str | None:
    value = raw(handler, name, what)
    return default if value is None else value


def choice(handler: Any, name: str, choices: Iterable[str], default: str) -> str:
    options = list(choices)
    what = f"use one of {', '.join(options)}"
    value = raw(handler, name, what)
    if value is None:
        return default
    if value not in options:
        raise HiveError(400, f"query parameter {name}: {what}, got {value[:40]!r}", name)
    return value


def names(handler: Any, name: str, what: str) -> list[str]:
    """A comma-separated list (``user=ann,bob``); an empty item (``user=ann,,bob``) is a 400 too."""
    value = raw(handler, name, f"give {what}, comma-separated")
    if value is None:
        return []
    items = value.split(",")
    if any(item == "" for item in items):
        raise HiveError(400, f"query parameter {name} has an empty name in {value[:80]!r}; give {what}, "
                             "comma-separated without empty items", name)
    return items



def page(handler: Any, default_limit: int, max_limit: int) -> tuple[int, int, int | None]:
    """``limit``, ``offset`` (unstable under arrivals, kept for old clients) and the cursor ``after`` (the
    ``next`` of the page before): one of offset and after."""
    limit = integer(handler, "limit", default_limit, 1, max_limit)
    offset = integer(handler, "offset", 0, 0, MAX_OFFSET)
    after = integer(handler, "after", None, 1, MAX_QUERY_INT)
    if after is not None and offset:
        raise HiveError(400, "query parameter after: give after (the cursor, the previous page's next) or offset, "
                             "not both", "after")
    return limit, offset, after


def users(handler: Any, me: str) -> list[str]:
    """``user=``: comma-separated user names; ``me`` is the caller (``me``)."""
    return [me if u == "me" else u for u in names(handler, "user", "user names (me: you)")]


# ``since`` of GET usage and GET history: 7d / 24h / 90m before now, or a calendar date (with a time and a zone)
_YEAR = r"(19|2[0-9])[0-9]{2}"
_LEAP_YEAR = r"((19|2[0-9])(0[48]|[2468][048]|[13579][26])|2000|2400|2800)"
_MONTH_DAY = r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
_TIME = r"(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?)?"
SINCE_PATTERN = (rf"^([0-9]{{1,9}}(\.[0-9]{{1,6}})?[dhm]|({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29){_TIME})$")
SINCE_HELP = "give a duration like 7d, 24h or 90m, or a date like 2026-11-01 (UTC) or 2026-11-01T08:00+01:00"
_SINCE = re.compile(SINCE_PATTERN)


def since(handler: Any, now: float) -> float:
    """The start of a usage window (UNIX seconds): exactly what SINCE_PATTERN allows, 7 days when left out."""
    from hive_lab_server.usage.accounting import parse_since

    value = raw(handler, "since", SINCE_HELP)
    if value is not None and not _SINCE.match(value):
        raise HiveError(400, f"query parameter since: {SINCE_HELP}; got {value[:40]!r}", "since")
    return parse_since(value, now)
