"""Gandiva's grow-shrink, live: the rounds resize elastic jobs (``min_gpus..max_gpus``).

After a round of ``gandiva`` is carried out (``rounds.RoundDriver.run_round``), ``plan_resizes`` looks at
each VC once more:

- **shrink** when a job of the VC waits (the round left it paused or queued) and an elastic job that
  runs on a GPU type above its ``min_gpus`` holds the GPUs it needs: the elastic job gives back what the
  first waiting job (oldest first) lacks on that type, down to ``min_gpus`` at most;
- **grow** when no job of the VC waits and a type has idle GPUs (the VC's usable GPUs of that type less
  those the round's running jobs hold): an elastic job running there (oldest first) grows by up to the
  idle GPUs, up to ``max_gpus``.

Sizes are tried largest first; one the core can never place (a task larger than a node) is skipped
(the resize event refuses it before changing anything). Each resize is the ordinary ``resize``
lifecycle event (checkpoint signal, restart with ``HIVE_WORLD_SIZE``), with the reason
``round N of gandiva: grown 1 -> 2 GPUs: 1 idle GPU of K80 in VC lab``.

Against thrashing: a job resized in round N is left alone in round N+1 (its resize is itself an input
change, and the next round sees the VC as it settled); a job never grows while another job of its VC
waits, and shrinks only when that frees what a waiting job needs. Jobs the round moved (paused,
migrated, resumed: a lifecycle intent is set) or that do not run are not resized in that round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Resize:
    job_id: str
    gpus: int  # the sizes to try, largest first, are in ``sizes``
    sizes: tuple[int, ...]
    grow: bool
    why: str


def _gpus(n: int) -> str:
    return f"{n} idle GPU" + ("" if n == 1 else "s")


def plan_resizes(vc: str, jobs: list[Any], choice: dict[str, str | None], gpus_by_type: dict[str, int],
                 gpu_type_of: Callable[[Any], str | None], runs: Callable[[Any], bool],
                 cooling: Callable[[str], bool]) -> list[Resize]:
    """The resizes of one VC after a round. ``jobs``: the round's candidates (oldest first);
    ``choice``: job -> GPU type or None (waits); ``gpu_type_of(job)``: the type it runs on now;
    ``runs(job)``: it runs with no move pending; ``cooling(job_id)``: it was resized last round."""
    size = {j.id: j.spec.total_gpus for j in jobs}
    held = {t: 0 for t in gpus_by_type}
    for j in jobs:
        t = choice.get(j.id)
        if t is not None:
            held[t] = held.get(t, 0) + size[j.id]
    free = {t: gpus_by_type[t] - held.get(t, 0) for t in gpus_by_type}

    def elastic(j: Any) -> bool:
        return (j.spec.elastic and choice.get(j.id) is not None and runs(j) and gpu_type_of(j) == choice.get(j.id)
                and not cooling(j.id))

    waiting = [j for j in jobs if choice.get(j.id) is None]
    out: list[Resize] = []
    if waiting:
        w = waiting[0]
        need = size[w.id]
        for j in jobs:
            if not elastic(j):
                continue
            t, cur, lo = choice[j.id], size[j.id], j.spec.min_gpus
            lack = need - free.get(t, 0)
            if lack <= 0 or cur - lo < lack:
                continue
            sizes = tuple(range(cur - lack, lo - 1, -1))
            out.append(Resize(j.id, sizes[0], sizes, False,
                              f"shrunk {cur} -> {{gpus}} GPUs: {w.id} waits for {need} GPU{'s' if need != 1 else ''} of {t} in VC {vc}"))
            free[t] = free.get(t, 0) + lack
            break
        return out
    for j in jobs:
        if not elastic(j):
            continue
        t, cur, hi = choice[j.id], size[j.id], j.spec.max_gpus
        idle = free.get(t, 0)
        if idle <= 0 or cur >= hi:
            continue
        sizes = tuple(range(min(hi, cur + idle), cur, -1))
        out.append(Resize(j.id, sizes[0], sizes, True, f"grown {cur} -> {{gpus}} GPUs: {_gpus(idle)} of {t} in VC {vc}"))
        free[t] = idle - (sizes[0] - cur)
    return out
