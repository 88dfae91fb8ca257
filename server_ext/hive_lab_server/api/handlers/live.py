"""The events websocket, Prometheus metrics and the OpenAPI document."""

from __future__ import annotations

import json
import socket

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.extension.handler import ExtensionHandlerMixin
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from tornado import web, websocket

from hive_lab_server.auth.access import identify
from hive_lab_server.api.event_outbox import SEND_BUFFER_BYTES, SLOW_CONSUMER, Outbox, queued_cost
from hive_lab_server.wire.events import state_message
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.upgrade import MAX_EVENT_SEQ, upgrade_problem
from hive_lab_server.api.handlers.base import AUTH_RESOURCE, HiveError, HiveHandler, json_error, require_caller, wait_for_recovery





class EventsHandler(ExtensionHandlerMixin, WebSocketMixin, JupyterHandler, websocket.WebSocketHandler):
    """``GET events[?since=N]``: a websocket of live updates; first message ``{"type": "hello", "user": ...,
    "seq": <newest seq>}``. With ``since``, the stored state changes after N follow (or a ``snapshot``
    marker when they are more than ``events_replay_max`` or N is unknown), then live messages. A
    subscriber more than ``events_buffer_bytes`` behind is closed with ``SLOW_CONSUMER`` (docs/rest-api.md)."""

    auth_resource = AUTH_RESOURCE

    async def pre_get(self) -> None:
        user = self.current_user
        ok = await ensure_async(self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(403, "not authorized to read hive_lab")
        await wait_for_recovery(self)  # a 503 (HiveError) while recovery takes too long
        self._since = self._since_arg()

    def _since_arg(self) -> int | None:
        return query.integer(self, "since", None, 0, MAX_EVENT_SEQ)

    async def prepare(self, *args, **kwargs):
        await require_caller(self, super().prepare(*args, **kwargs))  # 401 for an unknown caller

    def write_error(self, status_code: int, **kwargs) -> None:
        json_error(self, status_code, **kwargs)  # like every hive_lab endpoint: JSON, never an HTML page

    @ws_authenticated
    async def get(self, *args, **kwargs):
        await self.pre_get()
        problem = upgrade_problem(self.request.headers)
        if problem:  # tornado would answer a bare (or text/html) 400 or 426 itself
            raise HiveError(400, f"GET events is a websocket: {problem} (a websocket client does)")
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args, **kwargs) -> None:
        hive = self.settings["hive_lab"]
        user, _ = identify(self, hive.owner)
        bus = hive.service.events
        self._outbox = Outbox(hive.events_buffer_bytes, self.write_message, self._overflow)
        self._bound_send_buffer()
        self._last_sent = bus.seq
        # hello, the replay and the live messages are sent in this order with no await in between:
        # nothing published meanwhile can slip before the replay or be lost
        self._outbox.put(json.dumps({"type": "hello", "user": user, "seq": bus.seq}))
        since = getattr(self, "_since", None)
        if since is not None:
            for text in self._replay(hive, since, bus.seq):
                self._outbox.put(text)
        self._unsubscribe = bus.subscribe(self._outbox.put)

    def _bound_send_buffer(self) -> None:
        """What the kernel holds for this subscriber is bounded too (``SEND_BUFFER_BYTES``)."""
        stream = getattr(self.ws_connection, "stream", None)
        sock = getattr(stream, "socket", None)
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
            except OSError:  # not a socket that takes it (a test transport): the outbox still bounds it
                pass

    @staticmethod
    def _replay(hive, since: int, head: int) -> list[str]:
        """The stored state changes after ``since`` as messages, or one ``snapshot`` marker when they are
        more than ``events_replay_max`` or would fill half of ``events_buffer_bytes``."""
        if since == head:
            return []
        if since > head:
            why = f"seq {since} is newer than this server's newest event ({head}): its store is not the one you read"
            return [json.dumps({"type": "snapshot", "seq": head, "reason": why})]
        rows = hive.service.store.events_after(since, hive.events_replay_max + 1)
        if len(rows) > hive.events_replay_max:
            why = f"more than {hive.events_replay_max} events happened after seq {since}"
            return [json.dumps({"type": "snapshot", "seq": head, "reason": why})]
        texts = [json.dumps(state_message(r)) for r in rows]
        if sum(queued_cost(t) for t in texts) > hive.events_buffer_bytes // 2:
            why = f"the events after seq {since} are more than half of events_buffer_bytes"
            return [json.dumps({"type": "snapshot", "seq": head, "reason": why})]
        return texts

    def _overflow(self, held: int) -> None:
        hive = self.settings["hive_lab"]
        hive.service.metrics.events_dropped.inc()
        self.log.warning("hive-lab: closing a slow events subscriber (it holds %d bytes of events)", held)
        self._close_unsubscribed()
        self.close(SLOW_CONSUMER, f"slow consumer: its events would hold more than {hive.events_buffer_bytes} bytes; "
                                  "reconnect with since=<last seq read>"[:123])

    def _close_unsubscribed(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe:
            unsubscribe()
            self._unsubscribe = None

    def on_message(self, message) -> None:
        pass  # the stream is one-way; pings keep it alive

    def on_close(self) -> None:
        self._close_unsubscribed()
        outbox = getattr(self, "_outbox", None)
        if outbox is not None:
            outbox.close()


class MetricsHandler(HiveHandler):
    never_shed = ("GET",)  # says the server is alive, also under load

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
        # (from the app: the document is built from the route table, which names this handler)
        self.finish(self.hive.openapi_yaml, set_content_type="application/yaml")
