"""One shared event subscription per client, fanned out to views, plus a debouncer.

Views never poll: they refetch when the event stream says something changed, at most once per
``min_interval`` and only after ``delay`` of quiet, so a burst of 500 job events costs one refetch.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

_feeds: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_feeds_lock = threading.Lock()


class Debouncer:
    """``trigger()`` many times -> ``fn()`` runs once, ``delay`` s after the last trigger but no later
    than ``max_wait`` s after the first, and never more often than every ``min_interval`` s."""

    def __init__(self, fn: Callable[[], None], delay: float = 0.3, min_interval: float = 1.0,
                 max_wait: float = 2.0):
        self.fn = fn
        self.delay = delay
        self.min_interval = min_interval
        self.max_wait = max_wait
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._first: float | None = None
        self._last_run = 0.0
        self.runs = 0

    def trigger(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self._first is None:
                self._first = now
            if self._timer is not None:
                self._timer.cancel()
            wait = min(self.delay, max(0.0, self._first + self.max_wait - now))
            wait = max(wait, self._last_run + self.min_interval - now)
            self._timer = threading.Timer(wait, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            self._first = None
            self._last_run = time.monotonic()
        self.runs += 1
        self.fn()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._first = None


class LiveFeed:
    """The event stream of one client, shared by every view that subscribes."""

    def __init__(self, client):
        self.client = client
        self._subscribers: dict[int, Callable[[dict], None]] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._stream = None
        self.last_error: Exception | None = None

    @classmethod
    def for_client(cls, client) -> "LiveFeed":
        with _feeds_lock:
            feed = _feeds.get(client)
            if feed is None:
                feed = _feeds[client] = cls(client)
            return feed

    def subscribe(self, fn: Callable[[dict], None]) -> Callable[[], None]:
        """Start the stream if needed; returns a function that unsubscribes."""
        with self._lock:
            token = self._next
            self._next += 1
            self._subscribers[token] = fn
            if self._stream is None or not self._stream.alive:
                self._stream = self.client.subscribe(self._dispatch, on_error=self._error)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(token, None)
                if not self._subscribers and self._stream is not None:
                    stream, self._stream = self._stream, None
                    stream.close(timeout=0)
        return unsubscribe

    @property
    def connected(self) -> bool:
        return self._stream is not None and self._stream.connected.is_set()

    def _error(self, exc: Exception) -> None:
        self.last_error = exc

    def _dispatch(self, message: dict) -> None:
        self.last_error = None
        with self._lock:
            subscribers = list(self._subscribers.values())
        for fn in subscribers:
            fn(message)

    def close(self) -> None:
        with self._lock:
            self._subscribers.clear()
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
