"""The live status line and log tail that ``%%submit`` shows under the cell."""

from __future__ import annotations

import html

import ipywidgets as W

from ..format import FINISHED, status_line

STATE_COLORS = {"running": "#2ca02c", "succeeded": "#2ca02c", "failed": "#d62728", "cancelled": "#7f7f7f"}


class JobMonitor:
    """``update(job)`` and ``append_log(text)`` may be called from any thread."""

    def __init__(self, tail_lines: int = 40):
        self.tail_lines = tail_lines
        self.status = W.HTML()
        self.log = W.HTML()
        self.widget = W.VBox([self.status, self.log])
        self._log_text = ""
        self.job: dict | None = None

    def update(self, job: dict) -> None:
        self.job = job
        color = STATE_COLORS.get(job.get("state"), "#ff9f1c")
        icon = "✔" if job.get("state") == "succeeded" else "✖" if job.get("state") in FINISHED else "⏳"
        if job.get("state") == "running":
            icon = "▶"
        self.status.value = (f'<span style="color:{color};font-weight:bold">{icon}</span> '
                             f'<span style="font-family:monospace">{html.escape(status_line(job))}</span>')

    def append_log(self, text: str) -> None:
        self._log_text = "\n".join((self._log_text + text).split("\n")[-(self.tail_lines + 1):])
        self.log.value = (f'<pre style="max-height:300px;overflow:auto;margin:2px 0;background:#f7f7f7;'
                          f'padding:4px">{html.escape(self._log_text)}</pre>')

    @property
    def log_text(self) -> str:
        return self._log_text

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
