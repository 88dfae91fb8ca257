"""Live utilisation and memory of the caller's GPUs (one line per GPU, in the spirit of
jupyterlab-nvdashboard), from the ``utilization`` / ``memory_used_mb`` fields of ``GET cluster`` that
the server's GPU sampler (NVML) fills in. Readings are kept here, in the notebook: the server keeps
only the latest one.
"""

from __future__ import annotations

import html
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import ipywidgets as W
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.palettes import Category10_10
from bokeh.plotting import figure
from jupyter_bokeh import BokehModel

from .base import LiveView, error_html


@dataclass(frozen=True)
class Reading:
    at: float  # seconds (the view's clock)
    job: str
    utilization: float | None
    memory_used_mb: float | None
    memory_total_mb: float | None


def my_gpus(cluster: dict, me: str | None) -> list[dict]:
    """The GPUs held by ``me``'s jobs, in the cluster's order."""
    return [g for g in cluster.get("gpus") or [] if me and g.get("job") and g.get("user") == me]


def gpu_label(gpu: dict) -> str:
    """``node-0 GPU 3``: the one GPU-list form (hive_lab.format.gpu_name)."""
    from ..format import gpu_name

    return gpu_name(gpu.get("node"), gpu.get("index"))


class GpuUsageHistory:
    """The last ``length`` readings of each GPU a user holds (pure: no widgets, clock injected)."""

    def __init__(self, length: int = 120):
        self.length = length
        self.series: dict[tuple[str, int], deque[Reading]] = {}
        self.gpus: list[dict] = []

    def add(self, cluster: dict, me: str | None, at: float) -> None:
        self.gpus = my_gpus(cluster, me)
        held = set()
        for g in self.gpus:
            key = (str(g["node"]), int(g["index"]))
            held.add(key)
            series = self.series.get(key)
            if series is None or (series and series[-1].job != g["job"]):
                series = self.series[key] = deque(maxlen=self.length)  # another job: a new chart
            series.append(Reading(at, g["job"], g.get("utilization"), g.get("memory_used_mb"),
                                  g.get("memory_total_mb")))
        for key in [k for k in self.series if k not in held]:
            del self.series[key]  # released: its chart goes

    def columns(self, field: str, scale: float = 1.0) -> dict[str, list]:
        """``multi_line`` columns: one line per held GPU (x in ms for a datetime axis)."""
        xs, ys, labels, colors, jobs = [], [], [], [], []
        for i, g in enumerate(self.gpus):
            series = self.series.get((str(g["node"]), int(g["index"]))) or ()
            points = [(r.at * 1000.0, getattr(r, field)) for r in series if getattr(r, field) is not None]
            xs.append([x for x, _ in points])
            ys.append([v * scale for _, v in points])
            labels.append(gpu_label(g))
            colors.append(Category10_10[i % 10])
            jobs.append(g["job"])
        return {"xs": xs, "ys": ys, "gpu": labels, "color": colors, "job": jobs}

    def latest(self, gpu: dict) -> Reading | None:
        series = self.series.get((str(gpu["node"]), int(gpu["index"])))
        return series[-1] if series else None


class GpuUsageView(LiveView):
    """Two small live charts (utilisation %, memory GiB) of the GPUs your jobs hold.

    Live (a client): reads ``GET cluster`` every ``interval_s`` seconds and on every event of the
    stream. Offline: feed it ``add_cluster(cluster, at=...)``.
    """

    needs_bokehjs = True
    refetch_on = ("hello", "snapshot", "job", "cluster")

    def __init__(self, client=None, *, me: str | None = None, interval_s: float = 5.0, history: int = 120,
                 live: bool = True, clock: Callable[[], float] = time.time, **kwargs):
        super().__init__(client, live=live, poll_interval_s=interval_s if live else None, **kwargs)
        self.me = me
        self.interval_s = interval_s
        self.clock = clock
        self.history = GpuUsageHistory(history)
        self.util_source = ColumnDataSource(data=self.history.columns("utilization"))
        self.mem_source = ColumnDataSource(data=self.history.columns("memory_used_mb", 1 / 1024))
        self.util_figure = self._figure("utilisation (%)", self.util_source, Range1d(0, 100))
        self.mem_figure = self._figure("memory used (GiB)", self.mem_source, Range1d(0, 1))
        self.model = BokehModel(row(self.util_figure, self.mem_figure))
        self.model.layout.width = f"{2 * self.util_figure.width + 10}px"
        self.model.layout.height = f"{self.util_figure.height + 10}px"
        self.title = W.HTML()
        self.values = W.HTML()
        self.status = W.HTML()
        self.widget = W.VBox([self.title, self.values, self.model, self.status])
        self._show()
        if self.client is not None and live:
            self.start()

    @staticmethod
    def _figure(title: str, source: ColumnDataSource, y_range: Range1d):
        fig = figure(title=title, height=150, width=330, x_axis_type="datetime", y_range=y_range,
                     tools="", toolbar_location=None, min_border=4)
        fig.title.text_font_size = "11px"
        fig.xaxis.major_label_text_font_size = "9px"
        fig.yaxis.major_label_text_font_size = "9px"
        lines = fig.multi_line(xs="xs", ys="ys", line_color="color", line_width=2, source=source)
        fig.add_tools(HoverTool(renderers=[lines], tooltips=[("GPU", "@gpu"), ("job", "@job")]))
        return fig

    # LiveView -------------------------------------------------------------------------------------
    def fetch(self):
        if self.me is None:
            self.me = self.client.me().get("user")
        return self.client.cluster()

    def render(self, cluster) -> None:
        self.add_cluster(cluster)

    def show_error(self, message: str) -> None:
        self.status.value = error_html(message)

    # ----------------------------------------------------------------------------------------------
    def add_cluster(self, cluster: dict, at: float | None = None) -> None:
        """Record this ``GET cluster`` answer's readings of my GPUs and redraw."""
        self.history.add(cluster, self.me, self.clock() if at is None else at)
        self.status.value = ""
        self._show()

    def _show(self) -> None:
        h = self.history
        self.util_source.data = h.columns("utilization")
        self.mem_source.data = h.columns("memory_used_mb", 1 / 1024)
        totals = [r.memory_total_mb for g in h.gpus if (r := h.latest(g)) and r.memory_total_mb]
        used = [y for ys in self.mem_source.data["ys"] for y in ys]
        top = max(totals) / 1024 if totals else max(used, default=0) * 1.2
        self.mem_figure.y_range.end = max(top, 1.0)
        # no GPU held: no empty charts, just the sentence
        self.model.layout.display = "" if h.gpus else "none"
        if not h.gpus:
            self.title.value = ("<b>Your GPUs</b>: your jobs hold no GPU now; the GPUs they get are charted "
                                "here with their utilisation and memory.")
            self.values.value = ""
            return
        self.title.value = f"<b>Your GPUs ({len(h.gpus)})</b>: utilisation and memory, every {self.interval_s:g} s"
        chips = []
        for g, color in zip(h.gpus, self.util_source.data["color"]):
            r = h.latest(g)
            util = "—" if r is None or r.utilization is None else f"{r.utilization:g}%"
            if r is None or r.memory_used_mb is None:
                mem = "—"
            elif r.memory_total_mb:
                mem = f"{r.memory_used_mb / 1024:.1f} / {r.memory_total_mb / 1024:.0f} GiB"
            else:
                mem = f"{r.memory_used_mb / 1024:.1f} GiB"
            chips.append(f'<span style="margin-right:14px"><b style="color:{color}">{html.escape(gpu_label(g))}</b> '
                         f'{html.escape(str(g["job"]))}: {util}, {mem}</span>')
        self.values.value = f'<div style="font-size:12px">{"".join(chips)}</div>'
