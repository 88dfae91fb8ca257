"""A bounded outbox per events-websocket subscriber, counting the bytes the server really holds for it.

Messages wait in the outbox's own queue and go to the socket a batch at a time: the next batch is handed
over only once the socket has sent the last one (its write future is done). What the server holds for a
subscriber is then the queued messages (the ``str`` objects, ``sys.getsizeof``) plus one batch in flight
(each message framed and copied into the stream's write buffer, with the future and task tornado makes
per ``write_message``). ``held_bytes`` counts both; a message that would take it past ``max_bytes``
closes the outbox and calls ``on_overflow`` (the handler closes the socket with ``SLOW_CONSUMER``).

Counting the text length of every message handed to tornado at once (as before) undercounted ~6x: a
286-byte message held ~1,950 bytes in flight (tracemalloc, tornado 6.6, CPython 3.11), so a subscriber
that never read held 40-50 MiB under an 8 MiB limit.
"""

from __future__ import annotations

import collections
import sys
from typing import Any, Callable

SLOW_CONSUMER = 4008  # websocket close code: the subscriber fell behind by more than the outbox holds
QUEUE_SLOT = 8  # a deque's pointer to each queued message
# per message handed to tornado: the UTF-8 payload and the frame (two copies), plus its future, the
# wrapper task and coroutine of WebSocketProtocol13.write_message (measured: ~1,380 bytes; rounded up)
IN_FLIGHT_OVERHEAD = 1600
BATCH_BYTES = 64 * 1024  # in-flight bytes handed to the socket at most at once
# the kernel's send buffer of an events socket (Linux doubles it for its bookkeeping): a write counts as sent
# once the kernel holds it, and loopback/LAN sockets autotune up to tcp_wmem's maximum (4 MiB by default),
# so without a bound a subscriber that never reads first parks megabytes in kernel memory before its outbox
# fills. 64 KiB still carries ~1 MiB/s of events at 100 ms round trips: far above what the bus publishes.
SEND_BUFFER_BYTES = 64 * 1024


def queued_cost(text: str) -> int:
    """The bytes a queued message holds (the str object and its queue slot)."""
    return sys.getsizeof(text) + QUEUE_SLOT


def in_flight_cost(text: str) -> int:
    """The bytes a message holds from ``write_message`` until the socket has sent it."""
    return 2 * len(text.encode("utf-8")) + IN_FLIGHT_OVERHEAD


class Outbox:
    def __init__(self, max_bytes: int, write: Callable[[str], Any], on_overflow: Callable[[int], None],
                 batch_bytes: int = BATCH_BYTES):
        """``write(text)`` hands one message to the socket and returns a future done once it was sent."""
        self.max_bytes = max_bytes
        self.write = write
        self.on_overflow = on_overflow
        self.batch_bytes = min(batch_bytes, max_bytes // 4)  # room for messages to queue behind a batch
        self.queue: collections.deque[str] = collections.deque()
        self.queued_bytes = 0
        self.in_flight_bytes = 0
        self.sending = False
        self.closed = False

    @property
    def held_bytes(self) -> int:
        return self.queued_bytes + self.in_flight_bytes

    def put(self, text: str) -> None:
        """Queue one message (never blocks); overflowing closes the outbox and tells ``on_overflow``."""
        if self.closed:
            return
        cost = queued_cost(text)
        if self.held_bytes + cost > self.max_bytes:
            held = self.held_bytes
            self.close()
            self.on_overflow(held)
            return
        self.queue.append(text)
        self.queued_bytes += cost
        if not self.sending:
            self._send_batch()

    def _send_batch(self) -> None:
        """Hand queued messages to the socket, up to ``batch_bytes`` in flight, and wait for the last one."""
        last = None
        while self.queue and self.in_flight_bytes < self.batch_bytes:
            text = self.queue.popleft()
            self.queued_bytes -= queued_cost(text)
            try:
                last = self.write(text)
            except Exception:  # the socket is gone: nothing more to send
                self.close()
                return
            self.in_flight_bytes += in_flight_cost(text)
        self.sending = last is not None
        if last is not None:
            last.add_done_callback(self._sent)

    def _sent(self, future: Any) -> None:
        self.in_flight_bytes = 0
        self.sending = False
        if future.cancelled() or future.exception() is not None:  # the socket closed meanwhile
            self.close()
            return
        if self.queue and not self.closed:
            self._send_batch()

    def close(self) -> None:
        self.closed = True
        self.queue.clear()
        self.queued_bytes = 0
