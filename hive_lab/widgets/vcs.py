"""VC usage view: per VC a bar of guaranteed vs used vs opportunistic GPUs, and the queue length."""

from __future__ import annotations

import html

import ipywidgets as W

from .base import LiveView, error_html
from .shaping import STATE_COLORS, vc_rows


def bar_html(row: dict) -> str:
    """A stacked bar: used (green) and over-guarantee, opportunistic (purple), bad (red) on the guarantee's
    grey track; the guarantee's end is marked."""
    seg = lambda pct, color: (f'<div style="width:{pct:.1f}%;background:{color};height:100%"></div>'  # noqa: E731
                              if pct > 0 else "")
    return (
        f'<div style="position:relative;width:260px;height:14px;background:#f2f2f2;border:1px solid #ccc">'
        f'<div style="position:absolute;left:0;top:0;height:100%;width:{row["guaranteed_pct"]:.1f}%;'
        f'background:{STATE_COLORS["free"]}"></div>'
        f'<div style="position:absolute;left:0;top:0;height:100%;width:100%;display:flex">'
        f'{seg(row["used_pct"], STATE_COLORS["used"])}{seg(row["over_pct"], "#1b6b1b")}'
        f'{seg(row["borrowed_pct"], STATE_COLORS["opportunistic"])}</div>'
        f'<div style="position:absolute;right:0;top:0;height:100%;width:{row["doomed_pct"]:.1f}%;'
        f'background:{STATE_COLORS["bad"]}"></div>'
        f'<div style="position:absolute;left:{row["guaranteed_pct"]:.1f}%;top:-2px;height:18px;'
        f'border-left:2px solid #333"></div></div>'
    )


class VCUsageView(LiveView):
    refetch_on = ("hello", "snapshot", "job", "cluster", "vcs")

    def __init__(self, client=None, *, live: bool = True, vcs: list[dict] | None = None, **kwargs):
        super().__init__(client, live=live, **kwargs)
        self.rows: list[dict] = []
        self.title = W.HTML("<b>Virtual clusters</b>")
        self.table = W.GridBox(layout=W.Layout(grid_template_columns="120px 270px auto", grid_gap="3px 8px",
                                               align_items="center"))
        self.widget = W.VBox([self.title, self.table])
        if vcs is not None:
            self.set_vcs(vcs)
        elif self.client is not None:
            self.start()

    def fetch(self):
        return self.client.vcs()

    def render(self, data) -> None:
        self.set_vcs(data)

    def set_vcs(self, vcs: list[dict]) -> None:
        self.rows = vc_rows(vcs)
        children: list[W.Widget] = []
        for row in self.rows:
            name = html.escape(row["name"]) + (" <small>(yours)</small>" if row["mine"] else "")
            children += [W.HTML(f"<b>{name}</b>"), W.HTML(bar_html(row)), W.HTML(html.escape(row["summary"]))]
        self.table.children = children
        total_g = sum(r["guaranteed"] for r in self.rows)
        total_u = sum(r["used"] + r["borrowed"] for r in self.rows)
        self.title.value = f"<b>Virtual clusters</b> — {total_u} GPUs in use, {total_g} guaranteed"

    def show_error(self, message: str) -> None:
        self.title.value = error_html(message)
