"""A job array or sweep from Python: ``JobArray`` (what ``%%submit --array/--sweep`` returns) and
``array_results``, the elements' results side by side for comparing runs.

A result row is the element's index, state and job id, its sweep parameters, the last ``hive_lab.progress``
steps it reported, and the scalar values of a metrics JSON file it wrote to ``$HIVE_OUTPUT_DIR``
(default ``metrics.json``, e.g. ``{"loss": 0.12, "accuracy": 0.97}``).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import HiveLabError

METRICS_FILE = "metrics.json"


def _metrics(client, job_id: str, metrics_file: str) -> dict[str, Any]:
    try:
        data = json.loads(client.output(job_id, metrics_file))
    except (HiveLabError, ValueError):  # not written (yet), or not JSON: no metrics for this element
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, (int, float, str, bool)) or v is None}


def array_results(client, array_id: str, metrics_file: str = METRICS_FILE) -> list[dict[str, Any]]:
    """One row per element, by index (see the module doc). Pending elements have only index, state and
    parameters."""
    rows = []
    for e in client.array_elements(array_id):
        row: dict[str, Any] = {"index": e["index"], "state": e["state"], "job_id": e.get("job_id")}
        row.update(e.get("params") or {})
        if e.get("job_id"):
            progress = client.job(e["job_id"]).get("progress") or {}
            row["steps"] = progress.get("steps")
            if e["state"] in ("running", "succeeded", "failed", "cancelled", "paused"):
                row.update(_metrics(client, e["job_id"], metrics_file))
        rows.append(row)
    return rows


def result_columns(rows: list[dict[str, Any]]) -> list[str]:
    """index, state, job_id, then the other keys in the order they first appear (parameters, steps,
    metrics)."""
    cols = ["index", "state", "job_id"]
    for row in rows:
        for key in row:
            if key not in cols:
                cols.append(key)
    return cols


class JobArray:
    """A handle on one array: ``refresh()``, ``counts``, ``elements()``, ``cancel()``, ``pause()``,
    ``resume()``, ``set_throttle(n)``, ``wait()``, ``results()`` and ``show_results()`` (a widget)."""

    def __init__(self, client, info: dict):
        self.client = client
        self.info = info

    @property
    def id(self) -> str:
        return self.info["id"]

    @property
    def counts(self) -> dict[str, int]:
        return self.info.get("counts") or {}

    @property
    def state(self) -> str:
        return self.info.get("state", "")

    def refresh(self) -> "JobArray":
        self.info = self.client.array(self.id, limit=1)
        return self

    def elements(self) -> list[dict]:
        return self.client.array_elements(self.id)

    def cancel(self, indices: str | None = None) -> "JobArray":
        self.info = self.client.cancel_array(self.id, indices=indices)
        return self

    def pause(self) -> "JobArray":
        self.info = self.client.pause_array(self.id)
        return self

    def resume(self) -> "JobArray":
        self.info = self.client.resume_array(self.id)
        return self

    def set_throttle(self, throttle: int | None) -> "JobArray":
        self.info = self.client.set_throttle(self.id, throttle)
        return self

    def wait(self, timeout: float | None = None) -> "JobArray":
        from .watch import wait_for_array

        self.info = wait_for_array(self.client, self.id, timeout=timeout)
        return self

    def results(self, metrics_file: str = METRICS_FILE) -> list[dict[str, Any]]:
        return array_results(self.client, self.id, metrics_file)

    def show_results(self, metrics_file: str = METRICS_FILE):
        from .widgets.array_results import ArrayResults

        return ArrayResults(self.client, self.id, metrics_file=metrics_file).widget

    def __repr__(self) -> str:
        from .format import array_line

        return f"<JobArray {array_line(self.info)}>"
