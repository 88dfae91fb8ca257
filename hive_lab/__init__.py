"""hive_lab: what users import (magics, client, widgets, CLI).

``%load_ext hive_lab`` adds ``%%submit``, ``%hive_jobs``, ``%hive_cancel``, ``%hive_status``.
``hive_lab.Client()`` talks to the server's REST API (found by itself; see ``hive_lab.discovery``).
"""

__version__ = "0.1.0"

__all__ = ["Client", "Job", "HiveLabError", "load_ipython_extension", "progress", "replay", "__version__"]


def load_ipython_extension(ipython) -> None:
    from .magics import load_ipython_extension as load

    load(ipython)


def __getattr__(name):
    # lazy, so `hive-lab --version` and the server do not import requests/IPython for nothing, nor a
    # `hive-lab` command typing (hive_lab.reporting's)
    if name == "progress":  # hive_lab.progress(steps) from inside a job (docs/checkpoint.md)
        from .reporting import progress

        return progress
    if name == "Client":
        from .client import Client

        return Client
    if name == "Job":
        from .job import Job

        return Job
    if name == "replay":  # "what if" for the whole cluster, from its own history (admins; hive_lab/history_replay.py)
        from .history_replay import replay

        return replay
    if name == "HiveLabError":
        from .errors import HiveLabError

        return HiveLabError
    raise AttributeError(f"module 'hive_lab' has no attribute {name!r}")
