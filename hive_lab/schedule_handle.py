"""What ``%%submit --cron`` returns and how a cell names its schedule (docs/notebook.md).

A schedule's name is its identity per owner (the server replaces a schedule of the same name), so a
cell must name its schedule the same way each time it runs: after ``--name``, else after the notebook
and the cell (JupyterLab sends each cell's id with its code). A cell run where neither is known (a
terminal IPython) is named after its code, so running the same code again still replaces.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from typing import Any


class Schedule:
    """A schedule the server keeps; shown as one line (``schedule nightly: every day at 00:00 ...``).
    ``schedule["id"]``, ``.info`` (the server's object), ``.pause()``, ``.resume()``, ``.delete()``."""

    def __init__(self, client: Any, info: dict):
        self.client = client
        self.info = info

    def __getitem__(self, key: str) -> Any:
        return self.info[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.info.get(key, default)

    @property
    def id(self) -> str:
        return self.info["id"]

    def pause(self) -> "Schedule":
        self.info = self.client.pause_schedule(self.id)
        return self

    def resume(self) -> "Schedule":
        self.info = self.client.resume_schedule(self.id)
        return self

    def delete(self) -> None:
        self.client.delete_schedule(self.id)

    def __repr__(self) -> str:
        from .format import schedule_line

        return schedule_line(self.info)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the line, not the object
        printer.text(repr(self))


def cell_schedule_name(shell: Any, code: str) -> str:
    """``grading.ipynb cell 3f2a9c1e``: the notebook (JupyterLab's session name) and the running cell's id;
    without them the code's hash stands in (``ipython cell 9b1d...``)."""
    notebook = posixpath.basename(os.environ.get("JPY_SESSION_NAME", "")) or "ipython"
    cell = _cell_id(shell) or hashlib.sha256(code.encode("utf-8")).hexdigest()
    return f"{notebook} cell {cell[:8]}"[:128]


def _cell_id(shell: Any) -> str | None:
    """The id JupyterLab sent with the cell being run (``metadata.cellId`` of the execute request, which
    ipykernel keeps as the kernel's parent message)."""
    get_parent = getattr(getattr(shell, "kernel", None), "get_parent", None)
    try:
        parent = get_parent() if callable(get_parent) else None
    except Exception:  # (an ipykernel without it for this channel)
        parent = None
    metadata = parent.get("metadata") if isinstance(parent, dict) else None
    cell = metadata.get("cellId") if isinstance(metadata, dict) else None
    return cell if isinstance(cell, str) and cell else None
