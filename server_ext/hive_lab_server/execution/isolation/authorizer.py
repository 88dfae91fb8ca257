"""The token-map shared mode exposes only hive-lab's API to people who are not admins.

Under ``TokenMapIdentityProvider`` several people share one Jupyter server, which runs as root (to
start their jobs under their accounts). jupyter_server's own APIs act as the server's user: a
terminal is a root shell, a kernel runs as root, contents reads any file. ``HiveLabAuthorizer``
therefore lets non-admins reach hive-lab's handlers only (which check each job's owner themselves)
plus the resources in ``user_resources`` (read-only); everything else answers 403. Admins (hive-lab's
``admin_users``/``admin_groups``/server owner) get everything.

``HiveLabApp`` installs it by itself when the identity provider is a ``TokenMapIdentityProvider`` and
the authorizer is jupyter_server's permissive default (``c.Isolation.shared_api_only``); set
``c.ServerApp.authorizer_class = "hive_lab_server.execution.isolation.authorizer.HiveLabAuthorizer"`` to use it
elsewhere.
"""

from __future__ import annotations

from jupyter_server.auth.authorizer import AllowAllAuthorizer, Authorizer
from traitlets import List, Unicode

HIVE_MODULE = "hive_lab_server."


class HiveLabAuthorizer(Authorizer):
    user_resources = List(
        Unicode(), ["identity"], config=True,
        help="jupyter_server resources non-admins may read besides hive-lab's API (e.g. 'identity' = /api/me)",
    )

    def is_authorized(self, handler, user, action: str, resource: str) -> bool:
        if type(handler).__module__.startswith(HIVE_MODULE) and not getattr(handler, "jupyter_server_api", False):
            return True  # hive-lab's handlers authorize each request against the job's owner
        # (a hive-lab subclass of one of jupyter_server's own handlers, e.g. kernels.session_handlers,
        # sets jupyter_server_api: it starts kernels as the server's user, so it is authorized like them)
        app = handler.settings.get("hive_lab")
        if app is None or not hasattr(app, "access"):
            return False
        from hive_lab_server.auth.access import identify

        name, groups = identify(handler, app.owner)
        if app.access.caller(name, groups).admin:
            return True
        return action == "read" and resource in self.user_resources


def install(app) -> bool:
    """Put a ``HiveLabAuthorizer`` in front of the server when it runs the token-map shared mode with
    the permissive default authorizer. Returns whether it did."""
    from hive_lab_server.auth.identity import TokenMapIdentityProvider

    server = app.serverapp
    if server is None or not isinstance(getattr(server, "identity_provider", None), TokenMapIdentityProvider):
        return False
    current = getattr(server, "authorizer", None)
    if isinstance(current, HiveLabAuthorizer):
        return True
    if current is not None and type(current) is not AllowAllAuthorizer:
        app.log.warning("hive-lab: shared token-map mode with authorizer %s: make sure it refuses terminals, "
                        "kernels and contents to non-admins (see HiveLabAuthorizer)", type(current).__name__)
        return False
    authorizer = HiveLabAuthorizer(parent=server, identity_provider=server.identity_provider)
    server.authorizer = authorizer
    if getattr(server, "web_app", None) is not None:
        server.web_app.settings["authorizer"] = authorizer
    app.settings["authorizer"] = authorizer  # the extension's settings are copied over the web app's after
    app.log.info("hive-lab: shared token-map mode: non-admins may use hive-lab's API only (HiveLabAuthorizer)")
    return True
