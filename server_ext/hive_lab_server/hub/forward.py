"""Forwarding of ``hive_lab/api/*`` from a user's server (client mode) to the hive-lab service.

HTTP requests are relayed as they are (method, path, query, body, content type), streaming the answer
(``logs?follow=1`` stays a live stream); the ``events`` websocket is relayed message by message. The
service sees the server owner's Hub token, hence the owner; callers other than the owner get 403.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import httputil, web, websocket
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.iostream import StreamClosedError

from hive_lab_server.api.handlers.base import AUTH_RESOURCE

API_MARK = "/hive_lab/api/"
EVENTS_ROUTE = r"/hive_lab/api/events/?"
# answer headers worth relaying (hop-by-hop ones and the service's cookies are not)
RELAYED_HEADERS = ("Content-Type", "Content-Disposition", "Retry-After", "Allow", "Location")
FOLLOW_TIMEOUT_S = 7 * 24 * 3600.0
REQUEST_TIMEOUT_S = 120.0


def check_owner(handler: Any) -> None:
    """Only the server's owner speaks through it: their token is the one forwarded."""
    hive = handler.settings["hive_lab"]
    name = getattr(handler.current_user, "username", None)
    if name != hive.owner:
        raise web.HTTPError(
            403, f"hive-lab requests through {hive.owner}'s server are made as {hive.owner}; {name} may not make "
                 f"them: use your own server (or the hive-lab service with your own token)"
        )


def upstream_path(raw_path: str) -> str:
    """``/user/ann/hive_lab/api/jobs/x%2Fy`` -> ``jobs/x%2Fy`` (still percent-encoded)."""
    return raw_path[raw_path.index(API_MARK) + len(API_MARK):]


class ForwardHandler(ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or self._reason
        if isinstance(exc, web.HTTPError) and exc.args and message:
            message = message % exc.args
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": message, "field": None}))

    def on_connection_close(self) -> None:
        self._client_gone = True

    @web.authenticated
    @authorized
    async def get(self, path: str = "") -> None:
        await self._forward()

    @web.authenticated
    @authorized
    async def post(self, path: str = "") -> None:
        await self._forward()

    @web.authenticated
    @authorized
    async def put(self, path: str = "") -> None:
        await self._forward()

    @web.authenticated
    @authorized
    async def patch(self, path: str = "") -> None:
        await self._forward()

    @web.authenticated
    @authorized
    async def delete(self, path: str = "") -> None:
        await self._forward()

    async def _forward(self) -> None:
        check_owner(self)
        upstream = self.settings["hive_lab"].upstream
        url = upstream.api_url + upstream_path(self.request.path)
        if self.request.query:
            url += "?" + self.request.query
        headers = {"Accept": self.request.headers.get("Accept", "application/json"), **upstream.headers()}
        if "Content-Type" in self.request.headers:
            headers["Content-Type"] = self.request.headers["Content-Type"]
        method = self.request.method
        body = self.request.body if method in ("POST", "PUT", "PATCH") else None
        follow = self.get_argument("follow", "") not in ("", "0", "false")
        answer = httputil.HTTPHeaders()
        state = {"code": None, "sent": False}

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                state["code"] = httputil.parse_response_start_line(line.strip()).code
                answer.clear()
            elif line.strip():
                answer.parse_line(line)
            elif state["code"] and state["code"] != 100 and not state["sent"]:
                state["sent"] = True
                self.set_status(state["code"])
                self.clear_header("Content-Type")
                for name in RELAYED_HEADERS:
                    if name in answer:
                        self.set_header(name, answer[name])

        def on_chunk(chunk: bytes) -> None:
            if getattr(self, "_client_gone", False):
                raise StreamClosedError()  # the caller left: stop reading the service's stream
            self.write(chunk)
            self.flush()

        request = HTTPRequest(
            url, method=method, headers=headers, body=body, allow_nonstandard_methods=True,
            follow_redirects=False, connect_timeout=10,
            request_timeout=FOLLOW_TIMEOUT_S if follow else REQUEST_TIMEOUT_S,
            header_callback=on_header, streaming_callback=on_chunk,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
            reason = str(response.error) if response.error else f"HTTP {response.code}"
        except (OSError, StreamClosedError) as exc:  # refused, unreachable, reset (not an HTTP answer)
            reason = str(exc) or type(exc).__name__
        if not state["sent"]:
            if getattr(self, "_client_gone", False):
                return
            raise web.HTTPError(502, f"cannot reach the hive-lab service at {upstream.base_url}: {reason}")
        if not getattr(self, "_client_gone", False):
            self.finish()


class ForwardEventsHandler(ExtensionHandlerMixin, WebSocketMixin, JupyterHandler, websocket.WebSocketHandler):
    """``GET events`` (websocket) relayed from the service's own events stream."""

    auth_resource = AUTH_RESOURCE
    _upstream: websocket.WebSocketClientConnection | None = None
    _relay: asyncio.Task | None = None

    async def pre_get(self) -> None:
        user = self.current_user
        ok = await ensure_async(self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(403, "not authorized to read hive_lab")
        check_owner(self)
        upstream = self.settings["hive_lab"].upstream
        ws_url = "ws" + upstream.api_url[len("http"):] + "events"
        try:
            self._upstream = await websocket.websocket_connect(
                HTTPRequest(ws_url, headers=upstream.headers(), connect_timeout=10, request_timeout=30)
            )
        except Exception as exc:
            raise web.HTTPError(502, f"cannot reach the hive-lab service's events at {ws_url}: {exc}") from None

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:
        self._relay = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        upstream = self._upstream
        while upstream is not None:
            message = await upstream.read_message()
            if message is None:
                break
            try:
                await self.write_message(message)
            except websocket.WebSocketClosedError:
                break
        self.close()

    def on_message(self, message: Any) -> None:
        pass  # the stream is one-way

    def on_close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        if self._relay is not None and not self._relay.done():
            self._relay.cancel()
