"""ipywidgets views of a hive-lab server: queue, VC usage, topology heatmap (bokeh) and a dashboard.

Imported lazily, so the CLI can use the pure ``shaping``/``layout`` modules without ipywidgets/bokeh.
"""

__all__ = ["ArrayResults", "Dashboard", "GpuUsageView", "HeatmapView", "JobMonitor", "QueueView", "VCUsageView"]

_where = {"ArrayResults": "array_results", "Dashboard": "dashboard", "GpuUsageView": "gpu_usage", "HeatmapView": "heatmap", "JobMonitor": "job_monitor",
          "QueueView": "queue", "VCUsageView": "vcs"}


def __getattr__(name):
    if name in _where:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_where[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
