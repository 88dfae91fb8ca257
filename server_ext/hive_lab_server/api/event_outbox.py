"""A bounded outbox per events-websocket subscriber.

Each message goes to the socket's write buffer at once and counts as waiting until the socket took it
(its write future is done). A subscriber that reads slower than events come (or never reads) makes
the waiting bytes grow; once a message would take them past ``max_bytes`` the outbox closes itself
and calls ``on_overflow`` (the handler closes the socket with ``SLOW_CONSUMER``): the server's memory
per subscriber stays bounded by ``max_bytes``, whatever the client does.
"""

from __future__ import annotations

from typing import Any, Callable

SLOW_CONSUMER = 4008  # websocket close code: the subscriber fell behind by more than the outbox holds


class Outbox:
    def __init__(self, max_bytes: int, write: Callable[[str], Any], on_overflow: Callable[[int], None]):
        """``write(text)`` queues one message on the socket and returns a future done once it was sent."""
        self.max_bytes = max_bytes
        self.write = write
        self.on_overflow = on_overflow
        self.waiting_bytes = 0
        self.closed = False

    def put(self, text: str) -> None:
        """Send one message (never blocks); overflowing closes the outbox and tells ``on_overflow``."""
        if self.closed:
            return
        size = len(text)
        if self.waiting_bytes + size > self.max_bytes:
            waiting = self.waiting_bytes
            self.closed = True
            self.on_overflow(waiting)
            return
        self.waiting_bytes += size
        try:
            sent = self.write(text)
        except Exception:  # the socket is gone: nothing more to send
            self.closed = True
            return
        sent.add_done_callback(lambda future: self._sent(future, size))

    def _sent(self, future: Any, size: int) -> None:
        self.waiting_bytes -= size
        if not future.cancelled() and future.exception() is not None:  # the socket closed meanwhile
            self.closed = True

    def close(self) -> None:
        self.closed = True
