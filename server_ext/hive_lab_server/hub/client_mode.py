"""Client mode: a user's single-user server runs no scheduler; hive-lab's API is forwarded to the service.

Chosen with ``c.HiveLabApp.mode = "client"`` (or ``HIVE_LAB_MODE=client``; set by default when
``HIVE_LAB_SERVICE_URL`` is in the environment, which ``hive-lab hub-config`` puts in
``c.Spawner.environment``). Requests are forwarded with the server's ``JUPYTERHUB_API_TOKEN``, whose
owner is the server's user; so only that user's own requests are forwarded (anyone else the Hub lets
into this server gets 403): a job, ``%%submit`` or GPU kernel is always recorded under the person who
runs it.
"""

from __future__ import annotations

import os

from hive_lab_server.stop_signals import stop_cleanly_on_sigint
from hive_lab_server.hub.forward import EVENTS_ROUTE, ForwardEventsHandler, ForwardHandler

CLIENT_ROUTES = [
    (EVENTS_ROUTE, ForwardEventsHandler),
    (r"/hive_lab/api/(?P<path>.*)", ForwardHandler),
]


class Upstream:
    """Where the service is and the token to call it with (the server owner's Hub API token)."""

    def __init__(self, service_url: str, token: str | None):
        if not service_url:
            raise ValueError(
                "hive-lab client mode needs the service's URL: set c.HiveLabApp.service_url or "
                "HIVE_LAB_SERVICE_URL (e.g. http://127.0.0.1:10101/services/hive-lab/)"
            )
        self.base_url = service_url if service_url.endswith("/") else service_url + "/"
        self.api_url = self.base_url + "hive_lab/api/"
        self.token = token

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}


def initialize_client(app) -> None:
    """``HiveLabApp.initialize_settings`` in client mode: no store, scheduler, launcher or GPU monitor."""
    token = os.environ.get("JUPYTERHUB_API_TOKEN") or os.environ.get("JPY_API_TOKEN")
    app.upstream = Upstream(app.service_url, token)
    app.service = None
    app.settings["hive_lab"] = app
    from hive_lab_server.kernels.websocket import install

    # a GPU kernel started here may wait in the service's queue: its websocket opens at once all the same
    # (without this, jupyter_server held it for kernel_info_timeout, 60 s, and the proxy answered 503)
    install(app.settings)
    stop_cleanly_on_sigint(getattr(app, "serverapp", None), app.log)
    app.log.info("hive-lab: client mode (no scheduler here); hive_lab/api/ forwards to the service at %s as %s",
                 app.upstream.base_url, app.owner)
