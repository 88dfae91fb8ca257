"""The elements' results side by side, for comparing the runs of an array or sweep.

One row per element: its index, its sweep parameters, state, run time (``duration_s``), the values of a
metrics JSON file it wrote to ``$HIVE_OUTPUT_DIR`` (default ``metrics.json``, e.g. ``{"loss": 0.12}``),
the last ``hive_lab.progress`` steps (only when some element reported them) and its job id. Rows are
sorted by the first metric (the first numeric key of the first metrics file read; ascending unless
``ascending=False``), elements without it after, by index. Values keep their precision; ``display_value``
rounds them for a table. Used by ``JobArray.results``, the array cell (``widgets.array_results``) and
``hive-lab jobs ARRAY``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import HiveLabError
from .format import FINISHED, duration, seconds_between

METRICS_FILE = "metrics.json"
#: an element in these states may have written its metrics file
_MAY_HAVE_METRICS = ("running", "paused", *FINISHED)


def _metrics(client, job_id: str, metrics_file: str) -> dict[str, Any]:
    try:
        data = json.loads(client.output(job_id, metrics_file))
    except (HiveLabError, ValueError):  # not written (yet), or not JSON: no metrics for this element
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, (int, float, str, bool)) or v is None}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class ResultTable:
    """The rows (plain dicts, see the module doc) and what their columns are."""

    rows: list[dict[str, Any]]
    params: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # numeric ones, in the order first seen
    columns: list[str] = field(default_factory=list)

    def frame(self):
        """The rows as a pandas DataFrame indexed by element index (pandas must be installed)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns).set_index("index")


class ResultReader:
    """Reads an array's results; an ended element's run time and metrics are read once and kept (they
    do not change), so a live view refetching after each event costs one request per running element."""

    def __init__(self, client, array_id: str, metrics_file: str = METRICS_FILE):
        self.client = client
        self.array_id = array_id
        self.metrics_file = metrics_file
        self._ended: dict[str, dict[str, Any]] = {}  # job id -> its part of the row

    def read(self, *, sort_by: str | None = None, ascending: bool = True, now=None) -> ResultTable:
        rows, params, extra = [], [], []
        for e in self.client.array_elements(self.array_id):
            row: dict[str, Any] = {"index": e["index"]}
            for name, value in (e.get("params") or {}).items():
                row[name] = value
                if name not in params:
                    params.append(name)
            row["state"] = e["state"]
            row["duration_s"] = None
            job_id = e.get("job_id")
            if job_id:
                part = self._ended.get(job_id) or self._job_part(job_id, e["state"], now)
                for key in part:
                    if key not in extra:
                        extra.append(key)
                row.update(part)
            row["job_id"] = job_id
            rows.append(row)
        fixed = ("index", "state", "duration_s", "steps", "job_id")
        metrics = [k for k in extra if k not in fixed and k not in params and any(is_number(r.get(k)) for r in rows)]
        others = [k for k in extra if k not in metrics and k not in fixed and k not in params]
        steps = ["steps"] if any(r.get("steps") is not None for r in rows) else []
        columns = ["index", *params, "state", "duration_s", *metrics, *others, *steps, "job_id"]
        for row in rows:
            for key in columns:
                row.setdefault(key, None)
            for key in [k for k in row if k not in columns]:
                del row[key]
        key = sort_by or (metrics[0] if metrics else None)
        if key is not None:
            rows.sort(key=lambda r: _sort_key(r, key, ascending))
        return ResultTable([{c: r[c] for c in columns} for r in rows], params, metrics, columns)

    def _job_part(self, job_id: str, state: str, now) -> dict[str, Any]:
        try:
            job = self.client.job(job_id)
        except HiveLabError:
            return {}
        part: dict[str, Any] = {}
        seconds = seconds_between(job.get("started_at"), job.get("finished_at"), now)
        part["duration_s"] = None if seconds is None else round(seconds, 3)
        part["steps"] = (job.get("progress") or {}).get("steps")
        if state in _MAY_HAVE_METRICS:
            for name, value in _metrics(self.client, job_id, self.metrics_file).items():
                part.setdefault(name, value)  # a metric named like a column does not replace it
        if job.get("state") in FINISHED and state in FINISHED:
            self._ended[job_id] = part
        return part


def _sort_key(row: dict, key: str, ascending: bool):
    value = row.get(key)
    if not is_number(value):
        return (1, 0.0, row["index"])
    return (0, value if ascending else -value, row["index"])


def collect_results(client, array_id: str, metrics_file: str = METRICS_FILE, **kwargs) -> ResultTable:
    return ResultReader(client, array_id, metrics_file).read(**kwargs)


def array_results(client, array_id: str, metrics_file: str = METRICS_FILE, **kwargs) -> list[dict[str, Any]]:
    """The rows as plain dicts (the records ``JobArray.results`` gives without pandas)."""
    return collect_results(client, array_id, metrics_file, **kwargs).rows


def result_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The columns of rows from ``array_results`` (every row has them all, in order)."""
    return list(rows[0]) if rows else []


def display_value(column: str, value: Any) -> str:
    """A cell of a results table: numbers to 4 significant digits, run times as ``4 min 05 s``."""
    if value is None:
        return ""
    if column == "duration_s":
        return duration(value)
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4g}"
    return str(value)


def display_header(column: str) -> str:
    return "duration" if column == "duration_s" else column


def results_text(table: ResultTable) -> str:
    """The table as aligned plain text (``hive-lab jobs ARRAY``, the cell's text/plain)."""
    if not table.rows:
        return ""
    cols = table.columns
    cells = [[display_header(c) for c in cols]] + [[display_value(c, r.get(c)) for c in cols] for r in table.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    numeric = [c in table.metrics or c in ("index", "duration_s") or all(is_number(r.get(c)) or r.get(c) is None
                                                                         for r in table.rows) for c in cols]
    lines = []
    for row in cells:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
