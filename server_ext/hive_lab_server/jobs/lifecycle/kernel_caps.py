"""Server-side caps on GPU kernels, per VC (``HiveLabApp.kernel_limits``): what binds every GPU kernel of
the VC whatever its kernelspec says.

A kernelspec is the user's to write (``~/.local/share/jupyter/kernels``), and the provisioner and its
idle culler run in the user's own Jupyter server; neither can enforce a course's rules. The service
does, at the two places where it decides:

- at admission, a GPU kernel's time limit is the cap's ``max_time_limit_s`` when it asks for none or for
  more (a kernel that asks for less keeps its own);
- while it runs, the service follows the kernel's activity itself (``lifecycle.kernel_idle``) and cancels
  it after ``max_idle_s`` without execution, whether its kernelspec says ``idle_timeout: 0``, a larger
  value or nothing.

Config: ``{"cv-101": {"max_idle_s": 1800, "max_time_limit_s": 14400}, "*": {...}}``; ``"*"`` applies to
VCs not named. Either key may be left out (no cap of that kind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from hive_lab_server.jobs.lifecycle.time_limit import MAX_LIMIT_S

KEYS = ("max_idle_s", "max_time_limit_s")


class KernelCapsError(ValueError):
    """A malformed ``kernel_limits``; ``message`` says which entry and what to change."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class KernelCap:
    max_idle_s: float | None = None
    max_time_limit_s: float | None = None


def parse_kernel_limits(config: Mapping[str, Any] | None, vcs: list[str] | None = None) -> dict[str, KernelCap]:
    """``HiveLabApp.kernel_limits`` checked whole: KernelCapsError naming the entry that is wrong."""
    out: dict[str, KernelCap] = {}
    for vc, rule in (config or {}).items():
        where = f"HiveLabApp.kernel_limits[{vc!r}]"
        if vcs is not None and vc != "*" and vc not in vcs:
            raise KernelCapsError(f"{where}: there is no VC {vc!r}; use one of {', '.join(vcs)} or '*'")
        if not isinstance(rule, Mapping) or set(rule) - set(KEYS):
            raise KernelCapsError(f"{where}: give a dict with max_idle_s and/or max_time_limit_s (seconds), "
                                  f"got {rule!r}")
        values = {}
        for key in KEYS:
            v = rule.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= MAX_LIMIT_S):
                raise KernelCapsError(f"{where}.{key}: seconds > 0 (at most {MAX_LIMIT_S}), got {v!r}")
            values[key] = float(v) if v is not None else None
        out[vc] = KernelCap(**values)
    return out


def cap_of(vc: str, caps: Mapping[str, KernelCap]) -> KernelCap:
    return caps.get(vc) or caps.get("*") or KernelCap()


def capped_time_limit(asked: float | None, kind: str, gpus: float, vc: str,
                      caps: Mapping[str, KernelCap]) -> float | None:
    """The time limit a job asks for once its VC's kernel cap applies: a GPU kernel asking for none, or
    for more than ``max_time_limit_s``, asks for the cap; anything else keeps ``asked``."""
    cap = cap_of(vc, caps).max_time_limit_s
    if cap is None or kind != "kernel" or not gpus > 0:
        return asked
    return cap if asked is None or asked > cap else asked
