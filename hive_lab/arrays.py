"""A job array or sweep from Python: ``JobArray`` (what ``%%submit --array/--sweep`` returns) and
``array_results``, the elements' results side by side for comparing runs.

A result row is the element's index, state and job id, its sweep parameters, the last ``hive_lab.progress``
steps it reported, and the scalar values of a metrics JSON file it wrote to ``$HIVE_OUTPUT_DIR``
(default ``metrics.json``, e.g. ``{"loss": 0.12, "accuracy": 0.97}``).
"""

from __future__ import annotations

from typing import Any

from .array_results import METRICS_FILE, array_results, result_columns  # noqa: F401  (importable from here)


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
