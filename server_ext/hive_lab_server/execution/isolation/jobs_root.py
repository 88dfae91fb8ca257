"""The jobs root must be reachable by the accounts jobs run as.

Each job's working dir is ``<jobs_root>/<id>``, entered by the task after it dropped to its owner's
account. When the jobs root or a dir above it is not searchable by others (``o+x``), every job fails
at run time (``cannot enter the working dir ... Permission denied``, exit 126); Jupyter's data dir,
where the default jobs root lives, is created 0700. A server that isolates jobs therefore refuses to
start with such a jobs root (``HiveLabApp.initialize_settings``), saying what to set instead.
"""

from __future__ import annotations

import os
import pathlib
import stat

SETTING = "c.HiveLabApp.jobs_root"
SUGGESTED = "/var/lib/hive-lab/jobs"


def _dirs_on_the_way(path: pathlib.Path, include_self: bool) -> list[pathlib.Path]:
    """Every dir a process passes to reach ``path``, symlinks followed: for each dir above it as written,
    the dir it resolves to and the dirs above that (a symlink itself has no mode that counts)."""
    path = pathlib.Path(os.path.abspath(path))
    lexical = [*reversed(path.parents), *([path] if include_self else [])]
    seen: dict[pathlib.Path, None] = {}
    for d in lexical:
        real = pathlib.Path(os.path.realpath(d))
        for r in [*reversed(real.parents), real]:
            seen.setdefault(r, None)
    return list(seen)


def untraversable(path: str | os.PathLike, *, include_self: bool = True) -> list[pathlib.Path]:
    """The dirs on the way to ``path`` that other accounts cannot search (no ``o+x``), or that are missing."""
    out = []
    for d in _dirs_on_the_way(pathlib.Path(path), include_self):
        try:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                out.append(d)
        except OSError:
            out.append(d)
    return out


def unreachable_jobs_root(path: str | os.PathLike, *, include_self: bool = True) -> str | None:
    """A sentence saying why jobs run as their owners could not reach ``path``, and what to set; None: they can."""
    blocked = untraversable(path, include_self=include_self)
    if not blocked:
        return None
    modes = ", ".join(f"{d} ({_mode(d)})" for d in blocked)
    return (f"{SETTING} is {path}, but other accounts cannot enter {modes}, so every job run as its owner "
            f"would fail with 'cannot enter the working dir': set {SETTING} to a dir every account can "
            f"traverse, e.g. {SUGGESTED!r} (mkdir -p {SUGGESTED} && chmod 711 {SUGGESTED}), or "
            f"chmod o+x {' '.join(str(d) for d in blocked)}")


def _mode(d: pathlib.Path) -> str:
    try:
        return f"{stat.S_IMODE(os.stat(d).st_mode):04o}"
    except OSError:
        return "missing"
