"""hive-lab user -> the Unix account its jobs run as.

The mapping is the admin's (``c.Isolation.accounts = {"ann": "ann01"}``); a user not in it runs as the
account of the same name. A user with no such account gets an ``AccountError`` whose message says
what to fix; it never falls back to another account (least of all root's).
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass


class AccountError(LookupError):
    """The user cannot run jobs here (no account, or root not allowed). The message is shown to them."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]  # supplementary groups (initgroups)
    home: str
    shell: str

    def env(self) -> dict[str, str]:
        """The login variables a task of this account gets (HOME, USER, LOGNAME, SHELL)."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "SHELL": self.shell or "/bin/sh"}


def resolve_account(user: str, mapping: dict[str, str] | None = None, *, allow_root: bool = False,
                    min_uid: int = 0) -> Account:
    """The account ``user``'s jobs run as; ``AccountError`` when there is none, it is root and
    ``allow_root`` is off, or it is a system account (uid below ``min_uid``) the admin did not map."""
    name = (mapping or {}).get(user, user)
    if not name:
        raise AccountError("the job has no owner; cannot choose a Unix account to run it as")
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        how = f" (mapped from {user!r} by Isolation.accounts)" if name != user else ""
        raise AccountError(
            f"user {user!r} has no Unix account {name!r}{how} on this machine; ask an admin to create it "
            f"or to map {user!r} to an account in c.Isolation.accounts") from None
    if pw.pw_uid == 0 and not allow_root:
        raise AccountError(
            f"user {user!r} maps to the root account; jobs never run as root unless an admin sets "
            f"c.Isolation.allow_root = True")
    if 0 < pw.pw_uid < min_uid and user not in (mapping or {}):
        raise AccountError(
            f"user {user!r} has the system account {name!r} (uid {pw.pw_uid}, below c.Isolation.min_uid = "
            f"{min_uid}); jobs do not run as system accounts unless an admin maps the user to one in "
            f"c.Isolation.accounts")
    groups = tuple(sorted(set(os.getgrouplist(pw.pw_name, pw.pw_gid))))
    return Account(pw.pw_name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir or "/", pw.pw_shell or "/bin/sh")


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
