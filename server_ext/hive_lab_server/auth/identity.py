"""A token-map identity provider: several people share one Jupyter server, each with a token.

For small shared installs without JupyterHub (and for tests). Configure it with::

    c.ServerApp.identity_provider_class = "hive_lab_server.auth.identity.TokenMapIdentityProvider"
    c.TokenMapIdentityProvider.users = {
        "<ann's token>": {"username": "ann", "groups": ["students"]},
        "<bob's token>": "bob",                       # just a name: no groups
    }
    # or keep the tokens out of the config file:
    c.TokenMapIdentityProvider.users_file = "/etc/jupyter/hive-users.json"   # same mapping, JSON

Each request is identified by ``Authorization: token <t>`` (or ``?token=<t>``); in the browser,
typing one's token on the login page sets a cookie for that user. The server's own token
(``IdentityProvider.token``) still works and is the user running the server (``owner``).
hive-lab reads ``user.groups`` for its VC rules.
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass, field

from jupyter_server.auth.identity import IdentityProvider, User
from traitlets import Dict, Unicode, default


@dataclass
class GroupUser(User):
    """A jupyter_server User with group names."""

    groups: tuple[str, ...] = field(default_factory=tuple)


class TokenMapIdentityProvider(IdentityProvider):
    users = Dict(
        config=True,
        help="token -> username, or token -> {'username': ..., 'groups': [...], 'name': ...}",
    )
    users_file = Unicode("", config=True, help="a JSON file holding the same mapping as `users`")
    owner = Unicode(config=True, help="username of the server's own token (default: JUPYTERHUB_USER or the OS user)")

    @default("owner")
    def _owner_default(self) -> str:
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()

    def _mapping(self) -> dict[str, GroupUser]:
        raw = dict(self.users)
        if self.users_file:
            with open(self.users_file) as f:
                st = os.fstat(f.fileno())
                if st.st_mode & 0o077 and st.st_uid == os.geteuid():  # every token: never for jobs' eyes
                    self.log.warning("hive-lab: %s was readable by others; made it 0600", self.users_file)
                    os.fchmod(f.fileno(), 0o600)
                raw.update(json.load(f))
        out = {}
        for token, entry in raw.items():
            if isinstance(entry, str):
                entry = {"username": entry}
            out[str(token)] = GroupUser(
                username=entry["username"],
                name=entry.get("name", ""),
                groups=tuple(entry.get("groups", ())),
            )
        return out

    def _by_token(self, token: str) -> GroupUser | None:
        if not token:
            return None
        if not hasattr(self, "_cache"):
            self._cache = self._mapping()
        user = self._cache.get(token)
        return GroupUser(username=user.username, name=user.name, groups=user.groups) if user else None

    def _by_name(self, username: str) -> GroupUser | None:
        if not hasattr(self, "_cache"):
            self._cache = self._mapping()
        if username == self.owner:
            return GroupUser(username=self.owner)
        for user in self._cache.values():
            if user.username == username:
                return GroupUser(username=user.username, name=user.name, groups=user.groups)
        return None

    @property
    def auth_enabled(self) -> bool:
        return True

    async def get_user_token(self, handler) -> User | None:
        token = self.get_token(handler) or ""
        user = self._by_token(token)
        if user is not None:
            return user
        server_token = getattr(handler, "token", None)
        if server_token and token == server_token and not handler.get_cookie(self.get_cookie_name(handler)):
            # the server's own token without a login cookie: what jupyter_server answers (the owner),
            # without its per-request debug line (formatted, then dropped, for every API call)
            return self.generate_anonymous_user(handler)
        return await super().get_user_token(handler)

    def set_login_cookie(self, handler, user: User) -> None:
        # A client that sends its token in the Authorization header sends it with every request and
        # ignores cookies: signing a login cookie for it each time cost ~7% of the server's CPU per
        # submit. Browsers (the login form, ``?token=``) still get theirs.
        if handler.request.headers.get("Authorization"):
            return
        super().set_login_cookie(handler, user)

    def generate_anonymous_user(self, handler) -> User:
        # The server's own token identifies the person running the server.
        return GroupUser(username=self.owner)

    def user_from_cookie(self, cookie_value: str) -> User | None:
        data = json.loads(cookie_value)
        return self._by_name(data.get("username", ""))

    def process_login_form(self, handler) -> User | None:
        typed = handler.get_argument("password", default="")
        user = self._by_token(typed)
        if user is not None:
            return user
        if self.token and typed == self.token:
            return GroupUser(username=self.owner)
        return None
