"""The service's identity and authorization: the Hub says who calls; only hive-lab's API is served.

Each request's token (``Authorization: token ...``, or the service's OAuth cookie in a browser) is
resolved by the Hub (``jupyterhub.services.auth.HubOAuth``, through jupyterhub's own
``JupyterHubIdentityProvider``): the caller must hold ``access:services!service=hive-lab``. hive-lab
then reads the Hub user's groups (-> VCs through ``vc_access`` ``@group`` rules) and makes admins of
callers whose token holds one of ``admin_scopes`` (default ``custom:hive-lab:admin``; declare it with
``c.JupyterHub.custom_scopes`` and grant it through ``c.JupyterHub.load_roles``).

The service runs as root (it starts every user's jobs), so its Jupyter server must serve nothing else:
``ServiceAuthorizer`` refuses every resource but hive-lab's (terminals, kernels, contents, sessions,
kernelspecs, ... -> 403), whoever asks.
"""

from __future__ import annotations

from jupyterhub.singleuser.extension import JupyterHubAuthorizer, JupyterHubIdentityProvider
from traitlets import Bool, List, Set, Unicode

from hive_lab_server.api.handlers.base import AUTH_RESOURCE
from hive_lab_server.hub import ADMIN_SCOPE


def hub_admin(hub_user: dict, admin_scopes: set[str], hub_admins: bool) -> bool:
    """Whether a Hub user model (``GET /hub/api/user`` with the caller's token) makes a hive-lab admin."""
    scopes = set(hub_user.get("scopes") or ())
    return bool(scopes & admin_scopes) or (hub_admins and bool(hub_user.get("admin")))


class HubIdentityProvider(JupyterHubIdentityProvider):
    admin_scopes = List(
        Unicode(), [ADMIN_SCOPE], config=True,
        help="a caller whose Hub token holds any of these scopes is a hive-lab admin",
    )
    hub_admins = Bool(
        False, config=True,
        help="JupyterHub admins (admin: true) are hive-lab admins even without an admin scope on their token",
    )

    async def get_user(self, handler):
        user = await super().get_user(handler)
        if user is not None and not hasattr(user, "hive_admin"):
            user.groups = tuple(sorted(str(g) for g in user.hub_user.get("groups") or ()))
            user.hive_admin = hub_admin(user.hub_user, set(self.admin_scopes), self.hub_admins)
        return user


class ServiceAuthorizer(JupyterHubAuthorizer):
    allowed_resources = Set(
        Unicode(), {AUTH_RESOURCE}, config=True,
        help="""jupyter_server resources the service serves (to callers holding its access scope).
        Default: hive-lab's API only; terminals, kernels, contents, sessions... are refused to everyone.""",
    )

    def is_authorized(self, handler, user, action, resource) -> bool:
        if resource not in self.allowed_resources:
            self.log.warning("hive-lab service: %s may not %s %s (only %s are served here)",
                             getattr(user, "username", user), action, resource, ", ".join(sorted(self.allowed_resources)))
            return False
        return super().is_authorized(handler, user, action, resource)
