"""The elements' results side by side, for comparing the runs of an array or sweep: index, state, job id,
parameters, the last ``hive_lab.progress`` steps and the scalar values of a metrics JSON file each element
wrote to ``$HIVE_OUTPUT_DIR`` (default ``metrics.json``). Used by ``hive_lab.arrays.JobArray.results`` and
the ``ArrayResults`` widget."""

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
