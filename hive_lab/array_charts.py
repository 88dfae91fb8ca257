"""Bokeh charts of an array's results (``array_results.ResultTable``): each metric against each swept
parameter (one scatter per pair, in a grid: a row per metric), and with 3+ parameters a
parallel-coordinates plot (every parameter and metric an axis scaled to 0..1, a line per run, coloured by
the first metric). ``chart_item`` gives them as Bokeh's JSON (``bokeh.embed.json_item``), which the
array cell carries in its bundle and hive-lab's JupyterLab extension draws with BokehJS."""

from __future__ import annotations

from typing import Any

from .array_results import ResultTable, display_value, is_number

WIDTH, HEIGHT = 260, 220


def _axis_values(table: ResultTable, param: str) -> tuple[list[Any], list[str] | None]:
    """The parameter's x values, and its factors when it is not numeric (strings, booleans)."""
    values = [r.get(param) for r in table.rows]
    if all(is_number(v) for v in values):
        return values, None
    factors: list[str] = []
    for v in values:
        if str(v) not in factors:
            factors.append(str(v))
    return [str(v) for v in values], factors


def _scatter(table: ResultTable, param: str, metric: str):
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    rows = [r for r in table.rows if is_number(r.get(metric))]
    x, factors = _axis_values(ResultTable(rows, table.params, table.metrics, table.columns), param)
    source = ColumnDataSource({"x": x, "y": [r[metric] for r in rows], "index": [r["index"] for r in rows],
                               "label": [" ".join(f"{p}={display_value(p, r.get(p))}" for p in table.params)
                                         for r in rows]})
    ranges = {"x_range": factors} if factors is not None else {}
    fig = figure(width=WIDTH, height=HEIGHT, title=f"{metric} by {param}", x_axis_label=param,
                 y_axis_label=metric, tools="pan,box_zoom,reset,save", name=f"{metric}-by-{param}", **ranges)
    fig.scatter("x", "y", source=source, size=8, alpha=0.8)
    fig.add_tools(HoverTool(tooltips=[("run", "@index"), ("params", "@label"), (metric, "@y{0.[0000]}")]))
    fig.toolbar.logo = None
    return fig


def _parallel(table: ResultTable):
    """One line per run across the axes (parameters, then metrics), each axis scaled to 0..1."""
    from bokeh.models import ColumnDataSource, FactorRange, LinearColorMapper
    from bokeh.palettes import Viridis256
    from bokeh.plotting import figure

    axes = [*table.params, *table.metrics]
    first = table.metrics[0]
    rows = [r for r in table.rows if is_number(r.get(first))]
    scaled: dict[str, list[float]] = {}
    for axis in axes:
        values = [r.get(axis) for r in rows]
        if all(is_number(v) for v in values):
            lo, hi = min(values), max(values)
            scaled[axis] = [0.5 if hi == lo else (v - lo) / (hi - lo) for v in values]
        else:
            factors = sorted({str(v) for v in values})
            scaled[axis] = [0.5 if len(factors) == 1 else factors.index(str(v)) / (len(factors) - 1) for v in values]
    source = ColumnDataSource({
        "xs": [axes for _ in rows], "ys": [[scaled[a][i] for a in axes] for i in range(len(rows))],
        "color_by": [r[first] for r in rows], "index": [r["index"] for r in rows]})
    mapper = LinearColorMapper(palette=Viridis256, low=min(source.data["color_by"]),
                               high=max(source.data["color_by"]))
    fig = figure(width=max(400, 120 * len(axes)), height=HEIGHT + 40, x_range=FactorRange(*axes),
                 y_range=(-0.05, 1.05), title=f"parallel coordinates (colour: {first})", tools="pan,reset,save",
                 name="parallel-coordinates")
    fig.multi_line("xs", "ys", source=source, line_color={"field": "color_by", "transform": mapper},
                   line_width=2, alpha=0.7)
    fig.yaxis.visible = False
    fig.toolbar.logo = None
    return fig


def results_chart(table: ResultTable):
    """The charts as one Bokeh layout, or None when there is nothing to plot (no metric or parameter yet)."""
    if not table.metrics or not any(is_number(r.get(table.metrics[0])) for r in table.rows):
        return None
    from bokeh.layouts import column, row

    params = table.params or ["index"]
    rows = [row(*[_scatter(table, p, m) for p in params]) for m in table.metrics
            if any(is_number(r.get(m)) for r in table.rows)]
    if len(table.params) >= 3:
        rows.append(_parallel(table))
    return column(*rows)


def chart_item(table: ResultTable) -> dict | None:
    """``results_chart`` as Bokeh's JSON (``json_item``), None without a chart."""
    chart = results_chart(table)
    if chart is None:
        return None
    from bokeh.embed import json_item

    return json_item(chart)
