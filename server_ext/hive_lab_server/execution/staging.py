"""Writing a job's staged files (spec ``files``: a kernel's connection file with its HMAC key, the
owner's token, ...) so that nobody but the job's owner can read them, at any moment.

Files are created 0600 and directories 0700 in the same system call that creates them (``os.open`` /
``os.mkdir`` with a mode; the umask can only remove bits), never widened and narrowed afterwards. When
the job's tasks run as another Unix user than the server (Slurm ``submit_as_user`` or slurmrestd, a
docker ``user``), the server (root) hands them to that user with ``fchown`` before any byte is
written. A file is written under a temporary name and renamed into place, so a reader sees the old
or the new content, and a symlink planted at the target is replaced rather than followed.
"""

from __future__ import annotations

import os
import pathlib

Owner = tuple[int, int]  # uid, gid


def _chown(path: str | pathlib.Path, owner: Owner | None) -> None:
    if owner is not None and os.geteuid() == 0:
        os.chown(path, owner[0], owner[1], follow_symlinks=False)


def private_dir(path: pathlib.Path, owner: Owner | None = None, *, stop_at: pathlib.Path | None = None) -> None:
    """Create ``path`` and its missing parents (up to ``stop_at``) 0700, owned by ``owner``.

    Directories that exist are left as they are, except that those below ``stop_at`` are handed to
    ``owner`` (the provisioner may have created ``.hive-kernel`` before the job was placed)."""
    missing: list[pathlib.Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p or (stop_at is not None and p == stop_at):
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        _chown(d, owner)
    if owner is not None and stop_at is not None:
        p = path
        while p != stop_at and stop_at in p.parents:
            if not p.is_symlink() and p.is_dir() and p.stat().st_uid != owner[0]:
                _chown(p, owner)
            p = p.parent


def write_private(path: pathlib.Path, text: str, owner: Owner | None = None) -> None:
    """Write ``text`` to ``path``, readable by its owner only (0600) from its creation on.

    ``owner`` None keeps the owner of the file being replaced (when the server runs as root), so a
    kernel restart rewriting its connection file leaves it readable by the job's user."""
    if owner is None and os.geteuid() == 0:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if st.st_uid != 0:
                owner = (st.st_uid, st.st_gid)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _replace_in(dir_fd, path.name, text, owner)
    finally:
        os.close(dir_fd)


def _replace_in(dir_fd: int, name: str, text: str, owner: Owner | None) -> None:
    """Write ``text`` as ``name`` in the dir ``dir_fd``: 0600 (handed to ``owner``) from its creation on,
    under a temporary name first and renamed into place (a link planted at ``name`` is replaced)."""
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        if owner is not None and os.geteuid() == 0:
            os.fchown(fd, owner[0], owner[1])
        with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as f:
            f.write(text)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_beneath(base: pathlib.Path, rel: str, text: str, owner: Owner | None = None) -> None:
    """Write ``text`` to ``base/rel`` (0600, handed to ``owner``), creating the missing dirs (0700, the
    owner's) on the way, without following any link below ``base``: every component is opened with
    ``O_NOFOLLOW`` relative to its parent's descriptor, so a job that swaps a dir of its own for a link
    while the server (root) stages its files cannot send the write anywhere else. ``UnsafePath`` when a
    link (or ``..``) is on the way."""
    from hive_lab_server.execution.isolation.safe_files import UnsafePath, _parts

    parts = _parts(rel)
    if not parts:
        raise UnsafePath("empty path")
    fd = _open_dirs_beneath(base, parts[:-1], rel, owner)
    try:
        _replace_in(fd, parts[-1], text, owner)
    finally:
        os.close(fd)


def dir_beneath(base: pathlib.Path, rel: str, owner: Owner | None = None) -> pathlib.Path:
    """Create the directory ``base/rel`` and those on the way (0700, the owner's), following no link below
    ``base`` (as ``write_beneath``); its path. ``UnsafePath`` when a link (or ``..``) is on the way."""
    from hive_lab_server.execution.isolation.safe_files import UnsafePath, _parts

    parts = _parts(rel)
    if not parts:
        raise UnsafePath("empty path")
    os.close(_open_dirs_beneath(base, parts, rel, owner))
    return pathlib.Path(base, *parts)


def _open_dirs_beneath(base: pathlib.Path, names: list[str], rel: str, owner: Owner | None) -> int:
    """A descriptor of ``base/names...``, each made if missing, each opened with ``O_NOFOLLOW`` from its
    parent's descriptor."""
    from hive_lab_server.execution.isolation.safe_files import UnsafePath

    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, flags)
    try:
        for name in names:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
                if owner is not None and os.geteuid() == 0:
                    os.chown(name, owner[0], owner[1], dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                pass
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                raise UnsafePath(f"{name!r} in {rel!r} is not a directory of the job (a link?)") from exc
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd
