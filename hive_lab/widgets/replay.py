"""Charts of a replayed history (``hive_lab.replay``), for an instructor to read at a glance.

- queueing per VC over the window (average wait of the jobs submitted each hour; live solid, the first
  change dashed);
- average wait per user (the 20 who waited most live), live next to the change;
- GPUs used vs guaranteed per VC (hourly average of GPUs held, from the replay's decisions);
- the sharing anomaly per VC (extra waiting vs the VC alone on its own cells), when it was replayed;
- submissions per hour of the day, the busiest hour marked.

The data functions (``hourly_waits``, ``gpus_used``, ``busiest_hour``, ...) are pure; ``replay_charts``
draws them with bokeh and ``ReplayView`` shows the charts and the sentences (check, effects) as a widget.
"""

from __future__ import annotations

import html
import math
from typing import Any

HOUR = 3600.0


def hourly_waits(scenario: Any, vc: str) -> tuple[list[float], list[float]]:
    """(hours since the window's start, average wait in minutes of ``vc``'s jobs submitted in that hour)."""
    sums: dict[int, list[float]] = {}
    for s in scenario.history.submits:
        if s.vc == vc:
            w = scenario.waits.get(s.job, 0.0)
            if w != math.inf:
                sums.setdefault(int(s.t // HOUR), []).append(w)
    hours = sorted(sums)
    return [float(h) for h in hours], [sum(sums[h]) / len(sums[h]) / 60 for h in hours]


def gpus_used(scenario: Any) -> dict[str, list[float]]:
    """VC -> hourly average of the GPUs its jobs held (index = hour since the window's start)."""
    vc_of = {s.job: s.vc for s in scenario.history.submits}
    held: dict[str, int] = {}
    since: dict[str, float] = {}
    series: dict[str, list[float]] = {}
    end = max([float(d["t"]) for d in scenario.result.decisions] + [0.0])
    n = int(end // HOUR) + 1

    def add(vc: str, gpus: int, t0: float, t1: float) -> None:
        row = series.setdefault(vc, [0.0] * n)
        h = int(t0 // HOUR)
        while t0 < t1 and h < n:
            upto = min(t1, (h + 1) * HOUR)
            row[h] += gpus * (upto - t0) / HOUR
            t0, h = upto, h + 1

    for d in scenario.result.decisions:
        job, event, t = d["job"], d["event"], float(d["t"])
        if event == "started":
            held[job] = sum(len(p.get("gpus") or ()) for p in d.get("placement") or ())
            since[job] = t
        elif event in ("finished", "preempted") and job in since:
            add(vc_of.get(job, "?"), held.pop(job), since.pop(job), t)
    for job in list(since):
        add(vc_of.get(job, "?"), held.pop(job), since.pop(job), end)
    for vc in {s.vc for s in scenario.history.submits}:
        series.setdefault(vc, [0.0] * n)
    return dict(sorted(series.items()))


def busiest_hour(history: Any, since_epoch: float | None) -> tuple[list[int], int]:
    """(submissions per hour of the day, UTC when ``since_epoch`` is known, the busiest hour)."""
    counts = [0] * 24
    offset = since_epoch or 0.0
    for s in history.submits:
        counts[int(((offset + s.t) % 86400) // HOUR)] += 1
    return counts, max(range(24), key=lambda h: (counts[h], -h))


def user_waits(report: Any, top: int = 20) -> list[tuple[str, float, float | None]]:
    """(user, live average wait, the first change's) in minutes, for the ``top`` users who waited most live."""
    live = report.live.summary()["by_user"]
    other = report.scenarios[1].summary()["by_user"] if len(report.scenarios) > 1 else {}
    users = sorted(live, key=lambda u: (-live[u]["avg_wait_s"], u))[:top]
    return [(u, live[u]["avg_wait_s"] / 60, other[u]["avg_wait_s"] / 60 if u in other else None) for u in users]


def replay_charts(r: Any) -> Any:
    """A bokeh layout of the charts of ``r`` (a ``hive_lab.history_replay.Replay``)."""
    from bokeh.layouts import column, row
    from bokeh.models import ColumnDataSource, HoverTool, Span
    from bokeh.transform import dodge
    from bokeh.palettes import Category10_10
    from bokeh.plotting import figure

    report = r.report
    live = report.live
    change = report.scenarios[1] if len(report.scenarios) > 1 else None
    vcs = sorted({s.vc for s in r.history.submits})
    colour = {vc: Category10_10[i % 10] for i, vc in enumerate(vcs)}
    effect = report.effect(change) if change is not None else r.check.sentence()

    q = figure(title="queueing per VC (average wait of the jobs submitted each hour)", height=260, width=760,
               x_axis_label="hours since the window's start", y_axis_label="minutes", name="queueing")
    for vc in vcs:
        x, y = hourly_waits(live, vc)
        # markers too: a history of one hour is one point per series, which a line alone does not draw
        q.line(x, y, color=colour[vc], legend_label=f"{vc} live", line_width=2)
        q.scatter(x, y, color=colour[vc], legend_label=f"{vc} live", size=6)
        if change is not None:
            x, y = hourly_waits(change, vc)
            q.line(x, y, color=colour[vc], line_dash="dashed", legend_label=f"{vc} changed")
            q.scatter(x, y, color=colour[vc], legend_label=f"{vc} changed", size=6, marker="triangle")
    q.legend.click_policy = "hide"
    q.legend.location = "top_left"
    q.legend.background_fill_alpha = 0.5
    q.add_tools(HoverTool(tooltips=[("hour", "@x"), ("wait (min)", "@y{0.0}")]))

    uw = user_waits(report)
    users = [u for u, _, _ in uw]
    src = ColumnDataSource({"user": users, "live": [a for _, a, _ in uw], "change": [b or 0.0 for _, _, b in uw]})
    u = figure(x_range=users, title="average wait per user, the 20 who waited most (live; changed in orange)",
               height=260, width=760, y_axis_label="minutes", name="users")
    u.vbar(x=dodge("user", -0.2, range=u.x_range), top="live", width=0.38, source=src, color="#1f77b4")
    if change is not None:
        u.vbar(x=dodge("user", 0.2, range=u.x_range), top="change", width=0.38, source=src, color="#ff7f0e")
    u.xaxis.major_label_orientation = 0.9

    used = gpus_used(live)
    g = figure(title="GPUs used (hourly average) vs guaranteed, live", height=260, width=760,
               x_axis_label="hours since the window's start", y_axis_label="GPUs", name="gpus")
    guaranteed = live.summary()["by_vc"]
    for vc in vcs:
        series = used.get(vc, [])
        g.line(list(range(len(series))), series, color=colour[vc], legend_label=f"{vc} used", line_width=2)
        g.scatter(list(range(len(series))), series, color=colour[vc], legend_label=f"{vc} used", size=6)
        gpus = guaranteed.get(vc, {}).get("guaranteed_gpus")
        if gpus is not None:
            g.add_layout(Span(location=gpus, dimension="width", line_color=colour[vc], line_dash="dotted"))
    g.legend.click_policy = "hide"

    by_vc = live.summary()["by_vc"]
    anomaly = [(vc, (by_vc[vc].get("sharing_anomaly_s") or 0.0) / 3600) for vc in vcs]
    known = any(by_vc[vc].get("sharing_anomaly_s") is not None for vc in vcs)
    a = figure(x_range=vcs, title="sharing anomaly (job-hours vs VC alone)" if known else
               "sharing anomaly: not replayed", height=220, width=370, y_axis_label="job-hours", name="anomaly")
    a.vbar(x=[vc for vc, _ in anomaly], top=[h for _, h in anomaly], width=0.6,
           color=[colour[vc] for vc, _ in anomaly])
    counts, busiest = busiest_hour(r.history, r.since_epoch)
    b = figure(title=f"submissions per hour of day (busiest {busiest:02d}:00)", height=220, width=370,
               x_axis_label="hour (UTC)", name="busiest")
    b.vbar(x=list(range(24)), top=counts, width=0.8,
           color=["#d62728" if h == busiest else "#7f7f7f" for h in range(24)])
    layout = column(q, u, g, row(a, b))
    layout.name = "replay-charts"
    layout.tags = [effect]
    return layout


class ReplayView:
    """The sentences (live check, each change's effect, capacity answers) above the charts, as a widget."""

    def __init__(self, r: Any):
        import ipywidgets as W
        from jupyter_bokeh import BokehModel

        self.replay = r
        lines = [r.report.history_text(), r.check.sentence(), *r.effects]
        self.text = W.HTML("<div class='hive-lab-replay'>" + "".join(
            f"<p>{html.escape(line)}</p>" for line in lines) + "</div>")
        self.charts = replay_charts(r)
        self.widget = W.VBox([self.text, BokehModel(self.charts)])
        self.widget.add_class("hive-lab-replay-view")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _ipython_display_(self):
        from IPython.display import display

        from .base import load_bokehjs

        load_bokehjs()  # jupyter_bokeh's view needs BokehJS in the page (found by the browser test)
        display(self.widget)
