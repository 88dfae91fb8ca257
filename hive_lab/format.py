"""Pure helpers turning the REST JSON into short human text (used by magics, CLI and widgets).

One voice (issue 8): every surface (the panel through labextension/src/format.ts, the CLI, the cell
lines, the widgets and the server's own sentences) says these things one way, chosen here:

- dates and times: local time with its zone, ``2026-11-27 12:42 CET`` (:func:`when_text`); the zone is the
  short English name where there is a common one (UTC, GMT, BST, CET, CEST, EST, PDT, ...), else the offset
  (``UTC+5:30``); ``--json`` keeps the server's ISO 8601.
- GPUs lent to other VCs' opportunistic work: ``opportunistic`` (the word the docs use), never "borrowed".
- GPU lists: ``node-0 GPU 2`` / ``node-0 GPU 2,3`` / ``node-0 GPU 0-7; node-1 GPU 0-7`` (:func:`placement_text`,
  :func:`gpu_name`), never ``GPUs [0, 1]`` or ``node-0 #0``.
- time limits: ``2h``, ``1h30m``, ``90s`` (:func:`limit_text`): the form ``--time-limit`` takes, so what is
  read can be typed back; durations that are measured (waited, ran, left) read ``2 h 03 min`` (:func:`duration`).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone, tzinfo

FINISHED = ("succeeded", "failed", "cancelled")
WAITING = ("submitted", "queued", "scheduled")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


LENT_GPUS = "opportunistic"  # the one word for idle GPUs lent to other VCs' opportunistic work

# the zone names browsers (ICU, en) and the tz database agree on; any other zone is shown as its offset
ZONE_NAMES = frozenset(("UTC", "GMT", "BST", "WET", "WEST", "CET", "CEST", "EET", "EEST", "EST",
                        "EDT", "CST", "CDT", "MST", "MDT", "PST", "PDT", "AKST", "AKDT", "HST"))


def zone_text(at: datetime) -> str:
    """``CET`` / ``UTC`` / ``UTC+5:30`` for an aware datetime (see :data:`ZONE_NAMES`)."""
    name = at.tzname() or ""
    offset = at.utcoffset()
    minutes = 0 if offset is None else int(offset.total_seconds() // 60)
    if name in ZONE_NAMES:
        return name
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours}" + (f":{mins:02d}" if mins else "")


def when_text(value: str | datetime | float | None, tz: tzinfo | None = None) -> str:
    """A moment as every surface says it: ``2026-11-27 12:42 CET`` in the local zone (``tz`` for tests and
    servers that know better); ``-`` when unknown. Accepts ISO text, an aware datetime or a UNIX time."""
    if value is None or value == "":
        return "-"
    if isinstance(value, (int, float)):
        at = datetime.fromtimestamp(value, timezone.utc)
    elif isinstance(value, datetime):
        at = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    else:
        parsed = parse_time(value)
        if parsed is None:
            return str(value)
        at = parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    local = at.astimezone(tz) if tz is not None else at.astimezone()
    return f"{local:%Y-%m-%d %H:%M} {zone_text(local)}"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def seconds_between(start: str | None, end: str | None = None, now: datetime | None = None) -> float | None:
    a = parse_time(start)
    if a is None:
        return None
    b = parse_time(end) or now or utcnow()
    return max(0.0, (b - a).total_seconds())


def duration(seconds: float | None) -> str:
    """``3.2 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 4 h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:  # halves round up, as the extension's (format.ts) do: one voice, to the tenth
        return f"{math.floor(seconds * 10 + 0.5) / 10:.1f} s" if seconds < 10 else f"{math.floor(seconds + 0.5)} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def age_text(seconds: float | None) -> str:
    """An age in whole seconds: ``42 s``, ``4 min 05 s`` (a tenth of a second of age is noise)."""
    if seconds is None:
        return "-"
    return f"{math.floor(seconds + 0.5)} s" if seconds < 60 else duration(seconds)


def three_digits(x: float) -> str:
    """``1230``, ``4``, ``0.25``: three significant digits, as the panel prints them."""
    return f"{float(f'{x:.3g}'):g}"


def schedule_line(schedule: dict) -> str:
    """``schedule nightly: every day at 00:00 Europe/Berlin (next: 2026-11-28 00:00 CET); replaced the
    previous one``: one line, times in the schedule's own zone (a server without ``when`` gives the cron)."""
    when = schedule.get("when") or schedule["cron"]
    if schedule.get("paused"):
        nxt = "paused"
    else:
        nxt = "next: " + schedule_when_text(schedule.get("next_run_local") or schedule.get("next_run_at"),
                                            schedule["timezone"])
    tail = "; replaced the previous one" if schedule.get("replaced") else ""
    return f"schedule {schedule['name']}: {when} {schedule['timezone']} ({nxt}){tail}"


def schedule_when_text(iso_time: str | None, zone: str) -> str:
    """A schedule's time as every surface says times (:func:`when_text`), in the schedule's own zone:
    ``2026-11-28 00:00 CET`` for a Europe/Berlin schedule, wherever it is read."""
    import zoneinfo

    if not iso_time:
        return "-"
    try:
        return when_text(iso_time, zoneinfo.ZoneInfo(zone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return when_text(iso_time)


def gpus_text(gpus: float | int | None, gpu_type: str | None = None) -> str:
    """``1 GPU``, ``2 A100 GPUs``, ``0.5 GPU`` (a share of one GPU), ``0 GPUs``: as the panel says it,
    never ``1.0``."""
    n = float(gpus or 0)
    shown = f"{int(n)}" if n.is_integer() else f"{n:g}"
    kind = f" {gpu_type}" if gpu_type else ""
    return f"{shown}{kind} GPU" if n == 1 or 0 < n < 1 else f"{shown}{kind} GPUs"


def gpu_name(node, index) -> str:
    """One GPU: ``node-0 GPU 3`` (the heatmap's and the idle-GPU lists' name, :func:`placement_text`'s form)."""
    return f"{node} GPU {index}"


def gpu_list_text(node, gpus) -> str:
    """A node's GPUs: ``node-0 GPU 2`` / ``node-0 GPU 2,3`` / ``node-0 GPU 0-7`` / ``node-0 (no GPU)``: the
    core's words (the server's reasons say it the same way)."""
    from hive_scheduler.words import gpu_list_text as words

    return words(node, gpus)


def placement_text(placement: list[dict] | None) -> str:
    """``node-0 GPU 2,3`` / ``node-0 GPU 0-7; node-1 GPU 0-7`` / ``node-0 (no GPU)``."""
    if not placement:
        return ""
    by_node: dict[str, list[int]] = {}
    for task in placement:
        by_node.setdefault(task.get("node", "?"), []).extend(task.get("gpus") or [])
    return "; ".join(gpu_list_text(node, gpus) for node, gpus in by_node.items())


def estimate_text(job: dict, now: datetime | None = None, basis: bool = True) -> str:
    """A queued job's estimated start: ``starts in ~2 h 03 min (when j-000004 ends (its time limit of 2 h))``,
    ``start unknown (running jobs have no time limit)``; ``""`` when the server gave no estimate."""
    if job.get("state") not in WAITING or "estimated_start_basis" not in job or job.get("estimated_start_basis") is None:
        return ""
    why = job.get("estimated_start_basis") or ""
    at = parse_time(job.get("estimated_start"))
    if at is None:
        text = "start unknown"
    else:
        left = (at - (now or utcnow())).total_seconds()
        text = f"starts in ~{duration(left)}" if left > 1 else "starts any moment"
    return text + (f" ({why})" if basis and why else "")


def short_estimate(job: dict, now: datetime | None = None) -> str:
    """The estimate for a table cell: ``in ~2 h 03 min``, ``unknown``, ``""`` (not queued / no estimate)."""
    text = estimate_text(job, now, basis=False)
    return text.replace("starts in ", "in ").replace("start unknown", "unknown").replace("starts any moment", "now")


def status_line(job: dict, now: datetime | None = None) -> str:
    """One line saying where a job stands, e.g. ``j-000017 train: running on node-0 GPU 2 for 4.1 s``."""
    state = job.get("state", "?")
    head = f"{job.get('id', '?')} {job.get('name') or ''}".rstrip() + ": "
    if state in WAITING:
        waited = duration(seconds_between(job.get("submitted_at"), None, now))
        reason = job.get("reason")
        text = f"{state} for {waited}" + (f" — {reason}" if reason else "")
        est = estimate_text(job, now)
        if est:
            text += f"; {est}"
    elif state == "running":
        where = placement_text(job.get("placement"))
        ran = duration(seconds_between(job.get("started_at"), None, now))
        text = "running" + (f" on {where}" if where else "") + f" for {ran}"
        if job.get("opportunistic"):
            text += " (opportunistic)"
        if job.get("time_left_s") is not None:
            text += f"; {time_limit_text(job)}"
        moving = progress_short(job, now)
        if moving:
            text += f"; {moving}"
    elif state in FINISHED:
        ran = seconds_between(job.get("started_at"), job.get("finished_at"), now)
        text = state
        if job.get("exit_code") is not None:
            text += f" (exit code {job['exit_code']})"
        if ran is not None:
            text += f" after {duration(ran)}"
        if state != "succeeded" and job.get("reason"):
            text += f" — {job['reason']}"
    else:
        text = state + (f" — {job['reason']}" if job.get("reason") else "")
    return head + text


def limit_text(seconds: float | None) -> str:
    """``7200`` -> ``2h``, ``5400`` -> ``1h30m``, ``90`` -> ``1m30s`` (as the server names limits)."""
    if seconds is None:
        return "-"
    from hive_scheduler.words import limit_text as words  # the core's words: the server's reasons say it so

    return words(seconds)


def time_limit_text(job: dict) -> str:
    """``2h`` / ``1 h 12 min left of 2h`` (running) / ``-`` (no limit)."""
    limit = job.get("time_limit_s")
    if limit is None:
        return "-"
    left = job.get("time_left_s")
    if job.get("state") == "running" and left is not None:
        return f"{duration(left)} left of {limit_text(limit)}"
    return limit_text(limit)


def what_if_text(answer: dict) -> str:
    """One line for a dry-run answer (``POST jobs?dry_run=true``)."""
    gpus = answer.get("gpus", 0)
    head = f"what if ({gpus} GPU{'s' if gpus != 1 else ''}, VC {answer.get('vc', '?')}): "
    outcome = answer.get("outcome")
    where = placement_text(answer.get("placement"))
    if outcome == "start":
        text = f"would start now on {where}" if where else "would start now"
    elif outcome == "preempt" and where:
        text = f"would preempt {', '.join(answer.get('preempts') or [])} and run on {where}"
    elif outcome == "preempt":
        text = answer.get("reason") or f"would preempt {', '.join(answer.get('preempts') or [])}"
    else:
        text = "would wait" + (f" — {answer['reason']}" if answer.get("reason") else "")
        if answer.get("estimated_start"):
            text += f"; estimated start {when_text(answer['estimated_start'])}"
    if answer.get("time_limit_s") is not None:
        text += f" (time limit {limit_text(answer['time_limit_s'])})"
    return head + text + "; nothing was submitted"


def priority_text(job: dict) -> str:
    if job.get("opportunistic") or job.get("priority") == -1:
        return "opportunistic"
    return str(job.get("priority", 0))


class LogTail:
    """The last ``lines`` lines of a log fed in chunks (and how many lines there were in all)."""

    def __init__(self, lines: int = 40):
        self.lines = lines
        self._text = ""
        self.total_lines = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self.total_lines += text.count("\n")
        kept = (self._text + text).split("\n")
        self._text = "\n".join(kept[-(self.lines + 1):])

    @property
    def text(self) -> str:
        return self._text

    @property
    def dropped(self) -> int:
        """Lines written but not kept."""
        if not self._text:
            return 0
        total = self.total_lines + (0 if self._text.endswith("\n") else 1)
        return max(0, total - len(self._text.splitlines()))


def progress_short(job: dict, now: datetime | None = None) -> str | None:
    """A running job's progress in a few words, as the cell's line and the panel say it:
    ``step 40 of 100, 4 steps/s, about 15 s left``. None when it reported nothing."""
    p = job.get("progress") or {}
    if p.get("steps") is None:
        return None
    text = f"step {p['steps']}" + (f" of {p['total_steps']}" if p.get("total_steps") is not None else "")
    rate = ((p.get("rates") or {}).get(p.get("gpu_type") or "") or {}).get("steps_per_s") or next(
        (r.get("steps_per_s") for _, r in sorted((p.get("rates") or {}).items()) if r.get("steps_per_s")), None)
    if rate:
        text += f", {three_digits(rate)} steps/s"
    finish = p.get("estimated_finish")
    if finish is not None:
        current = (now or datetime.now(timezone.utc)).timestamp()
        text += f", about {duration(max(0.0, finish - current))} left"
    return text


def progress_text(job: dict) -> str | None:
    """The job's progress and measured throughputs (``GET jobs/{id}``'s ``progress``), e.g.
    ``1200 steps (last on V100); measured: K80 10 steps/s (over 3 s), V100 40 steps/s (over 1 s);
    Gavel's figures: k80 1.26, v100 7.92 steps/s``. None when the job reported nothing."""
    p = job.get("progress")
    if not p:
        return None
    parts = []
    if p.get("steps") is not None:
        parts.append(f"{p['steps']} steps" + (f" of {p['total_steps']}" if p.get("total_steps") is not None else "")
                     + (f" (last on {p['gpu_type']})" if p.get("gpu_type") else ""))
    if p.get("remaining_steps") is not None:
        parts.append(f"{p['remaining_steps']} to go" + (f", estimated finish {when_text(p['estimated_finish'])}"
                                                      if p.get("estimated_finish") is not None else ""))
    rates = [f"{t} {r['steps_per_s']:.3g} steps/s (over {duration(r.get('seconds'))})"
             for t, r in sorted((p.get("rates") or {}).items()) if r.get("steps_per_s") is not None]
    if rates:
        parts.append("measured: " + ", ".join(rates))
    elif p.get("steps") is not None:
        parts.append("no rate measured yet")
    known = p.get("known_rates") or {}
    if known:
        parts.append("Gavel's figures: " + ", ".join(f"{t} {v:.3g}" for t, v in sorted(known.items())) + " steps/s")
    return "; ".join(parts) or None


def environment_text(job: dict) -> str:
    """Where a job runs: "runs with /home/ann/.venv/bin/python (the submitter's environment, 12 variables)",
    "in image pytorch:2", or "" when the spec is not visible (another user's job)."""
    spec = job.get("spec") or {}
    if spec.get("image"):
        return f"in image {spec['image']}"
    env = spec.get("environment") or {}
    if not env:
        return ""
    n = len(env.get("vars") or {})
    who = f"runs with {env['python']}" if env.get("python") else "runs"
    return f"{who} (the submitter's environment, {n} variable{'s' if n != 1 else ''})"


ARRAY_COUNT_ORDER = ("running", "scheduled", "queued", "submitted", "pending", "paused", "succeeded", "failed",
                     "cancelled")


def array_counts_text(counts: dict) -> str:
    """``{"running": 3, "pending": 7}`` -> "3 running, 7 pending" (only the states with elements)."""
    return ", ".join(f"{counts[s]} {s}" for s in ARRAY_COUNT_ORDER if counts.get(s))


def array_line(array: dict) -> str:
    """One line per array: id, name, state, size, throttle and counts by state."""
    throttle = f", at most {array['throttle']} at once" if array.get("throttle") else ""
    held = " (paused)" if array.get("held") else ""
    reason = f"; {array['reason']}" if array.get("reason") else ""
    return (f"{array['id']} {array['name']} [{array['count']} elements{throttle}]: {array['state']}{held}: "
            f"{array_counts_text(array.get('counts') or {})}{reason}")
