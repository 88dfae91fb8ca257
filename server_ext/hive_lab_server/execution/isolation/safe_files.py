"""Opening files that a job wrote, without letting the job point us elsewhere.

A job owns its dir, so it can plant symlinks (``ln -s / $HIVE_OUTPUT_DIR/x``), rename dirs under us or
hard-link a file from outside. The server (often root) therefore never opens such a path in one go:
``open_beneath`` walks it one component at a time from a trusted base dir with ``O_NOFOLLOW`` (a
symlink anywhere fails), refuses ``..`` and absolute parts, and ``check_regular`` then refuses what is
not a plain file with one link (``st_nlink == 1``) owned by an expected uid.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Iterable, Iterator

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(PermissionError):
    """The path leaves its base dir, or is a symlink, a hard link, not a regular file or foreign-owned."""


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise UnsafePath(f"{rel!r} is not a path inside the dir")
    return parts


def open_beneath(base: str | os.PathLike, rel: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """An fd for ``base/rel`` opened with no symlink followed below ``base`` (``base`` itself is
    trusted). Raises ``FileNotFoundError``, ``UnsafePath`` (a symlink on the way) or ``OSError``."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath("empty path")
    fd = os.open(base, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            nxt = _openat(name, _DIR_FLAGS, 0, fd)
            os.close(fd)
            fd = nxt
        return _openat(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, fd)
    finally:
        os.close(fd)


def _openat(name: str, flags: int, mode: int, dir_fd: int) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                    raise UnsafePath(f"{name!r} is a symbolic link") from None
            except FileNotFoundError:
                pass
        raise


def check_regular(fd: int, uids: Iterable[int] | None = None) -> os.stat_result:
    """``fstat(fd)`` if it is a regular file with a single link (and owned by one of ``uids``)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath("not a regular file")
    if st.st_nlink != 1:
        raise UnsafePath("a hard link (the file has other names, maybe outside the job dir)")
    if uids is not None and st.st_uid not in set(uids):
        raise UnsafePath(f"owned by uid {st.st_uid}, not by the job's user")
    return st


def open_regular(base: str | os.PathLike, rel: str, uids: Iterable[int] | None = None) -> tuple[int, os.stat_result]:
    """``open_beneath`` for reading + ``check_regular``; the caller closes the fd. ``O_NONBLOCK`` so a
    FIFO the job planted cannot hang the server (it is then refused as not a regular file)."""
    fd = open_beneath(base, rel, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return fd, check_regular(fd, uids)
    except BaseException:
        os.close(fd)
        raise


def walk_regular(base: str | os.PathLike, rel: str, uids: Iterable[int] | None = None,
                 limit: int = 10000) -> Iterator[tuple[str, int]]:
    """(path relative to ``base/rel``, size) of every regular single-link file below ``base/rel``,
    sorted, never entering a symlinked dir."""
    uids = None if uids is None else set(uids)
    try:
        top = open_beneath(base, rel, _DIR_FLAGS) if _parts(rel) else os.open(base, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError, UnsafePath):
        return
    count = 0
    stack: list[tuple[str, int]] = [("", top)]
    try:
        while stack:
            prefix, fd = stack.pop()
            try:
                entries = sorted(os.listdir(fd))
                subdirs = []
                for name in entries:
                    try:
                        st = os.lstat(name, dir_fd=fd)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        subdirs.append(name)
                    elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and (uids is None or st.st_uid in uids):
                        yield prefix + name, st.st_size
                        count += 1
                        if count >= limit:
                            return
                for name in reversed(subdirs):
                    try:
                        stack.append((prefix + name + "/", os.open(name, _DIR_FLAGS, dir_fd=fd)))
                    except OSError:
                        continue
            finally:
                os.close(fd)
    finally:
        for _, fd in stack:
            os.close(fd)
