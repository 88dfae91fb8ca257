"""The live status line and log tail that ``%%submit`` shows under the cell.

Deliberately *not* an ipywidget: the view is an ordinary display bundle (``text/plain`` and
``text/html``) that is updated in place through its display id (``update_display_data``). What a
notebook saves is therefore readable after reopening, in nbconvert/papermill runs and without any
kernel: never "Error displaying widget: model not found", and no widget state is saved for it.
"""

from __future__ import annotations

import html
import threading
import time
import uuid
from datetime import datetime, timezone

from ..format import FINISHED, LogTail, status_line, when_text
from .lab_views import VIEW_MIME

STATE_COLORS = {"running": "#2ca02c", "succeeded": "#2ca02c", "failed": "#d62728", "cancelled": "#7f7f7f"}


def status_html(job: dict, now: datetime | None = None) -> str:
    state = job.get("state")
    color = STATE_COLORS.get(state, "#ff9f1c")
    # U+25F7 (a clock face) is in the fonts every browser has; an hourglass emoji renders as an empty box
    icon = "✔" if state == "succeeded" else "✖" if state in FINISHED else "▶" if state == "running" else "◷"
    bar = ""
    progress = job.get("progress") or {}
    steps, total = progress.get("steps"), progress.get("total_steps")
    if state == "running" and steps is not None and total:  # the line says "step 9 of 15"; the bar shows it
        bar = (f'<progress class="hive-progress" value="{min(int(steps), int(total))}" max="{int(total)}" '
               f'title="step {int(steps)} of {int(total)}" style="vertical-align:middle;margin-right:4px"></progress>')
    return (f'<span style="color:{color};font-weight:bold">{icon}</span> {bar}'
            f'<span style="font-family:monospace">{html.escape(status_line(job, now))}</span>')


def as_of_text(at: datetime) -> str:
    """``as of 2026-11-27 12:42 CET``: local with zone, every surface's form (hive_lab.format.when_text)."""
    return f"as of {when_text(at)}"


def log_continues_text(job_id: str) -> str:
    """The line under a log tail that the job goes on writing after (as the panel's cell view says it)."""
    return f"log continues: hive-lab logs {job_id}"


def job_bundle(job: dict, log_tail: str = "", as_of: datetime | None = None) -> dict:
    """The display bundle of a job: its status line (and the log tail, when given). A job that has not
    ended is stamped ``as of <time>``: a saved notebook reopened later (its kernel gone, nobody
    updating the display) says when it was true instead of "running" forever."""
    text = status_line(job, as_of)
    body = f'<div class="hive-status">{status_html(job, as_of)}</div>'
    if as_of is not None and job.get("state") not in FINISHED:
        text += f" ({as_of_text(as_of)})"
        body += f'<div class="hive-as-of" style="color:#7f7f7f;font-size:smaller">{html.escape(as_of_text(as_of))}</div>'
    if log_tail:
        text += "\n" + log_tail.rstrip("\n")
        body += (f'<pre class="hive-log" style="max-height:300px;overflow:auto;margin:2px 0;background:#f7f7f7;'
                 f'padding:4px">{html.escape(log_tail)}</pre>')
        if as_of is not None and job.get("state") not in FINISHED and job.get("id"):
            # a notebook saved now and reopened later holds only this much of a log that goes on
            more = log_continues_text(job["id"])
            text += "\n" + more
            body += (f'<div class="hive-log-continues" style="color:#7f7f7f;font-size:smaller">'
                     f'{html.escape(more)}</div>')
    bundle = {"text/plain": text, "text/html": body}
    if job.get("id"):
        # JupyterLab's extension draws this: the saved lines, with the status line refreshed from the
        # server when the notebook is opened again (a saved "running" is not taken for the truth)
        bundle[VIEW_MIME] = {"view": "job", "id": job["id"]}
    return bundle


class JobMonitor:
    """One job's live display. ``update(job)`` and ``append_log(text)`` may be called from any thread;
    the display is redrawn at most every ``min_interval`` s (``flush()`` forces the last state out)."""

    def __init__(self, tail_lines: int = 40, *, show_log: bool = True, min_interval: float = 0.5,
                 clock=time.monotonic, wall_clock=lambda: datetime.now(timezone.utc)):
        self.tail = LogTail(tail_lines)
        self.show_log = show_log
        self.min_interval = min_interval
        self.clock = clock
        self.wall_clock = wall_clock  # the "as of" stamp
        self.display_id = f"hive-lab-job-{uuid.uuid4().hex}"
        self.job: dict | None = None
        self.shown = False
        self.closed = False
        self._lock = threading.Lock()
        self._last_draw = float("-inf")
        self._dirty = False

    # -- state --------------------------------------------------------------------------------------
    def update(self, job: dict) -> None:
        with self._lock:
            keys = ("state", "reason", "estimated_start", "estimated_start_basis")
            changed = self.job is None or [self.job.get(k) for k in keys] != [job.get(k) for k in keys]
            self.job = job
        self._redraw(force=changed)

    def append_log(self, text: str) -> None:
        with self._lock:
            self.tail.add(text)
        self._redraw()

    @property
    def log_text(self) -> str:
        return self.tail.text

    def bundle(self) -> dict:
        with self._lock:
            return job_bundle(self.job or {}, self.tail.text if self.show_log else "", self.wall_clock())

    # -- display ------------------------------------------------------------------------------------
    def show(self) -> None:
        """Put the display under the current cell (again: every copy keeps updating)."""
        from IPython.display import display

        display(self.bundle(), raw=True, display_id=self.display_id)
        with self._lock:
            self.shown = True
            self._last_draw = self.clock()
            self._dirty = False

    def flush(self) -> None:
        with self._lock:
            dirty = self._dirty
        if dirty:
            self._redraw(force=True)

    def clear(self) -> None:
        """Empty the display and stop drawing (the cell's ordinary output says the rest)."""
        from IPython.display import update_display

        with self._lock:
            was_shown, self.closed = self.shown and not self.closed, True
        if was_shown:
            update_display({}, raw=True, display_id=self.display_id)

    def _redraw(self, force: bool = False) -> None:
        with self._lock:
            if not self.shown or self.closed:
                return
            now = self.clock()
            if not force and now - self._last_draw < self.min_interval:
                if not self._dirty:  # draw the last state once the interval is over
                    timer = threading.Timer(self.min_interval - (now - self._last_draw), self.flush)
                    timer.daemon = True
                    timer.start()
                self._dirty = True
                return
            self._last_draw, self._dirty = now, False
        from IPython.display import update_display

        update_display(self.bundle(), raw=True, display_id=self.display_id)

    def _repr_mimebundle_(self, **kwargs):
        return self.bundle()


def in_kernel(shell=None) -> bool:
    """True in a Jupyter kernel (rich displays render); False in terminal IPython or plain Python."""
    try:
        from IPython import get_ipython
        from ipykernel.zmqshell import ZMQInteractiveShell
    except ImportError:
        return False
    return isinstance(shell if shell is not None else get_ipython(), ZMQInteractiveShell)


def follow_in_background(job, monitor: JobMonitor) -> threading.Thread:
    """Keep ``monitor`` (and ``job.info``) current in a daemon thread until the job has finished."""
    from ..watch import watch_job

    def on_status(info: dict) -> None:
        job.info = info
        monitor.update(info)

    def run() -> None:
        try:
            final = watch_job(job.client, job.id, on_status=on_status,
                              on_log=monitor.append_log if monitor.show_log else None)
        except Exception as exc:  # noqa: BLE001 - a background thread: say it in the display
            monitor.update(dict(job.info, reason=f"hive-lab stopped following this job: {exc}"))
            return
        on_status(final)
        monitor.flush()

    thread = threading.Thread(target=run, daemon=True, name=f"hive-lab-watch-{job.id}")
    thread.start()
    return thread


def display_job(job) -> None:
    """How a ``Job`` shows itself as a cell's result: in a kernel, a live display while the job has
    not finished (a watcher thread updates it in place, see ``JobMonitor``), a static one after;
    elsewhere its one-line repr."""
    if not in_kernel():
        print(repr(job))
        return
    monitor = getattr(job, "monitor", None)
    if monitor is None:
        if job.done:
            from IPython.display import display

            display(job_bundle(job.info), raw=True)
            return
        monitor = job.monitor = JobMonitor()
        monitor.update(job.info)
        job.watcher = follow_in_background(job, monitor)
    monitor.show()
