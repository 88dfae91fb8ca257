"""The command JupyterHub runs for the hive-lab service: ``python -m hive_lab_server.hub.service_app``.

A Jupyter server hosting only the hive-lab extension, in scheduler mode, at the service's prefix
(``JUPYTERHUB_SERVICE_PREFIX``, e.g. ``/services/hive-lab/``) and address (``JUPYTERHUB_SERVICE_URL``),
with the Hub's identity (``hub.identity``). Every other server extension is off, terminals are off, and
the authorizer refuses every API but hive-lab's. Extra arguments are passed to the server, e.g.
``--config=/etc/hive-lab/hive_lab_config.py`` holding the ``c.HiveLabApp`` settings (cluster, VCs,
``vc_access``, ``db_url``, ``jobs_root``).
"""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit

from jupyter_server.serverapp import ServerApp

EXTENSION = "hive_lab_server"


class HiveLabServiceApp(ServerApp):
    name = "hive-lab-service"
    description = "hive-lab's scheduler as a JupyterHub service"

    def find_server_extensions(self) -> None:
        super().find_server_extensions()
        # only hive-lab: no JupyterLab, terminals, LSP... in a server that runs as root
        enabled = {name: False for name in self.jpserver_extensions}
        enabled[EXTENSION] = True
        self.jpserver_extensions = enabled
        self.config.ServerApp.jpserver_extensions = dict(enabled)

    def init_webapp(self) -> None:
        super().init_webapp()
        # as jupyterhub-singleuser does: tornado's own xsrf check runs before authentication (so before
        # a token is seen); jupyter_server checks xsrf for cookie-authenticated requests in prepare()
        self.web_app.settings["xsrf_cookies"] = False


def service_argv(env: dict[str, str] | None = None) -> list[str]:
    """The server's arguments, from the environment the Hub gives a managed service."""
    env = os.environ if env is None else env
    missing = [k for k in ("JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL") if not env.get(k)]
    if missing:
        raise SystemExit(
            f"hive-lab service: {', '.join(missing)} not set; this command is run by JupyterHub as a managed "
            "service (c.JupyterHub.services, see `hive-lab hub-config`)"
        )
    url = urlsplit(env["JUPYTERHUB_SERVICE_URL"])
    prefix = env.get("JUPYTERHUB_SERVICE_PREFIX") or url.path or "/"
    args = [
        f"--ServerApp.ip={url.hostname or '127.0.0.1'}",
        f"--ServerApp.port={url.port or 80}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={prefix}",
        "--ServerApp.identity_provider_class=hive_lab_server.hub.identity.HubIdentityProvider",
        "--ServerApp.authorizer_class=hive_lab_server.hub.identity.ServiceAuthorizer",
        "--ServerApp.terminals_enabled=False",
        "--ServerApp.open_browser=False",
        # SIGINT stops it at once (the Hub's Ctrl-C, a supervisor): no "Shutdown this server (y/[n])?" prompt,
        # which, with no one to answer, left it running until SIGTERM (a Hub took ~31 s to stop)
        "--ServerApp.answer_yes=True",
        "--HiveLabApp.mode=scheduler",
        "--HiveLabApp.owner_is_admin=False",  # the OS user running the service is nobody's Hub identity
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    HiveLabServiceApp.launch_instance(argv=service_argv() + list(argv))


if __name__ == "__main__":
    main()
