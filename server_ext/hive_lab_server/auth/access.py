"""Who is calling and what they may do: hive-lab's own rules on top of jupyter_server's auth.

- Jobs belong to the user who submitted them.
- ``vc_access`` maps users (``"ann"``), groups (``"@students"``) and everyone (``"*"``) to lists of
  VC names (``"*"`` = every VC). A user submits only to the VCs they are mapped to.
- Admins (``admin_users``, members of ``admin_groups``, and the user running the server unless
  ``owner_is_admin`` is off) may do everything.
- Others' jobs are visible without spec, env, logs, outputs or working dirs; only owners and admins
  cancel a job.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Any, Iterable

# jupyter_server's stock identity providers authenticate the server's token/password, not a person:
# every request they accept is the person who started the server.
_SINGLE_USER_PROVIDERS = {"IdentityProvider", "PasswordIdentityProvider", "LegacyIdentityProvider"}


@dataclass(frozen=True)
class Caller:
    user: str
    groups: tuple[str, ...]
    admin: bool
    vcs: tuple[str, ...]  # VCs this caller may submit to

    def may_submit(self, vc: str) -> bool:
        return self.admin or vc in self.vcs

    def owns(self, job: dict[str, Any]) -> bool:
        return job.get("user") == self.user

    def sees_private(self, job: dict[str, Any]) -> bool:
        return self.admin or self.owns(job)


def server_owner() -> str:
    """The person the server runs for: JupyterHub's user, else the OS user."""
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def identify(handler, owner: str) -> tuple[str, tuple[str, ...]]:
    """(username, groups) of an authenticated request."""
    user = handler.current_user
    provider = getattr(handler, "identity_provider", None)
    if provider is not None and type(provider).__name__ in _SINGLE_USER_PROVIDERS:
        return owner, ()
    username = getattr(user, "username", None) or str(user)
    groups = getattr(user, "groups", None)
    if groups is None:
        hub_user = getattr(user, "hub_user", None)
        if isinstance(hub_user, dict):
            groups = hub_user.get("groups")
    return username, tuple(sorted(str(g) for g in (groups or ())))


def serves_many(handler) -> bool:
    """Whether the server serves several people (JupyterHub, a token map), not only its owner: the
    panel shows its admin sections (instructor view, usage) only then."""
    provider = getattr(handler, "identity_provider", None)
    if provider is None or type(provider).__name__ in _SINGLE_USER_PROVIDERS:
        return False
    if hasattr(provider, "users_file") and hasattr(provider, "users"):  # a token map: shared when it maps anyone
        return bool(provider.users or provider.users_file)
    return True


class AccessPolicy:
    def __init__(
        self,
        vc_access: dict[str, Iterable[str]],
        admin_users: Iterable[str],
        admin_groups: Iterable[str],
        owner: str | None,
        all_vcs: Iterable[str],
    ):
        self.vc_access = {k: tuple(v) if not isinstance(v, str) else (v,) for k, v in (vc_access or {}).items()}
        self.admin_users = set(admin_users or ())
        self.admin_groups = set(admin_groups or ())
        self.owner = owner
        self.all_vcs = tuple(all_vcs)

    def caller(self, user: str, groups: Iterable[str] = (), admin: bool = False) -> Caller:
        """``admin``: the identity provider already made this caller an admin (e.g. a Hub scope)."""
        groups = tuple(groups)
        admin = admin or user in self.admin_users or bool(self.admin_groups.intersection(groups)) or (
            self.owner is not None and user == self.owner
        )
        allowed: set[str] = set()
        for key in ("*", user, *(f"@{g}" for g in groups)):
            for vc in self.vc_access.get(key, ()):
                if vc == "*":
                    allowed.update(self.all_vcs)
                else:
                    allowed.add(vc)
        if admin:
            allowed.update(self.all_vcs)
        vcs = tuple(v for v in self.all_vcs if v in allowed)
        return Caller(user=user, groups=groups, admin=admin, vcs=vcs)

    def fair_share_group(self, caller: Caller, vc: str) -> str:
        """The group a caller's job in ``vc`` counts under for fair share: the first (by name) of their
        groups that ``vc_access`` maps to ``vc`` ("@group"), else their first group, else "" (no group).
        Groups come from the identity (Hub groups, the token map's ``groups``)."""
        if not caller.groups:
            return ""
        for group in sorted(caller.groups):
            granted = self.vc_access.get(f"@{group}", ())
            if vc in granted or "*" in granted:
                return group
        return sorted(caller.groups)[0]


def unknown_vcs(vc_access: dict, cluster_vcs) -> list[str]:
    """Sentences for each VC that ``vc_access`` grants but the cluster does not have (a course set up with
    ``@cv-101 -> cv-101`` on a cluster without ``cv-101``: every student would be told they may submit to
    no VC). Empty when all are known."""
    known = set(cluster_vcs)
    out = []
    for who, vcs in sorted((vc_access or {}).items()):
        for vc in ([vcs] if isinstance(vcs, str) else list(vcs)):
            if vc != "*" and vc not in known:
                out.append(f"vc_access gives {who!r} the VC {vc!r}, which the cluster does not have (its VCs: "
                           f"{', '.join(sorted(known))}); add it to cluster_config's virtual clusters or fix vc_access")
    return out
