"""Launchers behind one interface (``base.Launcher``), chosen by ``HiveLabApp.launcher``.

``make_launcher(spec, **context)`` accepts ``local`` | ``docker`` | ``slurm`` (module
``hive_lab_server.execution.launchers.<name>``) or an import path ``package.module:Class`` / ``package.module``.
A module may name its class in ``LAUNCHER_CLASS``; otherwise its one ``Launcher`` subclass is used.

The constructor gets the keyword arguments it declares among the context the service offers:
``parent`` (the HiveLabApp, for traitlets config), ``state_dir`` (a directory the launcher may keep
files in), ``jobs_root``, ``log``, ``inventory``. Optional extras a launcher may define:
``host_address(node) -> str`` (what ``MASTER_ADDR`` should be for a node; default the node name).
"""

from __future__ import annotations

import importlib
import inspect

from hive_lab_server.execution.launchers.base import LaunchError, Launcher, LaunchRequest, TaskExit, TaskLaunch

__all__ = ["make_launcher", "launcher_class", "Launcher", "LaunchError", "LaunchRequest", "TaskExit", "TaskLaunch"]

BUILTIN = ("local", "docker", "slurm")


def launcher_class(spec: str) -> type[Launcher]:
    if spec in BUILTIN:
        module_name, attr = f"{__name__}.{spec}", None
    elif ":" in spec:
        module_name, attr = spec.split(":", 1)
    else:
        module_name, attr = spec, None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"launcher {spec!r}: cannot import {module_name} ({exc})") from exc
    if attr is None:
        attr = getattr(module, "LAUNCHER_CLASS", None)
    if attr is not None:
        cls = getattr(module, attr, None)
        if not (inspect.isclass(cls) and issubclass(cls, Launcher)):
            raise ValueError(f"launcher {spec!r}: {module_name}.{attr} is not a Launcher subclass")
        return cls
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Launcher) and obj is not Launcher
        and obj.__module__ == module.__name__ and not inspect.isabstract(obj)
    ]
    if len(found) != 1:
        raise ValueError(f"launcher {spec!r}: expected one Launcher class in {module_name}, found {len(found)}")
    return found[0]


def make_launcher(spec: str, **context) -> Launcher:
    cls = launcher_class(spec)
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = context
    else:
        kwargs = {k: v for k, v in context.items() if k in params}
    return cls(**kwargs)
