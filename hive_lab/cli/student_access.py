"""What a course's students can reach on this machine, tested as them (``hive-lab course check``).

Root's view is no guide: ``os.access`` as root says yes to everything, and a venv's ``python`` is often a
symlink into root's 0700 home (pyenv), which its parents' modes do not show. So each path students
need is resolved (symlinks followed) and tested with ``/usr/sbin/runuser -u <account> --
/usr/bin/test -x PATH`` (absolute tools, an environment built from scratch: nothing the student
controls runs as root). Without root, ``runuser`` or an account of the course here, nothing is tested
and the report says so.

Also here: the course's accounts against ``Isolation.min_uid`` (a system account's every job is
refused), and what leaks one student's work to another (homes others can read, ``/proc`` without
``hidepid``), which the report warns about with the fix.
"""

from __future__ import annotations

import os
import pathlib
import pwd
import stat
import subprocess
from dataclasses import dataclass

RUNUSER = "/usr/sbin/runuser"
SH = "/bin/sh"
TEST = "/usr/bin/test"
_CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
# prints each argument the account cannot search/execute, NUL-separated (paths are arguments, never code)
_PROBE = f'for p do {TEST} -x "$p" || printf "%s\\0" "$p"; done'


@dataclass(frozen=True)
class Need:
    """A path students need: what it is for (said in the sentence) and what to do when they cannot."""

    path: str
    what: str
    fix: str


def can_test_as_students() -> bool:
    return os.geteuid() == 0 and os.access(RUNUSER, os.X_OK) and os.access(TEST, os.X_OK)


def resolved(path: str) -> list[str]:
    """``path`` and, when a symlink is on the way, where it leads (both must be reachable)."""
    real = os.path.realpath(path)
    return [path] if real == path else [path, real]


def blocked_as(account: str, paths: list[str]) -> list[str]:
    """The paths ``account`` cannot search/execute (``test -x`` run as that account)."""
    if not paths:
        return []
    r = subprocess.run([RUNUSER, "-u", account, "--", SH, "-c", _PROBE, "sh", *paths], env=_CLEAN_ENV, cwd="/",
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise OSError(f"runuser -u {account} failed: {r.stderr.decode(errors='replace').strip()}")
    return [p for p in r.stdout.decode(errors="replace").split("\0") if p]


def first_blocked_dir(account: str, path: str) -> str | None:
    """The first dir on the way to ``path`` (as written, then symlinks resolved) that ``account`` cannot search."""
    given, real = pathlib.Path(os.path.abspath(path)), pathlib.Path(os.path.realpath(path))
    dirs = list(dict.fromkeys(str(d) for d in [*reversed(given.parents), *reversed(real.parents)]))
    blocked = set(blocked_as(account, dirs))
    return next((d for d in dirs if d in blocked), None)


def unix_account(user: str, mapping: dict) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(mapping.get(user, user))
    except KeyError:
        return None


def exposed_homes(accounts: list[pwd.struct_passwd]) -> list[str]:
    """Homes other accounts may list or enter (classmates could copy homework from them)."""
    out = []
    for pw in accounts:
        try:
            mode = stat.S_IMODE(os.stat(pw.pw_dir).st_mode)
        except OSError:
            continue
        if mode & 0o005 and pw.pw_dir not in ("/", "/nonexistent"):
            out.append(f"{pw.pw_dir} ({mode:04o})")
    return out


def proc_hides_pids(mounts: str) -> bool:
    """Whether the ``/proc`` in effect (the last one mounted there) has ``hidepid=invisible`` (or 2)."""
    options = ""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "/proc" and parts[2] == "proc":
            options = parts[3]
    return any(o in ("hidepid=2", "hidepid=invisible") for o in options.split(","))


PROC_FIX = ("mount -o remount,hidepid=invisible /proc, and in /etc/fstab: "
            "proc /proc proc defaults,hidepid=invisible 0 0")
