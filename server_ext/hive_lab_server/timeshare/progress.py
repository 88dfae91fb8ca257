"""Job progress and throughputs: what ``hive_lab.progress(steps)`` lines in a job's log say.

A job prints ``hive-progress: steps=N [total=M] [t=UNIX] [attempt=A] [gpu_type=T]``
(``hive_lab.progress`` writes it to the task's progress channel, ``$HIVE_PROGRESS_FILE``; any program may
print it into its output instead; ``total``: the steps the whole job will take, when it knows). The
tracker reads the first task's channel and log incrementally (the log is the record, so the estimate is
derived from it and rebuilt after a restart) and learns, online, the job's rate in steps/s on each
GPU type: the steps between consecutive readings of one attempt on one type over the time between
them (readings across a pause, a migration or a restart are not compared). Rates are also pooled
per ``job_type`` and GPU type (``learned``), and a declared ``job_type`` gets the known figures of
Gavel's throughput file (``known``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

PREFIX = b"hive-progress:"
_FIELD = re.compile(r"(steps|total|t|attempt|gpu_type)=(\S+)")
MAX_LINE = 4096


@dataclass(frozen=True)
class Reading:
    steps: int
    t: float | None = None
    attempt: int | None = None
    gpu_type: str | None = None
    total: int | None = None


def parse_line(line: str) -> Reading | None:
    """A progress line's reading, or None when the line is not one (or is malformed)."""
    if not line.startswith("hive-progress:"):
        return None
    fields = dict(_FIELD.findall(line[len("hive-progress:"):]))
    try:
        steps = int(fields["steps"])
        t = float(fields["t"]) if "t" in fields else None
        attempt = int(fields["attempt"]) if "attempt" in fields else None
        total = int(fields["total"]) if "total" in fields else None
    except (KeyError, ValueError):
        return None
    if steps < 0 or (total is not None and total < 0):
        return None
    return Reading(steps, t, attempt, fields.get("gpu_type"), total)


@dataclass
class Rate:
    """Steps done and seconds spent (between readings) on one GPU type: rate = steps / seconds."""

    steps: float = 0.0
    seconds: float = 0.0

    def add(self, steps: float, seconds: float) -> None:
        self.steps += steps
        self.seconds += seconds

    @property
    def per_s(self) -> float | None:
        return self.steps / self.seconds if self.seconds > 0 else None


@dataclass
class JobProgress:
    steps: int | None = None
    at: float | None = None
    gpu_type: str | None = None
    last: Reading | None = None
    total: int | None = None
    rates: dict[str, Rate] = field(default_factory=dict)

    def add(self, r: Reading, now: float) -> tuple[str, float, float] | None:
        """Take a reading (``now``: the time it was read, when the line has no ``t``); returns the
        (GPU type, steps, seconds) it adds to a rate, if any."""
        r = Reading(r.steps, r.t if r.t is not None else now, r.attempt, r.gpu_type, r.total)
        prev, self.last = self.last, r
        if r.total is not None:
            self.total = r.total
        self.steps, self.at, self.gpu_type = r.steps, r.t, r.gpu_type or self.gpu_type
        if (prev is None or r.gpu_type is None or prev.attempt != r.attempt or prev.gpu_type != r.gpu_type
                or r.t <= prev.t or r.steps < prev.steps):
            return None
        sample = (r.gpu_type, float(r.steps - prev.steps), r.t - prev.t)
        self.rates.setdefault(r.gpu_type, Rate()).add(sample[1], sample[2])
        return sample

    @property
    def remaining_steps(self) -> int | None:
        """Steps left (the last ``total`` said minus the steps so far), None when no total was said."""
        if self.total is None or self.steps is None:
            return None
        return max(0, self.total - self.steps)

    def rate_now(self) -> float | None:
        """Steps/s on the GPU type of the last reading (else the mean over all types), None if unmeasured."""
        r = self.rates.get(self.gpu_type or "")
        if r is not None and r.per_s:
            return r.per_s
        steps, seconds = sum(r.steps for r in self.rates.values()), sum(r.seconds for r in self.rates.values())
        return steps / seconds if seconds > 0 and steps > 0 else None


@dataclass
class _Log:
    offset: int = 0
    partial: bytes = b""


KEEP_ENDED = 1000  # ended jobs whose last progress stays in memory (the latest; older ones are read again)


class ProgressTracker:
    """Progress of every job whose log it was asked to read (``read``), and rates pooled by job type.

    What it keeps per job (its progress, where it stopped reading each source) goes when the job ends
    (``ended``): the progress of the last ``KEEP_ENDED`` ended jobs stays viewable, nothing else, so a
    long-running server keeps memory for the jobs that run, not for every job it ever ran (issue 24)."""

    def __init__(self, throughputs: Any = None):
        self.throughputs = throughputs  # hive_scheduler.hetero.Throughputs, or None
        self.jobs: dict[str, JobProgress] = {}
        self.logs: dict[tuple[str, str], _Log] = {}
        self.learned: dict[tuple[str, str], Rate] = {}
        self.ended_jobs: dict[str, JobProgress] = {}  # the latest KEEP_ENDED, oldest first
        # ended jobs whose sources are still to be read once to their end (what the job wrote after the
        # last periodic read: its final steps), oldest first; the service reads them (``finish``)
        self.ending: dict[str, None] = {}

    def ended(self, job_id: str) -> None:
        """``job_id`` reached a final state: its sources are read once more, to their end, then
        ``finish``ed (the service does it off the commit path); at most ``KEEP_ENDED`` wait for that."""
        if job_id not in self.jobs and not any(k[0] == job_id for k in self.logs):
            return  # never read: an ended job's log is read whole when asked
        self.ending.pop(job_id, None)
        self.ending[job_id] = None
        while len(self.ending) > KEEP_ENDED:
            self.finish(next(iter(self.ending)))

    def finish(self, job_id: str) -> None:
        """An ended job's sources were read to their end: they are not read again; its progress is kept
        among the latest ended jobs' (for its job object), the oldest of those forgotten."""
        self.ending.pop(job_id, None)
        for key in [k for k in self.logs if k[0] == job_id]:  # (only running jobs' sources are there)
            del self.logs[key]
        p = self.jobs.pop(job_id, None)
        if p is None:
            return
        self.ended_jobs.pop(job_id, None)
        self.ended_jobs[job_id] = p
        while len(self.ended_jobs) > KEEP_ENDED:
            del self.ended_jobs[next(iter(self.ended_jobs))]

    def read(self, job_id: str, job_type: str | None, read_chunk: Callable[[int], tuple[bytes, int]],
             now: float, source: str = "log") -> JobProgress | None:
        """Read what one of the job's sources (``source``: its log, its progress channel) gained since
        last time. ``read_chunk(offset) -> (data, next_offset)`` (empty at the end)."""
        log = self.logs.setdefault((job_id, source), _Log())
        while True:
            data, nxt = read_chunk(log.offset)
            if not data and nxt < log.offset:  # the log was rewritten (shorter now): read it again
                log.offset, log.partial = 0, b""
                continue
            if not data:
                break
            log.offset = nxt
            lines = (log.partial + data).split(b"\n")
            log.partial = lines.pop()[-MAX_LINE:]
            for raw in lines:
                if PREFIX in raw:
                    self._line(job_id, job_type, raw[raw.index(PREFIX):][:MAX_LINE], now)
        return self.jobs.get(job_id)

    def _line(self, job_id: str, job_type: str | None, raw: bytes, now: float) -> None:
        reading = parse_line(raw.decode("utf-8", "replace").strip())
        if reading is None:
            return
        sample = self.jobs.setdefault(job_id, JobProgress()).add(reading, now)
        if sample is not None and job_type:
            self.learned.setdefault((job_type, sample[0].lower()), Rate()).add(sample[1], sample[2])

    def known(self, job_type: str | None, gpus: int) -> dict[str, float] | None:
        """Gavel's figures for ``job_type`` on ``gpus`` GPUs: {gpu type: steps/s}, None if unknown."""
        if not job_type or self.throughputs is None:
            return None
        out = {gpu: table[(job_type, gpus)] for gpu, table in self.throughputs.isolated.items()
               if (job_type, gpus) in table and not gpu.endswith("_unconsolidated")}
        return out or None

    def knows_type(self, job_type: str) -> bool:
        return self.throughputs is not None and any(k[0] == job_type for k in self.throughputs.job_types())

    def view(self, job_id: str, job_type: str | None, gpus: int) -> dict[str, Any] | None:
        """The job object's ``progress``: steps so far, the GPU type of the last reading, the learned
        rates per GPU type, and the known ones (declared ``job_type``)."""
        p = self.jobs.get(job_id) or self.ended_jobs.get(job_id)
        known = self.known(job_type, gpus)
        if p is None and known is None:
            return None
        rates = {t: {"steps_per_s": r.per_s, "seconds": r.seconds} for t, r in sorted((p.rates if p else {}).items())}
        remaining = p.remaining_steps if p else None
        rate = p.rate_now() if p else None
        finish = p.at + remaining / rate if remaining is not None and rate and p.at is not None else None
        return {"steps": p.steps if p else None, "at": p.at if p else None, "gpu_type": p.gpu_type if p else None,
                "rates": rates, "known_rates": known, "total_steps": p.total if p else None,
                "remaining_steps": remaining, "estimated_finish": finish}

    def forget(self, job_id: str) -> None:
        self.ending.pop(job_id, None)
        self.jobs.pop(job_id, None)
        for key in [k for k in self.logs if k[0] == job_id]:
            del self.logs[key]
