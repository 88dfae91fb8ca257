"""Follow one job until it ends: status changes and log text as they happen.

Wakes on the job's events from the shared event stream, with a slow timed re-check as a fallback
(when the stream is down), so one watched job costs about one request per state change plus the
log reads while it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import HiveLabError, NotFound
from .format import FINISHED
from .live import LiveFeed


def _wake_on_events(client, concerns_it: Callable[[str | None, object], bool], use_events: bool):
    """An event set when the shared event stream says something that ``concerns_it(type, job)``, or says
    hello/snapshot (events may have been missed), and the unsubscribe (None without the stream: the
    waits' timed re-checks still work)."""
    wake = threading.Event()
    if not use_events:
        return wake, None

    def on_event(message: dict) -> None:
        kind = message.get("type")
        if kind in ("hello", "snapshot") or concerns_it(kind, message.get("job")):
            wake.set()

    try:
        return wake, LiveFeed.for_client(client).subscribe(on_event)
    except Exception:  # noqa: BLE001 - timed re-checks still work
        return wake, None


def watch_job(client, job_id: str, *, on_status: Callable[[dict], None] | None = None,
              on_log: Callable[[str], None] | None = None, stop: threading.Event | None = None,
              timeout: float | None = None, use_events: bool = True, tick_s: float = 5.0) -> dict:
    """Returns the finished job (or the last state seen when ``stop`` is set / ``timeout`` passes).

    ``on_status`` gets the job when its state, reason, placement or progress changed, and while it waits
    or runs at least every ``tick_s`` (a quiet job's "running for 2 min" ticks on)."""
    import time

    def concerns_it(kind, job) -> bool:
        # state: one of its state changes (live or replayed); job: the job itself
        return (kind == "state" and job == job_id) or (isinstance(job, dict) and job.get("id") == job_id)

    wake, unsubscribe = _wake_on_events(client, concerns_it, use_events)
    deadline = None if timeout is None else time.monotonic() + timeout
    offset, last_key, job, finished_reads, last_told = 0, None, {}, 0, float("-inf")
    try:
        while True:
            wake.clear()
            job = client.job(job_id)
            progress = job.get("progress") or {}
            key = (job.get("state"), job.get("reason"), str(job.get("placement")), progress.get("steps"),
                   progress.get("total_steps"))
            finished = job.get("state") in FINISHED
            if key != last_key or (not finished and time.monotonic() - last_told >= tick_s):
                last_key, last_told = key, time.monotonic()
                if on_status:
                    on_status(job)
            eof = True
            if on_log and (job.get("state") == "running" or finished):
                offset, eof = _read_logs(client, job_id, offset, on_log)
            if finished:
                finished_reads += 1
            if finished and (eof or finished_reads > 20):  # a log that never says eof: give up after ~2 s
                return job
            if stop is not None and stop.is_set():
                return job
            if deadline is not None and time.monotonic() >= deadline:
                return job
            running_logs = on_log is not None and job.get("state") == "running"
            pause = 0.5 if running_logs else (0.1 if finished else 3.0 if unsubscribe else 1.0)
            if deadline is not None:
                pause = max(0.0, min(pause, deadline - time.monotonic()))
            if stop is not None:
                # wake on either
                end = time.monotonic() + pause
                while not (wake.is_set() or stop.is_set()) and time.monotonic() < end:
                    wake.wait(min(0.2, max(0.0, end - time.monotonic())))
            else:
                wake.wait(pause)
    finally:
        if unsubscribe is not None:
            unsubscribe()


def _read_logs(client, job_id: str, offset: int, on_log: Callable[[str], None]) -> tuple[int, bool]:
    for _ in range(50):  # at most 50 pages per wake-up, then let the status catch up
        try:
            page = client.logs(job_id, offset=offset)
        except NotFound:
            return offset, True  # no log file (the task never started)
        except HiveLabError:
            return offset, True
        data = page.get("data") or ""
        if data:
            on_log(data)
        nxt = page.get("next_offset", offset + len(data.encode()))
        if nxt <= offset or not data:
            return offset, bool(page.get("eof", True))
        offset = nxt
        if page.get("eof"):
            return offset, True
    return offset, False


def wait_for_array(client, array_id: str, *, timeout: float | None = None, use_events: bool = True,
                   on_change: Callable[[dict], None] | None = None) -> dict:
    """Wait until every element of the array ended (its state is ``ended``); returns the array. Wakes on
    its elements' events (their ``array_id``), with a slow timed re-check as a fallback. ``on_change(array)``
    is called whenever its state or counts change before it has ended (the first reading included)."""
    import time

    def concerns_it(kind, job) -> bool:
        # "job" messages carry the job (with its array_id); "state" ones only its id: those of an element
        # come with a "job" message too, so only the array's own jobs wake the wait
        return isinstance(job, dict) and job.get("array_id") == array_id

    wake, unsubscribe = _wake_on_events(client, concerns_it, use_events)
    deadline = None if timeout is None else time.monotonic() + timeout
    last = None
    try:
        while True:
            wake.clear()
            array = client.array(array_id, limit=1)
            if array.get("state") == "ended":
                return array
            key = (array.get("state"), array.get("reason"), sorted((array.get("counts") or {}).items()))
            if on_change is not None and key != last:
                last = key
                on_change(array)
            if deadline is not None and time.monotonic() >= deadline:
                return array
            wake.wait(2.0 if unsubscribe else 0.5)
    finally:
        if unsubscribe is not None:
            unsubscribe()
