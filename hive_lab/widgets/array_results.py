"""An array cell's live display: the array's line (counts by state), its results table and charts.

Like a job cell (``job_monitor``), not an ipywidget: an ordinary display bundle updated in place through
its display id while the kernel lives, so the saved notebook holds the last state (no "Error displaying
widget: model not found" after a restart). The bundle has ``text/plain`` and ``text/html`` (the line and
the table, for any frontend) and ``VIEW_MIME`` ``{"view": "array", "id": ..., "chart": "<Bokeh JSON as a string>"}``,
which hive-lab's JupyterLab extension draws: the saved table, the Bokeh charts, and the line refreshed
from the server when the notebook is opened again.
"""

from __future__ import annotations

import html
import json
import threading
import uuid
from datetime import datetime, timezone

from ..array_results import METRICS_FILE, ResultReader, ResultTable, display_header, display_value, results_text
from ..format import array_line
from .job_monitor import as_of_text
from .lab_views import VIEW_MIME

ARRAY_COLORS = {"ended": "#2ca02c", "running": "#2ca02c", "held": "#7f7f7f"}


def results_html(table: ResultTable) -> str:
    """The table, rounded for reading (``display_value``); metric columns are marked for styling."""
    if not table.rows:
        return ""
    cols = table.columns
    head = "".join(f'<th class="{"hive-metric" if c in table.metrics else ""}">{html.escape(display_header(c))}</th>'
                   for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(display_value(c, r.get(c)))}</td>" for c in cols) + "</tr>"
                   for r in table.rows)
    return (f"<table class='hive-array-results' style='font-family:monospace'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def array_bundle(array: dict, table: ResultTable | None, chart: dict | None = None,
                 as_of: datetime | None = None) -> dict:
    """The display bundle of an array and its results. An array that has not ended is stamped
    ``as of <time>`` (a saved notebook reopened later says when it was true)."""
    line = array_line(array)
    ended = array.get("state") == "ended"
    color = ARRAY_COLORS.get(array.get("state"), "#ff9f1c")
    icon = "✔" if ended else "▶" if array.get("state") == "running" else "◷"
    text = line
    body = (f'<div class="hive-array-status"><span style="color:{color};font-weight:bold">{icon}</span> '
            f'<span style="font-family:monospace">{html.escape(line)}</span></div>')
    if as_of is not None and not ended:
        text += f" ({as_of_text(as_of)})"
        body += (f'<div class="hive-as-of" style="color:#7f7f7f;font-size:smaller">'
                 f'{html.escape(as_of_text(as_of))}</div>')
    if table is not None and table.rows:
        text += "\n" + results_text(table)
        body += results_html(table)
    bundle = {"text/plain": text, "text/html": body}
    if array.get("id"):
        # the chart as a JSON string: Bokeh's JSON defines a model where it first occurs, and a saved
        # notebook's keys are sorted (nbformat), which would put references before definitions
        bundle[VIEW_MIME] = {"view": "array", "id": array["id"], "ended": ended,
                             "chart": None if chart is None else json.dumps(chart)}
    return bundle


class ArrayMonitor:
    """One array's live display. ``refresh(array)`` reads the results anew and redraws; safe from any
    thread. ``wall_clock`` gives the "as of" stamp (injectable)."""

    def __init__(self, client, array: dict, *, metrics_file: str = METRICS_FILE, charts: bool = True,
                 wall_clock=lambda: datetime.now(timezone.utc)):
        self.client = client
        self.array = array
        self.reader = ResultReader(client, array["id"], metrics_file)
        self.charts = charts
        self.wall_clock = wall_clock
        self.display_id = f"hive-lab-array-{uuid.uuid4().hex}"
        self.table: ResultTable | None = None
        self.chart: dict | None = None
        self.shown = False
        self._lock = threading.Lock()
        self._draw_lock = threading.Lock()

    def refresh(self, array: dict | None = None) -> ResultTable:
        """Read the results (and, when given, take the array's new line) and redraw."""
        table = self.reader.read()
        chart = None
        if self.charts:
            from ..array_charts import chart_item

            chart = chart_item(table)
        with self._draw_lock:  # a redraw never falls between show()'s bundle and its display
            with self._lock:
                if array is not None:
                    self.array = array
                self.table, self.chart = table, chart
            if self.shown:
                from IPython.display import update_display

                update_display(self.bundle(), raw=True, display_id=self.display_id)
        return table

    def bundle(self) -> dict:
        with self._lock:
            return array_bundle(self.array, self.table, self.chart, self.wall_clock())

    def show(self) -> None:
        from IPython.display import display

        if self.table is None:
            self.refresh()
        with self._draw_lock:
            display(self.bundle(), raw=True, display_id=self.display_id)
            self.shown = True

    def _repr_mimebundle_(self, **kwargs):
        return self.bundle()


def follow_array_in_background(array, monitor: ArrayMonitor) -> threading.Thread:
    """Keep ``monitor`` (and ``array.info``) current in a daemon thread until every element has ended:
    it wakes on the elements' events (``watch.wait_for_array``) and redraws when the counts change."""
    from ..watch import wait_for_array

    def on_change(info: dict) -> None:
        array.info = info
        monitor.refresh(info)

    def run() -> None:
        try:
            on_change(wait_for_array(array.client, array.id, on_change=on_change))
        except Exception as exc:  # noqa: BLE001 - a background thread: say it in the display
            monitor.refresh(dict(array.info, reason=f"hive-lab stopped following this array: {exc}"))

    thread = threading.Thread(target=run, daemon=True, name=f"hive-lab-watch-{array.id}")
    thread.start()
    return thread


def display_array(array, monitor: ArrayMonitor | None = None) -> ArrayMonitor:
    """Show ``array`` live under the current cell: its monitor, followed in the background until it ends."""
    if monitor is None:
        monitor = ArrayMonitor(array.client, array.info)
    monitor.show()
    following = array.watcher is not None and array.watcher.is_alive()
    if array.info.get("state") != "ended" and not following:
        array.watcher = follow_array_in_background(array, monitor)
    return monitor


class ArrayResults:
    """``JobArray.show_results()``: the results table and charts, live until the array has ended (the
    same display as the array cell's). ``refresh()`` reads them anew and returns the rows."""

    def __init__(self, array, *, metrics_file: str = METRICS_FILE):
        """``array``: the ``hive_lab.arrays.JobArray`` (its watcher, if it runs, is shared)."""
        self.array = array
        self.monitor = ArrayMonitor(array.client, array.info, metrics_file=metrics_file)

    def refresh(self) -> list[dict]:
        return self.monitor.refresh(self.array.refresh().info).rows

    def _repr_mimebundle_(self, **kwargs):
        if self.monitor.table is None:
            self.monitor.refresh()
        return self.monitor.bundle()

    def _ipython_display_(self) -> None:
        from .job_monitor import in_kernel

        if not in_kernel():
            self.monitor.refresh()
            print(self.monitor.bundle()["text/plain"])
            return
        display_array(self.array, self.monitor)
