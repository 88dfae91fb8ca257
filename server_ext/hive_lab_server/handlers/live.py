"""The events websocket, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

import json

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from tornado import web, websocket

from ..access import identify
from ..openapi import openapi_yaml
from .base import AUTH_RESOURCE, HiveHandler, require_caller, wait_for_recovery



class EventsHandler(ExtensionHandlerMixin, WebSocketMixin, JupyterHandler, websocket.WebSocketHandler):
    """``GET events``: a websocket of live updates; first message ``{"type": "hello", "user": ...}``."""

    auth_resource = AUTH_RESOURCE

    async def pre_get(self) -> None:
        user = self.current_user
        ok = await ensure_async(self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(403, "not authorized to read hive_lab")
        await wait_for_recovery(self)  # a 503 (HiveError) while recovery takes too long

    async def prepare(self, *args, **kwargs):
        await require_caller(self, super().prepare(*args, **kwargs))  # 401 for an unknown caller

    @ws_authenticated
    async def get(self, *args, **kwargs):
        await self.pre_get()
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args, **kwargs) -> None:
        hive = self.settings["hive_lab"]
        user, _ = identify(self, hive.owner)
        self._unsubscribe = hive.service.events.subscribe(self._send)
        self.write_message(json.dumps({"type": "hello", "user": user}))

    def _send(self, text: str) -> None:
        self.write_message(text)

    def on_message(self, message) -> None:
        pass  # the stream is one-way; pings keep it alive

    def on_close(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe:
            unsubscribe()


class MetricsHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        text = generate_latest(self.hive.metrics_registry)
        if self.caller().admin:  # who used how much: admins only (metrics.Metrics.user_registry)
            text += generate_latest(self.hive.metrics.user_registry)
        self.finish(text, set_content_type=CONTENT_TYPE_LATEST)


class SpecHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.finish(openapi_yaml(), set_content_type="application/yaml")
