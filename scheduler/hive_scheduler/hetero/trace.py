"""Gavel's job trace: one job a line, tab-separated.

Fields: job type, command, working directory, steps argument, needs-data flag, total steps,
scale factor (GPUs), priority weight, SLO, arrival time (s). Gavel's older traces have no working
directory (9 fields); both are read. Job ids are the line order (0, 1, ...), as in Gavel.
"""

from __future__ import annotations

from dataclasses import dataclass


class TraceError(ValueError):
    """A trace line that cannot be read; the message names the file, line and field."""


@dataclass(frozen=True)
class TraceJob:
    job_id: int
    job_type: str
    total_steps: int
    scale_factor: int
    arrival_time: float
    priority_weight: float = 1.0
    slo: float = -1.0
    command: str = ""
    working_directory: str = ""
    num_steps_arg: str = ""
    needs_data_dir: bool = False
    vc: str = "default"  # not in Gavel's format; set by callers that split a trace over VCs


def _number(text: str, kind, name: str, where: str):
    try:
        return kind(text)
    except ValueError:
        raise TraceError(f"{where}: {name} {text!r} is not {'an integer' if kind is int else 'a number'}") from None


def parse_trace_lines(lines, source: str = "trace") -> list[TraceJob]:
    jobs: list[TraceJob] = []
    last_arrival = float("-inf")
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        fields = line.split("\t")
        if len(fields) == 10:
            job_type, command, workdir, steps_arg, needs_data, total, sf, prio, slo, arrival = fields
        elif len(fields) == 9:
            job_type, command, steps_arg, needs_data, total, sf, prio, slo, arrival = fields
            workdir = ""
        else:
            raise TraceError(f"{where}: expected 10 tab-separated fields (job type, command, working dir, "
                             f"steps argument, needs data, total steps, scale factor, priority weight, SLO, "
                             f"arrival time), got {len(fields)}")
        total_steps = _number(total, int, "total steps", where)
        scale_factor = _number(sf, int, "scale factor", where)
        priority = _number(prio, float, "priority weight", where)
        arrival_time = _number(arrival, float, "arrival time", where)
        if total_steps < 1:
            raise TraceError(f"{where}: total steps must be >= 1, got {total_steps}")
        if scale_factor < 1:
            raise TraceError(f"{where}: scale factor must be >= 1, got {scale_factor}")
        if not priority > 0:
            raise TraceError(f"{where}: priority weight must be > 0, got {priority}")
        if arrival_time < 0:
            raise TraceError(f"{where}: arrival time must be >= 0, got {arrival_time}")
        if arrival_time < last_arrival:
            raise TraceError(f"{where}: arrival times must not decrease ({arrival_time} after {last_arrival})")
        last_arrival = arrival_time
        jobs.append(TraceJob(
            job_id=len(jobs), job_type=job_type.strip(), total_steps=total_steps, scale_factor=scale_factor,
            arrival_time=arrival_time, priority_weight=priority, slo=_number(slo, float, "SLO", where),
            command=command, working_directory=workdir, num_steps_arg=steps_arg,
            needs_data_dir=needs_data.strip() not in ("0", "", "False", "false"),
        ))
    if not jobs:
        raise TraceError(f"{source}: no jobs")
    return jobs


def load_trace(path: str) -> list[TraceJob]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_trace_lines(f, path)
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None
