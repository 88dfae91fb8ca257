"""Topology heatmap: every GPU one cell of a single bokeh ``rect`` glyph, shown through jupyter_bokeh;
node names above the node outlines; under it, live charts of the GPUs the caller's jobs hold."""

from __future__ import annotations

import html

import ipywidgets as W
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.plotting import figure
from jupyter_bokeh import BokehModel

from .base import LiveView, error_html
from .gpu_usage import GpuUsageView
from .layout import Layout, compute_layout
from .shaping import COLOR_MODES, heatmap_columns, heatmap_legend, share_columns, topology_key

MAX_WIDTH_PX = 900
MAX_CELL_PX = 40
MIN_WIDTH_PX = 320
MAX_OUTLINES = 600  # node/rack outlines drawn up to this many groups
MAX_LABELS = 64  # node/rack names drawn up to this many groups (the hover names the node anyway)
MIN_LABEL_CELL_PX = 10  # ... and only where cells are at least this big
LABEL_PX = 14  # room above the top row for its names


def outline_columns(cluster: dict, layout: Layout | None = None) -> dict[str, list]:
    """Rectangles around nodes and the groups above them (racks ...), for a second, unfilled glyph."""
    layout = layout or compute_layout(cluster.get("gpus") or [])
    node_depths = {b.depth for b in layout.groups if b.is_node}
    top = min(node_depths) if node_depths else 0
    boxes = [b for b in layout.groups if b.depth <= top]
    if len(boxes) > MAX_OUTLINES:
        boxes = [b for b in boxes if not b.is_node]
    pad = 0.12
    return {
        "left": [b.x0 - pad for b in boxes], "right": [b.x1 + pad for b in boxes],
        "top": [b.y0 - pad for b in boxes], "bottom": [b.y1 + pad for b in boxes],
        "name": [b.address for b in boxes],
        "width": [1.0 if b.is_node else 2.0 for b in boxes],
        # node names (a rack's outline starts where its first node does: its name would cover that one)
        "label": [b.address if b.is_node and len(boxes) <= MAX_LABELS else "" for b in boxes],
    }


class HeatmapView(LiveView):
    needs_bokehjs = True
    refetch_on = ("hello", "snapshot", "job", "cluster", "vcs")

    def __init__(self, client=None, *, color_by: str = "state", live: bool = True, cluster: dict | None = None,
                 usage: bool = True, me: str | None = None, interval_s: float = 5.0, **kwargs):
        """``usage``: chart the utilisation and memory of my GPUs under the heatmap (``me``: whose GPUs;
        by default the client's user), refetching every ``interval_s`` s while live."""
        super().__init__(client, live=live, poll_interval_s=interval_s if usage and live else None, **kwargs)
        self.usage = GpuUsageView(None, me=me, interval_s=interval_s, live=False) if usage else None
        if color_by not in COLOR_MODES:
            raise ValueError(f"color_by must be one of {', '.join(COLOR_MODES)}, got {color_by!r}")
        self.color_by = color_by
        self.vc_names: list[str] = []
        if cluster is None and self.client is not None:
            # the first snapshot of the bokeh document is what the page draws first: make it real
            try:
                cluster, self.vc_names = self.fetch()
            except Exception as exc:  # noqa: BLE001 - shown in the status line; the stream retries
                self.error = str(exc)
        self.cluster: dict = cluster or {"gpus": []}
        self._topology = topology_key(self.cluster)
        self._layout = compute_layout(self.cluster.get("gpus") or [])
        self.source = ColumnDataSource(data=heatmap_columns(self.cluster, color_by, layout=self._layout))
        self.outlines = ColumnDataSource(data=outline_columns(self.cluster, self._layout))
        self.shares = ColumnDataSource(data=share_columns(self.cluster, self._layout))
        self.figure = figure(tools="pan,wheel_zoom,box_zoom,reset", toolbar_location="above",
                             x_axis_location=None, y_axis_location=None,
                             min_border=4, outline_line_color=None)
        self.figure.grid.visible = False
        self.figure.y_range = Range1d(1, 0)  # rows go downwards
        self.figure.x_range = Range1d(0, 1)
        self.figure.quad(left="left", right="right", top="top", bottom="bottom", source=self.outlines,
                         fill_color=None, line_color="#9a9a9a", line_width="width")
        self.labels = self.figure.text(x="left", y="top", text="label", source=self.outlines,
                                       text_font_size="10px", text_color="#555555", text_baseline="bottom",
                                       y_offset=-1)
        self.renderer = self.figure.rect(x="x", y="y", width=0.9, height=0.9, source=self.source,
                                         fill_color="color", fill_alpha="alpha", line_color=None,
                                         hover_line_color="black", hover_fill_alpha=1.0)
        # a shared GPU: its shares drawn over its cell, one strip per share, coloured by job
        self.share_renderer = self.figure.rect(x="x", y="y", width="w", height=0.8, source=self.shares,
                                               fill_color="color", line_color="white", line_width=1)
        self.figure.add_tools(HoverTool(renderers=[self.share_renderer], tooltips=[
            ("GPU", "@gpu"), ("share", "@share"), ("job", "@job"), ("user", "@user"), ("utilization", "@util")]))
        self.figure.add_tools(HoverTool(renderers=[self.renderer], tooltips=[
            ("GPU", "@node #@index (@type)"), ("state", "@state"), ("VC", "@vc"), ("job", "@job"),
            ("user", "@user"), ("cells", "@path"), ("util", "@util")]))
        self.model = None
        self._size()  # ranges and size must be right before the model is made (its first snapshot)
        self.model = BokehModel(self.figure)
        self._size()
        self.mode = W.ToggleButtons(options=list(COLOR_MODES), value=color_by, description="colour by",
                                    style={"button_width": "70px"})
        self.mode.observe(self._mode_changed, names="value")
        self.legend = W.HTML()
        self.status = W.HTML()
        parts = [W.HBox([self.mode, self.status]), self.model, self.legend]
        if self.usage is not None:
            if self.cluster.get("gpus"):
                self.usage.add_cluster(self.cluster)
            parts.append(self.usage.widget)
        self.widget = W.VBox(parts)
        self._legend()
        if self.error:
            self.show_error(self.error)
        if self.client is not None and live:
            self.start()

    def fetch(self):
        if self.usage is not None and self.usage.me is None:
            self.usage.me = self.client.me().get("user")
        cluster = self.client.cluster()
        try:
            names = [vc["name"] for vc in self.client.vcs()]
        except Exception:  # noqa: BLE001 - colours then come from the GPUs' VCs only
            names = self.vc_names
        return cluster, names

    def render(self, data) -> None:
        cluster, names = data
        self.set_cluster(cluster, names)
        if self.usage is not None:
            self.usage.add_cluster(cluster)

    def set_cluster(self, cluster: dict, vc_names: list[str] | None = None) -> None:
        """Show this ``GET cluster`` answer (also the way to drive the view without a server)."""
        self.cluster = cluster
        if vc_names is not None:
            self.vc_names = list(vc_names)
        topology = topology_key(cluster)
        changed = topology != self._topology
        if changed:  # the layout is recomputed only when GPUs or their cells change
            self._topology = topology
            self._layout = compute_layout(cluster.get("gpus") or [])
        self.source.data = heatmap_columns(cluster, self.color_by, self.vc_names, layout=self._layout)
        self.shares.data = share_columns(cluster, self._layout)
        if changed:
            self.outlines.data = outline_columns(cluster, self._layout)
            self._size()
            if self.model is not None:
                # a new shape: send the whole document again rather than a pile of patches
                self.model.update_from_model(self.figure)
        self._legend()
        self.status.value = (f"<span style='color:#555'>{cluster.get('gpus_free', '?')} of "
                             f"{cluster.get('gpus_total', len(cluster.get('gpus') or []))} GPUs free</span>")

    def show_error(self, message: str) -> None:
        self.status.value = error_html(message)

    def _mode_changed(self, change) -> None:
        self.color_by = change["new"]
        self.set_cluster(self.cluster)

    def _size(self) -> None:
        left, right = self.outlines.data["left"], self.outlines.data["right"]
        xs, ys = self.source.data["x"], self.source.data["y"]
        if not xs:
            w, h = 1.0, 1.0
        else:
            w = max([x + 0.5 for x in xs] + list(right))
            h = max([y + 0.5 for y in ys] + list(self.outlines.data["bottom"]))
        pad = 0.3
        x0 = min([0.0] + list(left)) - pad
        cell_px = max(1.5, min(MAX_CELL_PX, MAX_WIDTH_PX / (w + 2 * pad)))
        labelled = cell_px >= MIN_LABEL_CELL_PX and any(self.outlines.data.get("label") or [])
        self.labels.visible = labelled
        top_pad = pad + (LABEL_PX / cell_px if labelled else 0.0)
        # square cells: a small cluster gets a wider x range rather than stretched cells
        x_units = max(w + pad - x0, (MIN_WIDTH_PX - 10) / cell_px)
        self.figure.x_range.start, self.figure.x_range.end = x0, x0 + x_units
        self.figure.y_range.start, self.figure.y_range.end = h + pad, min([0.0] + list(self.outlines.data["top"])) - top_pad
        self.figure.width = int(x_units * cell_px) + 10
        self.renderer.glyph.line_color = "#bdbdbd" if cell_px >= 8 else None
        self.figure.height = int(min(700, max(60, (h + pad + top_pad) * cell_px))) + 40  # + the toolbar above
        if self.model is None:
            return
        # the widget's box must be as big as the figure, or the page squeezes it
        self.model.layout.width = f"{self.figure.width + 4}px"
        self.model.layout.height = f"{self.figure.height + 4}px"

    def _legend(self) -> None:
        items = heatmap_legend(self.source.data, self.color_by)
        chips = "".join(
            f'<span style="display:inline-block;margin-right:10px"><span style="display:inline-block;'
            f'width:12px;height:12px;background:{color};vertical-align:middle;margin-right:4px"></span>'
            f"{html.escape(str(label))}</span>" for label, color in items[:40])
        more = f" … and {len(items) - 40} more" if len(items) > 40 else ""
        self.legend.value = f'<div style="font-size:12px">{chips}{more}</div>'
