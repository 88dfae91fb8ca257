"""Old import paths of modules the package reshuffle moved (issue 23) keep working, with a warning.

Admins' configs name classes by path (``c.ServerApp.identity_provider_class =
"hive_lab_server.identity.TokenMapIdentityProvider"``, ``c.ServerApp.authorizer_class``,
``c.HiveLabApp.launcher = "hive_lab_server.launchers.local:LocalLauncher"``, an installed kernel
provisioner entry point ``hive_lab_server.provisioner:HiveProvisioner``). An import of an old path gets
the module at its new path, the very same module object (so the classes are the same classes, and a
launcher named by module still finds its one class), and a ``MovedPathWarning`` (a
``DeprecationWarning`` shown by default) naming the new path.

``MOVED`` is every rename of commit 5aaf360 (``git log --diff-filter=R -- server_ext/``), pointed at
where the module is now (issue 39 moved the wire types into ``wire/``), plus the paths issue 39 moved
that the docs named (``hive_lab_server.jobs.job_state``; its other moves were internal paths): whole
packages map by prefix (``hive_lab_server.isolation.authorizer`` ->
``hive_lab_server.execution.isolation.authorizer``, modules added there later included), single
modules exactly. ``install()`` (run when ``hive_lab_server`` is imported) puts the finder first on
``sys.meta_path``, so an old package path never loads a second copy of a module from the new dir.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

OLD = "hive_lab_server."

# old path -> new path (packages: every module below them too)
MOVED = {
    # packages
    "hive_lab_server.formats": "hive_lab_server.api.formats",
    "hive_lab_server.handlers": "hive_lab_server.api.handlers",
    "hive_lab_server.isolation": "hive_lab_server.execution.isolation",
    "hive_lab_server.launchers": "hive_lab_server.execution.launchers",
    "hive_lab_server.slurm": "hive_lab_server.execution.slurm",
    "hive_lab_server.arrays": "hive_lab_server.jobs.arrays",
    "hive_lab_server.lifecycle": "hive_lab_server.jobs.lifecycle",
    "hive_lab_server.pipelines": "hive_lab_server.jobs.pipelines",
    # modules
    **{f"hive_lab_server.{m}": f"hive_lab_server.api.{m}" for m in ("event_outbox", "load_shedding", "openapi")},
    **{f"hive_lab_server.{m}": f"hive_lab_server.wire.{m}" for m in ("events", "models", "spec")},
    **{f"hive_lab_server.{m}": f"hive_lab_server.auth.{m}" for m in ("access", "identity")},
    **{f"hive_lab_server.{m}": f"hive_lab_server.jobs.{m}"
       for m in ("limits", "service", "start_estimates", "submit_checks")},
    **{f"hive_lab_server.{m}": f"hive_lab_server.wire.{m}" for m in ("job_state", "notebook_run")},
    "hive_lab_server.staging": "hive_lab_server.execution.staging",
    # modules of the packages above that issue 39 moved again, into the bottom package ``wire`` (the
    # exact names win over their package's prefix)
    "hive_lab_server.arrays.spec": "hive_lab_server.wire.array_spec",
    "hive_lab_server.lifecycle.states": "hive_lab_server.wire.states",
    "hive_lab_server.pipelines.depends_spec": "hive_lab_server.wire.depends_spec",
    "hive_lab_server.pipelines.schedule_models": "hive_lab_server.wire.schedule_models",
    "hive_lab_server.formats.runtime_env": "hive_lab_server.execution.runtime_env",
    "hive_lab_server.formats.secrets": "hive_lab_server.execution.secrets",
    # issue 39's moves of a documented path (docs/rest-api.md names the job states' module)
    "hive_lab_server.jobs.job_state": "hive_lab_server.wire.job_state",
    "hive_lab_server.provisioner": "hive_lab_server.kernels.provisioner",
    **{f"hive_lab_server.{m}": f"hive_lab_server.timeshare.{m}"
       for m in ("elastic_rounds", "progress", "round_cache", "rounds")},
    **{f"hive_lab_server.{m}": f"hive_lab_server.usage.{m}" for m in ("accounting", "history_export", "metrics")},
}


class MovedPathWarning(DeprecationWarning):
    """An old hive_lab_server import path was used (shown by default, unlike a plain DeprecationWarning,
    so that admins see it in the server's log)."""


def new_path(old: str) -> str | None:
    """Where the module ``old`` lives now, or None when it did not move."""
    if old in MOVED:
        return MOVED[old]
    head = old
    while "." in head:
        head, _, _ = head.rpartition(".")
        if head in MOVED:
            return MOVED[head] + old[len(head):]
    return None


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}: write {new} in your config (the old path will be removed)",
                  MovedPathWarning, stacklevel=3)


class _MovedLoader(importlib.abc.Loader):
    """Hands out the module already imported at its new path (no second copy, same classes)."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec):
        module = importlib.import_module(self.new)
        self._real_spec = module.__spec__  # the import system stamps the old spec on it: put it back
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self._real_spec
        _warn(self.old, self.new)

    def get_code(self, fullname: str):
        """``python -m <old path>`` runs the module at its new path."""
        _warn(fullname, self.new)
        return importlib.util.find_spec(self.new).loader.get_code(self.new)


class MovedPathFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith(OLD):
            return None
        new = new_path(fullname)
        if new is None:
            return None
        try:
            real = importlib.util.find_spec(new)
        except ModuleNotFoundError:
            return None
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(fullname, new),
                                               is_package=real.submodule_search_locations is not None)


def install() -> None:
    if not any(isinstance(f, MovedPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedPathFinder())
    warnings.filterwarnings("default", category=MovedPathWarning)
