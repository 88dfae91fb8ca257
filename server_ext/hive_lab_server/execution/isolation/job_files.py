"""The job files the REST API serves (logs, outputs), read through ``safe_files``.

Everything is opened below the trusted ``jobs_root`` one component at a time without following
symlinks, and only regular files with a single link owned by the job's Unix user (or the server's)
are served: a job cannot make the server read ``/etc/shadow`` or another job's files for it.
"""

from __future__ import annotations

import os
import pathlib

from hive_lab_server.execution.isolation.safe_files import UnsafePath, open_beneath, open_regular, walk_regular

MAX_LOG_CHUNK = 1 << 20


def job_uids(service, user: str) -> set[int]:
    """Who may own the files of ``user``'s jobs: the account its tasks run as, and the server."""
    uids = {os.geteuid()}
    owner = getattr(service.launcher, "task_owner", None)
    if callable(owner):
        try:
            found = owner(user)
        except Exception:  # no account (any more): only the server's own files
            found = None
        if found is not None:
            uids.add(found[0])
    return uids


def _base_and_rel(service, path: pathlib.Path) -> tuple[pathlib.Path, str]:
    root = pathlib.Path(service.jobs_root)
    try:
        return root, path.relative_to(root).as_posix()
    except ValueError:  # a dir configured elsewhere (docker/slurm roots): trusted up to its parent
        return path.parent, path.name


def read_log(service, user: str, path: pathlib.Path, offset: int) -> tuple[bytes, int, int]:
    """(data from ``offset``, next offset, file size) of a task's log; empty when it is missing or unsafe."""
    base, rel = _base_and_rel(service, path)
    try:
        fd, st = open_regular(base, rel, job_uids(service, user))
    except (OSError, UnsafePath):
        return b"", offset, 0
    try:
        data = os.pread(fd, MAX_LOG_CHUNK, offset) if offset < st.st_size else b""
    finally:
        os.close(fd)
    return data, offset + len(data), st.st_size


def list_outputs(service, user: str, output_dir: str, limit: int = 10000) -> list[dict]:
    base, rel = _base_and_rel(service, pathlib.Path(output_dir))
    return [{"path": p, "size": size} for p, size in walk_regular(base, rel, job_uids(service, user), limit)]


def open_output(service, user: str, output_dir: str, path: str) -> tuple[int, os.stat_result]:
    """fd + stat of ``output_dir/path``; ``FileNotFoundError`` / ``UnsafePath`` (refused) otherwise."""
    base, rel = _base_and_rel(service, pathlib.Path(output_dir))
    return open_regular(base, f"{rel}/{path}", job_uids(service, user))


__all__ = ["job_uids", "read_log", "list_outputs", "open_output", "open_beneath", "UnsafePath"]
