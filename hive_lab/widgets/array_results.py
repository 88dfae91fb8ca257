"""A table of an array's elements for comparing runs: parameters, state, progress steps and metrics
(``hive_lab.array_results``), with a Refresh button."""

from __future__ import annotations

import html

from ..array_results import METRICS_FILE, array_results, result_columns


def results_html(rows: list[dict]) -> str:
    cols = result_columns(rows)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{'' if r.get(c) is None else html.escape(str(r.get(c)))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    return f"<table class='hive-array-results'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class ArrayResults:
    def __init__(self, client, array_id: str, *, metrics_file: str = METRICS_FILE):
        import ipywidgets as w

        self.client = client
        self.array_id = array_id
        self.metrics_file = metrics_file
        self.table = w.HTML()
        button = w.Button(description="Refresh", icon="refresh")
        button.on_click(lambda _b: self.refresh())
        self.widget = w.VBox([button, self.table])
        self.refresh()

    def refresh(self) -> list[dict]:
        rows = array_results(self.client, self.array_id, self.metrics_file)
        self.table.value = results_html(rows)
        return rows
