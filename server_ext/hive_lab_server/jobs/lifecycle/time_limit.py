"""Run time limits: how they read (``2h``, ``1h30m``), and which limit a job gets in its VC.

A job's limit is ``time_limit_s`` from its spec, else its VC's default (batch jobs only: a kernel gets
a limit only when its kernelspec asks for one or its VC caps GPU kernels, ``lifecycle.kernel_caps``;
the idle culler handles idle kernels). A limit above the
VC's maximum is refused (400) before anything is stored. The deadline itself is derived in the
lifecycle machine (``Job.deadline``: the attempt's stored start + the limit).

Config (``HiveLabApp.vc_time_limits``): ``{"cv-101": {"default_s": 3600, "max_s": 14400}, "*": {...}}``;
``"*"`` applies to VCs not named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from hive_scheduler.words import limit_text as core_limit_text

MAX_LIMIT_S = 366 * 86400  # the largest limit anyone may ask for (a year): beyond is a typo


def limit_text(seconds: float | None) -> str:
    """``7200`` -> ``2h``, ``5400`` -> ``1h30m``, ``90`` -> ``1m30s``, ``1`` -> ``1s``, ``0.5`` -> ``0.5s``."""
    if seconds is None:
        return "none"
    return core_limit_text(seconds)  # the core's words: the estimates' bases say limits the same way


class TimeLimitError(ValueError):
    """A limit the VC does not allow, or a malformed config: ``message`` says what to change."""

    def __init__(self, message: str, field: str | None = "time_limit_s"):
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class VcTimeLimit:
    default_s: float | None = None
    max_s: float | None = None


def parse_vc_time_limits(config: Mapping[str, Any] | None, vcs: list[str] | None = None) -> dict[str, VcTimeLimit]:
    """``HiveLabApp.vc_time_limits`` checked: TimeLimitError naming the entry that is wrong."""
    out: dict[str, VcTimeLimit] = {}
    for vc, rule in (config or {}).items():
        where = f"HiveLabApp.vc_time_limits[{vc!r}]"
        if vcs is not None and vc != "*" and vc not in vcs:
            raise TimeLimitError(f"{where}: there is no VC {vc!r}; use one of {', '.join(vcs)} or '*'", None)
        if not isinstance(rule, Mapping) or set(rule) - {"default_s", "max_s"}:
            raise TimeLimitError(f"{where}: give a dict with default_s and/or max_s (seconds), got {rule!r}", None)
        values = {}
        for key in ("default_s", "max_s"):
            v = rule.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= MAX_LIMIT_S):
                raise TimeLimitError(f"{where}.{key}: seconds > 0 (at most {MAX_LIMIT_S}), got {v!r}", None)
            values[key] = float(v) if v is not None else None
        if values["default_s"] is not None and values["max_s"] is not None and values["default_s"] > values["max_s"]:
            raise TimeLimitError(f"{where}: default_s ({limit_text(values['default_s'])}) is above max_s "
                                 f"({limit_text(values['max_s'])}); lower the default", None)
        out[vc] = VcTimeLimit(**values)
    return out


def effective_limit(asked: float | None, kind: str, vc: str, rules: Mapping[str, VcTimeLimit]) -> float | None:
    """The limit a job of ``kind`` asking for ``asked`` seconds gets in ``vc`` (TimeLimitError if over the max)."""
    rule = rules.get(vc) or rules.get("*") or VcTimeLimit()
    limit = asked
    if limit is None and kind == "batch":
        limit = rule.default_s
    if limit is not None and rule.max_s is not None and limit > rule.max_s:
        raise TimeLimitError(f"time_limit_s: {limit_text(limit)} ({limit:g} s) is over the maximum of VC {vc}, "
                             f"{limit_text(rule.max_s)} ({rule.max_s:g} s); ask for at most that")
    return limit
