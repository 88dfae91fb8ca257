"""A small async REST client for the provisioner (tornado, already in the Jupyter server process).

Where the scheduler is: the provisioner's ``url``/``token`` config, else ``HIVE_LAB_URL`` /
``HIVE_LAB_TOKEN``, else, in a JupyterHub user's server (client mode: ``HIVE_LAB_SERVICE_URL``), the
hive-lab service itself with the server's own Hub token, else the Jupyter server running in this very
process (its URL and token).

Client mode talks to the service directly rather than through this server's forwarding: a server that
stops closes its own HTTP port *before* it shuts its kernels down, so a kernel job withdrawn then
(queued or running) would never hear of it, start later for nobody, or end only as "exit code 143".
"""

from __future__ import annotations

import json
import os

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from hive_lab_server.wire import transport


class HiveApiError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def find_server(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    url = url or os.environ.get("HIVE_LAB_URL")
    token = token or os.environ.get("HIVE_LAB_TOKEN")
    if not url and os.environ.get("HIVE_LAB_SERVICE_URL") and os.environ.get("HIVE_LAB_MODE") != "scheduler":
        hub_token = os.environ.get("JUPYTERHUB_API_TOKEN") or os.environ.get("JPY_API_TOKEN")
        if hub_token:  # the server's owner's token: the service records the kernel's job under them
            url, token = os.environ["HIVE_LAB_SERVICE_URL"], token or hub_token
    if not url:
        try:
            from jupyter_server.serverapp import ServerApp

            if ServerApp.initialized():
                app = ServerApp.instance()
                url = app.connection_url
                token = token or getattr(app.identity_provider, "token", None) or None
        except Exception:
            url = None
    if not url:
        raise RuntimeError(
            "hive kernel: cannot find the hive-lab server; set HIVE_LAB_URL (the Jupyter server's URL) and "
            "HIVE_LAB_TOKEN, or start the kernel from a Jupyter server running hive-lab"
        )
    return (url if url.endswith("/") else url + "/"), token


class HiveRest:
    """The provisioner's async calls; URL, headers and error sentences from ``wire.transport`` (the
    client's own codec: ``hive_lab.Client`` is the synchronous one and cannot run inside this loop)."""

    def __init__(self, url: str, token: str | None):
        self.url = url
        self.token = token
        self.api = transport.api_url(url)
        self._http = AsyncHTTPClient(force_instance=True)

    async def request(self, method: str, path: str, body: dict | None = None, query: dict | None = None) -> dict:
        req = HTTPRequest(
            transport.request_url(self.api, path, query), method=method,
            headers=transport.request_headers(self.token, json_body=body is not None), body=json.dumps(body) if body is not None else None,
            request_timeout=30, allow_nonstandard_methods=True,
        )
        try:
            resp = await self._http.fetch(req)
        except HTTPClientError as exc:
            message, _field = transport.error_reply(exc.response.body if exc.response is not None else None)
            raise HiveApiError(exc.code, message or str(exc)) from None
        return json.loads(resp.body) if resp.body else {}

    def close(self) -> None:
        self._http.close()
