"""When a VC's Gavel allocation must be solved again, and when the last one still holds.

Gavel solves its policy when jobs arrive or end, not every round: between those, each round only
picks the jobs to run from the same allocation and the time each job has received. The round driver
(``rounds.RoundDriver``) keeps, per VC, the inputs of its last solve and the allocation it gave, and
solves again only when one of those inputs changed:

- the jobs: one arrived or ended (by id), or one's GPU count changed (a resize);
- the VC's GPUs: its usable GPUs per type (its guarantee less GPUs that are bad or drained, or a new
  cluster config);
- the throughputs: an entry of the job x GPU type matrix moved by more than ``rtol`` (relative) from
  the value used at the last solve (a rate measured with ``hive_lab.progress`` where there was none,
  or one that drifted); small noise in a learned rate does not.

Inputs that move every round but are not a reason to solve again: each job's time since its submit
(only ``finish_time_fairness*`` read it, as an estimate) and the jobs' states (running, paused).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_RTOL = 0.1


@dataclass(frozen=True)
class Inputs:
    """What a VC's allocation was solved for."""

    jobs: tuple[tuple[str, int], ...]  # (job id, GPUs), in the order of the matrix's rows
    gpus: tuple[tuple[str, int], ...]  # (GPU type, usable GPUs), in the order of its columns
    throughput: np.ndarray              # jobs x GPU types, steps/s


@dataclass(frozen=True)
class Solved:
    inputs: Inputs
    allocation: np.ndarray


def what_changed(old: Inputs | None, new: Inputs, rtol: float = DEFAULT_RTOL) -> str | None:
    """Why ``new`` needs a solve of its own (a sentence for the log), or None: ``old``'s allocation holds."""
    if old is None:
        return "first solve"
    before, now = dict(old.jobs), dict(new.jobs)
    arrived = [j for j in now if j not in before]
    ended = [j for j in before if j not in now]
    resized = [f"{j} {before[j]} -> {now[j]} GPUs" for j in now if j in before and before[j] != now[j]]
    parts = []
    if arrived:
        parts.append("arrived: " + ", ".join(arrived))
    if ended:
        parts.append("ended: " + ", ".join(ended))
    if resized:
        parts.append("resized: " + ", ".join(resized))
    if parts:
        return "jobs " + "; ".join(parts)
    if old.gpus != new.gpus:
        return "GPUs changed: " + _gpus_text(old.gpus) + " -> " + _gpus_text(new.gpus)
    if [j for j, _ in old.jobs] != [j for j, _ in new.jobs]:
        return "jobs reordered"
    moved = np.abs(new.throughput - old.throughput) > rtol * np.abs(old.throughput)
    if moved.any():
        i, k = (int(v) for v in np.argwhere(moved)[0])
        return (f"throughput of {new.jobs[i][0]} on {new.gpus[k][0]}: {old.throughput[i, k]:.4g} -> "
                f"{new.throughput[i, k]:.4g} steps/s (more than {rtol:.0%})")
    return None


def _gpus_text(gpus: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{n} {t}" for t, n in gpus) or "none"
