"""A job array or sweep from Python: ``JobArray`` (what ``%%submit --array/--sweep`` returns) and
``array_results``, the elements' results side by side for comparing runs.

A result row is the element's index, its sweep parameters, state, run time (``duration_s``), the scalar
values of a metrics JSON file it wrote to ``$HIVE_OUTPUT_DIR`` (default ``metrics.json``, e.g.
``{"loss": 0.12, "accuracy": 0.97}``), the last ``hive_lab.progress`` steps (when reported) and its job id,
sorted by the first metric (``hive_lab.array_results``).
"""

from __future__ import annotations

from .array_results import METRICS_FILE, array_results, collect_results, result_columns  # noqa: F401


def _pandas_available() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


class JobArray:
    """A handle on one array: ``refresh()``, ``counts``, ``elements()``, ``cancel()``, ``pause()``,
    ``resume()``, ``set_throttle(n)``, ``wait()``, ``results()`` and ``show_results()`` (the table and
    charts, live). As a cell's result in a kernel it is a live display of its counts, results and charts."""

    monitor = None  # its live display in a kernel (hive_lab.widgets.array_results), once shown
    watcher = None  # the thread keeping that display current

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

    def results(self, metrics_file: str = METRICS_FILE, *, sort_by: str | None = None, ascending: bool = True,
                as_frame: bool | None = None):
        """One row per element (see the module doc), sorted by ``sort_by`` (default: the first metric). A
        pandas DataFrame indexed by element index when pandas is installed (``as_frame=False``: plain
        records, a list of dicts, as without pandas)."""
        table = collect_results(self.client, self.id, metrics_file, sort_by=sort_by, ascending=ascending)
        if as_frame is None:
            as_frame = _pandas_available()
        return table.frame() if as_frame else table.rows

    def show_results(self, metrics_file: str = METRICS_FILE):
        """The results table and charts as a display that follows the array until it ends."""
        from .widgets.array_results import ArrayResults

        return ArrayResults(self.refresh(), metrics_file=metrics_file)

    def __repr__(self) -> str:
        from .format import array_line

        return f"<JobArray {array_line(self.info)}>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))

    def _ipython_display_(self) -> None:
        """A cell's result: in a kernel the live display (counts, results table, charts) that follows the
        array until every element has ended; elsewhere its one-line repr."""
        from .widgets.job_monitor import in_kernel

        if not in_kernel():
            print(repr(self))
            return
        from .widgets.array_results import display_array

        self.monitor = display_array(self, self.monitor)
