"""The few words the core and the service put in sentences people read (reasons, estimate bases), said
the way every other surface says them (hive_lab.format, labextension/src/format.ts: one voice)."""

from __future__ import annotations

from typing import Iterable


def limit_text(seconds: float) -> str:
    """A time limit as ``--time-limit`` takes it: ``7200`` -> ``2h``, ``5400`` -> ``1h30m``, ``90`` -> ``1m30s``,
    ``0.5`` -> ``0.5s``."""
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v) or "0s"


def gpu_list_text(node: str, gpus: Iterable[int]) -> str:
    """A node's GPUs: ``node-0 GPU 2`` / ``node-0 GPU 2,3`` / ``node-0 GPU 0-7`` / ``node-0 (no GPU)``."""
    ordered = sorted(set(gpus))
    if not ordered:
        return f"{node} (no GPU)"
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{node} GPU {ordered[0]}-{ordered[-1]}"
    return f"{node} GPU {','.join(map(str, ordered))}"
