"""Live events from ``GET events`` (websocket) delivered to a callback in a background thread.

Reconnects with backoff and resumes where it was: every message carries ``seq``, and a reconnect asks
for ``since=<the last seq seen>``, so the server replays the state changes missed meanwhile (also across
server restarts) or, when it cannot, sends ``{"type": "snapshot"}``: refetch (views do, as they do on
``hello``). A server closing a slow reader (code 4008) is just reconnected to.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import websocket  # websocket-client

log = logging.getLogger(__name__)


class EventStream:
    def __init__(self, client, callback: Callable[[dict], None], *, on_error: Callable[[Exception], None] | None = None,
                 max_backoff: float = 10.0, since: int | None = None):
        """``since``: the seq of the last event already seen (the first connect replays from there);
        None: only what happens from now on."""
        self.client = client
        self.last_seq = since
        self.callback = callback
        self.on_error = on_error
        self.max_backoff = max_backoff
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._ws: websocket.WebSocket | None = None
        self._thread = threading.Thread(target=self._run, name="hive-lab-events", daemon=True)
        self.messages = 0

    def start(self) -> "EventStream":
        self._thread.start()
        return self

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        ws = self._ws
        if ws is not None:
            try:
                ws.close(timeout=0.2)
            except Exception:  # noqa: BLE001 - closing a socket that is already gone
                pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _connect(self) -> websocket.WebSocket:
        headers = []
        if self.client.server.token:
            headers.append(f"Authorization: token {self.client.server.token}")
        url = self.client.events_url()
        if self.last_seq is not None:
            url += f"?since={self.last_seq}"
        return websocket.create_connection(url, header=headers, timeout=5)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._ws = self._connect()
                self._ws.settimeout(1.0)
                self.connected.set()
                backoff = 0.5
                while not self._stop.is_set():
                    try:
                        raw = self._ws.recv()
                    except websocket.WebSocketTimeoutException:
                        continue
                    if not raw:
                        raise ConnectionError("event stream closed by the server")
                    self.messages += 1
                    try:
                        message = json.loads(raw)
                    except ValueError:
                        continue
                    if not isinstance(message, dict):
                        continue
                    seq = message.get("seq")
                    if isinstance(seq, int) and not isinstance(seq, bool):
                        # a snapshot resets: its seq may be below ours (the server's store is another one)
                        if message.get("type") == "snapshot" or self.last_seq is None or seq > self.last_seq:
                            self.last_seq = seq
                    try:
                        self.callback(message)
                    except Exception:  # noqa: BLE001 - a view's bug must not kill the stream
                        log.exception("hive-lab event callback failed")
            except Exception as exc:  # noqa: BLE001 - reconnect on any network failure
                self.connected.clear()
                if self._stop.is_set():
                    break
                if self.on_error is not None:
                    try:
                        self.on_error(exc)
                    except Exception:  # noqa: BLE001
                        pass
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
            finally:
                if self._ws is not None:
                    try:
                        self._ws.close(timeout=0.2)
                    except Exception:  # noqa: BLE001
                        pass
                    self._ws = None
        self.connected.clear()
